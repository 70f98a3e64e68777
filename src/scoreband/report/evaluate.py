"""The HTML report's section for ``scoreband evaluate --out``: the verdict, the guarantee and
the share of splits below target, the calibration curve, coverage by level and by group with
Clopper-Pearson intervals, band width against the error, the groups' reliability map and the
width distribution."""

from __future__ import annotations

import numpy as np

from scoreband.metrics import band_usefulness, binomial_ci
from scoreband.report.blocks import (
    fig_block,
    fmt,
    mean_std,
    pyplot,
    svg,
    table_block,
)
from scoreband.report.schema import Measured, Pair, ScaleM, Stat, StrictModel
from scoreband.report.sections import ReportSection
from scoreband.textsafe import fig as label
from scoreband.textsafe import share_text

__all__ = ["evaluate_section", "EvaluateDoc", "REPORT_SECTION", "guarantee_text"]


def _group_coverage_figure(groups: dict, seeds: int, target: float) -> tuple[str, list]:
    plt = pyplot()
    names = list(groups)
    rows = []
    for g in names:
        v = groups[g]
        cov = v["coverage"]["mean"]
        # each distinct item counted once (older results files: the items of one split)
        n = int(v.get("n_items", v["n"]))
        lo, hi = v["ci"] if "ci" in v else binomial_ci(round(cov * n), n)
        rows.append((g, n, cov, lo, hi))
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(names) + 1.2))
    y = np.arange(len(names))
    cov = np.array([r[2] for r in rows])
    err = np.array([[r[2] - r[3] for r in rows], [r[4] - r[2] for r in rows]])
    colors = ["#9b2c2c" if r[4] < target else "#2b6cb0" for r in rows]
    ax.errorbar(cov, y, xerr=err, fmt="none", ecolor="#777", capsize=3)
    ax.scatter(cov, y, c=colors, zorder=3)
    ax.axvline(target, color="#276749", ls="--", lw=1, label=f"target {target:.2f}")
    ax.set_yticks(y, [label(g) for g in names])
    ax.set_xlabel("coverage (95 % Clopper-Pearson interval)")
    ax.legend(loc="lower left", fontsize=8)
    return svg(fig), rows


def _width_quantile_figure(q: dict, unit: str, mean: float | None = None) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 1.7))
    ax.broken_barh([(q["q25"], q["q75"] - q["q25"])], (0.3, 0.4), color="#90cdf4")
    ax.plot([q["q05"], q["q95"]], [0.5, 0.5], color="#2b6cb0")
    ax.plot([q["q50"]] * 2, [0.3, 0.7], color="#1a365d", lw=2)
    ax.plot([q["q00"], q["q100"]], [0.5, 0.5], "|", color="#777")
    if mean is not None:
        ax.plot([mean], [0.5], "D", color="#c53030", label=f"mean {mean:.2f}")
        ax.legend(fontsize=7, loc="upper right")
    ax.set_yticks([])
    ax.set_xlabel(f"band width (points on {unit}): box 25-75 %, line 5-95 %, bar median")
    return svg(fig)


def _curve_figure(curve: list, alpha: float, tc: dict) -> str:
    """Empirical against nominal coverage over alpha, each point with its 95 %
    Clopper-Pearson interval on the distinct items tested; the evaluated alpha's
    theoretical band drawn where it lies."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.0, 4.4))
    nom = np.array([c["nominal"] for c in curve])
    cov = np.array([c["coverage"] for c in curve])
    lo_all = float(min(nom.min(), cov.min())) - 0.05
    ax.plot([lo_all, 1], [lo_all, 1], color="#999", ls="--", lw=1,
            label="coverage = nominal (calibrated)")
    if all(c.get("ci") for c in curve):
        ci = np.array([c["ci"] for c in curve], dtype=float)
        ax.errorbar(nom, cov, yerr=np.vstack([np.maximum(cov - ci[:, 0], 0),
                                              np.maximum(ci[:, 1] - cov, 0)]),
                    fmt="none", ecolor="#777", capsize=3,
                    label="95 % Clopper-Pearson interval")
    ax.plot(nom, cov, "o-", color="#2b6cb0", label="empirical coverage (mean over splits)")
    ax.plot([1 - alpha] * 2, [tc["low"], tc["high"]], color="#276749", lw=6, alpha=0.5,
            solid_capstyle="butt", label=f"theoretical band at alpha {alpha:g}")
    for x, y in zip(nom, cov, strict=True):
        ax.annotate(f"{y:.3f}", (x, y), textcoords="offset points", xytext=(-28, 6),
                    fontsize=7)
    ax.set_xlabel("nominal coverage 1 - alpha")
    ax.set_ylabel("empirical coverage on held-out items")
    ax.set_xlim(lo_all, 1.0)
    ax.set_ylim(lo_all, 1.01)
    ax.legend(fontsize=7, loc="upper left")
    return svg(fig)


def _width_error_figure(we: dict, unit: str, constant: bool) -> str:
    """Band width against the absolute error of the calibrated median (native points):
    every sampled item, and per error bin the mean width with its quartiles."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    ax.scatter(we["error"], we["width"], s=6, alpha=0.25, color="#90a4ae",
               label="items (a sample of every split's test side)")
    b = we["bins"]
    if b:
        x = [(r['error_lo'] + r['error_hi']) / 2 for r in b]
        m = np.array([r['width_mean'] for r in b])
        q = np.array([[r['width_q25'], r['width_q75']] for r in b])
        ax.errorbar(x, m, yerr=np.vstack([np.maximum(m - q[:, 0], 0),
                                          np.maximum(q[:, 1] - m, 0)]),
                    fmt="o-", color="#1a365d", capsize=3,
                    label="mean width per error bin (bar: quartiles)")
        # the error a band of that width can hold: half its width (a centred band)
        top = max(r['error_hi'] for r in b)
        ax.plot([0, top], [0, 2 * top], color="#9b2c2c", ls=":", lw=1,
                label="width = 2 x error (below: the centred band misses)")
        ax.set_ylim(0, max(max(we["width"], default=0), float(m.max())) * 1.1 + 1e-9)
    ax.set_xlabel(f"absolute error |calibrated median - human score| (points on {unit})")
    ax.set_ylabel(f"band width (points on {unit})")
    if constant:
        ax.set_title("one width for every band (cut only at the scale's ends): "
                     "the band does not adapt to the error", fontsize=8)
    ax.legend(fontsize=7, loc="upper right")
    return svg(fig)


def _levels_figure(by: dict, target: float) -> str:
    """Coverage by the human score's level and by the predicted level, each with its 95 %
    Clopper-Pearson interval on distinct items; the nominal coverage and 0.1 below it."""
    plt = pyplot()
    kinds = [k for k in ("target", "predicted") if by.get(k)]
    fig, axes = plt.subplots(1, len(kinds), figsize=(3.4 * len(kinds) + 0.6, 3.4),
                             squeeze=False, sharey=True)
    titles = {"target": "by level of the human score",
              "predicted": "by predicted level (calibrated median)"}
    for ax, kind in zip(axes[0], kinds, strict=True):
        names = list(by[kind])
        cov = np.array([by[kind][g]["coverage"]["mean"] for g in names])
        ci = np.array([by[kind][g].get("ci") or [np.nan, np.nan] for g in names], dtype=float)
        x = np.arange(len(names))
        ax.errorbar(x, cov, yerr=np.vstack([np.maximum(cov - ci[:, 0], 0),
                                            np.maximum(ci[:, 1] - cov, 0)]),
                    fmt="none", ecolor="#555", capsize=3)
        ax.scatter(x, cov, zorder=3, c=["#9b2c2c" if c < target - 0.1 else "#2b6cb0"
                                        for c in cov])
        for xi, c, g in zip(x, cov, names, strict=True):
            n = by[kind][g].get("n_items", by[kind][g]["n"])
            ax.annotate(f"{c:.2f}\nn={n}", (xi, c), textcoords="offset points",
                        xytext=(6, -4), fontsize=7)
        ax.axhline(target, color="#276749", ls="--", lw=1, label=f"nominal {target:.2f}")
        ax.axhline(target - 0.1, color="#9b2c2c", ls=":", lw=1,
                   label=f"0.1 below ({target - 0.1:.2f})")
        ax.set_xticks(x, [label(g) for g in names])
        ax.set_xlim(-0.5, len(names) - 0.3)
        ax.set_title(titles[kind], fontsize=9)
        ax.set_xlabel("level")
    axes[0][0].set_ylabel("coverage (95 % Clopper-Pearson interval)")
    axes[0][0].legend(fontsize=7, loc="lower left")
    return svg(fig)


def _group_map_figure(rows: list, widths: dict, target: float, span: float,
                      unit: str) -> str:
    """The reliability map of the groups: each group's mean band width (points) as a bar,
    coloured by whether its coverage interval reaches the target and the band is narrow
    enough to tell low from high (at most half the scale)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(rows) + 1.3))
    y = np.arange(len(rows))
    w = np.array([widths[r[0]] for r in rows])
    colors = ["#9b2c2c" if r[4] < target else ("#dd6b20" if w[i] > span / 2 else "#2f855a")
              for i, r in enumerate(rows)]
    ax.barh(y, w, color=colors)
    for i, r in enumerate(rows):
        ax.annotate(f"{w[i]:.2f} pts, covers {r[2]:.2f}", (w[i], i), xytext=(4, -3),
                    textcoords="offset points", fontsize=7)
    ax.axvline(span / 2, color="#555", ls=":", lw=1, label="half the scale")
    ax.set_yticks(y, [label(r[0]) for r in rows], fontsize=8)
    ax.set_xlim(0, span * 1.25)
    ax.set_xlabel(f"mean band width (points on {unit}); green: trustworthy, orange: too "
                  "wide, red: under-covered", fontsize=8)
    ax.invert_yaxis()
    ax.legend(fontsize=7, loc="lower right")
    return svg(fig)


def _usefulness(width: float, sc: dict) -> str:
    """What a band of this mean width can tell on its scale (one sentence)."""
    share, what = band_usefulness(width, sc["lo"], sc["hi"])
    return (f"Is it useful? The mean band is {width:.2f} points wide on "
            f"{sc['lo']:g}-{sc['hi']:g}, {share:.0%} of the scale: {what}.")


def guarantee_text(doc: dict) -> str | None:
    """The guarantee the bands make and how the splits measured it: the share of splits
    whose test coverage fell below 1 - alpha (``coverage_below_target``); None for an
    evaluate JSON written before it was measured."""
    r = doc
    below = r.get("coverage_below_target")
    if not below:
        return None
    d = r.get("delta")
    k, n, ci = below["splits_below"], below["splits"], below.get("ci") or [None, None]
    head = f"Guarantee: {r['guarantee']}." if r.get("guarantee") else ""
    measured = (f" Measured: {k} of {n} splits ({below['share']:.0%}, 95 % CI "
                f"{fmt(ci[0], 2)}-{fmt(ci[1], 2)}) covered less than {below['target']:.0%} of "
                "their test items")
    if d is not None:
        where = ("within it" if below["share"] <= d else
                 "above it, within sampling error" if ci[0] is not None and ci[0] <= d else
                 "above it, beyond sampling error")
        measured += f"; the guarantee allows at most {share_text(d)} ({where})"
    else:
        measured += (" (marginal bands cover 1 - alpha on average over calibrations, so about "
                     "half of them fall below it; --delta bounds that share)")
    return (head + measured + ". Each split's coverage is measured on its test half, whose "
            "own sampling noise adds to the calibrator's shortfall, and the splits reuse the "
            "same rows: an indication, not a test of the guarantee.")


def _verdict(r: dict) -> str:
    """The section's one-line verdict: coverage, width, delta's share, the worst level."""
    a, tc, target = r['after'], r['theoretical_coverage'], 1 - r['alpha']
    sc = r['scale']
    verdict = (f"{target:.0%} bands cover {a['coverage']['mean']:.3f} of held-out items "
               f"(theoretical band {tc['low']:.3f}-{tc['high']:.3f}); mean width "
               f"{a['sharpness_native']['mean']:.2f} on {sc['lo']:g}-{sc['hi']:g}")
    below = r.get("coverage_below_target")
    if below and r.get("delta") is not None:
        verdict += (f"; with delta {r['delta']:g}, {below['splits_below']} of "
                    f"{below['splits']} splits below {target:.0%}")
    by = r.get("coverage_by_level", {})
    low = [(k, g, v["coverage"]["mean"]) for k in ("target", "predicted")
           for g, v in (by.get(k) or {}).items() if v["coverage"]["mean"] < target - 0.1]
    if low:
        k, g, c = min(low, key=lambda t: t[2])
        verdict += (f"; but items {'whose human score is' if k == 'target' else 'predicted'} "
                    f"at level {g} are covered only {c:.3f}")
    return verdict


def _curve_block(r: dict) -> dict:
    return fig_block(_curve_figure(r['calibration_curve'], r['alpha'], r['theoretical_coverage']),
                     f"Calibration curve ({r['method']}): empirical coverage of held-out items "
                     "against the nominal 1 - alpha, each point with its 95 % "
                     "Clopper-Pearson interval on the distinct items tested (alpha "
                     f"{r['alpha']:g}: its {r['seeds']} splits; the others at most 3 splits each). "
                     "On the dashed line the bands are exactly calibrated; above it they "
                     "over-cover (ties of discrete targets), below it they under-cover. The "
                     "green bar: the theoretical band.")


def _level_blocks(by: dict, target: float, span: float, unit: str) -> list[dict]:
    """Coverage by level: the figure and the table."""
    fig = fig_block(_levels_figure(by, target),
                    "Coverage where it matters: by the human score's level (left) and by the "
                    "level the calibrated median predicts (right), each with its 95 % "
                    "Clopper-Pearson interval on distinct items (an item predicted at "
                    "several levels over the splits counts at each by the share of its "
                    "splits there: the items add up to the items tested, not items x "
                    "splits); red: more than 0.1 below "
                    "the nominal coverage. Split-conformal bands hold on average over "
                    "levels, not at each: an auditor cannot trust a red level. Remedy (per "
                    "predicted level): --mondrian-by predicted (or --mondrian --groups on a "
                    "column of the rounded point score).")

    def ci(v):
        lo, hi = v.get("ci") or [None, None]
        return f"{fmt(lo)}-{fmt(hi)}"

    rows = [[f"{'human score' if k == 'target' else 'predicted'} {g}",
             v.get("n_items", v["n"]), fmt(v["coverage"]["mean"]), ci(v),
             fmt(v["sharpness"]["mean"] * span, 2)]
            for k in ("target", "predicted") for g, v in (by.get(k) or {}).items()]
    return [fig, table_block(["level", "distinct items", "coverage", "95 % CI",
                              f"width (points on {unit})"], rows, "Coverage by level")]


def _width_error_block(r: dict, splits: str, unit: str) -> dict:
    a, constant = r['after'], bool(r['after'].get("constant_width"))
    ups = (a.get("ups") or {}).get("mean")
    return fig_block(_width_error_figure(r['width_vs_error'], unit, constant),
                     f"Is the band wide where the score is wrong? Band width against the "
                     f"absolute error of the calibrated median, every test item of every "
                     f"split ({splits}). Bands that adapt rise to the right"
                     + (f" (UPS, their correlation: {ups:.3f})" if ups is not None
                        and not constant else "")
                     + "; items above the red dotted line's reach are missed by a centred "
                       "band.")


def _group_blocks(groups: dict, seeds: int, target: float, span: float,
                  unit: str) -> tuple[str, list[dict]]:
    """The groups' verdict clause, their coverage figure, reliability map and table."""
    fig, rows = _group_coverage_figure(groups, seeds, target)
    worst = min(rows, key=lambda r: r[2])
    widest = max(groups, key=lambda g: groups[g]["sharpness"]["mean"])
    clause = (f"; least covered group {worst[0]} ({worst[2]:.3f}, 95 % CI "
              f"{worst[3]:.3f}-{worst[4]:.3f}); widest group {widest}")
    widths = {g: groups[g]["sharpness"]["mean"] * span for g in groups}

    def points(d):  # a [0, 1] width in points of the native scale
        return {k: d[k] * span for k in ("mean", "std") if k in d}

    return clause, [
        fig_block(fig, "Coverage per group against the target, with the 95 % "
                       "Clopper-Pearson interval on the group's distinct items (red: the "
                       "interval lies below the target)."),
        fig_block(_group_map_figure(rows, widths, target, span, unit),
                  "Reliability map of the groups: mean band width per group in points, and "
                  "its coverage. Green: covered and at most half the scale wide (the scores "
                  "can be trusted to tell low from high); orange: covered but too wide to "
                  "say much; red: under-covered (the interval lies below the target)."),
        table_block(["group", "items (pooled)", "coverage", "95 % CI", "width [0, 1]",
                     f"width (points on {unit})"],
                    [[g, n, fmt(c), f"{fmt(lo)}-{fmt(hi)}", mean_std(groups[g]["sharpness"]),
                      mean_std(points(groups[g]["sharpness"]))]
                     for g, n, c, lo, hi in rows])]


def _metric_blocks(r: dict, unit: str) -> list[dict]:
    """The before / after table (UPS left out, and said why, for one width for all)."""
    a, constant = r['after'], bool(r['after'].get("constant_width"))
    before = r.get("before", {})
    metrics = ("coverage", "sharpness", "sharpness_native", "ups", "kendall_tau_c",
               "pearson", "spearman")
    names = {"sharpness": "sharpness (width on [0, 1])",
             "sharpness_native": f"width (points on {unit})"}
    if constant:  # UPS of one width cut at the ends: an artefact, left out
        metrics = tuple(m for m in metrics if m != "ups")
    rows = [[names.get(m, m), mean_std(before.get(m)), mean_std(a.get(m))]
            for m in metrics if m in a or m in before]
    out = [table_block(["metric", "before calibration", "after calibration"], rows,
                       f"{r['method']}, alpha {r['alpha']}, n = {r['n']}, {r['seeds']} splits (mean ± "
                       "standard deviation over the splits)")]
    if constant:
        out.append({"kind": "text", "text": (
            f"UPS is left out: {r['method']} gives every band the same width, cut only at the "
            "scale's ends, so a correlation of width and error would come from that "
            "cutting, not from bands that adapt to the error.")})
    return out


def evaluate_section(doc: dict) -> dict:
    """The section of an evaluate JSON (the keys of
    :class:`scoreband.evaluation.EvaluateResult`)."""
    r = doc
    a, target, sc = r['after'], 1 - r['alpha'], r['scale']
    unit = f"{sc['lo']:g}-{sc['hi']:g}"
    span = sc["hi"] - sc["lo"]
    splits = f"{r['method']} at alpha {r['alpha']:g}, {r['seeds']} splits"
    verdict = _verdict(r)
    blocks = []
    text = guarantee_text(r)
    if text:
        blocks.append({"kind": "text", "text": text})
    if r.get("calibration_curve"):
        blocks.append(_curve_block(r))
    by = r.get("coverage_by_level", {})
    if by:
        blocks += _level_blocks(by, target, span, unit)
    if (r.get("width_vs_error") or {}).get("bins"):
        blocks.append(_width_error_block(r, splits, unit))
    if r.get("groups"):
        clause, more = _group_blocks(r['groups'], r['seeds'], target, span, unit)
        verdict += clause
        blocks += more
    if a.get("width_quantiles"):
        blocks.append(fig_block(_width_quantile_figure(a["width_quantiles"], unit,
                                                       a["sharpness_native"]["mean"]),
                                f"Distribution of the calibrated band widths ({splits}) over "
                                "every test item of every split."))
    blocks.append({"kind": "text", "text": _usefulness(a["sharpness_native"]["mean"], sc)})
    blocks += _metric_blocks(r, unit)
    return {"title": f"evaluate: {r.get('table', '')}", "verdict": verdict + ".",
            "blocks": blocks}


# ------------------------------------------------------------------ the keys it reads
class TheoreticalM(StrictModel):
    low: float
    high: float


class MetricsM(StrictModel):
    coverage: Stat | None = None
    sharpness: Stat | None = None
    sharpness_native: Stat | None = None
    ups: Stat | None = None
    kendall_tau_c: Stat | None = None
    pearson: Stat | None = None
    spearman: Stat | None = None


class WidthQuantiles(StrictModel):
    q00: float
    q05: float
    q25: float
    q50: float
    q75: float
    q95: float
    q100: float


class AfterM(MetricsM):
    coverage: Measured
    sharpness_native: Measured
    width_quantiles: WidthQuantiles | None = None
    constant_width: bool | None = None


class GroupM(StrictModel):
    n: float
    n_items: float | None = None
    ci: Pair | None = None
    coverage: Measured
    sharpness: Measured


class CurvePoint(StrictModel):
    nominal: float
    coverage: float
    ci: Pair | None = None


class LevelsM(StrictModel):
    target: dict[str, GroupM] | None = None
    predicted: dict[str, GroupM] | None = None


class ErrorBin(StrictModel):
    error_lo: float
    error_hi: float
    n: float
    width_mean: float
    width_q25: float
    width_q75: float


class WidthErrorM(StrictModel):
    bins: list[ErrorBin]
    error: list[float]
    width: list[float]


class BelowTargetM(StrictModel):
    target: float
    splits_below: int
    splits: int
    share: float
    ci: Pair | None = None
    delta: float | None = None


class EvaluateDoc(StrictModel):
    alpha: float
    method: str
    n: float
    seeds: float
    scale: ScaleM
    theoretical_coverage: TheoreticalM
    after: AfterM
    before: MetricsM | None = None
    groups: dict[str, GroupM] | None = None
    calibration_curve: list[CurvePoint] | None = None
    coverage_by_level: LevelsM | None = None
    width_vs_error: WidthErrorM | None = None
    guarantee: str | None = None
    delta: float | None = None
    coverage_below_target: BelowTargetM | None = None



REPORT_SECTION = ReportSection(evaluate_section, schema=lambda: EvaluateDoc)
