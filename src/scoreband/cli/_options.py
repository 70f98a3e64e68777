"""Options shared by several commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scoreband.conformal import METHODS

Table_ = Annotated[Path, typer.Argument(help="Table: .csv .tsv .jsonl .json .parquet, or a "
                                              "Hugging Face datasets directory.")]
TargetOpt = Annotated[str | None, typer.Option("--target", help="Column of the human target "
                                                                 "(mean rating).")]
RatingsOpt = Annotated[str | None, typer.Option(
    "--ratings", help="Column of ';'-separated annotator ratings (replaces --target; the "
                      "target is their mean and the achievable grid follows from their count).")]
ScaleOpt = Annotated[str, typer.Option("--scale", help="Native scale of the target, 'A,B' "
                                                        "(e.g. 1,5 or 0,1).")]
MedianOpt = Annotated[str | None, typer.Option("--median", help="Column of the point "
                                                                 "prediction.")]
LoOpt = Annotated[str | None, typer.Option("--lo", help="Column of the uncalibrated 90 % "
                                                         "interval's lower end (for CRC).")]
HiOpt = Annotated[str | None, typer.Option("--hi", help="Column of the uncalibrated 90 % "
                                                         "interval's upper end (for CRC).")]
FeaturesOpt = Annotated[str | None, typer.Option(
    "--features", help="Comma list (or glob, e.g. 'logp_*') of feature columns for learned "
                       "calibrators.")]
EmbeddingOpt = Annotated[str | None, typer.Option(
    "--embedding", help="Comma list or glob of embedding columns (for k-means clusters).")]
GroupsOpt = Annotated[str | None, typer.Option("--groups", help="Column of group / task "
                                                                 "labels.")]
MethodOpt = Annotated[str, typer.Option(
    "--method", help=METHODS.help_text() + ". cqr, chr and r2ccp learn on --features; auto "
                     "picks the narrowest on a share of the calibration items and "
                     "conformalizes it on another; weighted-split reweights for covariate "
                     "shift between calibration and applied rows (needs --embedding).")]
MapOpt = Annotated[str, typer.Option(
    "--map", help="isotonic | linear | none: map a raw point metric (any scale) onto the "
                  "target's scale, fitted on its own share of the calibration items.")]
RandomizeOpt = Annotated[bool | None, typer.Option(
    "--randomize/--no-randomize", help="Randomised tie-breaking (smoothed conformal p-values) "
                                       "for split, cqr, chr, marginal and auto: coverage "
                                       "1 - alpha in expectation on discrete targets instead "
                                       "of over-covering. Default: on for chr and auto, off "
                                       "for the others.")]
AlphaOpt = Annotated[float, typer.Option("--alpha", help="Target miscoverage, in (0, 1).")]
MondrianOpt = Annotated[bool, typer.Option(
    "--mondrian", help="Group-conditional calibration: per --groups label, or Easy/Medium/Hard "
                       "difficulty groups when no --groups is given.")]
AdjustOpt = Annotated[bool, typer.Option(
    "--adjust-boundary", help="Snap bands to the achievable targets (integer scales).")]
PredScaleOpt = Annotated[str | None, typer.Option(
    "--pred-scale", help="Scale of the prediction columns, 'A,B' (default: --scale; a "
                         "quantile head writes 0,1).")]
KOpt = Annotated[str, typer.Option("--clusters", help="k for the cluster rules, or 'auto' "
                                                       "(elbow + silhouette).")]
SmallOpt = Annotated[str, typer.Option(
    "--small-group", help="Groups too small for alpha: marginal | full | error.")]
IdOpt = Annotated[str | None, typer.Option("--id-col", help="Column naming each row in "
                                                             "error reports.")]
NRatingsOpt = Annotated[int | None, typer.Option(
    "--n-ratings", help="Annotators behind each --target value (for the achievable grid of "
                        "--adjust-boundary; --ratings gives it per row).")]
ScorerOpt = Annotated[str | None, typer.Option(
    "--scorer-id", help="Fingerprint of the scorer that made the predictions; a calibrator "
                        "refuses predictions from another scorer.")]


