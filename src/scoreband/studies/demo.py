"""``scoreband demo``: the BEiTScore++ table (heads x test sets, before and after calibration) on the embedded world.

Generates three test sets (multi-annotator "clean", single-annotator "noisy", painting-style
"ood_painting"), scores them with the bundled quantile scorer (and its MC-dropout baseline),
calibrates with CRC and the cluster-conservative rule over repeated 50/50 splits, and writes
``results.json``, ``results.md`` and figures to an output folder.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from scoreband import metrics as M
from scoreband.conformal import CRC, ClusterConservative
from scoreband.datatypes import Predictions
from scoreband.evaluation import Tally, evaluate_splits, resplits
from scoreband.scorers.scorer import Scorer, bundled_model_dir
from scoreband.studies.base import StudyResult
from scoreband.world import make_dataset
from scoreband.world.dataset import LIKERT

__all__ = ["TEST_SETS", "ROWS", "METRICS", "run", "make_test_sets"]

#: name -> (style, annotators, seed)
TEST_SETS = {
    "clean": ("photo", 5, 101),
    "noisy": ("photo", 1, 102),
    "ood_painting": ("painting", 5, 103),
}
ROWS = ("mc_dropout", "unconstrained_pinball", "chained_pinball", "chained_ci",
        "chained_ci_clusters")
METRICS = ("kendall_tau_c", "ups", "sharpness", "coverage")


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
    lines += ["## Findings of the BEiTScore++ paper, checked on these numbers", ""]
    lines += [f"- [{'x' if f['holds'] else ' '}] {f['claim']} ({f['value']:.3f})"
              for f in meta["findings"]]
    lines.append("")
    return "\n".join(lines)
