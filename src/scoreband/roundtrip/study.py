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

from pathlib import Path

import numpy as np
from scipy import stats
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import roc_auc_score

from scoreband import metrics as M
from scoreband.conformal import CRC, SplitConformal, adjust_band
from scoreband.conformal.boundary import check_on_grid
from scoreband.errors import InputError
from scoreband.protocol import split_indices, summarize
from scoreband.records import Predictions, Scale

__all__ = ["derangement", "validation_study", "ScoreMap", "calibration_study", "study_markdown"]


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
        self.iso_ = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(s, y)
        self.eps_ = max(float(np.median(sd)) * 1e-3, 1e-9)
        r = np.abs(y - self.iso_.predict(s)) / np.maximum(sd, self.eps_)
        self.c_ = float(np.quantile(r, 0.9))
        return self

    def predictions(self, score, spread) -> Predictions:
        s, sd = np.asarray(score, dtype=float), np.asarray(spread, dtype=float)
        med = self.iso_.predict(s)
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
        rec = {k: [] for k in ("coverage", "width", "coverage_boundary", "width_boundary",
                               "ups", "raw_coverage")}
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            cal, test = split_indices(len(y), cal_frac, rng)
            fit, conf = np.split(rng.permutation(cal), [int(len(cal) * train_frac)])
            smap = ScoreMap().fit(s[fit], sd[fit], y[fit])
            c = SplitConformal(alpha, scale=scale) if method == "split" else CRC(alpha,
                                                                                 scale=scale)
            c.fit(smap.predictions(s[conf], sd[conf]), y[conf])
            raw = smap.predictions(s[test], sd[test])
            band = c.predict(raw)
            bb = adjust_band(band, nr[test] if np.ndim(nr) else nr)
            rec["coverage"].append(M.coverage(band.lo01, band.hi01, y[test]))
            rec["width"].append(M.sharpness(band.lo, band.hi))
            rec["coverage_boundary"].append(M.coverage(bb.lo01, bb.hi01, y[test]))
            rec["width_boundary"].append(M.sharpness(bb.lo, bb.hi))
            rec["ups"].append(M.ups(band.median01, band.lo01, band.hi01, y[test]))
            rec["raw_coverage"].append(M.coverage(raw.lo, raw.hi, y[test]))
        res[method] = {k: summarize(v) for k, v in rec.items()}
    res["n"] = int(len(y))
    res["alpha"] = alpha
    res["seeds"] = seeds
    res["pearson_score_target"] = M.pearson(s, y)
    res["spearman_score_target"] = M.spearman(s, y)
    res["pearson_spread_abs_residual"] = M.pearson(
        sd, np.abs(y - ScoreMap().fit(s, sd, y).iso_.predict(s)))
    return res


def study_markdown(doc: dict) -> str:
    v = doc["validation"]
    head = "embedded world (SIMULATED generator and encoder)" if doc.get("simulated") else \
        doc.get("source", "table")
    lines = [f"# Round-trip study: {head}", "",
             f"generator {doc['generator']}, encoder {doc['encoder']}, {doc['n_gen']} "
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
            lines.append(f"| {t} | {r['n']} | {r['gap']:.4f} | {r['auroc']:.3f} |")
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


def write_study(doc: dict, out_dir, matched=None, mismatched=None) -> None:
    from scoreband.io import atomic_write_text, write_json

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "roundtrip_study.json", doc)
    atomic_write_text(out / "roundtrip_study.md", study_markdown(doc))
    if matched is not None:
        from scoreband.report.figures import roundtrip_figure

        roundtrip_figure(out / "roundtrip_scores.png", matched, mismatched, doc["validation"])
