"""The calibrate step of every trained scorer: CRC of its chained CI-loss head on held-out
items, saved beside the model as ``calibrator.json`` and bound to the scorer's weights."""

from __future__ import annotations

from pathlib import Path

from scoreband.conformal import CRC, save_calibrator
from scoreband.scorers.scorer import Scorer
from scoreband.world import make_dataset
from scoreband.world.dataset import LIKERT

__all__ = ["calibrate_scorer", "calibrate_model"]


def calibrate_scorer(model_dir, images, texts, y01, scale, alpha: float,
                     calibration_set: dict, *, backbone=None) -> dict:
    """The one calibrate step of every trained scorer: CRC of the saved model's chained
    CI-loss head on held-out items, written as ``model_dir/calibrator.json`` (bound to the
    scorer's fingerprint, recording where its items came from). Returns its summary."""
    scorer = Scorer.load(model_dir, backbone=backbone)
    pred = scorer.predict(images, texts, head="chained_ci")
    cal = CRC(alpha, scale=scale).fit(pred, y01)
    save_calibrator(Path(model_dir) / "calibrator.json", cal,
                    scorer_fingerprint=scorer.fingerprint,
                    inputs={"head": "chained_ci", "pred_scale": [0, 1],
                            "calibration_set": calibration_set})
    return {"omega": cal.params_["omega"], "beta": cal.params_["beta"], "n": len(texts)}


def calibrate_model(model_dir, n: int = 2000, seed: int = 7, alpha: float = 0.1,
                    n_annotators: int = 3) -> dict:
    """:func:`calibrate_scorer` on a fresh in-domain world calibration set (its seed is
    recorded, so ``score`` can regenerate the items for its shift alarm)."""
    ds = make_dataset(n, seed, n_annotators=n_annotators, name="calibration")
    return calibrate_scorer(model_dir, ds.images, ds.captions, ds.y01, LIKERT, alpha,
                            {"n": n, "seed": seed, "n_annotators": n_annotators})
