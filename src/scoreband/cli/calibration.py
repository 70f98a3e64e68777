"""evaluate, calibrate, apply: conformal calibration of a table of predictions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from scoreband import api
from scoreband.api import (
    AppliedFile,
    band_usefulness,
    guarantee_of,
    needed_columns,
    provenance,
    write_json,
)
from scoreband.cli._app import (
    MOSTLY_SKIPPED_EXIT,
    app,
    console,
    err,
    fail,
    guard,
    print_warnings,
    report_rows,
    styled,
    warn,
)
from scoreband.cli._options import (
    CALIBRATION_KNOBS,
    CALIBRATION_OPTIONS,
    ENGINE_OPTIONS,
    PREDICTION_OVERRIDES,
    GroupsOpt,
    HtmlOpt,
    Knob,
    NRatingsOpt,
    RatingsOpt,
    ScorerOpt,
    Table_,
    TargetOpt,
    config_option,
    open_unit,
    read_knobs,
    split_options,
    with_options,
)
from scoreband.cli._rows import run_stage
from scoreband.errors import ERROR_COLUMN, CalibratorMismatch, RowError
from scoreband.progress import step_status
from scoreband.textsafe import plain, share_text


def _fmt(d) -> str:
    if not isinstance(d, dict):
        return "-"
    m, s = d.get("mean"), d.get("std")
    if m is None or (isinstance(m, float) and np.isnan(m)):
        return "-"
    return f"{m:.3f} ± {s:.3f}"


def print_metrics_table(res: dict, title: str) -> None:
    """The before/after table of ``evaluate`` (and per group), with the theoretical band."""
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
    console.print(f"(mean ± standard deviation over the {res['seeds']} random splits)")
    if after.get("constant_width"):
        console.print(f"note: every band of {plain(res['method'])} has the same width except "
                      "where the scale's ends cut it: its ups (correlation of width and "
                      "error) comes from that cutting, not from bands that adapt to the error")
    if "scale" in res:
        console.print(usefulness(after["sharpness_native"]["mean"], res["scale"]))
    if after.get("median_source", "the given median") != "the given median":
        console.print(f"note: after calibration, ups / tau-c / pearson / spearman are of "
                      f"{plain(after['median_source'])}")
    tc = res["theoretical_coverage"]
    console.print(f"theoretical coverage band (n={tc['n_cal']} items in the conformal step): "
                  f"[{tc['low']:.3f}, {tc['high']:.3f}]")
    _print_guarantee(res)
    cov = after["coverage"]
    if cov["mean"] > tc["high"] + 2 * cov["std"] / max(res["seeds"], 1) ** 0.5 + 0.005:
        console.print("note: coverage is above the band: ties in the conformity scores "
                      "(discrete targets: whole achievable values enter a band at once) or "
                      "the hull of a union of intervals (r2ccp) make bands conservative; "
                      "--method chr or auto with --randomize reach 1 - alpha in expectation")
    if res.get("groups"):
        g = Table(title="per group (after calibration)")
        for c in ("group", "n (test)", "coverage", "sharpness"):
            g.add_column(c, overflow="fold")  # a long name wraps, never cut with "..."
        for name, v in res["groups"].items():
            g.add_row(plain(name), str(v["n"]), _fmt(v["coverage"]), _fmt(v["sharpness"]))
        console.print(g)
    _print_levels(res)


def _print_guarantee(res: dict) -> None:
    """What the bands promise (``guarantee``) and the share of splits whose test coverage
    fell below 1 - alpha (``coverage_below_target``): at most about delta with --delta."""
    below, d = res.get("coverage_below_target"), res.get("delta")
    if res.get("guarantee"):
        console.print(f"guarantee: {plain(res['guarantee'])}")
    if not below:
        return
    ci = below.get("ci") or [float("nan")] * 2
    line = (f"splits covering less than {share_text(below['target'])} of their test rows: "
            f"{below['splits_below']} of {below['splits']} ({below['share']:.0%}, 95 % CI "
            f"{ci[0]:.2f}-{ci[1]:.2f})")
    console.print(line + (f"; delta {d:g} allows at most {share_text(d)} (each split's test half adds "
                          "its own sampling noise)" if d is not None else
                          "; marginal bands: about half, --delta bounds this share"))


def usefulness(width: float, scale: dict) -> str:
    """One sentence on what a band of this mean width can tell on the scale."""
    share, what = band_usefulness(width, scale["lo"], scale["hi"])
    return (f"mean band {width:.2f} points wide on {scale['lo']:g}-{scale['hi']:g} "
            f"({share:.0%} of the scale): {what}.")


def _print_levels(res: dict) -> None:
    """Coverage by the target's level and by the predicted level, with the intervals."""
    by = res.get("coverage_by_level")
    if not by:
        return
    nominal = 1 - res["alpha"]
    for kind, title in (("target", "coverage by level of the human score"),
                        ("predicted", "coverage by predicted level (the calibrated median)")):
        if not by.get(kind):
            continue
        t = Table(title=f"{title}, 95 % Clopper-Pearson interval on distinct items")
        for c in ("level", "items", "coverage", "95 % CI", "width"):
            t.add_column(c, justify="right", overflow="fold")
        for g, v in by[kind].items():
            ci = v.get("ci") or [float("nan")] * 2
            low = v["coverage"]["mean"] < nominal - 0.1
            cov = f"{v['coverage']['mean']:.3f}" + (" <" if low else "")
            w = v["sharpness"]["mean"] * (res["scale"]["hi"] - res["scale"]["lo"])
            t.add_row(plain(g), str(v.get("n_items", v["n"])), cov,
                      f"{ci[0]:.3f}-{ci[1]:.3f}", f"{w:.2f}")
        console.print(t)



# ------------------------------------------------------------------ evaluate
#: evaluate's rarely used knobs (`--config FILE`): calibrate's and its own
EVALUATE_KNOBS = {
    "cal_frac": Knob(0.5, float, "a share in (0, 1)", "calibration share of each split",
                     lambda v: 0 < v < 1),
    "curve": Knob(None, bool, "true | false", "also the calibration curve (coverage at alpha "
                  "0.05 ... 0.5); none: with --html", nullable=True),
    **CALIBRATION_KNOBS,
}
EvaluateConfigOpt = config_option(EVALUATE_KNOBS)
CalibrationConfigOpt = config_option(CALIBRATION_KNOBS)


@app.command()
@guard
@with_options(CALIBRATION_OPTIONS)
def evaluate(
    table: Table_,
    seeds: Annotated[int, typer.Option("--seeds", min=1, max=10_000,
                                       help="Number of random splits.")] = 10,
    split_by: Annotated[str | None, typer.Option(
        "--split-by", help="Rows sharing this column's value stay on one side of every "
                           "split.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the metrics JSON here.")] = None,
    html: HtmlOpt = None,
    config: EvaluateConfigOpt = None,
    **opts,
):
    """Repeated calibration/test splits: coverage, sharpness, UPS, tau-c before/after.

    Example: scoreband evaluate preds.csv --target human --scale 1,5 --median score
    --lo q05 --hi q95 --pred-scale 0,1 --method crc --out metrics.json
    """
    knobs = read_knobs(config, EVALUATE_KNOBS)
    cal_frac, curve = knobs["cal_frac"], knobs["curve"]
    cols, cfg = split_options(opts, knobs)
    df = api.read_table(table, columns=None if api.reads_whole_rows(**cols, **cfg) else
                        needed_columns(table, cols, [split_by]))
    cols = {**cols, "split_by": split_by}
    with step_status(err, f"calibrating over {seeds} splits ...", every_s=5) as step:
        res = api.evaluate(df, **cols, **cfg, seeds=seeds, cal_frac=cal_frac,
                           n_ratings=opts["n_ratings"],
                           on_split=lambda k, n: step(f"split {k} of {n} done"))
    if html is not None if curve is None else curve:
        res["calibration_curve"] = _curve(df, cols, cfg, res, seeds, cal_frac,
                                          opts["n_ratings"])
    res["table"] = str(table)
    res["provenance"] = provenance({"input_table": str(table)})
    # the files first: nothing printed below (a name, a terminal's encoding) can lose them
    if out:
        write_json(out, res)
    if html:
        with step_status(err, "writing the HTML report (figures) ...", every_s=5):
            from scoreband.api import write_report  # lazy: loads matplotlib

            write_report([res], html)
    mostly = report_rows([row_error(e) for e in res["skipped_rows"]], len(df),
                         listed_in=out and f"{out} (skipped_rows)")
    print_warnings(res.get("warnings", []))
    for note in res.get("notes", []):
        err.print(f"note: {plain(note)}")
    delta = "" if res.get("delta") is None else f" · delta={res['delta']:g}"
    print_metrics_table(res, f"{res['method']} · alpha={opts['alpha']}{delta} · n={res['n']} · "
                             f"{seeds} seeds")
    for path in (out, html):
        if path:
            console.print(f"wrote {plain(path)}")
    _exit_if_mostly_skipped(mostly, len(res["skipped_rows"]), len(df))


def _exit_if_mostly_skipped(mostly: bool, skipped: int, total: int) -> None:
    """More than half of the rows skipped: the files are written and the results printed,
    then the command exits with status 1 (a table mostly unreadable is rarely meant)."""
    if mostly:
        err.print(styled(f"error: {skipped} of {total} rows were skipped (more than half; "
                         "reasons above): exit status 1, the results above rest on the "
                         f"other {total - skipped} rows only", "bold red"))
        raise typer.Exit(MOSTLY_SKIPPED_EXIT)


def _curve(df, cols, cfg, res, seeds, cal_frac, n_ratings) -> list[dict]:
    """The calibration curve (:func:`scoreband.api.calibration_curve`), progress on stderr."""
    k = min(seeds, 3)
    n_alphas = api.curve_splits(cfg["alpha"], seeds) // k
    with step_status(err, f"calibration curve: {n_alphas} more alphas x {k} splits ...",
                     every_s=5) as step:
        return api.calibration_curve(df, res, **cols, **cfg, seeds=seeds, cal_frac=cal_frac,
                                     n_ratings=n_ratings,
                                     on_split=lambda s, n: step(
                                         f"calibration curve: split {s} of {n} done"))


def row_error(d: dict):
    return RowError(**d)


# ------------------------------------------------------------------ calibrate
@app.command()
@guard
@with_options(CALIBRATION_OPTIONS)
def calibrate(
    table: Table_,
    out: Annotated[Path, typer.Option("--out", help="Calibrator JSON to write.")],
    scorer_id: ScorerOpt = None,
    split_by: Annotated[str | None, typer.Option(
        "--split-by", help="As in evaluate, so its command line works here unchanged: "
                           "calibrate fits on every row (no test split); the column is "
                           "checked and recorded.")] = None,
    config: CalibrationConfigOpt = None,
    **opts,
):
    """Fit a calibrator on every usable row and save it as versioned JSON.

    Example: scoreband calibrate preds.csv --target human --scale 1,5 --median score
    --method split --out calibrator.json
    """
    cols, cfg = split_options(opts, read_knobs(config, CALIBRATION_KNOBS))
    df = api.read_table(table, columns=None if api.reads_whole_rows(**cols, **cfg) else
                        needed_columns(table, cols, [split_by]))
    cols = {**cols, "split_by": split_by}
    # a learned method or auto on a large table fits for minutes: say so while it does
    with step_status(err, f"fitting {cfg['method']} on {len(df)} rows ...", every_s=5):
        fit = api.calibrate(df, **cols, **cfg, n_ratings=opts["n_ratings"], scorer_id=scorer_id,
                            on_warning=warn)
    mostly = report_rows(fit.errors, len(df))
    fit.save(out)
    console.print(f"calibrated {plain(repr(fit.calibrator))} on "
                  f"{fit.inputs['n_calibration']} rows -> {plain(out)}")
    console.print(f"guarantee: {plain(guarantee_of(fit.calibrator))}")
    _exit_if_mostly_skipped(mostly, len(fit.errors), len(df))


# ------------------------------------------------------------------ recalibrate
@app.command()
@guard
@with_options(PREDICTION_OVERRIDES)
def recalibrate(
    calibrator: Annotated[Path, typer.Argument(help="Calibrator JSON to start from (its "
                                                    "fitted model is kept).")],
    table: Annotated[Path | None, typer.Argument(
        help="Labeled rows of the new domain, scored like the calibration rows.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="New calibrator JSON.")] = None,
    target: TargetOpt = None,
    ratings: RatingsOpt = None,
    n_ratings: NRatingsOpt = None,
    plan: Annotated[float | None, typer.Option(
        "--plan", min=0.001, max=0.5,
        help="Say how many labeled rows keep the coverage within this slack of the target "
             "(e.g. 0.05) with probability 1 - --delta. A calibrator fitted with a delta "
             "keeps its own guarantee (coverage >= 1 - alpha with probability >= 1 - its "
             "delta) from its fewest labels on: the plan then says that number and the "
             "rank taken at more labels.")] = None,
    delta: Annotated[float | None, typer.Option(
        "--delta", callback=open_unit,
        help="Probability that the guarantee may fail over the draw of the labels (a "
             "calibrator fitted with a delta uses its own). Default: 0.1.")] = None,
    **predictions,
):
    """Adapt a calibrator to a new domain from a few labeled rows: keep its fitted model
    (CQR's regressor, CHR's histogram, CRC's omega, auto's choice, a map) and redo only the
    conformal step on the new rows; the coverage guarantee for that many labels is printed
    and saved.

    Example: scoreband recalibrate cal.json paintings_labeled.csv --target human
    --out cal_paintings.json; scoreband recalibrate cal.json --plan 0.05
    """
    from scoreband.api import conditional_plan, delta_of, label_plan, min_labels  # lazy: scipy

    cal, _ = api.load_calibrator(calibrator)
    d = delta_of(cal)
    if d is not None and delta is not None and delta != d:
        warn(f"--delta {delta:g} is not used: this calibrator was fitted with delta {d:g} "
             "and keeps that guarantee on the new labels")
    delta = 0.1 if delta is None else delta
    if plan is not None and d is not None:
        _print_conditional_plan(conditional_plan(cal.alpha, d), cal.alpha, d)
    elif plan is not None:
        _print_plan(label_plan(cal.alpha, sorted({plan, 0.02, 0.05, 0.1}), delta), plan,
                    cal.alpha, min_labels(cal.alpha))
    if table is None:
        if plan is None:
            fail("give the labeled TABLE of the new domain (or --plan SLACK for the planner)")
        return
    if out is None:
        fail("`out`: give the new calibrator's file (--out NEW.json)")
    fit = api.recalibrate(calibrator, table, target=target, ratings=ratings, **predictions,
                          n_ratings=n_ratings, delta=delta, on_warning=warn)
    report_rows(fit.errors, fit.inputs["recalibration"]["n_labeled"] + len(fit.errors))
    fit.save(out)
    g = fit.inputs["recalibration"]["guarantee"]
    console.print(f"recalibrated {plain(repr(fit.calibrator))} on {g['m']} labeled rows -> "
                  f"{plain(out)}")
    if g["delta"] is not None:  # the calibrator's training-conditional guarantee, kept
        console.print(f"guarantee on the new domain: coverage >= {1 - g['alpha']:.3f} with "
                      f"probability >= {share_text(1 - g['delta'])} over these labels "
                      f"(training-conditional: rank {g['rank']} of {g['m']}); expected "
                      f"coverage in [{g['expected_low']:.3f}, {g['expected_high']:.3f}]",
                      soft_wrap=False)
        return
    console.print(f"guarantee on the new domain: expected coverage in [{g['expected_low']:.3f},"
                  f" {g['expected_high']:.3f}]; with probability "
                  f"{share_text(g['with_probability']['probability'])} over these labels, "
                  f"coverage >= {g['with_probability']['coverage']:.3f}", soft_wrap=False)


def _print_conditional_plan(rows: list[dict], alpha: float, delta: float) -> None:
    t = Table(title=f"labels for a new domain at alpha = {alpha:g}, delta = {delta:g}: "
                    f"coverage >= {1 - alpha:g} with probability >= {share_text(1 - delta)} "
                    f"from {rows[0]['labels']} labels on")
    for c in ("labeled rows", "rank taken", "marginal rank", "quantile level"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(f"{r['labels']:,}", str(r["rank"]), str(r["marginal_rank"]),
                  f"{r['level']:.3f}")
    console.print(t)
    console.print("more labels do not change the guarantee; they bring the rank taken nearer "
                  "the marginal one (narrower bands)")


def _print_plan(rows: list[dict], plan: float, alpha: float, need: int) -> None:
    t = Table(title=f"labels for a new domain at alpha = {alpha:g} (at least {need})")
    for c in ("slack", "coverage at least", "with probability", "labeled rows"):
        t.add_column(c, justify="right")
    for r in rows:
        mark = " <" if abs(r["slack"] - plan) < 1e-12 else ""
        t.add_row(f"{r['slack']:g}{mark}", f"{r['coverage_at_least']:.3f}",
                  f"{r['probability']:.0%}", f"{r['labels']:,}")
    console.print(t)


# ------------------------------------------------------------------ apply
@app.command()
@guard
@with_options({**PREDICTION_OVERRIDES, **ENGINE_OPTIONS})
def apply(
    table: Table_,
    calibrator: Annotated[Path, typer.Option("--calibrator", help=(
        "Calibrator JSON from `scoreband calibrate`, or a rule: from `scoreband triage --out` "
        "(trust or escalate; with --pairwise: pairwise verdicts) or `scoreband cascade "
        "--rule-out` (a cascade of judges)."))],
    out: Annotated[Path, typer.Option("--out", help="Output table (every input row and "
                                                    "column kept).")],
    groups: GroupsOpt = None,
    scorer_id: ScorerOpt = None,
    n_ratings: Annotated[int | None, typer.Option(
        "--n-ratings", min=1, help="Annotators per target for boundary adjustment (default: "
                                   "as in calibration).")] = None,
    **engine_opts,
):
    """Add calibrated bands to every row of a table.

    Adds band_lo, band_median, band_hi (the target's scale), band_lo01, band_median01,
    band_hi01 (on [0, 1]), band_flag and band_error (the reason when a row could not be
    banded; its band columns are left empty).
    Prediction columns default to those used at calibration.

    With a rule file from `scoreband triage --out` instead of a calibrator, it triages the
    rows (trusted / triage_score, or a pairwise rule's verdict / p_a), the same as
    `scoreband triage --rule RULE --apply TABLE --apply-out OUT`.

    Example: scoreband apply new_preds.csv --calibrator calibrator.json --out banded.csv
    """
    from scoreband.cli.decisions import apply_rule, rule_kind

    cols = {**{k: engine_opts.pop(k) for k in PREDICTION_OVERRIDES}, "groups": groups}
    try:  # the calibrator file, read once: the stage (or each Ray actor) gets what it holds
        kw = api.apply_options(calibrator, scorer_id=scorer_id, n_ratings=n_ratings, **cols)
    except CalibratorMismatch:
        if rule_kind(calibrator) is None:
            raise
        given = [o for o, v in (("--groups", groups), ("--scorer-id", scorer_id),
                                ("--n-ratings", n_ratings)) if v is not None]
        given += ["--" + k.replace("_", "-") for k in PREDICTION_OVERRIDES
                  if cols.get(k) is not None]
        if given:
            fail(f"{', '.join(given)}: not used with a rule file ({plain(calibrator)} is a "
                 f"{rule_kind(calibrator)} rule, which keeps the columns it was fitted with); "
                 "leave them out")
        return apply_rule(calibrator, table, out)
    run, stage = run_stage(table, out, "apply", kw, engine_opts, local={"on_warning": warn})
    if stage is None:  # Ray: the reasons as the rows passed
        for i, e in list(run.failures.items())[:20]:
            warn(f"row {i + 1} left without a band: {e}")
        console.print(f"banded {run.rows - len(run.failures)} of {run.rows} rows on Ray "
                      f"-> {plain(out)}")
        return
    res = AppliedFile.of(run.rows, stage)
    report_rows(res.errors, res.rows, action="left without a band",
                listed_in=f"{out} (column {ERROR_COLUMN['apply']})")
    _print_shift(res.shift)
    console.print(f"banded {res.banded} of {res.rows} rows with {plain(res.method)} "
                  f"(alpha={res.alpha}) -> {plain(out)}")


def _print_shift(shift: dict | None) -> None:
    """The shift alarm of a weighted calibrator: do these rows look like the calibration
    items?"""
    if not shift or "p_value" not in shift:
        return
    alarm = ("[yellow]shift alarm:[/] these rows look unlike the calibration items"
             if shift["p_value"] < 0.01 else "no shift detected")
    ess = (f"; effective sample of the weights {shift['effective_sample_size']:.0f} of "
           f"{shift['n_cal']}" if "effective_sample_size" in shift else "")
    err.print(f"{alarm} (classifier AUC {shift['auc']:.2f}, p = {shift['p_value']:.2g})" + ess,
              markup=True)
    if shift["p_value"] < 0.01:
        err.print("  the bands' guarantee is for rows like the calibration items; to adapt it, "
                  "label a few of these rows and run `scoreband recalibrate CALIBRATOR "
                  "LABELED_TABLE --out NEW.json` (`scoreband recalibrate CALIBRATOR --plan "
                  "0.05` says how many labels)")
