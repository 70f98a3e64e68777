"""The shared part of the conformal methods with a learned part on features (e.g. judge
score-token log-probs): their base class and the feature helpers. Each method is a module of
its own: :mod:`~scoreband.conformal.fitted`, :mod:`~scoreband.conformal.cqr`,
:mod:`~scoreband.conformal.r2ccp`, :mod:`~scoreband.conformal.chr` and
:mod:`~scoreband.conformal.marginal`.

Each fits its model on a ``train_frac`` share of the calibration items and runs the conformal
step on the rest, so the guarantee holds. Models persist as plain JSON numbers (no pickle).
torch and scikit-learn are imported only when a model is fitted or evaluated, so applying a
split or CRC calibrator never loads them.
"""

from __future__ import annotations

import numpy as np

from scoreband.conformal.base import Calibrator
from scoreband.conformal.core import open_tied_edges, unbounded
from scoreband.conformal.randomness import draw_seed, item_uniforms, keys_of
from scoreband.conformal.scores import ModelOutput
from scoreband.conformal.split import quantile_params
from scoreband.datatypes import Band, Predictions
from scoreband.errors import InputError

__all__ = ["LearnedCalibrator", "features_of", "looks_like_logprobs"]

def features_of(pred: Predictions, method: str) -> np.ndarray:
    """The feature columns of ``pred`` as a float array, refused (InputError naming the fix)
    when absent or not finite."""
    if pred.features is None:
        raise InputError(f"{method} needs feature columns (e.g. judge log-probs): pass "
                         "`features` COL1,COL2,... or a glob such as 'logp_*'")
    X = np.asarray(pred.features, dtype=float)
    if not np.isfinite(X).all():
        raise InputError(f"{method}: features contain NaN/inf; fix or drop those rows")
    return X


class LearnedCalibrator(Calibrator):
    """The shared base of the methods with a learned part (``fitted``, CQR, R2CCP, CHR,
    ``marginal``): the ``train_frac`` share, the ``seed``, the stored model and randomised
    tie-breaking at the band's edges (draws from :mod:`scoreband.conformal.randomness`)."""

    learned = True

    def __init__(self, alpha: float = 0.1, *, train_frac: float = 0.5, seed: int = 0,
                 randomize: bool = False, **kw):
        super().__init__(alpha, **kw)
        if not 0 < train_frac < 1:
            raise InputError(f"train_frac must be in (0, 1), got {train_frac}")
        self.train_frac = train_frac
        self.seed = seed
        self.randomize = bool(randomize)
        self.model_: dict | None = None

    def get_config(self) -> dict:
        return {**super().get_config(), "train_frac": self.train_frac, "seed": self.seed,
                "randomize": self.randomize}

    def _open_ties(self, lo, hi, params, pred):
        """Randomised tie-breaking at the band's edges (see ``tie_keep_probability``), one
        uniform per item from its identity."""
        if not self.randomize:
            return lo, hi
        return open_tied_edges(lo, hi, params.get("tie_keep", 1.0),
                               item_uniforms(keys_of(pred), params.get("draw_seed", self.seed),
                                             2))

    def _model_state(self):
        return self.model_

    def _load_model_state(self, state):
        self.model_ = state

    # The conformity-score seam (MAPIE's split of score and procedure): a method names its
    # ``score`` (scoreband.conformal.scores) and the model outputs it is computed on; the
    # conformal step, the interval, tie-breaking and the band are the same for every method.
    def outputs(self, pred) -> ModelOutput:  # pragma: no cover - abstract
        """The model's outputs on ``pred`` that the method's ``score`` reads."""
        raise NotImplementedError

    def band_median(self, pred) -> np.ndarray:
        """The band's centre on [0, 1]: the outputs' median, else the middle of lo and hi."""
        out = self.outputs(pred)
        if out.median is not None:
            return np.asarray(out.median, dtype=float)
        return (np.asarray(out.lo, dtype=float) + np.asarray(out.hi, dtype=float)) / 2

    def conformity(self, pred, y) -> np.ndarray:
        """The method's conformity score per item."""
        return self.score.score(self.outputs(pred), y)

    def apply_params(self, pred, params):
        full, q = unbounded(params["q"], len(pred), at=self.score.full_at)
        lo, hi = self.score.interval(self.outputs(pred), q)
        lo, hi = self._open_ties(lo, hi, params, pred)
        return lo, hi, full

    def predict(self, pred: Predictions, groups=None) -> Band:
        self._require_fitted()
        self.check_pred(pred)
        lo, hi, full = self.apply_params(pred, self.params_)
        return self._band(Predictions(self.band_median(pred)), lo, hi, full)

    def fit_conformal(self, pred, y):
        """The conformal step: quantile of the method's conformity scores (randomised: with
        the seed of this calibration's draws, :func:`~scoreband.conformal.randomness.
        draw_seed`)."""
        return {**quantile_params(self.conformity(pred, y), self.alpha, self.randomize,
                                  delta=self.delta),
                **({"draw_seed": draw_seed(self.seed, pred, y)} if self.randomize else {})}

    def check_pred(self, pred):
        features_of(pred, self.method)
        if self.model_ is not None and pred.features.shape[1] != self.model_["n_features"]:
            raise InputError(f"{self.method} was fitted on {self.model_['n_features']} feature "
                             f"columns, got {pred.features.shape[1]}")


def looks_like_logprobs(X: np.ndarray, scale) -> bool:
    """Whether feature columns are the log-probs of a judge's score tokens: one column per
    integer point of ``scale`` (5 for 1-5), every value <= 0."""
    return (scale is not None and scale.integer and X.ndim == 2
            and X.shape[1] == int(round(scale.hi - scale.lo)) + 1 and X.shape[1] >= 2
            and bool((X <= 1e-9).all()))


#: the former private names of the shared base and helper
_Learned = LearnedCalibrator
_features = features_of
