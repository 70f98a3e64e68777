"""``scoreband demo``: the BEiTScore++ table (heads x test sets, before and after calibration) on the embedded world.

Generates three test sets (multi-annotator "clean", single-annotator "noisy", painting-style
"ood_painting"), scores them with the bundled quantile scorer (and its MC-dropout baseline),
calibrates with CRC and the cluster-conservative rule over repeated 50/50 splits, and writes
``results.json``, ``results.md`` and figures to an output folder.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Annotated

import numpy as np

from scoreband import metrics as M
from scoreband.conformal import CRC, ClusterConservative
from scoreband.datatypes import Predictions
from scoreband.evaluation import Tally, evaluate_splits, resplits
from scoreband.metrics import binomial_ci
from scoreband.report.blocks import (
    FINDINGS_DEFINITIONS,
    bar_figure,
    fig_block,
    findings_block,
    fmt,
    mean_std,
    pyplot,
    svg,
    table_block,
)
from scoreband.report.result import StudyResult
from scoreband.report.sections import ReportSection
from scoreband.system_level.active import active_arrays, inclusion_probabilities, systematic_draw
from scoreband.textsafe import fig as label
from scoreband.world import make_dataset
from scoreband.world.dataset import LIKERT

if TYPE_CHECKING:  # torch loads with the scorer, when the demo runs (not to render its report)
    from scoreband.scorers.scorer import Scorer

__all__ = ["TEST_SETS", "ROWS", "METRICS", "run", "make_test_sets", "active_labels",
           "decisions_lines", "demo_section", "DEMO_DEFINITIONS", "REPORT_SECTION",
           "ACTIVE_LABEL_SHARE"]

#: name -> (style, annotators, seed)
TEST_SETS = {
    "clean": ("photo", 5, 101),
    "noisy": ("photo", 1, 102),
    "ood_painting": ("painting", 5, 103),
}
ROWS = ("mc_dropout", "unconstrained_pinball", "chained_pinball", "chained_ci",
        "chained_ci_clusters")
METRICS = ("kendall_tau_c", "ups", "sharpness", "coverage")
#: the demo's active-labeling question: expected labels per test set, a share of its items
ACTIVE_LABEL_SHARE = 0.1
#: label draws behind the realised width ratio (its Monte-Carlo error ~ 1 / sqrt(2 draws))
ACTIVE_DRAWS = 400


def make_test_sets(n: int) -> dict:
    return {name: make_dataset(n, seed, style=style, n_annotators=r, name=name)
            for name, (style, r, seed) in TEST_SETS.items()}


def _row_predictions(scorer: Scorer, ds, mc_passes: int,
                     step=lambda msg: None) -> dict[str, Predictions]:
    preds = scorer.predict_heads(ds.images, ds.captions,
                                 ["unconstrained_pinball", "chained_pinball", "chained_ci"])
    last = [time.perf_counter()]

    def progress(done, total):  # a line every 5 s at most
        if time.perf_counter() - last[0] >= 5 or done == total:
            last[0] = time.perf_counter()
            step(f"  MC dropout: {done / total:.0%} of {mc_passes} passes over {len(ds)} items")

    mc = scorer.mc_dropout(ds.images, ds.captions, passes=mc_passes, on_batch=progress)
    mc.embedding = preds["chained_ci"].embedding
    preds["mc_dropout"] = mc
    preds["chained_ci_clusters"] = preds["chained_ci"]
    return preds


def _make(row: str, alpha: float, seed: int):
    if row == "chained_ci_clusters":
        return lambda: ClusterConservative(CRC(alpha, scale=LIKERT), n_clusters="auto",
                                           seed=seed)
    return lambda: CRC(alpha, scale=LIKERT)


def _pick(res: dict, part: str) -> dict:
    return {k: res[part][k] for k in METRICS}


def run(*, n_test: int = 600, seeds: int = 10, alpha: float = 0.1,
        model: str = "embedded:default", mc_passes: int = 25,
        on_step: Callable[[str], None] | None = None) -> StudyResult:
    """Run the demo (``.write(out_dir)`` writes results.json, results.md, widths.png and
    examples.png)."""
    from scoreband.scorers.scorer import Scorer, bundled_model_dir  # lazy: loads torch

    step = on_step or (lambda msg: None)
    t0 = time.perf_counter()
    scorer = Scorer.load(model)
    step(f"generating {len(TEST_SETS)} test sets of {n_test} items")
    sets = make_test_sets(n_test)
    results: dict = {}
    extra: dict = {"alpha": alpha, "seeds": seeds, "n_test": n_test, "model": model,
                   "scorer_fingerprint": scorer.fingerprint, "point_kendall_tau_c": {},
                   "crossings": {}, "timing_s": {}}
    all_preds = {}
    for name, ds in sets.items():
        step(f"scoring {name} (quantile heads + MC dropout x{mc_passes})")
        t = time.perf_counter()
        preds = _row_predictions(scorer, ds, mc_passes, step)
        extra["timing_s"][name] = round(time.perf_counter() - t, 2)
        all_preds[name] = preds
        y = ds.y01
        point = scorer.point(ds.images, ds.captions)
        extra["point_kendall_tau_c"][name] = M.kendall_tau_c(point, y)
        q = preds["unconstrained_pinball"].quantiles
        extra["crossings"][name] = int((np.diff(q, axis=1) < 0).any(axis=1).sum())
        # what to do with the bands: the share of scores a user may keep without a human,
        # within a point on 1-5, risk 0.2 with probability 0.9 (scoreband triage)
        from scoreband.decisions import accepted_share  # lazy: loads scikit-learn

        p = preds["chained_ci"]
        extra.setdefault("triage", {})[name] = accepted_share(
            LIKERT.from01(y), LIKERT.from01(p.median), scale=LIKERT, tolerance=1.0,
            alpha=0.2, delta=0.1, uncertainty=p.hi - p.lo, seed=0)
        # and which items to label: active sampling by the same uncertainty against uniform
        extra.setdefault("active_labels", {})[name] = active_labels(
            y, p.median, p.hi - p.lo, n_labels=max(10, round(ACTIVE_LABEL_SHARE * len(y))))
        results[name] = {}
        for row in ROWS:
            step(f"calibrating {name} / {row} over {seeds} splits")
            res = evaluate_splits(preds[row], y, _make(row, alpha, 0), seeds=seeds,
                                  groups=ds.tasks, n_ratings=ds.n_ratings)
            results[name][row] = {"before": _pick(res, "before"), "after": _pick(res, "after")}
            results[name][row]["after"]["worst_group_coverage"] = res["after"][
                "worst_group_coverage"]
    # distribution shift: calibrate on the clean set, apply to the painting set
    step("domain shift: calibrated in domain, applied to ood_painting")
    results["ood_painting_shift"] = _shift(all_preds["clean"]["chained_ci"], sets["clean"].y01,
                                           all_preds["ood_painting"]["chained_ci"],
                                           sets["ood_painting"].y01, alpha, seeds)
    extra["seconds"] = round(time.perf_counter() - t0, 1)
    extra["findings"] = findings({**results, "_meta": extra})
    from scoreband.provenance import provenance  # lazy: loads httpx, rich

    extra["provenance"] = provenance({"backbone": "embedded:default"}, files={
        "weights": bundled_model_dir() / "model.safetensors",
        "calibrator": bundled_model_dir() / "calibrator.json"})
    doc = {**results, "_meta": extra}
    widths, bands = {}, {}
    for name, ds in sets.items():
        bands[name] = CRC(alpha, scale=LIKERT).fit(all_preds[name]["chained_ci"],
                                                   ds.y01).predict(all_preds[name]["chained_ci"])
        widths[name] = bands[name].width01 * LIKERT.width
    from scoreband.report.figures import examples_figure, width_figure  # lazy: loads matplotlib

    return StudyResult("demo", doc, results_markdown(doc), [
        ("widths.png", lambda p: width_figure(p, widths, what=(
            f"chained_ci head, CRC at alpha {alpha:g} fitted on each whole test set (no "
            "held-out split)"))),
        ("examples.png", lambda p: examples_figure(p, sets["clean"], bands["clean"], n=8))])


def active_labels(y01, f01, u, *, n_labels: int, draws: int = ACTIVE_DRAWS,
                  seed: int = 0) -> dict:
    """What active sampling saves on one fully labeled test set: the mean of the human
    scores ``y01`` estimated from ``n_labels`` expected labels and the scorer's ``f01`` on
    every item, labels drawn uniformly or with probability proportional to the uncertainty
    ``u`` (mixed with uniform, :func:`~scoreband.system_level.active.inclusion_probabilities`)
    by systematic sampling, ``draws`` times each; the inverse-probability-weighted PPI++
    standard errors (:func:`~scoreband.system_level.active.active_arrays`, uniform: equal
    weights) averaged over the draws.

    Returns ``width_ratio`` (active / uniform, realised), ``predicted_width_ratio`` (from the
    squared residuals and the design, :func:`predicted_variance_ratio` with ``lam = 1``),
    ``uniform_labels_for_same_width`` (``n_labels / width_ratio^2``: the labels uniform
    sampling needs for active's width), ``labels_saved_share`` (``1 - width_ratio^2``, < 0
    when active is wider), ``active_pays`` (whether the predicted gain beats what the design
    would cost were the uncertainty uninformative, as ``systems --plan`` decides),
    ``n_labels``, ``n_items``, ``draws``.

    >>> rng = np.random.default_rng(0)
    >>> u = rng.uniform(0.02, 0.4, 600); f = rng.uniform(size=600)
    >>> r = active_labels(f + rng.normal(0, u), f, u, n_labels=60)
    >>> r["width_ratio"] < 0.95, r["uniform_labels_for_same_width"] > 60
    (True, True)
    """
    from scoreband.system_level.active import active_is_worth_it, predicted_variance_ratio

    y01, f01, u = (np.asarray(a, dtype=float) for a in (y01, f01, u))
    n_items = len(y01)
    pi = inclusion_probabilities(u, n_labels)
    flat = np.full(n_items, n_labels / n_items)
    rng = np.random.default_rng([seed, 35])
    order, start = rng.random((draws, n_items)), rng.random(draws)
    se = {}
    for name, p in (("active", pi), ("uniform", flat)):
        lab = systematic_draw(p, order, start)
        shape = lab.shape
        _, s, *_ = active_arrays(np.broadcast_to(y01, shape), np.broadcast_to(f01, shape),
                                 np.broadcast_to(p, shape), lab)
        se[name] = float(np.mean(s[np.isfinite(s)]))
    ratio = se["active"] / se["uniform"]
    pred = float(np.sqrt(predicted_variance_ratio((y01 - f01) ** 2, pi)))
    return {"n_items": n_items, "n_labels": int(n_labels), "draws": draws,
            "width_ratio": ratio, "predicted_width_ratio": pred,
            "uniform_labels_for_same_width": float(n_labels / ratio ** 2),
            "labels_saved_share": float(1 - ratio ** 2),
            "active_pays": active_is_worth_it(pred, pi),
            "uncertainty": "the chained head's raw 5-95 % interval width",
            "estimator": "inverse-probability-weighted (Hajek) PPI++ of the mean human score"}


def decisions_lines(doc: dict) -> list[str]:
    """"What to do with the bands" in plain lines (the console's and the markdown's): per
    test set the share of scores kept at the demo's tolerance and what active sampling
    saves; empty for a results file written before these were measured."""
    meta = doc["_meta"]
    tri, act = meta.get("triage") or {}, meta.get("active_labels") or {}
    out = []
    for k in dict.fromkeys([*tri, *act]):
        parts = []
        if k in tri:
            v = tri[k]
            parts.append(f"keep {v['accepted_share']:.0%} of the scores without a human "
                         f"(keeping all would risk {v['accept_all_risk']:.0%})")
        if k in act:
            a = act[k]
            parts.append(f"{a['n_labels']} labels drawn by the band's width give intervals "
                         f"{a['width_ratio']:.2f}x as wide as uniform ones: uniform "
                         f"sampling would need {a['uniform_labels_for_same_width']:.0f} "
                         f"({a['labels_saved_share']:+.0%} labels saved"
                         + ("" if a.get("active_pays", True) else
                            "; the error spread varies too little here: label uniformly")
                         + ")")
        out.append(f"{k}: " + "; ".join(parts))
    return out


def _shift(pred_in, y_in, pred_out, y_out, alpha, seeds) -> dict:
    rec = Tally()
    for sp in resplits(len(y_in), seeds):
        band = CRC(alpha).fit(pred_in.take(sp.cal), y_in[sp.cal]).predict(pred_out)
        rec.add(coverage=M.coverage(band.lo01, band.hi01, y_out),
                sharpness=M.sharpness(band.lo01, band.hi01))
    return {"chained_ci": {"after": rec.summary()}}


def findings(doc: dict) -> list[dict]:
    """The BEiTScore++ findings the demo checks, each checked on the numbers."""
    def m(s, row, part, k):
        return doc[s][row][part][k]["mean"]

    meta = doc["_meta"]
    out = []
    for s in TEST_SETS:
        d = abs(m(s, "chained_ci", "before", "kendall_tau_c") - meta["point_kendall_tau_c"][s])
        out.append({"claim": f"{s}: chained-head median tau-c within 0.01 of the point model",
                    "value": d, "holds": d <= 0.01})
        g = m(s, "chained_ci", "after", "ups") - m(s, "unconstrained_pinball", "after", "ups")
        out.append({"claim": f"{s}: UPS chained_ci - unconstrained_pinball >= 0.10 (after)",
                    "value": g, "holds": g >= 0.10})
        c, cc = m(s, "chained_ci", "after", "coverage"), m(s, "chained_ci_clusters", "after",
                                                            "coverage")
        out.append({"claim": f"{s}: cluster rule coverage >= unclustered", "value": cc - c,
                    "holds": cc >= c - 1e-12})
    for s in ("clean", "noisy"):
        c = m(s, "chained_ci", "after", "coverage")
        out.append({"claim": f"{s}: in-domain coverage after CRC in [0.88, 0.93]", "value": c,
                    "holds": 0.88 <= c <= 0.93})
    w = {s: m(s, "chained_ci", "after", "sharpness") for s in TEST_SETS}
    out.append({"claim": "bands wider on ood_painting than on clean (same annotator count)",
                "value": w["ood_painting"] - w["clean"], "holds": w["ood_painting"] > w["clean"]})
    out.append({"claim": "bands narrower on clean (5 annotators) than noisy (1 annotator)",
                "value": w["noisy"] - w["clean"], "holds": w["clean"] < w["noisy"]})
    shift = doc["ood_painting_shift"]["chained_ci"]["after"]["coverage"]["mean"]
    out.append({"claim": "coverage drops under shift (calibrated on clean, tested on painting)",
                "value": shift, "holds": shift < m("clean", "chained_ci", "after", "coverage")})
    return out


def results_markdown(doc: dict) -> str:
    meta = doc["_meta"]
    lines = [f"# scoreband demo (alpha = {meta['alpha']}, {meta['seeds']} seeds, "
             f"{meta['n_test']} items per test set)", "",
             "Scorer: bundled embedded model, fingerprint " + meta["scorer_fingerprint"], ""]
    for part in ("before", "after"):
        lines += [f"## {part} calibration", ""]
        header = "| row | " + " | ".join(f"{s} {m}" for s in TEST_SETS for m in METRICS) + " |"
        lines += [header, "|" + "---|" * (1 + len(TEST_SETS) * len(METRICS))]
        for row in ROWS:
            cells = []
            for s in TEST_SETS:
                for m in METRICS:
                    v = doc[s][row][part][m]
                    cells.append("-" if v["mean"] is None or np.isnan(v["mean"])
                                 else f"{v['mean']:.3f}±{v['std']:.3f}")
            lines.append(f"| {row} | " + " | ".join(cells) + " |")
        lines.append("")
    sh = doc["ood_painting_shift"]["chained_ci"]["after"]
    lines += ["## domain shift (calibrated on clean, applied to ood_painting)", "",
              f"coverage {sh['coverage']['mean']:.3f} ± {sh['coverage']['std']:.3f}, "
              f"sharpness {sh['sharpness']['mean']:.3f}", "",
              "Point model Kendall tau-c: " + ", ".join(
                  f"{k} {v:.3f}" for k, v in meta["point_kendall_tau_c"].items()),
              "", "Unconstrained head, items with crossed quantiles: " + ", ".join(
                  f"{k} {v}" for k, v in meta["crossings"].items()), "",
              ]
    tri = meta.get("triage") or {}
    if tri:
        lines += ["## What to do with the bands: which scores to keep (`scoreband triage`)", "",
                  "Kept without a human where the chained head's band is narrow enough that, "
                  "among kept scores, at most 20 % are off the human score by more than one "
                  "point (probability 0.9 over the labels):", ""]
        lines += [f"- {k}: keep {v['accepted_share']:.0%} of the scores (keeping all would "
                  f"risk {v['accept_all_risk']:.0%})" for k, v in tri.items()]
        lines.append("")
    act = meta.get("active_labels") or {}
    if act:
        lines += ["## What to do with the bands: which items to label (`scoreband systems "
                  "--propose-labels`)", "",
                  "Each test set's mean human score from 10 % of its items labeled, drawn "
                  "uniformly or with probability growing with the chained head's band width "
                  f"(PPI++, mean interval width over {next(iter(act.values()))['draws']} "
                  "draws):", ""]
        lines += [f"- {k}: active / uniform width {v['width_ratio']:.2f} (predicted "
                  f"{v['predicted_width_ratio']:.2f}); uniform sampling would need "
                  f"{v['uniform_labels_for_same_width']:.0f} labels for the width of "
                  f"{v['n_labels']} active ones"
                  + ("" if v.get("active_pays", True) else " (no gain predicted: the error "
                     "spread varies too little here, label uniformly)") for k, v in act.items()]
        lines.append("")
    lines += ["## Findings of the BEiTScore++ paper, checked on these numbers", ""]
    lines += [f"- [{'x' if f['holds'] else ' '}] {f['claim']} ({f['value']:.3f})"
              for f in meta["findings"]]
    lines.append("")
    return "\n".join(lines)


# ------------------------------------------------------------------ its report section
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


def demo_section(doc: dict) -> dict:
    """The demo's section of the HTML report."""
    meta = doc["_meta"]
    target = 1 - meta["alpha"]
    sets = [k for k in doc if k not in ("_meta", "study", "ood_painting_shift", "provenance")]
    rows, labels, cov, cis = [], [], [], []
    n_test = int(meta.get("n_test") or 0)
    for s in sets:
        for head, v in doc[s].items():
            a = v["after"]
            points = {k: a["sharpness"][k] * 4 for k in ("mean", "std")}  # on 1-5
            rows.append([s, head, mean_std(a["coverage"]), mean_std(a["sharpness"]), mean_std(points),
                         mean_std(a["ups"]), mean_std(a["kendall_tau_c"])])
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
        fig_block(bar_figure(labels, cov, xlabel="coverage after calibration", target=target,
                         intervals=cis if n_test else None),
             f"Coverage per test set and head, with the 95 % Clopper-Pearson interval of "
             f"each on its {n_test} distinct test items."),
        table_block(["test set", "head", "coverage", "width [0, 1]", "width (points on 1-5)",
                "UPS", "tau-c"], rows),
        findings_block(meta["findings"])] + _decisions_blocks(meta)}


def _decisions_blocks(meta: dict) -> list[dict]:
    """The "what to do with the bands" table, for a results file that measured active
    sampling (older ones: none, their report unchanged)."""
    act, tri = meta.get("active_labels") or {}, meta.get("triage") or {}
    if not act:
        return []
    rows = [[k, f"{tri[k]['accepted_share']:.0%}" if k in tri else "-",
             f"{tri[k]['accept_all_risk']:.0%}" if k in tri else "-", str(a["n_labels"]),
             fmt(a["width_ratio"], 2), fmt(a["predicted_width_ratio"], 2),
             f"{a['uniform_labels_for_same_width']:.0f}", f"{a['labels_saved_share']:+.0%}"]
            for k, a in act.items()]
    return [table_block(["test set", "scores kept (triage)", "risk keeping all",
                         "labels (active)", "width active / uniform", "predicted",
                         "uniform labels for that width", "labels saved"], rows,
                        "What to do with the bands: scores kept within a point at risk 0.2 "
                        "(probability 0.9), and labels saved by drawing the items to label "
                        "by the band's width (PPI++, mean width over "
                        f"{next(iter(act.values()))['draws']} draws)")]


@cache
def report_schema():
    """The keys :func:`demo_section` reads (pydantic, loaded when a report is checked)."""
    from pydantic import Field, TypeAdapter, model_validator

    from scoreband.report.schema import Finding, Measured, NonEmpty, Stat, StrictModel

    class Before(StrictModel):
        coverage: Measured
        sharpness: Measured


    class After(StrictModel):
        coverage: Measured
        sharpness: Measured
        ups: Stat
        kendall_tau_c: Stat


    class DemoHead(StrictModel):
        before: Before
        after: After


    class DemoMeta(StrictModel):
        alpha: float
        n_test: float | None = None
        findings: list[Finding]


    class ShiftAfter(StrictModel):
        coverage: Measured


    class ShiftHead(StrictModel):
        after: ShiftAfter


    class DemoShift(StrictModel):
        chained_ci: ShiftHead


    DemoSet = Annotated[dict[str, DemoHead], NonEmpty]


    class DemoDoc(StrictModel):
        meta: DemoMeta = Field(alias="_meta")
        clean: Annotated[dict[str, DemoHead], NonEmpty]
        ood_painting_shift: DemoShift

        @model_validator(mode="after")
        def _sets(self):
            if "chained_ci" not in self.clean:
                raise ValueError("'clean' has no head 'chained_ci'")
            heads = set(self.clean)
            for name, v in (self.model_extra or {}).items():
                if name in ("study", "provenance"):
                    continue
                s = demo_set.validate_python(v, strict=True)
                if set(s) != heads:
                    raise ValueError(f"test set {name!r} has heads {sorted(s)}, 'clean' has "
                                     f"{sorted(heads)}")
            return self


    demo_set = TypeAdapter(DemoSet)
    return DemoDoc


REPORT_SECTION = ReportSection(demo_section, [*DEMO_DEFINITIONS, *FINDINGS_DEFINITIONS],
                               report_schema)
