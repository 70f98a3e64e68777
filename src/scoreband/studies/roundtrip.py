"""Validation study and calibrated band for the round-trip score.

* Validation (as in the round-trip paper): matched captions vs mismatched (shuffled) ones on the same images:
  the mean gap and the AUROC, each with a paired bootstrap 95 % interval (scipy.stats.bootstrap,
  resampling images).
* Calibrated band (beyond the source): :class:`ScoreMap` learns, on a training part, a
  monotone map from the cosine score to the human target (isotonic regression) and a scale
  turning the seed spread into a raw interval; the core's calibrators (split CP on the mapped
  score, CRC on the spread interval) then calibrate it on a separate part, so the conformal
  guarantee holds for the test items.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from scoreband import metrics as M
from scoreband.columns import ColumnSpec, load_inputs
from scoreband.conformal import CRC, SplitConformal, adjust_band
from scoreband.conformal.boundary import check_on_grid
from scoreband.conformal.mapping import MonotoneMap
from scoreband.datatypes import Predictions, Scale
from scoreband.errors import InputError
from scoreband.evaluation import Tally, resplits
from scoreband.report.blocks import fmt, mean_std, table_block
from scoreband.report.result import StudyResult
from scoreband.report.sections import ReportSection
from scoreband.tables import read_table
from scoreband.textsafe import md

__all__ = ["run", "derangement", "validation_study", "ScoreMap", "calibration_study",
           "study_markdown"]


def derangement(n: int, seed: int = 0) -> np.ndarray:
    """A seeded permutation with no fixed point (every image gets another row's caption).

    A random permutation, then each position still holding itself, in order, swaps with the
    next one: its new value came from elsewhere, and the swapped-out value lands on a
    position that is not its own.

    >>> p = derangement(5, seed=3)
    >>> sorted(p.tolist()), bool((p == np.arange(5)).any())
    ([0, 1, 2, 3, 4], False)
    """
    if n < 2:
        raise InputError(f"the validation study needs at least 2 rows, got {n}")
    p = np.random.default_rng(seed).permutation(n)
    for i in range(n):
        if p[i] == i:
            j = (i + 1) % n
            p[i], p[j] = p[j], p[i]
    return p


def validation_study(matched, mismatched, *, n_boot: int = 2000, seed: int = 0,
                     confidence: float = 0.95) -> dict:
    """Matched vs mismatched scores of the same images (paired by position)."""
    from sklearn.metrics import roc_auc_score  # lazy: scikit-learn (not to render a report)

    m = np.asarray(matched, dtype=float)
    mm = np.asarray(mismatched, dtype=float)
    ok = np.isfinite(m) & np.isfinite(mm)
    m, mm = m[ok], mm[ok]
    if len(m) < 10:
        raise InputError(f"the validation study needs >= 10 scored pairs, got {len(m)}")
    labels = np.r_[np.ones(len(m)), np.zeros(len(mm))]

    def auc(a, b, axis=-1):
        return roc_auc_score(np.r_[np.ones(len(a)), np.zeros(len(b))], np.r_[a, b])

    rng = np.random.default_rng(seed)
    gap_ci = stats.bootstrap((m - mm,), np.mean, n_resamples=n_boot, confidence_level=confidence,
                             random_state=rng, method="BCa").confidence_interval
    auc_ci = stats.bootstrap((m, mm), auc, paired=True, vectorized=False,
                             n_resamples=n_boot, confidence_level=confidence,
                             random_state=rng, method="percentile").confidence_interval
    return {"n": int(len(m)), "matched_mean": float(m.mean()),
            "mismatched_mean": float(mm.mean()), "gap": float((m - mm).mean()),
            "gap_ci": [float(gap_ci.low), float(gap_ci.high)],
            "auroc": float(roc_auc_score(labels, np.r_[m, mm])),
            "auroc_ci": [float(auc_ci.low), float(auc_ci.high)], "confidence": confidence,
            "n_boot": n_boot, "dropped_unscored": int((~ok).sum())}


class ScoreMap:
    """Monotone map from the round-trip score to the target on [0, 1], and the seed spread
    turned into a raw interval on that scale.

    ``fit``: isotonic regression of y on the score; ``c`` = the 90 % quantile of
    ``|y - g(score)| / spread`` on the same items. ``predictions`` gives the median g(score)
    and the raw interval ``g(score) -/+ c * spread`` (clipped to [0, 1]) for the core's
    calibrators.
    """

    def fit(self, score, spread, y01) -> ScoreMap:
        s, sd, y = (np.asarray(v, dtype=float) for v in (score, spread, y01))
        # the one monotone map of scoreband, increasing (a higher round-trip cosine is a
        # better caption)
        self.map_ = MonotoneMap("isotonic", increasing=True).fit(s, y)
        self.eps_ = max(float(np.median(sd)) * 1e-3, 1e-9)
        r = np.abs(y - self.map_.transform(s)) / np.maximum(sd, self.eps_)
        self.c_ = float(np.quantile(r, 0.9))
        return self

    def predictions(self, score, spread) -> Predictions:
        s, sd = np.asarray(score, dtype=float), np.asarray(spread, dtype=float)
        med = self.map_.transform(s)
        half = self.c_ * np.maximum(sd, self.eps_)
        return Predictions(med, lo=np.clip(med - half, 0, 1), hi=np.clip(med + half, 0, 1))


def calibration_study(score, spread, y01, *, scale: Scale, n_ratings=1, alpha: float = 0.1,
                      seeds: int = 10, cal_frac: float = 0.5, train_frac: float = 0.5) -> dict:
    """Per seed: a ``cal_frac`` calibration part (of which ``train_frac`` fits the ScoreMap
    and the rest runs the conformal step) and the test rest. Split CP and CRC, plain and
    boundary-adjusted."""
    s, sd, y = (np.asarray(v, dtype=float) for v in (score, spread, y01))
    ok = np.isfinite(s) & np.isfinite(sd) & np.isfinite(y)
    # boundary adjustment onto the wrong grid destroys coverage: refuse it up front
    check_on_grid(y[ok], scale, np.asarray(n_ratings)[ok] if np.ndim(n_ratings) else n_ratings)
    s, sd, y = s[ok], sd[ok], y[ok]
    nr = np.asarray(n_ratings)[ok] if np.ndim(n_ratings) else n_ratings
    res: dict = {}
    for method in ("split", "crc"):
        rec = Tally()
        for sp in resplits(len(y), seeds, cal_frac):
            cal, test = sp.cal, sp.test
            fit, conf = np.split(sp.rng.permutation(cal), [int(len(cal) * train_frac)])
            smap = ScoreMap().fit(s[fit], sd[fit], y[fit])
            c = SplitConformal(alpha, scale=scale) if method == "split" else CRC(alpha,
                                                                                 scale=scale)
            c.fit(smap.predictions(s[conf], sd[conf]), y[conf])
            raw = smap.predictions(s[test], sd[test])
            band = c.predict(raw)
            bb = adjust_band(band, nr[test] if np.ndim(nr) else nr)
            rec.add(coverage=M.coverage(band.lo01, band.hi01, y[test]),
                    width=M.sharpness(band.lo, band.hi),
                    coverage_boundary=M.coverage(bb.lo01, bb.hi01, y[test]),
                    width_boundary=M.sharpness(bb.lo, bb.hi),
                    ups=M.ups(band.median01, band.lo01, band.hi01, y[test]),
                    raw_coverage=M.coverage(raw.lo, raw.hi, y[test]))
        res[method] = rec.summary()
    res["n"] = int(len(y))
    res["alpha"] = alpha
    res["seeds"] = seeds
    res["pearson_score_target"] = M.pearson(s, y)
    res["spearman_score_target"] = M.spearman(s, y)
    res["pearson_spread_abs_residual"] = M.pearson(
        sd, np.abs(y - ScoreMap().fit(s, sd, y).map_.transform(s)))
    return res


def study_markdown(doc: dict) -> str:
    v = doc["validation"]
    head = "embedded world (SIMULATED generator and encoder)" if doc.get("simulated") else \
        md(doc.get("source", "table"))
    lines = [f"# Round-trip study: {head}", "",
             f"generator {md(doc['generator'])}, encoder {md(doc['encoder'])}, {doc['n_gen']} "
             "generations per caption", "",
             "## Matched vs mismatched (shuffled) captions", "",
             f"n = {v['n']} images; mean score matched {v['matched_mean']:.4f}, mismatched "
             f"{v['mismatched_mean']:.4f}", "",
             f"* gap {v['gap']:.4f}, {v['confidence']:.0%} bootstrap interval "
             f"[{v['gap_ci'][0]:.4f}, {v['gap_ci'][1]:.4f}]",
             f"* AUROC {v['auroc']:.3f}, {v['confidence']:.0%} bootstrap interval "
             f"[{v['auroc_ci'][0]:.3f}, {v['auroc_ci'][1]:.3f}]", ""]
    if doc.get("per_task"):
        lines += ["| task | n | gap | AUROC |", "|---|---|---|---|"]
        for t, r in doc["per_task"].items():
            lines.append(f"| {md(t)} | {r['n']} | {r['gap']:.4f} | {r['auroc']:.3f} |")
        lines.append("")
    c = doc.get("calibration")
    if c:
        lines += [f"## Calibrated band (alpha = {c['alpha']}, {c['seeds']} seeds, n = {c['n']})",
                  "", f"score vs human target: Pearson {c['pearson_score_target']:.3f}, "
                  f"Spearman {c['spearman_score_target']:.3f}; seed spread vs |residual|: "
                  f"Pearson {c['pearson_spread_abs_residual']:.3f}", "",
                  "| method | coverage | width | coverage (boundary) | width (boundary) | UPS "
                  "| raw interval coverage |", "|---|---|---|---|---|---|---|"]
        for m in ("split", "crc"):
            r = c[m]
            lines.append(f"| {m} | {r['coverage']['mean']:.3f} +/- {r['coverage']['std']:.3f}"
                         f" | {r['width']['mean']:.3f} | {r['coverage_boundary']['mean']:.3f} "
                         f"| {r['width_boundary']['mean']:.3f} | {r['ups']['mean']:.3f} | "
                         f"{r['raw_coverage']['mean']:.3f} |")
        lines.append("")
    if doc.get("text_metrics"):
        t = doc["text_metrics"]
        lines += ["## Text metrics against references (corpus level)", "",
                  ", ".join(f"{k} {v:.3f}" for k, v in t.items()), ""]
    return "\n".join(lines)


def _world_study(gen, enc, *, n: int, n_gen: int, alpha: float, seeds: int, step) -> tuple:
    from PIL import Image

    from scoreband.roundtrip.metric import roundtrip_scores  # lazy: loads PIL, httpx
    from scoreband.world import make_dataset  # lazy: loads PIL
    from scoreband.world.dataset import LIKERT  # lazy: loads PIL

    doc: dict = {"simulated": True}
    ref = make_dataset(n, 11, n_annotators=3, name="roundtrip-ref", p_corrupt=0.0)
    ims = [Image.fromarray(a) for a in ref.images]
    perm = derangement(len(ims))
    step("round trip: matched and shuffled captions ...")
    m, _, _ = roundtrip_scores(ims, ref.captions, gen, enc, n_gen=n_gen)
    mm, _, _ = roundtrip_scores(ims, [ref.captions[j] for j in perm], gen, enc, n_gen=n_gen)
    doc["validation"] = validation_study(m, mm)
    doc["per_task"] = {}
    for t in np.unique(ref.tasks):
        k = ref.tasks == t
        if k.sum() < 10:  # too few for an AUROC: left out of the per-task table
            continue
        v = validation_study(m[k], mm[k], n_boot=200)
        doc["per_task"][str(t)] = {"n": v["n"], "gap": v["gap"], "auroc": v["auroc"]}
    cal = make_dataset(4 * n, 12, n_annotators=3, name="roundtrip-cal")
    step("round trip: calibration set ...")
    s, sd, _ = roundtrip_scores([Image.fromarray(a) for a in cal.images], cal.captions, gen,
                                enc, n_gen=n_gen)
    doc["calibration"] = calibration_study(s, sd, cal.y01, scale=LIKERT,
                                           n_ratings=cal.n_ratings, alpha=alpha, seeds=seeds)
    return doc, m, mm


def _table_study(df, gen, enc, *, n_gen, image_col, text_col, base_dir, target, scale,
                 n_ratings, alpha, seeds, progress, on_rows) -> tuple:
    from scoreband.roundtrip.metric import roundtrip_table  # lazy: loads PIL, httpx

    kw = dict(n_gen=n_gen, image_col=image_col, text_col=text_col, base_dir=base_dir,
              progress=progress)
    res, _ = roundtrip_table(df, gen, enc, **kw)
    shuffled = df.copy()
    shuffled[text_col] = df[text_col].to_numpy()[derangement(len(df))]
    res2, _ = roundtrip_table(shuffled, gen, enc, **kw)
    m, mm = res["roundtrip_score"].to_numpy(), res2["roundtrip_score"].to_numpy()
    doc: dict = {"simulated": False, "validation": validation_study(m, mm)}
    if target is not None:
        ok = res["roundtrip_error"] == ""
        good = res[ok].reset_index(drop=True)
        inp = load_inputs(good, ColumnSpec(scale=scale, target=target, median="roundtrip_score",
                                           pred_scale=Scale(-1, 1)), n_ratings=n_ratings)
        if on_rows:
            on_rows(inp.errors, int(ok.sum()))
        rows = good.iloc[inp.rows]
        doc["calibration"] = calibration_study(
            rows["roundtrip_score"].to_numpy(), rows["roundtrip_spread"].to_numpy(), inp.y01,
            scale=scale, n_ratings=inp.n_ratings, alpha=alpha, seeds=seeds)
    return doc, m, mm


def run(gen, enc, *, table=None, n: int = 500, n_gen: int = 4, image_col: str = "image",
        text_col: str = "caption", target: str | None = None, scale: Scale | None = None,
        n_ratings=None, alpha: float = 0.1, seeds: int = 10, on_step=None, progress=None,
        on_rows=None) -> StudyResult:
    """The round-trip validation study (matched vs shuffled captions: mean gap and AUROC
    with bootstrap intervals) and, where human targets exist, a calibrated band around the
    score. ``table``: a path of (image, caption[, target]) rows; None: the embedded world."""
    step = on_step or (lambda msg: None)
    head = {"generator": gen.name, "encoder": enc.name, "n_gen": n_gen,
            "components": {"generator": gen.describe(), "encoder": enc.describe()}}
    if table is None:
        doc, m, mm = _world_study(gen, enc, n=n, n_gen=n_gen, alpha=alpha, seeds=seeds,
                                  step=step)
    else:
        doc, m, mm = _table_study(read_table(table), gen, enc, n_gen=n_gen,
                                  image_col=image_col, text_col=text_col,
                                  base_dir=Path(table).parent, target=target,
                                  scale=scale or Scale(1, 5), n_ratings=n_ratings,
                                  alpha=alpha, seeds=seeds, progress=progress,
                                  on_rows=on_rows)
        doc["source"] = str(table)
    doc = {**head, **doc}
    from scoreband.report.figures import roundtrip_figure  # lazy: loads PIL, matplotlib

    return StudyResult("roundtrip-study", doc, study_markdown(doc), [
        ("roundtrip_scores.png",
         lambda p: roundtrip_figure(p, m, mm, doc["validation"]))])


# ------------------------------------------------------------------ its report section
def roundtrip_section(doc: dict) -> dict:
    """The round-trip study's section of the HTML report."""
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
                             [[m, mean_std(c[m]["coverage"]), mean_std(c[m]["width"]),
                               mean_std(c[m]["coverage_boundary"]), mean_std(c[m]["width_boundary"]),
                               mean_std(c[m]["ups"])] for m in ("split", "crc")],
                             f"Calibrated band (alpha {c['alpha']}, n = {c['n']})"))
    return {"title": "round-trip study", "verdict": verdict, "blocks": blocks}


@cache
def report_schema():
    """The keys :func:`roundtrip_section` reads (pydantic, loaded when a report is checked)."""
    from scoreband.report.schema import Pair, Stat, StrictModel

    class Validation(StrictModel):
        gap: float
        auroc: float
        gap_ci: Pair
        auroc_ci: Pair


    class RoundtripMethod(StrictModel):
        coverage: Stat
        width: Stat
        coverage_boundary: Stat
        width_boundary: Stat
        ups: Stat


    class RoundtripCalibration(StrictModel):
        alpha: float
        n: float
        split: RoundtripMethod
        crc: RoundtripMethod


    class RoundtripDoc(StrictModel):
        simulated: bool = False
        generator: Any
        encoder: Any
        n_gen: Any
        validation: Validation
        calibration: RoundtripCalibration | None = None

    return RoundtripDoc


REPORT_SECTION = ReportSection(roundtrip_section, schema=report_schema)
