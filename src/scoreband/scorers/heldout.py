"""Held-out evaluation of a trained, calibrated scorer on a fresh world test set (the
numbers its model card reports)."""

from __future__ import annotations

from pathlib import Path

from scoreband.conformal import load_calibrator
from scoreband.scorers.scorer import Scorer
from scoreband.world import make_dataset

__all__ = ["heldout_metrics"]


def heldout_metrics(model_dir, n: int = 1000, seed: int = 9) -> dict:
    """Metrics of the trained, calibrated scorer on a fresh 5-annotator world test set."""
    from scoreband import metrics as M  # lazy: loads scipy

    scorer = Scorer.load(model_dir)
    cal, _ = load_calibrator(Path(model_dir) / "calibrator.json",
                             scorer_fingerprint=scorer.fingerprint)
    ds = make_dataset(n, seed, n_annotators=5, name="heldout")
    y = ds.y01
    preds = scorer.predict_heads(ds.images, ds.captions)
    band = cal.predict(preds["chained_ci"])
    point = scorer.point(ds.images, ds.captions)
    return {
        "n": n, "seed": seed, "n_annotators": 5,
        "point_kendall_tau_c": M.kendall_tau_c(point, y),
        "point_pearson": M.pearson(point, y),
        "chained_ci_kendall_tau_c": M.kendall_tau_c(preds["chained_ci"].median, y),
        "calibrated_coverage": M.coverage(band.lo01, band.hi01, y),
        "calibrated_mean_width01": M.sharpness(band.lo01, band.hi01),
        "calibrated_ups": M.ups(band.median01, band.lo01, band.hi01, y),
    }
