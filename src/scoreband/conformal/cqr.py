"""``cqr``: conformalized quantile regression (linear quantile regressors on the
features)."""

from __future__ import annotations

import numpy as np

from scoreband.conformal.base import register
from scoreband.conformal.core import row_matmul
from scoreband.conformal.learned import LearnedCalibrator, features_of
from scoreband.conformal.pointfit import fit_standardiser, standardise
from scoreband.conformal.scores import QUANTILE_RESIDUAL, ModelOutput
from scoreband.errors import InputError

__all__ = ["CQR"]


@register
class CQR(LearnedCalibrator):
    """Conformalized quantile regression: linear quantile regressors for alpha/2 and
    1 - alpha/2 on the features (scikit-learn), conformity ``max(q_lo - y, y - q_hi)``.

    Linear models keep the calibrator a small JSON file; on a handful of log-prob features
    they are what the LLM-as-a-judge uncertainty study uses.
    """

    method = "cqr"
    names = {"cqr": ("conformalized linear quantile regression on `features`", {})}
    needs = (("features",),)
    auto_rank = 3

    def fit_model(self, pred, y):
        X = features_of(pred, self.method)
        from sklearn.linear_model import QuantileRegressor

        st = fit_standardiser(X)
        Z = standardise(X, st)
        coefs = {}
        for name, q in (("lo", self.alpha / 2), ("hi", 1 - self.alpha / 2), ("mid", 0.5)):
            r = QuantileRegressor(quantile=q, alpha=0.0, solver="highs").fit(Z, y)
            if r.coef_ is None or not np.isfinite(r.coef_).all():
                raise InputError(f"cqr: the {q:g}-quantile regression did not converge on "
                                 "these features; try `method` r2ccp or split")
            coefs[name] = {"coef": r.coef_.tolist(), "intercept": float(r.intercept_)}
        self.model_ = {"n_features": X.shape[1], **st, **coefs}

    def _q(self, pred, name):
        c = self.model_[name]
        Z = standardise(features_of(pred, self.method), self.model_)
        return row_matmul(Z, np.asarray(c["coef"])) + c["intercept"]

    #: its conformity score: ``max(q_lo - y, y - q_hi)`` around the two regressions
    score = QUANTILE_RESIDUAL

    def outputs(self, pred) -> ModelOutput:
        return ModelOutput(lo=self._q(pred, "lo"), hi=self._q(pred, "hi"))

    def band_median(self, pred) -> np.ndarray:
        """The median regression, clipped to [0, 1]."""
        return np.clip(self._q(pred, "mid"), 0, 1)

    def difficulty(self, pred):
        return self._q(pred, "hi") - self._q(pred, "lo")
