"""One self-contained HTML report for any results file (evaluate, demo, judge-study,
roundtrip-study, stress): a verdict first, then figures (inline SVG from matplotlib), tables,
the definition of every metric and the provenance. Jinja2 renders the page; nothing is
fetched when it is opened (no scripts, fonts or images from elsewhere)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from scoreband._version import __version__
from scoreband.errors import InputError
from scoreband.files import atomic_write_text, read_json
from scoreband.metrics import binomial_ci
from scoreband.report.blocks import fig_block, fmt, pyplot, svg, table_block
from scoreband.report.schema import FIX, check_results
from scoreband.report.systems import DEFINITIONS as SYSTEMS_DEFINITIONS
from scoreband.report.systems import systems_section
from scoreband.textsafe import fig as label

__all__ = ["render_report", "write_report", "kind_of", "DEFINITIONS"]

DEFINITIONS = [
    ("coverage", "Share of held-out items whose human score lies inside their band; the "
                 "target is 1 - alpha (0.90 for alpha = 0.1)."),
    ("theoretical coverage band", "Where split-conformal coverage lands with n calibration "
                                  "items: between 1 - alpha and 1 - alpha + 1/(n + 1) in "
                                  "expectation, wider on discrete targets (ties)."),
    ("Clopper-Pearson interval", "Exact 95 % binomial interval of a coverage measured on a "
                                 "finite number of items. Over repeated splits the same items "
                                 "are tested again and again, so each distinct item is "
                                 "counted once: the interval is that of the mean coverage "
                                 "over the splits observed on the group's distinct tested "
                                 "items (n in the table), never on n per split x splits."),
    ("mean ± std", "A number over repeated random calibration/test splits: its mean and its "
                   "standard deviation across the splits (the spread from re-drawing the "
                   "split, not a confidence interval)."),
    ("coverage by level", "Coverage of the items whose human score rounds to a level (left) "
                          "or whose calibrated median does (predicted level). A band built "
                          "for 90 % on average can cover the best and worst items far less: "
                          "the per-level coverage says where it can be trusted."),
    ("calibration curve", "Empirical coverage against the nominal 1 - alpha over several "
                          "alphas: on the diagonal the bands mean what they say at every "
                          "level of confidence."),
    ("width / sharpness", "Mean band width; on the native scale unless said (sharpness on "
                          "[0, 1] is the width divided by the scale's range). Narrower is "
                          "better at the same coverage."),
    ("UPS", "Uncertainty-prediction score: the correlation between an item's band width and "
            "its absolute error. Positive: wider bands where the scorer errs more. A method "
            "that gives every band one width (split conformal on a given median) has a UPS "
            "only from bands cut at the scale's ends: it is then not a sign of adaptation "
            "(the evaluate report leaves it out)."),
    ("Kendall tau-c", "Rank agreement between the point predictions and the human scores "
                      "(tau-c handles ties and unequal numbers of categories)."),
    ("RSG", "Ranking-scoring gap of a judge: how much better it orders items than it scores "
            "them (high: use it for pairwise ranking, not absolute scores)."),
    ("effective sample", "(sum w)^2 / sum w^2 of the weights of weighted conformal "
                         "prediction: how many calibration items the shift-corrected band "
                         "really rests on."),
]


#: the demo's rows: the scorer's heads as the BEiTScore++ paper names them
DEMO_DEFINITIONS = [
    ("mc_dropout", "Baseline: the point head run many times with dropout left on; the "
                   "spread of those passes gives the interval."),
    ("unconstrained_pinball", "Ablation: 11 independent quantile outputs (5 % ... 95 %) "
                              "trained with the pinball (quantile) loss; they may cross "
                              "(a 95 % quantile below the 90 %)."),
    ("chained_pinball", "The monotone ('chained') 11-quantile head: each quantile is the "
                        "previous one plus a non-negative step, so they never cross; "
                        "trained with the pinball loss."),
    ("chained_ci", "The same monotone head trained with the centred interval loss "
                   "(interval score of the 90 % interval + L1 of the median): the paper's "
                   "main head."),
    ("chained_ci_clusters", "chained_ci calibrated with the cluster-conservative rule "
                            "(CRC per k-means cluster of the embeddings, the most "
                            "conservative (omega, beta) for all)."),
]


#: what a finding marked "no" means (the demo's and the stress study's findings)
FINDINGS_DEFINITIONS = [
    ("claim marked no", "A claim of the paper this run did not reproduce: the measured value "
                        "lies outside the bound the claim states. On the small embedded "
                        "world with few splits a claim can miss by chance; rerun with more "
                        "--seeds (and more items) before concluding that it fails."),
]


# ------------------------------------------------------------------ figures




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
        x = [(r["error_lo"] + r["error_hi"]) / 2 for r in b]
        m = np.array([r["width_mean"] for r in b])
        q = np.array([[r["width_q25"], r["width_q75"]] for r in b])
        ax.errorbar(x, m, yerr=np.vstack([np.maximum(m - q[:, 0], 0),
                                          np.maximum(q[:, 1] - m, 0)]),
                    fmt="o-", color="#1a365d", capsize=3,
                    label="mean width per error bin (bar: quartiles)")
        # the error a band of that width can hold: half its width (a centred band)
        top = max(r["error_hi"] for r in b)
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


def _bar_figure(labels, values, *, xlabel: str, target: float | None = None,
                colors=None, intervals=None) -> str:
    """Horizontal bars; ``intervals``: (lo, hi) per bar, drawn as error bars."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 0.42 * len(labels) + 1.2))
    y = np.arange(len(labels))
    xerr = None
    if intervals is not None:
        v = np.asarray(values, dtype=float)
        lo, hi = np.asarray(intervals, dtype=float).T
        xerr = np.vstack([np.maximum(v - lo, 0), np.maximum(hi - v, 0)])
    ax.barh(y, values, color=colors or "#2b6cb0", xerr=xerr, ecolor="#1b1b1b", capsize=3)
    if target is not None:
        ax.axvline(target, color="#276749", ls="--", lw=1, label=f"target {target:.2f}")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_yticks(y, [label(v) for v in labels], fontsize=8)
    ax.set_xlabel(xlabel)
    ax.invert_yaxis()
    return svg(fig)


def _lines_figure(series: dict[str, tuple[list, list]], *, xlabel: str, ylabel: str,
                  target: float | None = None, logx: bool = False, xticks=None) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for name, (x, y) in series.items():
        ax.plot(x, y, "o-", label=label(name))
    if target is not None:
        ax.axhline(target, color="#276749", ls="--", lw=1, label=f"target {target:.2f}")
    if logx:
        ax.set_xscale("log", base=2)
    if xticks is not None:
        ax.set_xticks(range(len(xticks)), [label(v) for v in xticks])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, ncol=2)
    return svg(fig)




def _ms(d) -> str:
    return "-" if not isinstance(d, dict) else f"{fmt(d.get('mean'))} ± {fmt(d.get('std'))}"






# ------------------------------------------------------------------ sections
def kind_of(doc: dict) -> str:
    """Which command wrote a results document."""
    what = ("not a scoreband results file (evaluate, demo, judge-study, roundtrip-study, "
            "stress, systems or a triage rule)")
    if isinstance(doc, dict) and doc.get("format") == "scoreband-triage-rule":
        return "triage"
    if not isinstance(doc, dict):
        raise ValueError(f"{what}: a JSON {_json_type(doc)}, where a results file is an "
                         "object")
    study = doc.get("study")
    if study:
        if not isinstance(study, str) or study not in _SECTIONS:
            raise ValueError(f"{what}: its key 'study' is {str(study)[:60]!r}")
        return study
    if "after" in doc and "theoretical_coverage" in doc:
        return "evaluate"
    raise ValueError(what)


def _json_type(v) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null",
            int: "number", float: "number"}.get(type(v), type(v).__name__)


def _usefulness(width: float, sc: dict) -> str:
    """What a band of this mean width can tell on its scale (one sentence)."""
    span = sc["hi"] - sc["lo"]
    share = width / span
    if share <= 0.25:
        what = "narrow enough to tell neighbouring levels apart for most items"
    elif share <= 0.5:
        what = ("enough to tell a low score from a high one, not neighbouring levels: use "
                "the scores to sort or screen, not as exact values")
    else:
        what = ("most of the scale: a band says little about a single item; use the scores "
                "for ranking, or a better scorer")
    return (f"Is it useful? The mean band is {width:.2f} points wide on "
            f"{sc['lo']:g}-{sc['hi']:g}, {share:.0%} of the scale: {what}.")


def _evaluate(doc: dict) -> dict:
    a, tc = doc["after"], doc["theoretical_coverage"]
    target, sc = 1 - doc["alpha"], doc["scale"]
    unit = f"{sc['lo']:g}-{sc['hi']:g}"
    span = sc["hi"] - sc["lo"]
    splits = f"{doc['method']} at alpha {doc['alpha']:g}, {doc['seeds']} splits"
    verdict = (f"{target:.0%} bands cover {a['coverage']['mean']:.3f} of held-out items "
               f"(theoretical band {tc['low']:.3f}-{tc['high']:.3f}); mean width "
               f"{a['sharpness_native']['mean']:.2f} on {unit}")
    blocks = []
    by = doc.get("coverage_by_level") or {}
    low = [(k, g, v["coverage"]["mean"]) for k in ("target", "predicted")
           for g, v in (by.get(k) or {}).items() if v["coverage"]["mean"] < target - 0.1]
    if low:
        k, g, c = min(low, key=lambda t: t[2])
        verdict += (f"; but items {'whose human score is' if k == 'target' else 'predicted'} "
                    f"at level {g} are covered only {c:.3f}")
    if doc.get("calibration_curve"):
        blocks.append(fig_block(_curve_figure(doc["calibration_curve"], doc["alpha"], tc),
                           f"Calibration curve ({doc['method']}): empirical coverage of "
                           "held-out items against the nominal 1 - alpha, each point with "
                           "its 95 % Clopper-Pearson interval on the distinct items tested "
                           f"(alpha {doc['alpha']:g}: its {doc['seeds']} splits; the others "
                           "at most 3 splits each). On the dashed line the bands are exactly "
                           "calibrated; above it they over-cover (ties of discrete targets), "
                           "below it they under-cover. The green bar: the theoretical band."))
    if by:
        blocks.append(fig_block(_levels_figure(by, target),
                           "Coverage where it matters: by the human score's level (left) and "
                           "by the level the calibrated median predicts (right), each with "
                           "its 95 % Clopper-Pearson interval on distinct items; red: more "
                           "than 0.1 below the nominal coverage. Split-conformal bands hold "
                           "on average over levels, not at each: an auditor cannot trust a "
                           "red level. Remedy (per predicted level): --mondrian --groups on "
                           "a column of the rounded point score."))
        rows = [[f"{'human score' if k == 'target' else 'predicted'} {g}",
                 v.get("n_items", v["n"]), fmt(v["coverage"]["mean"]),
                 f"{fmt((v.get('ci') or [None, None])[0])}-{fmt((v.get('ci') or [None, None])[1])}",
                 fmt(v["sharpness"]["mean"] * span, 2)]
                for k in ("target", "predicted") for g, v in (by.get(k) or {}).items()]
        blocks.append(table_block(["level", "items", "coverage", "95 % CI",
                              f"width (points on {unit})"], rows,
                             "Coverage by level"))
    we = doc.get("width_vs_error")
    constant = bool(a.get("constant_width"))
    if we and we.get("bins"):
        ups = (a.get("ups") or {}).get("mean")
        blocks.append(fig_block(_width_error_figure(we, unit, constant),
                           f"Is the band wide where the score is wrong? Band width against "
                           f"the absolute error of the calibrated median, every test item of "
                           f"every split ({splits}). Bands that adapt rise to the right"
                           + (f" (UPS, their correlation: {ups:.3f})" if ups is not None
                              and not constant else "")
                           + "; items above the red dotted line's reach are missed by a "
                             "centred band."))
    if doc.get("groups"):
        svg, rows = _group_coverage_figure(doc["groups"], doc["seeds"], target)
        worst = min(rows, key=lambda r: r[2])
        widest = max(doc["groups"], key=lambda g: doc["groups"][g]["sharpness"]["mean"])
        verdict += (f"; least covered group {worst[0]} ({worst[2]:.3f}, 95 % CI "
                    f"{worst[3]:.3f}-{worst[4]:.3f}); widest group {widest}")
        blocks.append(fig_block(svg, "Coverage per group against the target, with the 95 % "
                                "Clopper-Pearson interval on the group's distinct items "
                                "(red: the interval lies below the target)."))
        widths = {g: doc["groups"][g]["sharpness"]["mean"] * span for g in doc["groups"]}
        blocks.append(fig_block(_group_map_figure(rows, widths, target, span, unit),
                           "Reliability map of the groups: mean band width per group in "
                           "points, and its coverage. Green: covered and at most half the "
                           "scale wide (the scores can be trusted to tell low from high); "
                           "orange: covered but too wide to say much; red: under-covered "
                           "(the interval lies below the target)."))

        def points(d):  # a [0, 1] width in points of the native scale
            return {k: d[k] * span for k in ("mean", "std") if k in d}

        blocks.append(table_block(["group", "items (pooled)", "coverage", "95 % CI", "width [0, 1]",
                              f"width (points on {unit})"],
                             [[g, n, fmt(c), f"{fmt(lo)}-{fmt(hi)}",
                               _ms(doc["groups"][g]["sharpness"]),
                               _ms(points(doc["groups"][g]["sharpness"]))]
                              for g, n, c, lo, hi in rows]))
    if a.get("width_quantiles"):
        blocks.append(fig_block(_width_quantile_figure(a["width_quantiles"], unit,
                                                  a["sharpness_native"]["mean"]),
                           f"Distribution of the calibrated band widths ({splits}) over "
                           "every test item of every split."))
    blocks.append({"kind": "text", "text": _usefulness(a["sharpness_native"]["mean"], sc)})
    metrics = ("coverage", "sharpness", "sharpness_native", "ups", "kendall_tau_c",
               "pearson", "spearman")
    names = {"sharpness": "sharpness (width on [0, 1])",
             "sharpness_native": f"width (points on {unit})"}
    if constant:  # UPS of one width cut at the ends: an artefact, left out
        metrics = tuple(m for m in metrics if m != "ups")
    rows = [[names.get(m, m), _ms(doc.get("before", {}).get(m)), _ms(a.get(m))]
            for m in metrics if m in a or m in doc.get("before", {})]
    blocks.append(table_block(["metric", "before calibration", "after calibration"], rows,
                         f"{doc['method']}, alpha {doc['alpha']}, n = {doc['n']}, "
                         f"{doc['seeds']} splits (mean ± standard deviation over the "
                         "splits)"))
    if constant:
        blocks.append({"kind": "text", "text": (
            f"UPS is left out: {doc['method']} gives every band the same width, cut only "
            "at the scale's ends, so a correlation of width and error would come from that "
            "cutting, not from bands that adapt to the error.")})
    return {"title": f"evaluate: {doc.get('table', '')}", "verdict": verdict + ".",
            "blocks": blocks}


def _paper_table_figure(doc: dict, sets: list[str], target: float) -> str:
    """The demo's main table as the paper prints it: heads x test sets, coverage and width
    (points on 1-5) before -> after calibration; a cell is green where the calibrated
    coverage reaches the target."""
    plt = pyplot()
    heads = list(doc[sets[0]])
    cells, colours = [], []
    for h in heads:
        row, col = [], []
        for s in sets:
            b, a = doc[s][h]["before"], doc[s][h]["after"]
            row.append(f"{b['coverage']['mean']:.2f} -> {a['coverage']['mean']:.2f}\n"
                       f"{b['sharpness']['mean'] * 4:.1f} -> {a['sharpness']['mean'] * 4:.1f}")
            col.append("#e6f4ea" if a["coverage"]["mean"] >= target - 1e-9 else "#fbe9e7")
        cells.append(row)
        colours.append(col)
    fig, ax = plt.subplots(figsize=(1.9 * len(sets) + 1.8, 0.62 * len(heads) + 0.9))
    ax.axis("off")
    t = ax.table(cellText=cells, cellColours=colours, rowLabels=[label(h) for h in heads],
                 colLabels=[label(s) for s in sets],
                 cellLoc="center", loc="center")
    t.auto_set_font_size(False)
    t.set_fontsize(8)
    t.scale(1, 2.3)
    ax.set_title("coverage before -> after calibration (first line); width in points on "
                 "1-5 (second)", fontsize=8)
    return svg(fig)


def _demo(doc: dict) -> dict:
    meta = doc["_meta"]
    target = 1 - meta["alpha"]
    sets = [k for k in doc if k not in ("_meta", "study", "ood_painting_shift", "provenance")]
    rows, labels, cov, cis = [], [], [], []
    n_test = int(meta.get("n_test") or 0)
    for s in sets:
        for head, v in doc[s].items():
            a = v["after"]
            points = {k: a["sharpness"][k] * 4 for k in ("mean", "std")}  # on 1-5
            rows.append([s, head, _ms(a["coverage"]), _ms(a["sharpness"]), _ms(points),
                         _ms(a["ups"]), _ms(a["kendall_tau_c"])])
            labels.append(f"{s} / {head}")
            cov.append(a["coverage"]["mean"])
            # each test item counted once (the splits resample the same items)
            cis.append(binomial_ci(round(a["coverage"]["mean"] * n_test), n_test)
                       if n_test else (np.nan, np.nan))
    best = doc["clean"]["chained_ci"]["after"]
    verdict = (f"On clean items the chained head's {target:.0%} bands cover "
               f"{best['coverage']['mean']:.3f} with width {best['sharpness']['mean']:.3f} of "
               f"the scale ({best['sharpness']['mean'] * 4:.2f} points on 1-5); calibrated in domain and applied to paintings they cover "
               f"{doc['ood_painting_shift']['chained_ci']['after']['coverage']['mean']:.3f}.")
    return {"title": "demo: the embedded world", "verdict": verdict, "blocks": [
        fig_block(_paper_table_figure(doc, sets, target),
             f"The main table, as the BEiTScore++ paper prints it: each head on each test "
             f"set, before and after calibration (green: calibrated coverage reaches "
             f"{target:.2f})."),
        fig_block(_bar_figure(labels, cov, xlabel="coverage after calibration", target=target,
                         intervals=cis if n_test else None),
             f"Coverage per test set and head, with the 95 % Clopper-Pearson interval of "
             f"each on its {n_test} distinct test items."),
        table_block(["test set", "head", "coverage", "width [0, 1]", "width (points on 1-5)",
                "UPS", "tau-c"], rows),
        {"kind": "findings", "findings": meta["findings"]}]}


def best_judge_method(doc: dict) -> dict | None:
    """The narrowest (judge, method) of a judge study whose mean coverage reaches the target
    within its 95 % Clopper-Pearson interval (on the study's distinct items: the splits
    reuse them), or None. A method below its target is never named."""
    target, n = 1 - doc["alpha"], int(doc["n"])
    ok = []
    for j, ms in doc["methods"].items():
        for m, v in ms.items():
            cov = v["plain"]["coverage"]["mean"]
            ci = binomial_ci(int(round(cov * n)), n)
            if ci[1] >= target:
                ok.append({"judge": j, "method": m, "coverage": cov, "ci": ci, "n": n,
                           "width": v["plain"]["width"]["mean"]})
    return min(ok, key=lambda r: r["width"], default=None)


def _judge(doc: dict) -> dict:
    target, k, thr = 1 - doc["alpha"], doc["k"], doc["threshold"]
    rows, blocks = [], []
    for judge, methods in doc["methods"].items():
        for m, v in methods.items():
            rows.append([judge, m, _ms(v["plain"]["coverage"]), _ms(v["plain"]["width"]),
                         _ms(v["boundary"]["coverage"]), _ms(v["boundary"]["width"])])
    best = best_judge_method(doc)
    verdict = ("SIMULATED judges. " if doc.get("simulated") else "") + (
        f"Narrowest method whose coverage reaches {target:.0%} within its 95 % interval: "
        f"{best['judge']} / {best['method']} (coverage {best['coverage']:.3f}, interval "
        f"{best['ci'][0]:.3f}-{best['ci'][1]:.3f} on {best['n']} items; width "
        f"{best['width']:.2f} of {k - 1})." if best else
        f"No method's coverage reaches {target:.0%} within its 95 % interval.")
    for judge, tasks in doc["reliability_map"].items():
        names = list(tasks)
        widths = [tasks[t]["mean_width"] for t in names]
        colors = ["#9b2c2c" if tasks[t]["recommendation"].startswith("use") else "#2b6cb0"
                  for t in names]
        blocks.append(fig_block(_bar_figure(names, widths, xlabel=f"mean band width (of {k - 1})",
                                       target=thr * (k - 1), colors=colors),
                           f"Reliability map of {judge}: tasks by band width; past the dashed "
                           f"threshold ({thr:.0%} of the scale, red) use pairwise ranking."))
        blocks.append(table_block(["task", "n", "coverage", "width", "pearson", "RSG",
                              "recommendation"],
                             [[t, fmt(v["n"], 0), fmt(v["coverage"]), fmt(v["mean_width"], 2),
                               fmt(v["pearson"]), fmt(v["rsg"]), v["recommendation"]]
                              for t, v in tasks.items()], f"{judge}: per task"))
    blocks.append(table_block(["judge", "method", "coverage", "width", "coverage (boundary)",
                          "width (boundary)"], rows, "Methods (mean ± std over splits)"))
    return {"title": "judge study", "verdict": verdict, "blocks": blocks}


def _roundtrip(doc: dict) -> dict:
    v = doc["validation"]
    verdict = (("SIMULATED generator and encoder. " if doc.get("simulated") else "")
               + f"Matched captions score {v['gap']:.3f} higher than shuffled ones (AUROC "
               f"{v['auroc']:.3f}, 95 % CI {v['auroc_ci'][0]:.3f}-{v['auroc_ci'][1]:.3f}).")
    blocks = [table_block(["", "value", "95 % CI"], [
        ["gap", fmt(v["gap"], 4), f"{fmt(v['gap_ci'][0], 4)}-{fmt(v['gap_ci'][1], 4)}"],
        ["AUROC", fmt(v["auroc"]), f"{fmt(v['auroc_ci'][0])}-{fmt(v['auroc_ci'][1])}"]],
        f"{doc['generator']} -> {doc['encoder']}, {doc['n_gen']} generations per caption")]
    c = doc.get("calibration")
    if c:
        blocks.append(table_block(["method", "coverage", "width", "coverage (boundary)",
                              "width (boundary)", "UPS"],
                             [[m, _ms(c[m]["coverage"]), _ms(c[m]["width"]),
                               _ms(c[m]["coverage_boundary"]), _ms(c[m]["width_boundary"]),
                               _ms(c[m]["ups"])] for m in ("split", "crc")],
                             f"Calibrated band (alpha {c['alpha']}, n = {c['n']})"))
    return {"title": "round-trip study", "verdict": verdict, "blocks": blocks}


def _stress(doc: dict) -> dict:
    target = 1 - doc["alpha"]
    d = doc["distortions"]
    cov = {n: (list(range(len(per))), [v["coverage"] for v in per.values()])
           for n, per in d.items()}
    wid = {n: (list(range(len(per))), [v["width"]["mean"] for v in per.values()])
           for n, per in d.items()}
    levels = list(next(iter(d.values())))
    held = sum(f["holds"] for f in doc["findings"])
    verdict = (f"Calibrated on clean in-domain items, {target:.0%} bands cover "
               f"{next(iter(d.values()))['clean']['coverage']:.3f} of clean test items; "
               f"{held} of {len(doc['findings'])} findings hold (below).")
    blocks = [{"kind": "findings", "findings": doc["findings"]},
              fig_block(_lines_figure(cov, xlabel="level", ylabel="coverage", target=target,
                                 xticks=levels),
                   "Coverage under each distortion by level (calibrated on clean items)."),
              fig_block(_lines_figure(wid, xlabel="level", ylabel="mean width (native scale)",
                                 xticks=levels),
                   "Mean band width under each distortion by level.")]
    ks = doc["k_sensitivity"]
    kk = sorted(ks, key=int)
    blocks.append(fig_block(_lines_figure({"coverage": ([int(k) for k in kk],
                                                   [ks[k]["coverage"] for k in kk])},
                                     xlabel="clusters k", ylabel="coverage", target=target,
                                     logx=True),
                       "k-sensitivity of the cluster-conservative rule (auto k = "
                       + ", ".join(k for k in kk if ks[k]["auto"]) + ")."))
    ds = doc.get("domain_shift")
    if ds:
        rows = [[k.replace("_", " "), fmt(ds[k]["coverage"]), fmt(ds[k]["width"])]
                for k in ("in_domain", "out_of_domain", "out_of_domain_weighted")]
        rows += [[f"mixture {k}", fmt(ds["mixture"][k]["coverage"]),
                  fmt(ds["mixture"][k]["width"])] for k in ("unweighted", "weighted")]
        blocks.append(table_block(["setting", "coverage", "width"], rows, "Domain shift"))
    return {"title": "stress study", "verdict": verdict, "blocks": blocks}


def _systems(doc: dict) -> dict:
    return systems_section(doc)


_SECTIONS = {"evaluate": _evaluate, "demo": _demo, "judge-study": _judge,
             "roundtrip-study": _roundtrip, "stress": _stress, "systems": _systems}


def _triage(doc: dict) -> str:
    from scoreband.decisions.report import triage_section  # the decisions package's own

    return triage_section(doc)


_SECTIONS["triage"] = _triage


def _provenance(doc: dict) -> str:
    p = doc.get("provenance") or doc.get("_meta", {}).get("provenance")
    if not p:
        keep = {k: v for k, v in doc.items() if isinstance(v, (str, int, float, bool))}
        return json.dumps(keep, indent=1)
    return json.dumps({k: p[k] for k in p if k != "packages"} | {
        "packages": p.get("packages", {})}, indent=1, default=str)


def _provenance_rows(doc: dict) -> list[tuple[str, str]]:
    """The provenance as (what, value) rows: time, command, components, package versions."""
    p = doc.get("provenance") or doc.get("_meta", {}).get("provenance") or {}
    rows = []
    for k, v in p.items():
        if k == "packages" and isinstance(v, dict):
            rows += [(f"package {name}", str(ver)) for name, ver in v.items()]
        elif isinstance(v, dict):
            rows += [(f"{k}: {kk}", json.dumps(vv, default=str) if not isinstance(vv, str)
                      else vv) for kk, vv in v.items()]
        else:
            rows.append((k, " ".join(v) if isinstance(v, list) else str(v)))
    return rows


def _image_block(path) -> dict:
    """A PNG the command wrote, inlined (the report stays one self-contained file)."""
    import base64

    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return {"kind": "image", "src": f"data:image/png;base64,{data}",
            "caption": f"{Path(path).name}, as the command wrote it beside this report."}


def render_report(docs: list[dict], title: str | None = None, images=(),
                  names=None) -> str:
    """The HTML of one report over one or more results documents; ``images``: PNG files the
    command wrote, shown in the first section; ``names``: the file each document was read
    from (None for one the command made), named in an error."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    sections, prov = [], []
    seen: dict[str, int] = {}
    for doc, name in zip(docs, names or [None] * len(docs), strict=True):
        kind = kind_of(doc)
        sections.append(_section(doc, kind, name))
        t = sections[-1]["title"]
        seen[t] = seen.get(t, 0) + 1
        if seen[t] > 1:  # two results files of one kind: titles that tell them apart
            sections[-1]["title"] = f"{t} ({seen[t]})"
        prov.append({"title": sections[-1]["title"], "text": _provenance(doc),
                     "rows": _provenance_rows(doc)})
    if sections:
        sections[0]["blocks"] += [_image_block(p) for p in images
                                  if str(p).lower().endswith(".png") and Path(p).is_file()]
    env = Environment(loader=PackageLoader("scoreband.report", "templates"),
                      autoescape=select_autoescape(["html", "j2"]))
    return env.get_template("report.html.j2").render(
        title=title or "scoreband report: " + ", ".join(s["title"] for s in sections),
        version=__version__, created=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        sections=sections, definitions=_definitions(docs), provenance=prov)


def _definitions(docs) -> list:
    """The terms the report's sections use (each kind adds its own)."""
    defs = list(DEFINITIONS)
    if any(kind_of(d) == "systems" for d in docs):
        defs += SYSTEMS_DEFINITIONS
    if any(kind_of(d) == "demo" for d in docs):
        defs += DEMO_DEFINITIONS
    if any(kind_of(d) in ("demo", "stress") for d in docs):
        defs += FINDINGS_DEFINITIONS
    if any(kind_of(d) == "triage" for d in docs):
        from scoreband.decisions.report import DEFINITIONS as TRIAGE_DEFINITIONS

        defs += list(TRIAGE_DEFINITIONS)
    return defs


def write_report(docs, out, title: str | None = None, images=()) -> Path:
    """Write the report of ``docs`` (dicts, or paths of results JSON files) to ``out``,
    with the PNG ``images`` the command wrote inlined."""
    loaded = []
    for d in docs:
        if isinstance(d, dict):
            loaded.append(d)
            continue
        try:
            doc = read_json(d, what="results file")
        except InputError as e:
            raise InputError(f"{d}: not a readable results JSON ({e})") from None
        try:
            kind = kind_of(doc)
        except ValueError as e:
            raise InputError(f"{d}: {e}") from None
        check_results(doc, kind, d)  # every key its section reads, of its type
        loaded.append(doc)
    for d, doc in zip(docs, loaded, strict=True):
        try:
            kind_of(doc)
        except ValueError as e:
            raise InputError(f"{d if not isinstance(d, dict) else 'document'}: {e}") from None
    names = [None if isinstance(d, dict) else str(d) for d in docs]
    atomic_write_text(Path(out), render_report(loaded, title, images, names=names))
    return Path(out)


def _section(doc: dict, kind: str, name: str | None) -> dict:
    """The section of one document; ``name``: the file it was read from, whose problems
    the declared keys (:mod:`scoreband.report.schema`) did not catch (an edited file) are
    then an InputError naming it, never a crash."""
    if name is None:
        return _SECTIONS[kind](doc)
    try:
        return _SECTIONS[kind](doc)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, StopIteration,
            ZeroDivisionError, OverflowError) as e:
        what = (f"key {e.args[0]!r} is missing" if isinstance(e, KeyError) and e.args
                else " ".join(str(e).split())[:200] or type(e).__name__)
        raise InputError(f"{name}: cannot read this {kind} results file ({what}); "
                         f"{FIX}") from None
