"""``fitted``: split conformal (absolute residual) around a point score fitted to the
targets from the given columns (ridge, then an isotonic map)."""

from __future__ import annotations

import numpy as np

from scoreband.conformal.base import register
from scoreband.conformal.learned import LearnedCalibrator, features_of, looks_like_logprobs
from scoreband.conformal.pointfit import fit_point_model, predict_point_model
from scoreband.conformal.scores import ABSOLUTE_RESIDUAL, ModelOutput
from scoreband.datatypes import Predictions
from scoreband.errors import InputError

__all__ = ["Fitted"]


@register
class Fitted(LearnedCalibrator):
    """Split conformal around a point score fitted to the targets from the given columns.

    What a careful user would try before anything fancier: ridge regression (regularisation
    chosen by leave-one-out, scikit-learn's ``RidgeCV``) on the standardised columns - the
    point prediction when there is one, the features, and, when the features are a judge's
    score-token log-probs (:func:`looks_like_logprobs`), their expected score - then an
    isotonic map of its output onto [0, 1] (a judge's expected score is often on the wrong
    part of the scale: 4.6 where the experts say 3). Both are fitted on the ``train_frac``
    share; the residual ``|y - fit|`` is conformalized on the rest, as split conformal.

    >>> rng = np.random.default_rng(0)
    >>> y = rng.uniform(size=600)
    >>> X = np.c_[3 * y ** 2 + rng.normal(0, 0.05, 600), rng.normal(size=600)]
    >>> cal = Fitted(0.1).fit(Predictions(np.full(600, np.nan), features=X), y)
    >>> band = cal.predict(Predictions(np.full(2, np.nan), features=[[0.75, 0.0], [3.0, 0.0]]))
    >>> (band.hi01 - band.lo01 < 0.2).all(), band.median01.round(1).tolist()
    (np.True_, [0.5, 1.0])
    """

    method = "fitted"
    names = {"fitted": ("absolute residual around a point score fitted to the targets (ridge "
                        "on the median and `features`, then an isotonic map)", {})}
    needs = (("median",), ("features",))
    auto_rank = 1

    def _columns(self, pred: Predictions, fitting: bool) -> np.ndarray:
        cols = []
        med = pred.median
        has_median = bool(len(med)) and bool(np.isfinite(med).all())
        if fitting:
            logp = pred.features is not None and looks_like_logprobs(
                np.asarray(pred.features, dtype=float), self.scale)
            self.model_ = {"median": has_median, "features": pred.features is not None,
                           "logprobs": logp}
        m = self.model_
        if m["median"]:
            if not has_median:
                raise InputError("fitted was fitted with a point prediction (median); these "
                                 "predictions have none")
            cols.append(np.asarray(med, dtype=float)[:, None])
        if m["features"]:
            X = features_of(pred, self.method)
            cols.append(X)
            if m["logprobs"]:
                from scoreband.logprobs import expected_score  # lazy: loads scipy

                cols.append(expected_score(X)[:, None])
        if not cols:
            raise InputError("fitted needs a point prediction (median) or feature columns")
        return np.hstack(cols)

    def fit_model(self, pred, y):
        X = self._columns(pred, fitting=True)
        self.model_.update(fit_point_model(X, y))

    def point(self, pred: Predictions) -> np.ndarray:
        """The fitted point score on [0, 1]."""
        return predict_point_model(self.model_, self._columns(pred, fitting=False))

    def check_pred(self, pred):
        if self.model_ is None:
            if pred.features is None and not (len(pred) and np.isfinite(pred.median).all()):
                raise InputError("fitted needs a point prediction (median) or feature columns")
            return
        if self.model_["features"]:
            features_of(pred, self.method)
            want = self.model_["n_columns"] - self.model_["median"] - self.model_["logprobs"]
            if pred.features.shape[1] != want:
                raise InputError(f"fitted was fitted on {want} feature columns, got "
                                 f"{pred.features.shape[1]}")

    #: its conformity score: the absolute residual around the fitted point score
    score = ABSOLUTE_RESIDUAL

    def outputs(self, pred) -> ModelOutput:
        return ModelOutput(median=self.point(pred))

    def difficulty(self, pred):
        """The spread of the judge's score distribution (log-prob features), else the base
        interval's width."""
        if self.model_ is not None and self.model_["logprobs"]:
            from scoreband.logprobs import distribution_std_from_logprobs  # lazy: loads scipy

            return distribution_std_from_logprobs(pred.features)
        return super().difficulty(pred)
