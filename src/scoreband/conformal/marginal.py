"""``marginal``: the no-model band, the same interval for every item from the targets
alone (the baseline any method should beat; ``auto``'s fallback)."""

from __future__ import annotations

import numpy as np

from scoreband.conformal.base import register
from scoreband.conformal.learned import LearnedCalibrator
from scoreband.conformal.scores import QUANTILE_RESIDUAL, ModelOutput

__all__ = ["Marginal"]


@register
class Marginal(LearnedCalibrator):
    """The no-model band: the same interval for every item, from the targets alone.

    The ``alpha/2`` and ``1 - alpha/2`` quantiles of the training share's targets,
    conformalized on the rest (score ``max(lo - y, y - hi)``). Any method that is wider than
    this has learned nothing useful; :class:`~scoreband.conformal.auto.Auto` falls back to it.
    Needs no prediction columns.
    """

    method = "marginal"
    names = {"marginal": ("one band from the targets alone (a baseline any method should "
                          "beat)", {})}
    auto_rank = 99  # always the last candidate: the no-model band auto falls back to

    def check_pred(self, pred):
        pass

    def fit_model(self, pred, y):
        lo, hi, mid = np.quantile(y, [self.alpha / 2, 1 - self.alpha / 2, 0.5])
        self.model_ = {"lo": float(lo), "hi": float(hi), "median": float(mid)}

    #: its conformity score: ``max(lo - y, y - hi)`` around the training share's quantiles
    score = QUANTILE_RESIDUAL

    def outputs(self, pred) -> ModelOutput:
        n = len(pred)
        return ModelOutput(lo=np.full(n, self.model_["lo"]), hi=np.full(n, self.model_["hi"]))

    def band_median(self, pred) -> np.ndarray:
        return np.full(len(pred), self.model_["median"])

    def difficulty(self, pred):
        return np.zeros(len(pred))
