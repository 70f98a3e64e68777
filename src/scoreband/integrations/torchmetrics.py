"""A torchmetrics ``Metric`` for people who already compute CLIPScore with torchmetrics:
the calibrated band per item beside the point score, and the mean with its interval.

    from scoreband.integrations.torchmetrics import CalibratedScore
    metric = CalibratedScore()                 # the bundled model; or model="DIR"
    metric.update(images, captions)            # tensors (N, 3, H, W), arrays, PIL, paths
    out = metric.compute()                     # score, band_lo, band_hi, mean, mean_ci

Needs the optional extra ``pip install "scoreband[torchmetrics]"``. The numbers are those
of ``scoreband score`` on the same images and captions (the same scoring stage: model,
calibrator and image conversion), on the calibrator's scale (1-5 for the bundled model).
"""

from __future__ import annotations

import math

import torch

from scoreband.extras import require

_tm = require("torchmetrics", "scoreband.integrations.torchmetrics")

__all__ = ["CalibratedScore"]


class CalibratedScore(_tm.Metric):
    """Median and calibrated band per (image, caption) pair from a scoreband model
    (``"embedded:default"`` or a folder written by ``scoreband train``, with its
    calibrator), accumulated over ``update`` calls.

    ``compute()`` returns a dict of tensors: ``score`` (the median per item), ``band_lo``,
    ``band_hi`` (the calibrated band, ``1 - alpha`` of the calibrator), all on the
    calibrator's scale (1-5 for the bundled model) as in ``score``'s columns, ``out_of_domain``
    (what ``score`` flags in ``band_ood``: an image or words unlike the model's world),
    ``mean`` (the mean
    score) and ``mean_ci`` (its ``1 - ci_alpha`` normal interval over the items: an
    interval for the *metric's* mean; the mean human score needs a few labels -
    ``scoreband systems``).
    """

    higher_is_better = True
    is_differentiable = False
    full_state_update = False

    def __init__(self, model: str = "embedded:default", *, ci_alpha: float = 0.05,
                 device: str = "cpu", **kwargs):
        super().__init__(**kwargs)
        from scoreband.scorers.stages import (
            score_stage,  # lazy: loads pandas, pyarrow, pydantic, safetensors
        )

        self._stage = score_stage(model=None if model == "embedded:default" else model,
                                  device=device)
        self.ci_alpha = float(ci_alpha)
        for name in ("median", "lo", "hi", "ood"):
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def update(self, images, captions) -> None:
        """Score a batch: ``images`` a tensor (N, 3, H, W) / (N, H, W, 3), or a sequence of
        images (see :func:`scoreband.images.image_input`); ``captions`` N strings."""
        from scoreband.images import image_input  # lazy: loads pandas, pyarrow

        captions = [captions] if isinstance(captions, str) else list(captions)
        images = list(images) if not (hasattr(images, "ndim") and images.ndim == 3) \
            else [images]
        if len(images) != len(captions):
            raise ValueError(f"{len(images)} images for {len(captions)} captions")
        size = getattr(self._stage, "image_size", None)
        arrays = [image_input(im, size) for im in images]
        recs = self._stage.predict(list(range(len(arrays))), arrays, captions)
        for name, key in (("median", "band_median"), ("lo", "band_lo"), ("hi", "band_hi")):
            getattr(self, name).append(torch.tensor([float(r[key]) for r in recs],
                                                    dtype=torch.float64))
        self.ood.append(torch.tensor([bool(r.get("band_ood")) for r in recs]))

    def compute(self) -> dict:
        from scipy import stats
        from torchmetrics.utilities import dim_zero_cat

        med = dim_zero_cat(self.median)
        n = int(med.numel())
        mean = med.mean()
        se = med.std(unbiased=True) / math.sqrt(n) if n > 1 else torch.tensor(float("nan"))
        z = float(stats.norm.ppf(1 - self.ci_alpha / 2))
        return {"score": med, "band_lo": dim_zero_cat(self.lo),
                "band_hi": dim_zero_cat(self.hi), "out_of_domain": dim_zero_cat(self.ood),
                "mean": mean,
                "mean_ci": torch.stack([mean - z * se, mean + z * se])}
