"""train and score: quantile scorers on the embedded model or a registered backbone."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from scoreband.api import BACKBONES, resolve_backbone
from scoreband.cli._app import app, console, err, fail, finish_rows, guard, report_rows
from scoreband.cli._options import (
    ENGINE_OPTIONS,
    AlphaOpt,
    ImageColOpt,
    Knob,
    KOpt,
    NRatingsOpt,
    RatingsOpt,
    Table_,
    TargetOpt,
    TextColOpt,
    check_scale,
    config_option,
    int_knob,
    read_knobs,
    with_options,
)
from scoreband.cli._rows import run_stage
from scoreband.cli.calibration import _print_shift
from scoreband.progress import step_status
from scoreband.textsafe import plain

HeadEpochsOpt = Annotated[int, typer.Option("--head-epochs", min=1, max=100_000,
                                         help="Max epochs per quantile head.")]
TrainTableOpt = Annotated[Path | None, typer.Argument(
    help="Training table of (image, caption, human target) rows. Omit to train the "
         "embedded scorer from scratch on the embedded world.")]
OutOpt = Annotated[Path, typer.Option("--out", help="Model folder to write (resumes from "
                                                "OUT/checkpoint after an interruption).")]
BackboneOpt = Annotated[str, typer.Option(
    "--backbone", help=BACKBONES.help_text() + " (with TRAIN_TABLE).")]
ScaleOpt = Annotated[str | None, typer.Option("--scale", callback=check_scale, help="Native scale of the target, "
                                                          "'A,B' (with TRAIN_TABLE).")]
ValOpt = Annotated[Path | None, typer.Option(
    "--val", help="Validation table (half early stopping, half CRC calibration); default: "
                  "20 % of TRAIN_TABLE held out.")]
FreezeBackboneOpt = Annotated[bool, typer.Option(
    "--freeze-backbone/--fine-tune", help="Frozen backbone with cached representations "
                                          "(default), or full fine-tuning.")]
DeviceOpt = Annotated[str, typer.Option("--device", help="cpu | cuda.")]
DtypeOpt = Annotated[str, typer.Option("--dtype", help="Backbone precision: float32 | "
                                                   "bfloat16 | float16 (heads: float32).")]
ImageSizeOpt = Annotated[int | None, typer.Option(
    "--image-size", min=8, max=4096,
    help="beit3: input size (224 / 384; position embeddings are "
         "interpolated bicubically).")]
NTrainOpt = Annotated[int, typer.Option("--n-train", min=10,
                                     help="Embedded-world training items.")]
NValOpt = Annotated[int, typer.Option("--n-val", min=10, help="Validation items.")]
AnnotatorsOpt = Annotated[int, typer.Option("--annotators", min=1, max=1000,
                                        help="Annotators per training "
                                             "item.")]
EpochsOpt = Annotated[int, typer.Option("--epochs", min=1, max=100_000,
                                    help="Max epochs of the point stage.")]
BatchSizeOpt = Annotated[int, typer.Option("--batch-size", min=1)]
SeedOpt = Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1,
                                  help="Random seed (same seed, same result).")]
#: train's rarely used knobs (`--config FILE`, JSON or TOML)
TRAIN_KNOBS = {
    "patience": int_knob(15, 1, 100_000, "early-stopping patience"),
    "lr": Knob(1e-3, float, "a learning rate > 0", "AdamW learning rate (point stage)",
               lambda v: v > 0),
    "n_cal": int_knob(2000, 20, 10_000_000, "embedded world: fresh in-domain items the "
                      "calibrator is fitted on"),
    "n_heldout": int_knob(1000, 20, 10_000_000, "embedded world: fresh 5-annotator items of "
                          "the model card's held-out metrics"),
}
TrainConfigOpt = config_option(TRAIN_KNOBS)
ResumeOpt = Annotated[bool, typer.Option(
    "--resume", help="Continue the finished run in --out from its checkpoint.")]
OverwriteOpt = Annotated[bool, typer.Option(
    "--overwrite", help="Replace the finished run in --out.")]


@app.command()
@guard
def train(
    train_table: TrainTableOpt = None,
    out: OutOpt = Path("model"),
    backbone: BackboneOpt = "embedded:default",
    target: TargetOpt = None,
    ratings: RatingsOpt = None,
    scale: ScaleOpt = None,
    val: ValOpt = None,
    image_col: ImageColOpt = "image",
    text_col: TextColOpt = "caption",
    freeze_backbone: FreezeBackboneOpt = True,
    n_ratings: NRatingsOpt = None,
    device: DeviceOpt = "cpu",
    dtype: DtypeOpt = "float32",
    image_size: ImageSizeOpt = None,
    alpha: AlphaOpt = 0.1,
    n_train: NTrainOpt = 8000,
    n_val: NValOpt = 1000,
    annotators: AnnotatorsOpt = 3,
    epochs: EpochsOpt = 30,
    head_epochs: HeadEpochsOpt = 200,
    batch_size: BatchSizeOpt = 16,
    clusters: KOpt = "auto",
    seed: SeedOpt = 0,
    resume: ResumeOpt = False,
    overwrite: OverwriteOpt = False,
    config: TrainConfigOpt = None,
):
    """Train a quantile scorer and its CRC calibrator.

    A point head first, then the quantile heads (chained with the centred interval loss;
    unconstrained pinball as the baseline) initialised from it, then the calibrator.

    With TRAIN_TABLE: heads on --backbone (frozen with cached representations, or
    --fine-tune), early stopping on half of --val and CRC calibration on the other half.
    Without: the embedded scorer from scratch on the embedded world.

    Examples: scoreband train --out my-model --n-train 2000 --epochs 5;
    scoreband train train.csv --backbone hf:clip-dir --target human --scale 1,5
    --val val.csv --out clip-model
    """
    from scoreband.api import (  # lazy: loads safetensors, torch
        BackboneTrainConfig,
        TrainConfig,
        claim_model_folder,
        train_embedded,
        train_on_table,
    )

    k = read_knobs(config, TRAIN_KNOBS)
    resolve_backbone(backbone)
    claim_model_folder(out, resume=resume, overwrite=overwrite)
    common = dict(epochs=epochs, head_epochs=head_epochs, batch_size=batch_size,
                  lr=k["lr"], patience=k["patience"], clusters=clusters, seed=seed)
    if train_table is None and backbone != "embedded:default":
        fail(f"--backbone {backbone}: give a TRAIN_TABLE of human ratings to train heads on it "
             "(only the embedded scorer trains on the embedded world)")
    command = " ".join(["scoreband", "train", *sys.argv[2:]])  # as the user typed it
    with step_status(err, "training ...", every_s=5) as step:
        def on_epoch(stage, ep, *losses):
            step(f"{stage}: epoch {ep}, val {losses[-1]:.5f}")

        if train_table is not None:
            cfg = BackboneTrainConfig(**common, freeze_backbone=freeze_backbone, alpha=alpha)
            report = train_on_table(train_table, out, backbone, scale=scale, target=target,
                                    ratings=ratings, val=val, image_col=image_col,
                                    text_col=text_col, n_ratings=n_ratings, device=device,
                                    dtype=dtype, image_size=image_size, cfg=cfg,
                                    on_rows=report_rows, on_epoch=on_epoch,
                                    command=command)
            return _print_table_run(report, out)
        run = train_embedded(out, TrainConfig(**common), n_train=n_train, n_val=n_val,
                             n_cal=k["n_cal"], n_heldout=k["n_heldout"],
                             annotators=annotators,
                             command=command, on_epoch=on_epoch, on_step=step, alpha=alpha)
    _print_world_run(run, out)


def _print_world_run(run: dict, out) -> None:
    report, calib, held = run["report"], run["calibration"], run["heldout"]
    console.print(f"trained in {report['seconds']} s: point val loss "
                  f"{report['stage1']['best']:.4f}; heads "
                  + ", ".join(f"{k} {v['best_val']:.4f}" for k, v in report["heads"].items()))
    console.print(f"calibrator: omega={calib['omega']:.2f} beta={calib['beta']:.4f} -> "
                  f"{plain(out)}/calibrator.json")
    console.print("held-out: " + ", ".join(f"{k} {v:.3f}" for k, v in held.items()
                                           if isinstance(v, float)))


def _print_table_run(report: dict, out) -> None:
    console.print(f"trained on {report['n_train']} rows in {report['seconds']} s: point val "
                  f"MSE {report['stage1']['best']:.5f}; heads " + ", ".join(
                      f"{k} {v['best_val']:.4f}" for k, v in report["heads"].items()))
    c = report["calibration"]
    console.print(f"calibrator (CRC on {c['n']} held-out rows): omega {c['omega']:.2f}, beta "
                  f"{c['beta']:.4f} -> {plain(out)}/calibrator.json")


@app.command()
@guard
@with_options(ENGINE_OPTIONS)
def score(
    table: Table_,
    out: Annotated[Path, typer.Option("--out", help="Output table (every input row and "
                                                    "column kept).")],
    image_col: Annotated[str, typer.Option("--image-col", help="Column of image paths.")]
    = "image",
    text_col: TextColOpt = "caption",
    backbone: Annotated[str, typer.Option("--backbone", help="Scorer backbone.")]
    = "embedded:default",
    model: Annotated[Path | None, typer.Option("--model", help="A model folder from "
                                                               "`scoreband train`.")] = None,
    scorer: Annotated[str | None, typer.Option(
        "--scorer", help="clip-s: the CLIP-S point score (w = 2.5, max(cos, 0); no band) with "
                         "a dual-encoder --backbone.")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1)] = 256,
    device: Annotated[str, typer.Option("--device", help="cpu | cuda (real backbones).")]
    = "cpu",
    dtype: Annotated[str | None, typer.Option(
        "--dtype", help="Backbone precision: float32 | bfloat16 | float16 (default: the "
                        "model's); heads and similarities run in float32.")] = None,
    runtime: Annotated[str, typer.Option(
        "--runtime",
        help="eager | onnx: the embedded models' encoder through ONNX Runtime (outputs "
             "within 1e-5 of eager; on 2 CPU cores no faster than eager; needs "
             "scoreband[onnx], else eager with a warning).")] = "eager",
    **engine_opts,
):
    """Score image/caption pairs: median and calibrated 90 % band per row.

    Adds band_lo, band_median, band_hi (on the calibrator's scale: 1-5 for the bundled
    model), band_lo01, band_median01, band_hi01 (the same on [0, 1]), band_error (empty when
    the row scored), band_truncated, n_tokens, band_ood and scorer_fingerprint. Bad images (missing, truncated, not an
    image, huge) and empty captions are reported per row; they never stop the batch.

    The default model (embedded:default) is a tiny scorer trained on the embedded synthetic
    world (coloured shapes and their captions; the README's section "The embedded world"
    shows them and the rules an in-domain image follows): it is for trying scoreband without
    a download, not for real photos. band_ood flags rows it cannot judge (unknown words, an
    image unlike its world) and a shift alarm is printed when the table as a whole looks
    unlike its calibration items. For real data: --model DIR from `scoreband train TABLE
    --backbone hf:... | beit3:...`, or --scorer clip-s.

    Example: scoreband score pairs.csv --image-col image --text-col caption --out scored.csv
    """
    kw = dict(model=model, backbone=backbone, scorer=scorer, image_col=image_col,
              text_col=text_col, batch_size=batch_size, device=device, dtype=dtype)
    if runtime != "eager":
        kw["runtime"] = runtime
    run, stage = run_stage(table, out, "score-clip-s" if scorer else "score", kw,
                           engine_opts)
    if run.reused:
        err.print(f"{run.reused} rows resumed from the journal")
    n_trunc = run.counts.get("band_truncated", run.counts.get("truncated", 0))
    if n_trunc:
        err.print(f"[yellow]{n_trunc} captions were truncated to the text tower's length "
                  "(flagged per row)[/]", markup=True)
    if run.counts.get("band_ood"):
        err.print(f"[yellow]{run.counts['band_ood']} of {run.rows} rows are outside what the "
                  "model knows (band_ood says why): their bands are guesses[/]", markup=True)

    _print_shift(run.summary.get("shift"))
    where = " on Ray" if stage is None else ""
    finish_rows(run.failures, run.rows, "not scored",
                f"scored {run.rows - len(run.failures)} of {run.rows} rows{where} -> {plain(out)}")
