"""The ``scoreband`` command: a thin layer over the Python API.

Every command validates its input at the edge; bad rows are reported (row, column,
reason) and skipped, never a traceback.
"""

from __future__ import annotations

import logging
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from scoreband import __version__
from scoreband.errors import RowError, ScorebandError

app = typer.Typer(
    name="scoreband",
    help="Calibrated uncertainty bands around image-text evaluation scores.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()
err = Console(stderr=True)


def _version(value: bool):
    if value:
        console.print(f"scoreband {__version__}")
        raise typer.Exit()


_STATE = {"debug": False}


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log more.")] = False,
    debug: Annotated[bool, typer.Option(
        "--debug", help="Show the full traceback of an unexpected error.")] = False,
):
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    _STATE["debug"] = debug


# ------------------------------------------------------------------ shared options
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
    "--method", help="split | crc | crc-exact | crc-same | crc-cluster | crc-cluster-mondrian "
                     "| cqr | chr | r2ccp | marginal | auto | weighted-split. cqr, chr and "
                     "r2ccp learn on --features; auto picks the narrowest on a share of the "
                     "calibration items and conformalizes it on another; weighted-split "
                     "reweights for covariate shift between calibration and applied rows "
                     "(needs --embedding).")]
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


def _fail(msg: str, code: int = 2):
    err.print(f"[bold red]error:[/] {msg}")
    raise typer.Exit(code)


def _report_rows(errors: list[RowError], total: int, action: str = "skipped") -> None:
    if not errors:
        return
    err.print(f"[yellow]{len(errors)} of {total} rows {action}:[/]")
    for e in errors[:20]:
        err.print(f"  {e}")
    if len(errors) > 20:
        err.print(f"  ... and {len(errors) - 20} more (all listed in the output JSON)")


def _report_error_column(res, col: str, action: str) -> int:
    """Print the rows of an output table whose ``col`` holds a reason (rows numbered from 1,
    as in every other report); returns how many there are."""
    bad = res.loc[res[col] != "", col]
    if len(bad):
        err.print(f"[yellow]{len(bad)} of {len(res)} rows {action}:[/]")
        for i, e in list(bad.items())[:20]:
            err.print(f"  row {i + 1}: {e}")
    return len(bad)


def _spec(scale, target, ratings, median, lo, hi, features, embedding, groups, split_by,
          id_col, pred_scale, map_="none"):
    from scoreband.io import ColumnSpec
    from scoreband.records import Scale

    sc = Scale.parse(scale)
    return ColumnSpec(
        scale=sc, target=target, ratings=ratings, median=median, lo=lo, hi=hi,
        features=features or (), embedding=embedding or (), groups=groups, split_by=split_by,
        id_col=id_col, pred_scale=Scale.parse(pred_scale, integer=False) if pred_scale else None,
        raw_predictions=map_ not in (None, "none"),
    )


def _factory(method, alpha, scale, mondrian, groups, clusters, small_group, map_="none",
             randomize=None, adjust_boundary=False):
    from scoreband.conformal import make_calibrator

    k = clusters if clusters == "auto" else _int(clusters, "--clusters")
    by = ("given" if groups else "difficulty") if mondrian else None
    if method.startswith("crc-cluster") and by == "given":
        # the cluster rules use the group column as their clusters
        by = None

    def make():
        return make_calibrator(method, alpha, scale=scale, mondrian=by, n_clusters=k,
                               small_group=small_group, map=map_, randomize=randomize,
                               adjust_boundary=adjust_boundary)

    make()  # validate the options once, before any work
    return make


def _int(v, flag):
    try:
        return int(v)
    except ValueError:
        _fail(f"{flag} expects an integer or 'auto', got {v!r}")


def as_flags(message: str) -> str:
    """The library names parameters in backticks (`image_col`); on the command line they
    are the current command's options (--image-col)."""
    import re

    try:  # typer >= 0.24 runs on its own copy of click
        from typer._click.globals import get_current_context
    except ImportError:
        from click import get_current_context

    ctx = get_current_context(silent=True)
    flags = {}
    if ctx is not None:
        for p in ctx.command.params:
            opts = [o for o in p.opts if o.startswith("--")]
            if opts:
                flags[p.name.rstrip("_")] = opts[0]
    return re.sub(r"`([a-z][a-z0-9_]*)`", lambda m: flags.get(m.group(1), m.group(0)), message)


def _guard(fn):
    """Turn scoreband errors into a clean message and exit code 2."""
    import functools

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        try:
            _SHOWN.clear()  # once per command run
            with warnings.catch_warnings():
                warnings.simplefilter("default")
                warnings.showwarning = _show_warning_once
                return fn(*a, **kw)
        except ScorebandError as e:
            _fail(as_flags(str(e)))
        except (typer.Exit, typer.Abort, KeyboardInterrupt, SystemExit):
            raise
        except OSError as e:  # a path the user gave: a folder, no permission, a full disk
            if _STATE["debug"]:
                raise
            where = f" {str(e.filename)!r}" if e.filename else ""
            _fail(f"cannot use{where}: {e.strerror or e}")
        except Exception as e:  # anything else is a bug: one line, the traceback on request
            if _STATE["debug"]:
                raise
            msg = " ".join(str(e).split())[:300]
            _fail(f"unexpected {type(e).__name__}: {msg} (rerun with `scoreband --debug "
                  f"{fn.__name__.replace('_', '-')} ...` for the traceback)", code=1)

    return wrapper


_SHOWN: set[str] = set()


def _show_warning_once(message, category, filename, lineno, file=None, line=None) -> None:
    """Library warnings as one line each (no file path or source line), each shown once."""
    text = " ".join(str(message).split())
    if text not in _SHOWN:
        _SHOWN.add(text)
        err.print(f"[yellow]warning:[/] {text}", soft_wrap=True)


def _print_warnings(messages) -> None:
    for m in messages:
        err.print(f"[yellow]warning:[/] {m}")


@contextmanager
def _warnings_to_console():
    """Collect the library's warnings (too-small groups, crossed quantiles ...) and print
    each once on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    _print_warnings(dict.fromkeys(str(w.message) for w in caught))


def _fmt(d) -> str:
    if not isinstance(d, dict):
        return "-"
    m, s = d.get("mean"), d.get("std")
    if m is None or (isinstance(m, float) and np.isnan(m)):
        return "-"
    return f"{m:.3f} ± {s:.3f}"


def print_metrics_table(res: dict, title: str) -> None:
    t = Table(title=title)
    t.add_column("metric")
    if "before" in res:
        t.add_column("before calibration", justify="right")
    t.add_column("after calibration", justify="right")
    for k in ("coverage", "sharpness", "ups", "kendall_tau_c", "pearson", "spearman"):
        row = [k]
        if "before" in res:
            row.append(_fmt(res["before"].get(k)))
        row.append(_fmt(res["after"].get(k)))
        t.add_row(*row)
    after = res["after"]
    if "set_coverage" in after:
        t.add_row("set coverage", *([""] if "before" in res else []),
                  _fmt(after["set_coverage"]))
        t.add_row("set length", *([""] if "before" in res else []),
                  _fmt(after["set_length"]))
    console.print(t)
    tc = res["theoretical_coverage"]
    console.print(f"theoretical coverage band (n={tc['n_cal']} items in the conformal step): "
                  f"[{tc['low']:.3f}, {tc['high']:.3f}]")
    cov = after["coverage"]
    if cov["mean"] > tc["high"] + 2 * cov["std"] / max(res["seeds"], 1) ** 0.5 + 0.005:
        console.print("note: coverage is above the band: ties in the conformity scores "
                      "(discrete targets: whole achievable values enter a band at once) or "
                      "the hull of a union of intervals (r2ccp) make bands conservative; "
                      "--method chr or auto with --randomize reach 1 - alpha in expectation")
    if res.get("groups"):
        g = Table(title="per group (after calibration)")
        for c in ("group", "n (test)", "coverage", "sharpness"):
            g.add_column(c)
        for name, v in res["groups"].items():
            g.add_row(name, str(v["n"]), _fmt(v["coverage"]), _fmt(v["sharpness"]))
        console.print(g)


# ------------------------------------------------------------------ evaluate
@app.command()
@_guard
def evaluate(
    table: Table_,
    scale: ScaleOpt = ...,
    target: TargetOpt = None,
    ratings: RatingsOpt = None,
    median: MedianOpt = None,
    lo: LoOpt = None,
    hi: HiOpt = None,
    features: FeaturesOpt = None,
    embedding: EmbeddingOpt = None,
    groups: GroupsOpt = None,
    method: MethodOpt = "split",
    alpha: AlphaOpt = 0.1,
    seeds: Annotated[int, typer.Option("--seeds", help="Number of random splits.")] = 10,
    cal_frac: Annotated[float, typer.Option("--cal-frac", help="Calibration share of each "
                                                               "split.")] = 0.5,
    mondrian: MondrianOpt = False,
    adjust_boundary: AdjustOpt = False,
    n_ratings: NRatingsOpt = None,
    split_by: Annotated[str | None, typer.Option(
        "--split-by", help="Rows sharing this column's value stay on one side of every "
                           "split.")] = None,
    pred_scale: PredScaleOpt = None,
    clusters: KOpt = "auto",
    small_group: SmallOpt = "marginal",
    id_col: IdOpt = None,
    map_: MapOpt = "none",
    randomize: RandomizeOpt = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the metrics JSON here.")] = None,
):
    """Repeated calibration/test splits: coverage, sharpness, UPS, tau-c before/after.

    Example: scoreband evaluate preds.csv --target human --scale 1,5 --median score
    --lo q05 --hi q95 --pred-scale 0,1 --method crc --out metrics.json
    """
    from scoreband.io import load_inputs, read_table, write_json
    from scoreband.protocol import evaluate_splits

    spec = _spec(scale, target, ratings, median, lo, hi, features, embedding, groups,
                 split_by, id_col, pred_scale, map_)
    df = read_table(table)
    inp = load_inputs(df, spec, n_ratings=n_ratings)
    _report_rows(inp.errors, len(df))
    make = _factory(method, alpha, spec.scale, mondrian, groups, clusters, small_group, map_,
                    randomize, adjust_boundary)
    with console.status(f"calibrating over {seeds} splits ..."):
        res = evaluate_splits(inp.pred, inp.y01, make, seeds=seeds, cal_frac=cal_frac,
                              groups=inp.groups, split_keys=inp.split_keys,
                              adjust_boundary=adjust_boundary, n_ratings=inp.n_ratings)
    res["scale"] = spec.scale.to_dict()
    res["table"] = str(table)
    res["skipped_rows"] = [e.__dict__ for e in inp.errors]
    _print_warnings(res.get("warnings", []))
    print_metrics_table(res, f"{res['method']} · alpha={alpha} · n={res['n']} · "
                             f"{seeds} seeds")
    if out:
        from scoreband.provenance import provenance

        res["provenance"] = provenance({"input_table": str(table)})
        write_json(out, res)
        console.print(f"wrote {out}")


# ------------------------------------------------------------------ calibrate
@app.command()
@_guard
def calibrate(
    table: Table_,
    out: Annotated[Path, typer.Option("--out", help="Calibrator JSON to write.")],
    scale: ScaleOpt = ...,
    target: TargetOpt = None,
    ratings: RatingsOpt = None,
    median: MedianOpt = None,
    lo: LoOpt = None,
    hi: HiOpt = None,
    features: FeaturesOpt = None,
    embedding: EmbeddingOpt = None,
    groups: GroupsOpt = None,
    method: MethodOpt = "split",
    alpha: AlphaOpt = 0.1,
    mondrian: MondrianOpt = False,
    adjust_boundary: AdjustOpt = False,
    n_ratings: NRatingsOpt = None,
    pred_scale: PredScaleOpt = None,
    clusters: KOpt = "auto",
    small_group: SmallOpt = "marginal",
    id_col: IdOpt = None,
    map_: MapOpt = "none",
    randomize: RandomizeOpt = None,
    scorer_id: ScorerOpt = None,
):
    """Fit a calibrator on every usable row and save it as versioned JSON.

    Example: scoreband calibrate preds.csv --target human --scale 1,5 --median score
    --method split --out calibrator.json
    """
    from scoreband.conformal import save_calibrator
    from scoreband.conformal.boundary import check_on_grid
    from scoreband.io import load_inputs, read_table

    spec = _spec(scale, target, ratings, median, lo, hi, features, embedding, groups, None,
                 id_col, pred_scale, map_)
    df = read_table(table)
    spec = spec.resolved(df.columns)  # saved with the column names, not the patterns
    inp = load_inputs(df, spec, n_ratings=n_ratings)
    _report_rows(inp.errors, len(df))
    if adjust_boundary:
        check_on_grid(inp.y01, spec.scale, inp.n_ratings)
    cal = _factory(method, alpha, spec.scale, mondrian, groups, clusters, small_group, map_,
                   randomize, adjust_boundary)()
    with _warnings_to_console():
        cal.fit(inp.pred, inp.y01, groups=inp.groups)
    n_r = float(np.median(inp.n_ratings))
    fp = scorer_id or _table_fingerprint(df)
    save_calibrator(out, cal, scorer_fingerprint=fp, inputs={
        "columns": spec.to_dict(), "adjust_boundary": adjust_boundary, "n_ratings": n_r,
        "n_calibration": len(inp.pred), "skipped_rows": len(inp.errors),
    })
    console.print(f"calibrated {cal!r} on {len(inp.pred)} rows -> {out}")


def _table_fingerprint(df) -> str | None:
    if "scorer_fingerprint" in df.columns:
        vals = df["scorer_fingerprint"].dropna().astype(str).unique()
        if len(vals) == 1:
            return vals[0]
    return None


# ------------------------------------------------------------------ apply
@app.command()
@_guard
def apply(
    table: Table_,
    calibrator: Annotated[Path, typer.Option("--calibrator", help="Calibrator JSON from "
                                                                  "`scoreband calibrate`.")],
    out: Annotated[Path, typer.Option("--out", help="Output table (every input row and "
                                                    "column kept).")],
    median: MedianOpt = None,
    lo: LoOpt = None,
    hi: HiOpt = None,
    groups: GroupsOpt = None,
    scorer_id: ScorerOpt = None,
    n_ratings: Annotated[int | None, typer.Option(
        "--n-ratings", min=1, help="Annotators per target for boundary adjustment (default: "
                                   "as in calibration).")] = None,
):
    """Add calibrated bands to every row of a table.

    Adds band_lo, band_median, band_hi (native scale), band_lo01, band_hi01 and band_error
    (the reason when a row could not be banded; its band columns are left empty).
    Prediction columns default to those used at calibration.

    Example: scoreband apply new_preds.csv --calibrator calibrator.json --out banded.csv
    """
    from scoreband.conformal import adjust_band, load_calibrator
    from scoreband.io import ColumnSpec, load_inputs, read_table, write_table

    df = read_table(table)
    fp = scorer_id or _table_fingerprint(df)
    cal, doc = load_calibrator(calibrator, scorer_fingerprint=fp)
    inputs = doc.get("inputs", {})
    cols = dict(inputs.get("columns") or {})
    if not cols:
        _fail(f"{calibrator} records no input columns; recalibrate with `scoreband calibrate`")
    for k, v in (("median", median), ("lo", lo), ("hi", hi), ("groups", groups)):
        if v is not None:
            cols[k] = v
    spec = ColumnSpec.from_dict({**cols, "target": None, "ratings": None, "split_by": None})
    inp = load_inputs(df, spec, require_target=False)
    _report_rows(inp.errors, len(df), action="left without a band")
    with _warnings_to_console():
        band = cal.predict(inp.pred, groups=inp.groups)
    shift = getattr(cal, "last_shift_", None)
    if shift and "p_value" in shift:
        alarm = ("[yellow]shift alarm:[/] these rows look unlike the calibration items"
                 if shift["p_value"] < 0.01 else "no shift detected")
        err.print(f"{alarm} (classifier AUC {shift['auc']:.2f}, p = {shift['p_value']:.2g}); "
                  f"effective sample of the weights {shift['effective_sample_size']:.0f} of "
                  f"{shift['n_cal']}")
    if inputs.get("adjust_boundary"):
        band = adjust_band(band, n_ratings or inputs.get("n_ratings") or 1)
    res = df.copy()
    n = len(df)
    new = {k: np.full(n, np.nan) for k in ("band_lo", "band_median", "band_hi", "band_lo01",
                                           "band_hi01")}
    for k, v in (("band_lo", band.lo), ("band_median", band.median), ("band_hi", band.hi),
                 ("band_lo01", band.lo01), ("band_hi01", band.hi01)):
        new[k][inp.rows] = v
    for k, v in new.items():
        res[k] = v
    flags = np.full(n, "", dtype=object)
    flags[inp.rows] = np.where(band.full_range, "full_range", "")
    flags[inp.rows] = np.where(band.fallback & ~band.full_range, "group_fallback",
                               flags[inp.rows])
    if band.note:
        flags[inp.rows] = np.where(flags[inp.rows] == "", band.note, flags[inp.rows])
    res["band_flag"] = flags
    if band.sets01 is not None and all(v is not None for v in band.sets01):
        # R2CCP's union of intervals on the native scale, beside its hull (band_lo, band_hi)
        sets = np.full(n, "", dtype=object)
        sc = band.scale
        sets[inp.rows] = [";".join(f"{sc.from01(a):.6g}..{sc.from01(b):.6g}" for a, b in v)
                          for v in band.sets01]
        res["band_sets"] = sets
    if band.group is not None:
        g = np.full(n, "", dtype=object)
        g[inp.rows] = band.group
        res["band_group"] = g
    errs = np.full(n, "", dtype=object)
    for e in inp.errors:
        errs[e.position] = f"{e.column}: {e.reason}"
    res["band_error"] = errs
    write_table(res, out)
    from scoreband.provenance import write_provenance

    write_provenance(out, {"calibrator_method": band.method}, files={"calibrator": calibrator})
    console.print(f"banded {len(inp.rows)} of {n} rows with {band.method} "
                  f"(alpha={band.alpha}) -> {out}")


# ------------------------------------------------------------------ train
@app.command()
@_guard
def train(
    train_table: Annotated[Path | None, typer.Argument(
        help="Training table of (image, caption, human target) rows. Omit to train the "
             "embedded scorer from scratch on the embedded world.")] = None,
    out: Annotated[Path, typer.Option("--out", help="Model folder to write (resumes from "
                                                    "OUT/checkpoint after an interruption).")]
    = Path("model"),
    backbone: Annotated[str, typer.Option(
        "--backbone", help="embedded:default | beit3:PATH | hf:MODEL_ID_OR_DIR | "
                           "open_clip:ARCH:PRETRAINED (with TRAIN_TABLE).")]
    = "embedded:default",
    target: TargetOpt = None,
    ratings: RatingsOpt = None,
    scale: Annotated[str | None, typer.Option("--scale", help="Native scale of the target, "
                                                              "'A,B' (with TRAIN_TABLE).")]
    = None,
    val: Annotated[Path | None, typer.Option(
        "--val", help="Validation table (half early stopping, half CRC calibration); default: "
                      "20 % of TRAIN_TABLE held out.")] = None,
    image_col: Annotated[str, typer.Option("--image-col")] = "image",
    text_col: Annotated[str, typer.Option("--text-col")] = "caption",
    freeze_backbone: Annotated[bool, typer.Option(
        "--freeze-backbone/--fine-tune", help="Frozen backbone with cached representations "
                                              "(default), or full fine-tuning.")] = True,
    n_ratings: NRatingsOpt = None,
    device: Annotated[str, typer.Option("--device", help="cpu | cuda.")] = "cpu",
    dtype: Annotated[str, typer.Option("--dtype", help="Backbone precision: float32 | "
                                                       "bfloat16 | float16 (heads: float32).")]
    = "float32",
    image_size: Annotated[int | None, typer.Option(
        "--image-size", help="beit3: input size (224 / 384; position embeddings are "
                             "interpolated bicubically).")] = None,
    alpha: AlphaOpt = 0.1,
    n_train: Annotated[int, typer.Option("--n-train", min=10,
                                         help="Embedded-world training items.")]
    = 8000,
    n_val: Annotated[int, typer.Option("--n-val", min=10, help="Validation items.")] = 1000,
    annotators: Annotated[int, typer.Option("--annotators", help="Annotators per training "
                                                                 "item.")] = 3,
    epochs: Annotated[int, typer.Option("--epochs", help="Max epochs of the point stage.")] = 30,
    head_epochs: Annotated[int, typer.Option("--head-epochs", help="Max epochs per quantile "
                                                                   "head.")] = 200,
    patience: Annotated[int, typer.Option("--patience", help="Early-stopping patience.")] = 15,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1)] = 16,
    lr: Annotated[float, typer.Option("--lr", help="AdamW learning rate (point stage).")] = 1e-3,
    clusters: KOpt = "auto",
    seed: Annotated[int, typer.Option("--seed")] = 0,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Continue the finished run in --out from its checkpoint.")] = False,
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="Replace the finished run in --out.")] = False,
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
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from scoreband.backbones import resolve_backbone
    from scoreband.scorers.train import (
        TrainConfig,
        calibrate_model,
        heldout_metrics,
        train_scorer,
        write_model_card,
    )
    from scoreband.world import make_dataset

    resolve_backbone(backbone)
    k = clusters if clusters == "auto" else _int(clusters, "--clusters")
    _claim_model_folder(Path(out), resume=resume, overwrite=overwrite)
    if train_table is not None:
        return _train_on_table(train_table, out, backbone, target, ratings, scale, val,
                               image_col, text_col, freeze_backbone, n_ratings, device, dtype,
                               image_size, alpha, epochs, head_epochs, patience, batch_size,
                               lr, k, seed)
    if backbone != "embedded:default":
        _fail(f"--backbone {backbone}: give a TRAIN_TABLE of human ratings to train heads on it "
              "(only the embedded scorer trains on the embedded world)")
    cfg = TrainConfig(epochs=epochs, head_epochs=head_epochs, batch_size=batch_size, lr=lr,
                      patience=patience, clusters=k, seed=seed)
    with console.status("generating the embedded world ..."):
        tr = make_dataset(n_train, seed + 1, n_annotators=annotators, name="train")
        va = make_dataset(n_val, seed + 2, n_annotators=annotators, name="val")
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                  TimeElapsedColumn(), console=console) as prog:
        task = prog.add_task("point model", total=epochs, info="")

        def on_epoch(stage, ep, tl, vl):
            if stage == "point":
                prog.update(task, completed=ep, info=f"epoch {ep} train {tl:.4f} val {vl:.4f}")
            else:
                prog.update(task, description=f"head {stage}", total=head_epochs,
                            completed=ep, info=f"val {vl:.4f}")

        report = train_scorer(tr, va, out, cfg, on_epoch=on_epoch)
    with console.status("calibrating on a fresh in-domain set ..."):
        calib = calibrate_model(out, seed=seed + 7)
    with console.status("held-out evaluation ..."):
        held = heldout_metrics(out, seed=seed + 9)
    command = "scoreband train " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else \
        f"scoreband train --out {out}"
    write_model_card(out, command, report, calib, held)
    console.print(f"trained in {report['seconds']} s: point val loss "
                  f"{report['stage1']['best']:.4f}; heads "
                  + ", ".join(f"{k} {v['best_val']:.4f}" for k, v in report["heads"].items()))
    console.print(f"calibrator: omega={calib['omega']:.2f} beta={calib['beta']:.4f} -> "
                  f"{out}/calibrator.json")
    console.print("held-out: " + ", ".join(f"{k} {v:.3f}" for k, v in held.items()
                                           if isinstance(v, float)))


def _model_format(model) -> str | None:
    """The ``format`` a model folder's config.json declares (None when unreadable: the loader
    then reports what is wrong with the folder)."""
    import json

    f = Path(model) / "config.json"
    try:
        doc = json.loads(f.read_text(encoding="utf-8")) if f.is_file() else None
    except (ValueError, UnicodeDecodeError):
        return None
    return doc.get("format") if isinstance(doc, dict) else None


def _claim_model_folder(out: Path, *, resume: bool, overwrite: bool) -> None:
    """A finished run in ``out`` (its weights are there) is never silently continued or
    mixed with a new one: refused unless --resume (continue from its checkpoint) or
    --overwrite (its files are removed first). An interrupted run (a checkpoint only) resumes."""
    import shutil

    if resume and overwrite:
        _fail("give --resume or --overwrite, not both")
    if out.exists() and not out.is_dir():
        _fail(f"--out {str(out)!r} is a file; give a folder for the model")
    finished = any((out / f).exists() for f in ("model.safetensors", "heads.safetensors",
                                                 "MODEL_CARD.md"))
    if finished and not (resume or overwrite):
        _fail(f"{str(out)!r} holds a finished model; pass --overwrite to replace it, --resume "
              "to continue it from its checkpoint, or another --out")
    if overwrite and out.is_dir():
        for name in ("model.safetensors", "heads.safetensors", "backbone.safetensors",
                     "config.json", "calibrator.json", "MODEL_CARD.md", "checkpoint", "cache"):
            f = out / name
            shutil.rmtree(f) if f.is_dir() else f.unlink(missing_ok=True)
    if resume and not (out / "checkpoint").is_dir():
        _fail(f"--resume: {str(out)!r} has no checkpoint folder to continue from")


def _train_on_table(table, out, backbone, target, ratings, scale, val, image_col, text_col,
                    freeze, n_ratings, device, dtype, image_size, alpha, epochs, head_epochs,
                    patience, batch_size, lr, k, seed):
    from scoreband.backbones import load_backbone
    from scoreband.io import read_table
    from scoreband.records import Scale
    from scoreband.scorers.backbone_scorer import BackboneTrainConfig, train_backbone_scorer
    from scoreband.scorers.pairs import load_pairs, take_rows

    if scale is None:
        _fail("give --scale A,B (the native scale of the human target)")
    if not (target or ratings):
        _fail("give the human target: --target COL (mean rating) or --ratings COL")
    sc = Scale.parse(scale)
    kw = dict(scale=sc, image_col=image_col, text_col=text_col, target=target,
              ratings=ratings, n_ratings=n_ratings)
    tr, errs = load_pairs(read_table(table), base_dir=Path(table).parent, **kw)
    _report_rows(errs, len(tr["texts"]) + len(errs))
    if val is not None:
        va, verrs = load_pairs(read_table(val), base_dir=Path(val).parent, **kw)
        _report_rows(verrs, len(va["texts"]) + len(verrs))
    else:
        idx = np.random.default_rng(seed).permutation(len(tr["texts"]))
        cut = max(20, len(idx) // 5)
        if len(idx) - cut < 10:
            _fail(f"{len(idx)} usable rows are too few to hold out a validation part; give "
                  "--val")

        tr, va = take_rows(tr, np.sort(idx[cut:])), take_rows(tr, np.sort(idx[:cut]))
    with console.status(f"loading {backbone} ..."):
        bb = load_backbone(backbone, device=device, dtype=dtype, image_size=image_size)
    cfg = BackboneTrainConfig(epochs=epochs, head_epochs=head_epochs, batch_size=batch_size,
                              lr=lr, patience=patience, clusters=k, seed=seed,
                              freeze_backbone=freeze, alpha=alpha)
    with console.status("training ...") as st:
        report = train_backbone_scorer(
            bb, tr, va, out, cfg,
            on_epoch=lambda stage, ep, vl: st.update(f"{stage}: epoch {ep}, val {vl:.5f}"))
    from scoreband.provenance import write_provenance

    write_provenance(Path(out) / "model", {"backbone": bb.describe()},
                     files={"calibrator": Path(out) / "calibrator.json"})
    console.print(f"trained on {report['n_train']} rows in {report['seconds']} s: point val "
                  f"MSE {report['point']['best_val']:.5f}; heads " + ", ".join(
                      f"{k2} {v['best_val']:.4f}" for k2, v in report["heads"].items()))
    console.print(f"calibrator (CRC on {report['calibration']['n']} held-out rows): omega "
                  f"{report['calibration']['omega']:.2f}, beta {report['calibration']['beta']:.4f}"
                  f" -> {out}/calibrator.json")


# ------------------------------------------------------------------ score
@app.command()
@_guard
def score(
    table: Table_,
    out: Annotated[Path, typer.Option("--out", help="Output table (every input row and "
                                                    "column kept).")],
    image_col: Annotated[str, typer.Option("--image-col", help="Column of image paths.")]
    = "image",
    text_col: Annotated[str, typer.Option("--text-col", help="Column of captions.")] = "caption",
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
):
    """Score image/caption pairs: median and calibrated 90 % band per row, on [0, 1].

    Adds band_median, band_lo, band_hi, band_error (empty when the row scored),
    band_truncated and scorer_fingerprint. Bad images (missing, truncated, not an image,
    huge) and empty captions are reported per row; they never stop the batch.

    Example: scoreband score pairs.csv --image-col image --text-col caption --out scored.csv
    """

    from scoreband.io import read_table, write_table
    from scoreband.provenance import write_provenance
    from scoreband.scorers.scoring import clip_s_table, score_table, score_table_backbone

    df = read_table(table)
    base = Path(table).parent
    files = {}
    if scorer is not None:
        if scorer != "clip-s":
            _fail(f"--scorer {scorer!r}: the only point scorer is clip-s")
        if model is not None:
            _fail("--scorer clip-s uses --backbone, not --model")
        res, n_bad, comps = clip_s_table(df, backbone, image_col=image_col, text_col=text_col,
                                         batch_size=min(batch_size, 64), base_dir=base,
                                         device=device, dtype=dtype or "float32")
        err_col = "score_error"
    elif model is not None and _model_format(model) == "scoreband.backbone-scorer":
        res, n_bad, comps = score_table_backbone(df, model, image_col=image_col,
                                                 text_col=text_col,
                                                 batch_size=min(batch_size, 64),
                                                 base_dir=base, device=device, dtype=dtype)
        files["calibrator"] = Path(model) / "calibrator.json"
        err_col = "band_error"
    else:
        if backbone != "embedded:default" and model is None:
            _fail(f"--backbone {backbone}: bands need a model trained on it (scoreband train "
                  "TABLE --backbone ... --out DIR, then --model DIR), or use --scorer clip-s")
        journal = Path(str(out) + ".partial.jsonl")
        res, n_bad, comps = score_table(df, image_col=image_col, text_col=text_col,
                                        model=str(model) if model else backbone,
                                        batch_size=batch_size, progress=console,
                                        base_dir=base, journal=journal)
        from scoreband.scorers.model import bundled_model_dir

        files["calibrator"] = (Path(model) if model else bundled_model_dir()) / "calibrator.json"
        err_col = "band_error"
    write_table(res, out)
    write_provenance(out, comps, files=files)
    Path(str(out) + ".partial.jsonl").unlink(missing_ok=True)  # the table is complete
    if res.attrs.get("reused_rows"):
        console.print(f"{res.attrs['reused_rows']} rows resumed from {out}.partial.jsonl")
    bad = _report_error_column(res, err_col, "not scored")
    n_trunc = int(res.get("band_truncated", res.get("truncated", 0)).sum()) if len(res) else 0
    if n_trunc:
        err.print(f"[yellow]{n_trunc} captions were truncated to the text tower's length "
                  "(flagged per row)[/]")
    n_ood = int((res["band_ood"] != "").sum()) if "band_ood" in res else 0
    if n_ood:
        err.print(f"[yellow]{n_ood} of {len(res)} rows are outside what the model knows "
                  "(band_ood says why): their bands are guesses[/]")
    console.print(f"scored {len(res) - bad} of {len(res)} rows -> {out}")
    if bad == len(res):  # as judge and roundtrip: a run that scored nothing is a failure
        raise typer.Exit(1)


# ------------------------------------------------------------------ demo
@app.command()
@_guard
def demo(
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("scoreband-demo"),
    n_test: Annotated[int, typer.Option("--n-test", help="Items per test set.")] = 600,
    seeds: Annotated[int, typer.Option("--seeds", help="Random calibration/test splits.")]
    = 10,
    alpha: AlphaOpt = 0.1,
    mc_passes: Annotated[int, typer.Option("--mc-passes", help="MC-dropout passes.")] = 25,
):
    """Run everything on the embedded world, with no download: three test sets (clean
    multi-annotator, noisy single-annotator, painting-style out of domain), the bundled
    quantile scorer and its MC-dropout baseline, CRC and cluster calibration over repeated
    splits. Writes results.json, results.md, widths.png and examples.png to --out.
    """
    from scoreband.demo import METRICS, ROWS, TEST_SETS, run_demo
    from scoreband.progress import step_status

    with step_status(err, "demo: scoring the three test sets ...") as step:
        doc = run_demo(out, n_test=n_test, seeds=seeds, alpha=alpha, mc_passes=mc_passes,
                       on_step=step)
    def cell(v):
        return "-" if v["mean"] is None or np.isnan(v["mean"]) else f"{v['mean']:.3f}"

    # short names so the tables fit 80 columns; the legend below says what they stand for
    short = {"mc_dropout": "mc-drop", "unconstrained_pinball": "pin", "chained_pinball":
             "ch-pin", "chained_ci": "ch-ci", "chained_ci_clusters": "ch-ci-k"}
    heads = {"kendall_tau_c": "tau-c", "ups": "UPS", "sharpness": "width", "coverage": "cover"}
    for s in TEST_SETS:
        t = Table(title=f"{s}: before -> after calibration (alpha={alpha}, {seeds} seeds, "
                        f"n={n_test})")
        t.add_column("head")
        for m in METRICS:
            t.add_column(heads.get(m, m), justify="right")
        for row in ROWS:
            t.add_row(short.get(row, row), *[f"{cell(doc[s][row]['before'][m])} -> "
                                             f"{cell(doc[s][row]['after'][m])}"
                                             for m in METRICS])
        console.print(t)
    console.print("heads: mc-drop = MC dropout of the point head, pin = unconstrained pinball, "
                  "ch-pin = chained pinball, ch-ci = chained with the centred interval loss "
                  "(CRC), ch-ci-k = ch-ci with the cluster-conservative rule; width = "
                  "sharpness on [0, 1], cover = coverage, UPS = width-error correlation")
    for f in doc["_meta"]["findings"]:
        mark = "[green]yes[/]" if f["holds"] else "[red]no[/]"
        console.print(f"  {mark}  {f['claim']} ({f['value']:.3f})")
    sh = doc["ood_painting_shift"]["chained_ci"]["after"]["coverage"]
    console.print(f"calibrated in domain, applied to ood_painting: coverage {sh['mean']:.3f}")
    console.print(f"wrote {out}/results.json, results.md, widths.png, examples.png "
                  f"({doc['_meta']['seconds']} s)")


# ------------------------------------------------------------------ judge
@app.command("judge")
@_guard
def judge(
    table: Table_,
    judge_spec: Annotated[str, typer.Option(
        "--judge", help="hf:DIR_OR_HUB_ID (local transformers VLM) or openai:MODEL "
                        "(OpenAI-compatible endpoint with logprobs).")],
    out: Annotated[Path, typer.Option("--out", help="Output table (every row kept).")],
    scale: Annotated[str, typer.Option("--scale", help="Integer label scale 'A,B', e.g. 1,5; "
                                                        "every label must be one token.")] = "1,5",
    image_col: Annotated[str, typer.Option("--image-col")] = "image",
    instruction_col: Annotated[str, typer.Option("--instruction-col")] = "instruction",
    response_col: Annotated[str, typer.Option("--response-col")] = "response",
    rubric: Annotated[str | None, typer.Option(
        "--rubric", help="Rubric text, or @FILE to read it from a file.")] = None,
    template: Annotated[str | None, typer.Option(
        "--template", help="Prompt template (or @FILE) with {instruction} {response} {rubric} "
                           "{delimiter} {lo} {hi}.")] = None,
    delimiter: Annotated[str, typer.Option(
        "--delimiter", help="Text after which the judge writes its score, searched from the "
                            "end of the answer (e.g. 'Score:' or '\"score\":').")] = "Score:",
    max_new_tokens: Annotated[int, typer.Option(
        "--max-new-tokens", help="hf: tokens of reasoning before the score (0: read the score "
                                 "right after the prompt and delimiter).")] = 0,
    device: Annotated[str, typer.Option("--device", help="hf: cpu | cuda.")] = "cpu",
    dtype: Annotated[str, typer.Option("--dtype", help="hf: float32 | bfloat16 | float16.")]
    = "float32",
    base_url: Annotated[str, typer.Option(
        "--base-url", help="openai: endpoint root ($OPENAI_API_KEY is sent if set).")]
    = "https://api.openai.com/v1",
    top_logprobs: Annotated[int, typer.Option("--top-logprobs", help="openai: top-k.")] = 20,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="openai: answer length.")]
    = 256,
    timeout: Annotated[float, typer.Option("--timeout", help="openai: seconds per request.")]
    = 60.0,
    retries: Annotated[int, typer.Option("--retries", help="openai: retries on 429/5xx/"
                                                           "time-outs.")] = 4,
    cache: Annotated[Path | None, typer.Option(
        "--cache", help="openai: response cache folder (default: OUT.cache/).")] = None,
):
    """Extract score-token log-probs from a VLM judge for every (image, instruction,
    response) row: logp_<label> columns (log-softmax over the labels; variants such as
    " 5", "▁5", "Ġ5" added together), expected score, argmax, entropy, max probability and
    missing mass. Failed rows keep empty features and the reason in judge_error. Rerunning
    the same command resumes: finished rows are kept in OUT.partial.jsonl (and endpoint
    answers in the cache).

    Then calibrate, e.g.: scoreband evaluate OUT --target human --scale 1,5
    --median judge_expected --features 'logp_*' --method r2ccp
    """
    from scoreband.io import read_table, write_table
    from scoreband.judges.extract import JudgePrompt, extract_judge_table, make_judge
    from scoreband.records import Scale

    sc = Scale.parse(scale)

    def text_or_file(v):
        if v is not None and v.startswith("@"):
            f = Path(v[1:])
            if not f.is_file():
                _fail(f"{v}: file not found")
            return f.read_text()
        return v

    kw = {}
    if rubric is not None:
        kw["rubric"] = text_or_file(rubric)
    if template is not None:
        kw["template"] = text_or_file(template)
    prompt = JudgePrompt(int(sc.lo), int(sc.hi), delimiter=delimiter, **kw)
    _ = prompt.labels  # validates the scale
    df = read_table(table)
    j = make_judge(judge_spec, prompt, max_new_tokens=max_new_tokens, device=device,
                   dtype=dtype, base_url=base_url, top_logprobs=top_logprobs,
                   max_tokens=max_tokens, timeout=timeout, retries=retries,
                   cache_dir=cache if cache is not None else Path(str(out) + ".cache"))
    journal = Path(str(out) + ".partial.jsonl")
    res, bad = extract_judge_table(df, j, image_col=image_col, instruction_col=instruction_col,
                                   response_col=response_col, base_dir=Path(table).parent,
                                   journal=journal, progress=err)
    write_table(res, out)
    from scoreband.provenance import write_provenance

    write_provenance(out, {"judge": j.describe(), "prompt": {
        "template": prompt.template, "rubric": prompt.rubric, "delimiter": prompt.delimiter,
        "labels": prompt.labels}})
    journal.unlink(missing_ok=True)
    reused = res.attrs.get("reused_rows", 0)
    _report_error_column(res, "judge_error", "could not be judged")
    console.print(f"wrote {out}: {len(res) - bad} of {len(res)} rows judged by {j.name}"
                  + (f" ({reused} resumed from the journal)" if reused else ""))
    if bad == len(res):
        raise typer.Exit(1)


# ------------------------------------------------------------------ judge-study
@app.command("judge-study")
@_guard
def judge_study(
    table: Annotated[Path | None, typer.Argument(
        help="Table of judge log-probs (e.g. from `scoreband judge`); omit to run on the "
             "SIMULATED judges of the embedded world.")] = None,
    judge_cols: Annotated[list[str] | None, typer.Option(
        "--judge", help="NAME=COLUMNS: one judge's K log-prob columns (comma list or glob, "
                        "in label order), repeatable; several judges are also fused.")] = None,
    target: TargetOpt = None,
    ratings: RatingsOpt = None,
    scale: Annotated[str, typer.Option("--scale", help="Label scale 'A,B' (K = B - A + 1 "
                                                        "labels).")] = "1,5",
    task_col: Annotated[str | None, typer.Option(
        "--task-col", help="Column of the task / category (Mondrian groups and the "
                           "reliability map).")] = None,
    n_ratings: NRatingsOpt = None,
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("judge-study"),
    n: Annotated[int, typer.Option("--n", help="Items of the embedded world.")] = 2000,
    seeds: Annotated[int, typer.Option("--seeds")] = 10,
    alpha: AlphaOpt = 0.1,
    threshold: Annotated[float, typer.Option(
        "--threshold", help="Width (share of the scale) above which a task is sent to "
                            "pairwise ranking.")] = 0.5,
    map_method: Annotated[str, typer.Option(
        "--map-method", help="Bands of the reliability map: split (around the judge's own "
                             "score: can its absolute scores be used?) or r2ccp (a model "
                             "re-learned on its log-probs). Both are computed.")] = "split",
):
    """The judge-uncertainty protocol: split CP, CQR and R2CCP, Mondrian by task on/off, boundary
    adjustment on/off, judge fusion, over --seeds random 50/50 splits; per-task reliability
    map with RSG and a recommendation. Writes judge_study.json, judge_study.md and
    reliability_map.png.

    Without TABLE it runs on the SIMULATED judges of the embedded world (labelled so in every
    output). With TABLE: e.g. scoreband judge-study judged.csv --judge llava='logp_*'
    --target human --scale 1,5 --task-col task
    """
    from scoreband.judges.study import run_judge_study

    simulated = table is None
    if simulated:
        from scoreband.world import make_dataset
        from scoreband.world.dataset import LIKERT
        from scoreband.world.judges import SIMULATED_JUDGES, judge_logprobs

        ds = make_dataset(n, 42, n_annotators=3, name="judged")
        judges = {j.name: judge_logprobs(j, ds.true01, ds.tasks) for j in SIMULATED_JUDGES}
        y01, tasks, nr, sc = ds.y01, ds.tasks, ds.n_ratings, LIKERT
    else:
        from scoreband.io import ColumnSpec, expand_columns, load_inputs, read_table
        from scoreband.records import Scale

        if not judge_cols:
            _fail("give at least one --judge NAME=COLUMNS (e.g. --judge llava='logp_*')")
        sc = Scale.parse(scale)
        df = read_table(table)
        parts = {}
        for spec in judge_cols:
            name, eq, cols = spec.partition("=")
            if not eq or not name or not cols:
                _fail(f"--judge {spec!r}: expected NAME=COLUMNS, e.g. llava='logp_*'")
            parts[name] = expand_columns(cols, df.columns)
        k = int(sc.hi - sc.lo + 1)
        for name, cols in parts.items():
            if len(cols) != k:
                _fail(f"--judge {name}: {len(cols)} columns ({', '.join(cols)}) but the scale "
                      f"{scale} has K = {k} labels; give one log-prob column per label")
        allcols = [c for cols in parts.values() for c in cols]
        inp = load_inputs(df, ColumnSpec(scale=sc, target=target, ratings=ratings,
                                         features=allcols, groups=task_col),
                          require_median=False, n_ratings=n_ratings)
        _report_rows(inp.errors, len(df))
        judges, at = {}, 0
        for name, cols in parts.items():
            judges[name] = inp.pred.features[:, at:at + len(cols)]
            at += len(cols)
        # without --task-col the table is one task: Mondrian is then the marginal band
        tasks = (np.full(len(inp.y01), "all") if inp.groups is None
                 else inp.groups.astype(str))
        y01, nr = inp.y01, inp.n_ratings
    if map_method not in ("split", "r2ccp"):
        _fail(f"--map-method {map_method!r}: choose split or r2ccp")
    from scoreband.progress import step_status

    with step_status(err, "judge study ...") as step:
        run_judge_study(judges, y01, tasks, nr, scale=sc, seeds=seeds, alpha=alpha,
                        threshold=threshold, out_dir=out, simulated=simulated,
                        on_step=step, map_method=map_method)
    console.print((Path(out) / "judge_study.md").read_text())


@app.command()
@_guard
def example(
    out: Annotated[Path, typer.Option("--out", help="Where to write the example table.")] =
    Path("example_predictions.csv"),
):
    """Write the example predictions table shipped with scoreband (2,000 simulated
    quantile-scorer outputs with 3 annotators each; see scripts/make_example_predictions.py).
    """
    import shutil
    from importlib import resources

    src = resources.files("scoreband") / "data" / "example_predictions.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    with resources.as_file(src) as p:
        shutil.copyfile(p, out)
    from scoreband.provenance import write_provenance

    write_provenance(out, {"table": "the bundled example predictions (embedded world, seeded)"})
    console.print(f"wrote {out}; try:")
    # one physical line, never wrapped, so that copy-paste runs the whole command
    console.print(f"scoreband evaluate {out} --ratings ratings --scale 1,5 --median median "
                  "--lo q05 --hi q95 --pred-scale 0,1 --method crc --groups task",
                  soft_wrap=True)


# ------------------------------------------------------------------ datasets
datasets_app = typer.Typer(help="Public human-rating benchmarks: list them, or turn a local "
                                "copy into a standard table.", no_args_is_help=True)
app.add_typer(datasets_app, name="datasets")


@datasets_app.command("list")
def datasets_list():
    """The benchmarks, their native scales, splits, annotator counts and expected files."""
    from scoreband.datasets import BENCHMARKS

    for b in BENCHMARKS.values():
        console.print(b.describe())


@datasets_app.command("prepare")
@_guard
def datasets_prepare(
    name: Annotated[str, typer.Argument(help="Benchmark (see `scoreband datasets list`).")],
    root: Annotated[Path, typer.Argument(help="Folder of the local copy.")],
    out: Annotated[Path, typer.Option("--out", help="Standard table to write.")],
    split: Annotated[str | None, typer.Option("--split", help="Split (default: the test "
                                                               "split).")] = None,
    image_dir: Annotated[Path | None, typer.Option(
        "--image-dir", help="Where images stored inside Parquet / arrow files are written "
                            "(default ROOT/.scoreband-images).")] = None,
):
    """Write one split of a benchmark as a standard table: id, image, caption, target
    (native scale), target01, n_ratings, ratings, references, task, split. Then e.g.:
    scoreband score TABLE --model DIR, or scoreband train TABLE --backbone ...
    --target target --scale A,B.
    """
    from scoreband.datasets import load_benchmark
    from scoreband.io import write_table

    df, b = load_benchmark(name, root, split, image_dir)
    write_table(df, out)
    from scoreband.provenance import write_provenance

    write_provenance(out, {"benchmark": {"name": b.name, "root": str(root), "split": split,
                                         "scale": [b.scale.lo, b.scale.hi]}})
    missing = int((~df["image"].map(lambda p: Path(p).is_file())).sum())
    console.print(f"wrote {out}: {len(df)} rows of {b.name} ({df['split'].iloc[0] if len(df) else ''}),"
                  f" scale {b.scale.lo:g}-{b.scale.hi:g}" + (
                      f"; [yellow]{missing} image files not found[/]" if missing else ""))


# ------------------------------------------------------------------ world
@app.command("world")
@_guard
def world(
    out: Annotated[Path, typer.Option("--out", help="Output folder (world.csv + images/).")]
    = Path("world"),
    n: Annotated[int, typer.Option("--n", help="Items.")] = 200,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    style: Annotated[str, typer.Option("--style", help="photo | painting (out of domain).")]
    = "photo",
    annotators: Annotated[int, typer.Option("--annotators", help="Simulated ratings per "
                                                                 "item.")] = 3,
    p_corrupt: Annotated[float, typer.Option(
        "--p-corrupt", help="Share of captions with corruptions (0: only correct captions).")]
    = 0.6,
):
    """Write items of the embedded world as a table with PNG images, to try every command
    on: columns id, image, caption, task, ratings (';'-separated 1-5), human (their mean),
    true_score, domain, and instruction / response (the caption as a response to judge).

    Example: scoreband world --out w && scoreband score w/world.csv --out scored.csv
    """
    from scoreband.io import write_table
    from scoreband.world import make_dataset

    if style not in ("photo", "painting"):
        _fail(f"--style {style!r}: choose photo or painting")
    if not 0 <= p_corrupt <= 1:
        _fail(f"--p-corrupt must be in [0, 1], got {p_corrupt}")
    ds = make_dataset(n, seed, style=style, n_annotators=annotators, p_corrupt=p_corrupt,
                      name=f"world-{style}")
    df = ds.to_frame(Path(out) / "images")
    df["image"] = [str(Path(p).relative_to(out)) for p in df["image"]]
    df["instruction"] = "Describe the picture in one sentence."
    df["response"] = df["caption"]
    write_table(df, Path(out) / "world.csv")
    from scoreband.provenance import write_provenance

    write_provenance(Path(out) / "world.csv", {"world": {
        "n": n, "seed": seed, "style": style, "annotators": annotators,
        "p_corrupt": p_corrupt}})
    console.print(f"wrote {Path(out) / 'world.csv'} ({n} items, images in "
                  f"{Path(out) / 'images'})")


# ------------------------------------------------------------------ round trip
GeneratorOpt = Annotated[str, typer.Option(
    "--generator", help="embedded:renderer | diffusers:PATH_OR_ID | openai:MODEL.")]
EncoderOpt = Annotated[str, typer.Option(
    "--encoder", help="embedded:default | hf:PATH_OR_ID (CLIP/SigLIP vision tower, ViT, "
                      "DINOv2, ResNet).")]
NGenOpt = Annotated[int, typer.Option("--n-gen", help="Generations per caption (seeds "
                                                      "SEED, SEED+1, ...).")]


def _rt_components(generator, encoder, steps, size, guidance, device, dtype, base_url,
                   cache, out):
    from scoreband.roundtrip.encoders import make_encoder
    from scoreband.roundtrip.generators import make_generator

    gen = make_generator(generator, steps=steps, size=size, guidance=guidance, device=device,
                         dtype=dtype, base_url=base_url,
                         cache_dir=cache if cache is not None else Path(str(out) + ".cache"))
    enc = make_encoder(encoder, device=device, dtype=dtype)
    return gen, enc


@app.command("roundtrip")
@_guard
def roundtrip(
    table: Table_,
    out: Annotated[Path, typer.Option("--out", help="Output table (every row kept).")],
    generator: GeneratorOpt = "embedded:renderer",
    encoder: EncoderOpt = "embedded:default",
    captioner: Annotated[str | None, typer.Option(
        "--captioner", help="hf:PATH_OR_ID of an image-to-text model: caption the images "
                            "first and score those captions (the model under test).")] = None,
    n_gen: NGenOpt = 4,
    seed: Annotated[int, typer.Option("--seed", help="First generation seed.")] = 0,
    image_col: Annotated[str, typer.Option("--image-col")] = "image",
    text_col: Annotated[str, typer.Option("--text-col")] = "caption",
    references: Annotated[str | None, typer.Option(
        "--references", help="Column of ';'-separated reference captions: adds BLEU-4, "
                             "ROUGE-L and CIDEr-D per row (needs scoreband[text]).")] = None,
    keep_images: Annotated[Path | None, typer.Option(
        "--keep-images", help="Folder to keep the generated images in.")] = None,
    steps: Annotated[int, typer.Option("--steps", help="diffusers: inference steps.")] = 25,
    size: Annotated[int, typer.Option("--size", help="Generated image size (pixels).")] = 512,
    guidance: Annotated[float, typer.Option("--guidance", help="diffusers: guidance.")] = 7.5,
    device: Annotated[str, typer.Option("--device", help="cpu | cuda.")] = "cpu",
    dtype: Annotated[str, typer.Option("--dtype", help="float32 | bfloat16 | float16 "
                                                       "(similarities are float32).")]
    = "float32",
    base_url: Annotated[str, typer.Option("--base-url", help="openai: endpoint root.")]
    = "https://api.openai.com/v1",
    cache: Annotated[Path | None, typer.Option(
        "--cache", help="openai: image cache folder (default OUT.cache/).")] = None,
):
    """Round-trip score of every (image, caption) row: the caption is turned into --n-gen
    images by the generator, and the score is the mean cosine similarity between the
    original image's embedding and theirs (spread = their standard deviation). Adds
    roundtrip_score, roundtrip_spread, roundtrip_error (failed rows keep NaN, never a score),
    roundtrip_seeds; writes OUT.provenance.json. Rerunning resumes from OUT.partial.jsonl.

    Example (no download): scoreband world --out w && scoreband roundtrip w/world.csv
    --out rt.csv
    """
    from scoreband.io import read_table, write_table
    from scoreband.provenance import write_provenance
    from scoreband.roundtrip.metric import roundtrip_table

    df = read_table(table)
    base = Path(table).parent
    gen, enc = _rt_components(generator, encoder, steps, size, guidance, device, dtype,
                              base_url, cache, out)
    components = {"generator": gen.describe(), "encoder": enc.describe()}
    if captioner is not None:
        from scoreband.roundtrip.captioner import HFCaptioner, caption_table

        if not captioner.startswith("hf:"):
            _fail(f"--captioner {captioner!r}: use hf:PATH_OR_ID")
        cap = HFCaptioner(captioner[3:], device=device)
        with console.status("captioning ..."):
            df = caption_table(df, cap, image_col=image_col, base_dir=base)
        text_col = "generated_caption"
        components["captioner"] = cap.describe()
    if keep_images is not None and keep_images.exists() and not keep_images.is_dir():
        _fail(f"--keep-images {str(keep_images)!r} is a file; give a folder for the images")
    journal = Path(str(out) + ".partial.jsonl")
    res, bad = roundtrip_table(df, gen, enc, n_gen=n_gen, seed=seed, image_col=image_col,
                               text_col=text_col, base_dir=base, keep_dir=keep_images,
                               journal=journal, progress=err)
    if references is not None:
        from scoreband.roundtrip.text_metrics import text_metrics

        if references not in res.columns:
            _fail(f"--references column {references!r} is not in the table")
        corpus, per = text_metrics(res[text_col].tolist(), res[references].tolist())
        for k, v in per.items():
            res[k] = v
        components["text_metrics_corpus"] = corpus
        console.print("text metrics (corpus): " + ", ".join(
            f"{k} {v:.3f}" for k, v in corpus.items() if k != "n"))
    write_table(res, out)
    write_provenance(out, components)
    journal.unlink(missing_ok=True)
    _report_error_column(res, "roundtrip_error", "not scored")
    reused = res.attrs.get("reused_rows", 0)
    console.print(f"wrote {out}: {len(res) - bad} of {len(res)} rows scored"
                  + (f" ({reused} resumed)" if reused else "")
                  + f"; mean score {np.nanmean(res['roundtrip_score']):.4f}"
                  if len(res) > bad else f"wrote {out}: no row could be scored")
    if bad == len(res):
        raise typer.Exit(1)


@app.command("roundtrip-study")
@_guard
def roundtrip_study(
    table: Annotated[Path | None, typer.Argument(
        help="Table of (image, caption[, human target]) rows; omit for the embedded world.")]
    = None,
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("roundtrip-study"),
    generator: GeneratorOpt = "embedded:renderer",
    encoder: EncoderOpt = "embedded:default",
    n_gen: NGenOpt = 4,
    n: Annotated[int, typer.Option("--n", help="World: images in the validation study "
                                               "(the calibration set has 4x as many).")] = 500,
    image_col: Annotated[str, typer.Option("--image-col")] = "image",
    text_col: Annotated[str, typer.Option("--text-col")] = "caption",
    target: TargetOpt = None,
    scale: Annotated[str, typer.Option("--scale", help="Native scale of --target.")] = "1,5",
    n_ratings: NRatingsOpt = None,
    seeds: Annotated[int, typer.Option("--seeds", help="Random 50/50 splits.")] = 10,
    alpha: AlphaOpt = 0.1,
    steps: Annotated[int, typer.Option("--steps", help="diffusers: inference steps.")] = 25,
    size: Annotated[int, typer.Option("--size", help="Generated image size.")] = 512,
    guidance: Annotated[float, typer.Option("--guidance")] = 7.5,
    device: Annotated[str, typer.Option("--device")] = "cpu",
    dtype: Annotated[str, typer.Option("--dtype")] = "float32",
    base_url: Annotated[str, typer.Option("--base-url")] = "https://api.openai.com/v1",
):
    """The round-trip validation study (matched vs shuffled captions: mean gap and AUROC with
    bootstrap 95 % intervals), plus a calibrated band around the round-trip score where human
    ratings exist (split CP on an isotonic map of the score, CRC with the seed spread as the
    raw interval; --seeds random splits). Writes roundtrip_study.json / .md and
    roundtrip_scores.png.

    Without TABLE: the embedded world (correct reference captions for the validation study;
    corrupted captions with 3 simulated annotators each for the band).
    """
    from PIL import Image

    from scoreband.records import Scale
    from scoreband.roundtrip.metric import roundtrip_scores, roundtrip_table
    from scoreband.roundtrip.study import (
        calibration_study,
        derangement,
        validation_study,
        write_study,
    )

    gen, enc = _rt_components(generator, encoder, steps, size, guidance, device, dtype,
                              base_url, None, Path(out) / "generations")
    doc = {"generator": gen.name, "encoder": enc.name, "n_gen": n_gen,
           "components": {"generator": gen.describe(), "encoder": enc.describe()}}
    if table is None:
        from scoreband.world import make_dataset
        from scoreband.world.dataset import LIKERT

        doc["simulated"] = True
        ref = make_dataset(n, 11, n_annotators=3, name="roundtrip-ref", p_corrupt=0.0)
        ims = [Image.fromarray(a) for a in ref.images]
        perm = derangement(len(ims))
        from scoreband.progress import step_status

        with step_status(err, "round trip: matched and shuffled captions ..."):
            m, _, _ = roundtrip_scores(ims, ref.captions, gen, enc, n_gen=n_gen)
            mm, _, _ = roundtrip_scores(ims, [ref.captions[j] for j in perm], gen, enc,
                                        n_gen=n_gen)
        doc["validation"] = validation_study(m, mm)
        doc["per_task"] = {}
        for t in np.unique(ref.tasks):
            k = ref.tasks == t
            if k.sum() < 10:  # too few for an AUROC: left out of the per-task table
                continue
            v = validation_study(m[k], mm[k], n_boot=200)
            doc["per_task"][str(t)] = {"n": v["n"], "gap": v["gap"], "auroc": v["auroc"]}
        cal = make_dataset(4 * n, 12, n_annotators=3, name="roundtrip-cal")
        with step_status(err, "round trip: calibration set ..."):
            s, sd, _ = roundtrip_scores([Image.fromarray(a) for a in cal.images],
                                        cal.captions, gen, enc, n_gen=n_gen)
        doc["calibration"] = calibration_study(s, sd, cal.y01, scale=LIKERT,
                                               n_ratings=cal.n_ratings, alpha=alpha,
                                               seeds=seeds)
    else:
        from scoreband.io import read_table

        doc["simulated"] = False
        doc["source"] = str(table)
        df = read_table(table)
        res, bad = roundtrip_table(df, gen, enc, n_gen=n_gen, image_col=image_col,
                                   text_col=text_col, base_dir=Path(table).parent,
                                   progress=err)
        perm = derangement(len(df))
        shuffled = df.copy()
        shuffled[text_col] = df[text_col].to_numpy()[perm]
        res2, _ = roundtrip_table(shuffled, gen, enc, n_gen=n_gen, image_col=image_col,
                                  text_col=text_col, base_dir=Path(table).parent, progress=err)
        m, mm = res["roundtrip_score"].to_numpy(), res2["roundtrip_score"].to_numpy()
        doc["validation"] = validation_study(m, mm)
        if target is not None:
            from scoreband.io import ColumnSpec, load_inputs

            sc = Scale.parse(scale)
            ok = res["roundtrip_error"] == ""
            inp = load_inputs(res[ok].reset_index(drop=True),
                              ColumnSpec(scale=sc, target=target, median="roundtrip_score",
                                         pred_scale=Scale(-1, 1)),
                              n_ratings=n_ratings)
            _report_rows(inp.errors, int(ok.sum()))
            rows = res[ok].reset_index(drop=True).iloc[inp.rows]
            doc["calibration"] = calibration_study(
                rows["roundtrip_score"].to_numpy(), rows["roundtrip_spread"].to_numpy(),
                inp.y01, scale=sc, n_ratings=inp.n_ratings, alpha=alpha, seeds=seeds)
    write_study(doc, out, m, mm)
    console.print((Path(out) / "roundtrip_study.md").read_text())


def main() -> None:
    """Entry point of the console script."""
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
