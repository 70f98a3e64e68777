"""Split conformal prediction: the conformal quantile of a conformity score (by default the
absolute residual around the point prediction; any score of
:mod:`scoreband.conformal.scores`)."""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np

from scoreband.conformal.base import Calibrator, register
from scoreband.conformal.core import (
    conformal_quantile,
    min_calibration_size,
    open_tied_edges,
    tie_keep_probability,
    unbounded,
)
from scoreband.conformal.randomness import draw_seed, item_uniforms, keys_of
from scoreband.conformal.scores import (
    ABSOLUTE_RESIDUAL,
    ConformityScore,
    ModelOutput,
    score_from_config,
)
from scoreband.datatypes import Predictions
from scoreband.errors import CalibratorMismatch, InputError

__all__ = ["SplitConformal", "absolute_residual_interval", "TooFewCalibrationItems"]


class TooFewCalibrationItems(UserWarning):
    """The calibration set is too small for alpha: the band is the whole range."""


def warn_too_small(n: int, alpha: float, where: str = "calibration set",
                   delta: float | None = None) -> None:
    at = f"alpha={alpha}" + ("" if delta is None else f", delta={delta}")
    warnings.warn(
        f"{where} has {n} items, too few for {at}: the conformal rank exceeds n, so "
        f"the band is the whole scale. At least {min_calibration_size(alpha, delta)} items "
        f"are needed for {at}.",
        TooFewCalibrationItems,
        stacklevel=3,
    )


def absolute_residual_interval(median_cal, y_cal, median_test, alpha: float):
    """Split CP: ``[m - q, m + q]`` with q the conformal quantile of ``|y - m|``: the
    absolute-residual score (:data:`~scoreband.conformal.scores.ABSOLUTE_RESIDUAL`, the one
    :class:`SplitConformal` ranks by default) and its quantile, in one call.

    Returns ``(lo, hi, q)``; unclipped (q may be ``inf``).

    >>> lo, hi, q = absolute_residual_interval([0.1, 0.5, 0.9], [0.2, 0.5, 0.6], [0.4], 0.5)
    >>> round(q, 6), round(float(lo[0]), 6), round(float(hi[0]), 6)
    (0.1, 0.3, 0.5)
    """
    cal = ModelOutput(median=np.asarray(median_cal, dtype=float))
    r = ABSOLUTE_RESIDUAL.score(cal, np.asarray(y_cal, dtype=float))
    q = conformal_quantile(r, alpha, overwrite=True)
    lo, hi = ABSOLUTE_RESIDUAL.interval(ModelOutput(median=np.asarray(median_test, dtype=float)), q)
    return lo, hi, q



def quantile_params(scores: np.ndarray, alpha: float, randomize: bool, *,
                    overwrite: bool = False, delta: float | None = None) -> dict:
    """The conformal step shared by every score-based method: the conformal quantile ``q``
    of the conformity ``scores`` at ``alpha`` (and ``delta``: the training-conditional rank,
    :func:`~scoreband.conformal.core.conditional_rank`; a warning when n is too small),
    ``n``, and with ``randomize`` the probability of keeping an edge tied with ``q``."""
    n = len(scores)
    q = conformal_quantile(scores, alpha, overwrite=overwrite and not randomize, delta=delta)
    if math.isinf(q):
        warn_too_small(n, alpha, delta=delta)
    params = {"q": q, "n": n}
    if randomize:
        params["tie_keep"] = tie_keep_probability(scores, q, alpha, delta=delta)
    return params

@register
class SplitConformal(Calibrator):
    """Split conformal on a conformity score: by default the absolute residual,
    ``[m - q, m + q]`` (clipped to [0, 1] by default).

    Parameters
    ----------
    randomize : randomised tie-breaking at the band's edges (draws from
        :mod:`scoreband.conformal.randomness`), with any score
    score : a :class:`~scoreband.conformal.scores.ConformityScore` or its name
        (``"absolute-residual"``, the default; ``"quantile-residual"`` around the given
        ``lo``/``hi``; ``{"name": "crc-residual", "omega": w}``); wrapped in
        :class:`~scoreband.conformal.mondrian.Mondrian` it is calibrated per group
    scale : the target's native scale (:class:`~scoreband.datatypes.Scale`); bands are
        returned on it (``band.lo``, ``band.hi``) and on [0, 1] (``band.lo01`` ...)
    native : whether :meth:`fit` and :meth:`predict` take targets and predictions on
        ``scale`` (True) or on [0, 1] (False). None (default): decided at fit - on the
        native scale when ``scale`` is not [0, 1] and a target or a point prediction lies
        outside [0, 1] (both are then read on that scale, as scikit-learn / MAPIE read
        them); give it where the data cannot tell (every value within [0, 1] on a scale
        such as 0-10). On [0, 1], a prediction outside it is refused, never read as a
        band. Saved with the calibrator.

    ``fit`` and ``predict`` take a :class:`~scoreband.datatypes.Predictions` or an array
    of point predictions.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> m = rng.uniform(size=200); y = np.clip(m + rng.normal(0, 0.05, 200), 0, 1)
    >>> cal = SplitConformal(alpha=0.1).fit(Predictions(m), y)
    >>> band = cal.predict(Predictions([0.5]))
    >>> bool(band.lo01[0] < 0.5 < band.hi01[0])
    True

    On a native scale (1 to 4), predictions and targets as they are:

    >>> from scoreband.datatypes import Scale
    >>> cal = SplitConformal(scale=Scale(1, 4)).fit(1 + 3 * m, 1 + 3 * y)
    >>> band = cal.predict([2.5])
    >>> bool(band.lo[0] < 2.5 < band.hi[0]), cal.native_
    (True, True)
    """

    method = "split"
    names = {"split": ("absolute residual around the point prediction", {})}
    needs = (("median",),)
    auto_rank = 0
    param_ranges = {"q": (0.0, False)}

    @classmethod
    def check_params(cls, params: dict, where: str, number) -> None:
        if "q" not in params:
            raise CalibratorMismatch(f"{where} has no 'q'")
        try:  # saved beside q when it is not the default (absolute residual)
            score = score_from_config(params.get("score", ABSOLUTE_RESIDUAL))
        except InputError as e:
            raise CalibratorMismatch(f"{where}.score: {e}; recalibrate") from None
        number(params["q"], f"{where}.q", lo=0.0 if score.nonnegative else None, inf_ok=True)
        q = float(params["q"])
        if math.isfinite(q) and q > score.full_at:
            # residuals live on [0, 1]: a finite q above 1 is an edit; a band too wide for
            # alpha is stored as inf and flagged full_range
            raise CalibratorMismatch(f"{where}.q = {q:g} is above {score.full_at:g} (residuals "
                                     "are on [0, 1]; a full-range band is stored as inf); "
                                     "recalibrate")

    def __init__(self, alpha: float = 0.1, *, randomize: bool = False, seed: int = 0,
                 score: ConformityScore | str | dict = ABSOLUTE_RESIDUAL,
                 native: bool | None = None, **kw):
        super().__init__(alpha, **kw)
        self.randomize, self.seed = bool(randomize), seed
        self.score = score_from_config(score)
        self.native = native
        self.native_ = bool(native)

    # --- targets and predictions on the native scale ----------------------------------
    def _reads_native(self, y, pred) -> bool:
        """Whether ``fit``'s targets and predictions are on ``scale`` (see the class's
        ``native``): a target or a point prediction outside [0, 1] says so."""
        if self.native is not None:
            return bool(self.native)
        sc = self.scale
        if (sc.lo, sc.hi) == (0.0, 1.0):
            return False
        parts = [np.asarray(y, dtype=float).ravel()]
        if isinstance(pred, Predictions):
            parts += [np.asarray(a, dtype=float).ravel() for a in (pred.median, pred.lo, pred.hi)
                      if a is not None]
        else:
            parts.append(np.asarray(pred, dtype=float).ravel())
        v = np.concatenate(parts)
        v = v[np.isfinite(v)]
        return bool(len(v)) and bool(((v < 0) | (v > 1)).any())

    def _to01(self, pred) -> Predictions:
        """``pred`` (Predictions or an array of point predictions) on [0, 1]."""
        if not isinstance(pred, Predictions):
            pred = Predictions(np.asarray(pred, dtype=float))
        if not self.native_:
            return pred
        sc = self.scale
        return replace(pred, median=sc.to01(pred.median),
                       lo=None if pred.lo is None else sc.to01(pred.lo),
                       hi=None if pred.hi is None else sc.to01(pred.hi))

    def fit(self, pred, y01, groups=None) -> SplitConformal:
        """Fit on calibration predictions and targets: on [0, 1], or on ``scale`` (see
        ``native``). Returns self."""
        self.native_ = self._reads_native(y01, pred)
        if self.native_:
            y = np.asarray(y01, dtype=float)
            sc = self.scale
            outside = np.flatnonzero(~((y >= sc.lo) & (y <= sc.hi)))
            if len(outside):
                i = int(outside[0])
                raise InputError(f"target {i} is {y[i]:g}, outside the scale {sc.lo:g}-"
                                 f"{sc.hi:g} ({len(outside)} such); give targets on the "
                                 "scale, or on [0, 1] with native=False")
            y01 = sc.to01(y)
        return super().fit(self._to01(pred), y01, groups)

    def predict(self, pred, groups=None):
        """Calibrated bands for ``pred``, read on the scale ``fit`` read (``native_``)."""
        return super().predict(self._to01(pred), groups)

    def _custom_score(self) -> dict:
        """``{"score": config}`` when the score is not the default, else ``{}`` (the saved
        files of the default stay as they were)."""
        return {} if self.score == ABSOLUTE_RESIDUAL else {"score": self.score.to_config()}

    def get_config(self) -> dict:
        # native only when fitted on it: the saved files of the [0, 1] path stay as they were
        return {**super().get_config(), "randomize": self.randomize, "seed": self.seed,
                **self._custom_score(), **({"native": True} if self.native_ else {})}

    def check_pred(self, pred: Predictions) -> None:
        if "interval" in self.score.needs and pred.lo is None:
            raise InputError(f"split conformal on the {self.score.name} score needs the "
                             "uncalibrated interval of each item: pass `lo` and `hi` columns")

    def fit_conformal(self, pred: Predictions, y01: np.ndarray) -> dict:
        r = self.score.score(pred, y01)
        return {**quantile_params(r, self.alpha, self.randomize, overwrite=not self.randomize,
                                  delta=self.delta),
                **({"draw_seed": draw_seed(self.seed, pred, y01)} if self.randomize else {}),
                **self._custom_score()}

    def apply_params(self, pred: Predictions, params: dict):
        # q >= 1 on [0, 1] is the whole scale for every item (absolute residual): flagged
        # like an infinite q
        full, q = unbounded(params["q"], len(pred), at=self.score.full_at)
        lo, hi = self.score.interval(pred, q)
        if self.randomize:
            lo, hi = open_tied_edges(lo, hi, params.get("tie_keep", 1.0), item_uniforms(
                keys_of(pred), params.get("draw_seed", self.seed), 2))
        return lo, hi, full

    def difficulty(self, pred: Predictions) -> np.ndarray:
        if pred.features is not None:
            # Judge features: the spread of the score distribution is the natural difficulty.
            from scoreband.logprobs import distribution_std_from_logprobs  # lazy: loads scipy

            return distribution_std_from_logprobs(pred.features)
        return super().difficulty(pred)
