"""Conformity scores: what a split method ranks, and how its threshold becomes a band.

Separated from the methods as MAPIE separates them (``mapie/conformity_scores/``): a score
says how badly a prediction fits a target (:meth:`ConformityScore.score`, larger = worse) and
turns a threshold ``q`` back into each item's band (:meth:`ConformityScore.interval`), so
that ``{y : score(pred, y) <= q} = [lo, hi]``. A method then only chooses ``q`` (the
conformal quantile, a weighted one, one per Mondrian group, with randomised tie-breaking or
without) and never knows which score it ranks: :class:`~scoreband.conformal.split.SplitConformal`,
:class:`~scoreband.conformal.weighted.WeightedSplit` (and so Mondrian groups of either) take
any score by name.

The scores here:

* :class:`AbsoluteResidual` (``"absolute-residual"``): ``|y - m|`` around the point
  prediction; band ``[m - q, m + q]`` (split conformal, ``fitted``);
* :class:`QuantileResidual` (``"quantile-residual"``): ``max(lo - y, y - hi)`` around an
  interval; band ``[lo - q, hi + q]`` (CQR's score, the no-model ``marginal`` band's);
* :class:`CRCResidual` (``"crc-residual"``): ``max(m + w (lo - m) - y, y - m - w (hi - m))``
  for a fixed ``omega`` = w; band ``[m + w (lo - m) - q, m + w (hi - m) + q]`` kept around
  ``m`` (CRC's residual at its chosen omega, :func:`crc_residuals`, which
  :mod:`scoreband.conformal.crc` uses).

Classification scores (prediction sets over a few labels, :data:`SET_SCORES`) take a
``(n, k)`` matrix of label probabilities instead of bands: :class:`LAC` (``1 - p(y)``,
the smallest sets) and :class:`APS` (the mass of the labels at least as likely as ``y``);
the set is ``{y : score(P, y) <= q}`` (:meth:`SetScore.sets`), ``q`` the conformal
quantile of :func:`scoreband.conformal.core.conformal_quantile`.

A score reads the fields it names in ``needs`` (:data:`~scoreband.conformal.base.INPUTS`)
from a :class:`~scoreband.datatypes.Predictions`, or from a :class:`ModelOutput` a learned
method fills with its model's outputs (CQR's two quantile regressions).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from scoreband.errors import InputError

__all__ = ["ConformityScore", "AbsoluteResidual", "QuantileResidual", "CRCResidual",
           "ModelOutput", "SCORES", "score_from_config", "ABSOLUTE_RESIDUAL",
           "QUANTILE_RESIDUAL", "crc_residuals", "crc_interval", "SetScore", "LAC", "APS",
           "SET_SCORES", "set_score"]


def crc_residuals(median, lo, hi, y, omega: float) -> np.ndarray:
    """``r_i(omega)``: the smallest beta that covers item i at this omega."""
    m = np.asarray(median, dtype=float)
    return np.maximum(m + omega * (np.asarray(lo) - m) - y, y - m - omega * (np.asarray(hi) - m))


def crc_interval(median, lo, hi, omega: float, beta: float, clip: bool = True):
    """The calibrated interval ``(l_hat, u_hat)``, with ``l_hat <= m <= u_hat`` kept."""
    m = np.asarray(median, dtype=float)
    lo_hat = m + omega * (np.asarray(lo) - m) - beta
    hi_hat = m + omega * (np.asarray(hi) - m) + beta
    # beta can be negative when omega over-widens; never let the band leave the median.
    lo_hat, hi_hat = np.minimum(lo_hat, m), np.maximum(hi_hat, m)
    if clip:
        lo_hat, hi_hat = np.clip(lo_hat, 0.0, 1.0), np.clip(hi_hat, 0.0, 1.0)
    return lo_hat, hi_hat


@dataclass
class ModelOutput:
    """A method's model outputs in the fields a score reads (no checks, no copies)."""

    median: np.ndarray | None = None
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None


class ConformityScore(ABC):
    """A conformity score: ``score(pred, y) -> (n,) array`` and
    ``interval(pred, q) -> (lo, hi)``, with ``q`` one threshold or one per item."""

    #: the name a calibrator's saved config gives it
    name: ClassVar[str] = "base"
    #: the inputs (:data:`~scoreband.conformal.base.INPUTS`) the predictions must hold
    needs: ClassVar[tuple[str, ...]] = ()
    #: whether every score is >= 0 (a saved threshold below 0 is then an edit)
    nonnegative: ClassVar[bool] = False
    #: a threshold at or above this makes every item's band the whole of [0, 1]
    full_at: ClassVar[float] = math.inf

    @abstractmethod
    def score(self, pred, y) -> np.ndarray:
        """How badly each prediction fits its target (larger = worse)."""

    @abstractmethod
    def interval(self, pred, q) -> tuple[np.ndarray, np.ndarray]:
        """The band ``{y : score(pred, y) <= q}`` per item, unclipped."""

    def to_config(self) -> str | dict:
        """What a saved calibrator stores to rebuild it (:func:`score_from_config`)."""
        return self.name

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.to_config() == self.to_config()

    def __hash__(self) -> int:
        return hash(repr(self.to_config()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class AbsoluteResidual(ConformityScore):
    """``|y - m|``; band ``[m - q, m + q]``.

    >>> s = AbsoluteResidual()
    >>> s.score(ModelOutput(median=np.array([0.5, 0.2])), np.array([0.6, 0.2])).round(6).tolist()
    [0.1, 0.0]
    >>> [a.tolist() for a in s.interval(ModelOutput(median=np.array([0.5])), 0.25)]
    [[0.25], [0.75]]
    """

    name = "absolute-residual"
    needs = ("median",)
    nonnegative = True
    full_at = 1.0  # on [0, 1], a residual of 1 already spans the scale

    def score(self, pred, y) -> np.ndarray:
        r = np.subtract(y, pred.median)
        np.abs(r, out=r)  # in place: this runs on 10^6 items in the benchmarks
        return r

    def interval(self, pred, q):
        m = pred.median
        return m - q, m + q


class QuantileResidual(ConformityScore):
    """``max(lo - y, y - hi)`` (conformalized quantile regression's score); band
    ``[lo - q, hi + q]``, kept ordered (crossed quantiles with a negative q could invert it).

    >>> s = QuantileResidual()
    >>> p = ModelOutput(lo=np.array([0.2, 0.2]), hi=np.array([0.4, 0.4]))
    >>> s.score(p, np.array([0.3, 0.5])).round(6).tolist()
    [-0.1, 0.1]
    >>> [a.round(6).tolist() for a in s.interval(p, 0.1)]
    [[0.1, 0.1], [0.5, 0.5]]
    """

    name = "quantile-residual"
    needs = ("interval",)

    def score(self, pred, y) -> np.ndarray:
        return np.maximum(pred.lo - y, y - pred.hi)

    def interval(self, pred, q):
        lo, hi = pred.lo - q, pred.hi + q
        return np.minimum(lo, hi), np.maximum(lo, hi)


class CRCResidual(ConformityScore):
    """CRC's residual at a fixed ``omega``: ``max(m + omega (lo - m) - y,
    y - m - omega (hi - m))``; band ``[m + omega (lo - m) - q, m + omega (hi - m) + q]``,
    never leaving the median (:func:`crc_interval`).

    >>> s = CRCResidual(omega=2.0)
    >>> p = ModelOutput(median=np.array([0.5]), lo=np.array([0.45]), hi=np.array([0.55]))
    >>> float(s.score(p, np.array([0.65]))[0].round(6))
    0.05
    """

    name = "crc-residual"
    needs = ("median", "interval")

    def __init__(self, omega: float = 1.0):
        omega = float(omega)
        if not (math.isfinite(omega) and omega >= 0):
            raise InputError(f"the CRC residual's omega must be a finite number >= 0, "
                             f"got {omega!r}")
        self.omega = omega

    def score(self, pred, y) -> np.ndarray:
        return crc_residuals(pred.median, pred.lo, pred.hi, y, self.omega)

    def interval(self, pred, q):
        return crc_interval(pred.median, pred.lo, pred.hi, self.omega, q, clip=False)

    def to_config(self) -> dict:
        return {"name": self.name, "omega": self.omega}

    def __repr__(self) -> str:
        return f"CRCResidual(omega={self.omega:g})"


#: the scores by name
SCORES: dict[str, type[ConformityScore]] = {
    c.name: c for c in (AbsoluteResidual, QuantileResidual, CRCResidual)}
#: the shared instances of the scores without parameters
ABSOLUTE_RESIDUAL = AbsoluteResidual()
QUANTILE_RESIDUAL = QuantileResidual()


def score_from_config(value) -> ConformityScore:
    """A score from a :class:`ConformityScore`, its name, or a saved config (a name, or a
    dict with ``name`` and the score's parameters).

    >>> score_from_config("quantile-residual"), score_from_config({"name": "crc-residual", "omega": 1.5})
    (QuantileResidual(), CRCResidual(omega=1.5))
    """
    if isinstance(value, ConformityScore):
        return value
    if isinstance(value, dict):
        kw = dict(value)
        name = kw.pop("name", None)
    else:
        name, kw = value, {}
    if name not in SCORES:
        raise InputError(f"unknown conformity score {name!r}; choose one of "
                         f"{', '.join(SCORES)}")
    try:
        return SCORES[name](**kw)
    except TypeError as e:
        raise InputError(f"conformity score {name!r}: {e}") from None


# ------------------------------------------------------------------ prediction sets
class SetScore(ABC):
    """A conformity score of a label under a matrix of label probabilities ``P`` (n, k):
    ``score(P, y_idx) -> (n,)`` (larger = worse), and the sets a threshold admits."""

    #: the name a rule file and ``--set-method`` give it
    name: ClassVar[str] = "base"

    @abstractmethod
    def score(self, P, y_idx) -> np.ndarray:
        """The score of label index ``y_idx[i]`` under row ``P[i]``."""

    def sets(self, P, q) -> np.ndarray:
        """(n, k) booleans: label j admitted for row i (``score <= q``, ``q`` one threshold
        or one per row; 1e-12 of float slack); a row with a NaN probability admits none."""
        P = np.asarray(P, float)
        q = np.broadcast_to(np.asarray(q, float), (len(P),))
        S = np.column_stack([self.score(P, np.full(len(P), j)) for j in range(P.shape[1])])
        return (S <= q[:, None] + 1e-12) & np.isfinite(P).all(axis=1)[:, None]

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class LAC(SetScore):
    """Least ambiguous set-valued classifier: ``1 - p(y)`` (the smallest sets).

    >>> LAC().score(np.array([[0.7, 0.2, 0.1], [0.4, 0.35, 0.25]]), [0, 1]).round(2).tolist()
    [0.3, 0.65]
    """

    name = "lac"

    def score(self, P, y_idx) -> np.ndarray:
        P = np.asarray(P, float)
        return 1.0 - P[np.arange(len(P)), np.asarray(y_idx, int)]


class APS(SetScore):
    """Adaptive prediction sets (non-randomised): the mass of the labels with
    ``p >= p(y)``.

    >>> APS().score(np.array([[0.7, 0.2, 0.1], [0.4, 0.35, 0.25]]), [0, 1]).round(2).tolist()
    [0.7, 0.75]
    """

    name = "aps"

    def score(self, P, y_idx) -> np.ndarray:
        P = np.asarray(P, float)
        py = P[np.arange(len(P)), np.asarray(y_idx, int)]
        return np.sum(np.where(P >= py[:, None], P, 0.0), axis=1)


#: the prediction-set scores by name
SET_SCORES: dict[str, SetScore] = {c.name: c() for c in (LAC, APS)}


def set_score(name: str) -> SetScore:
    """The prediction-set score called ``name`` (``"lac"`` or ``"aps"``)."""
    if name not in SET_SCORES:
        raise InputError(f"set method {name!r}: choose {' or '.join(SET_SCORES)}")
    return SET_SCORES[name]
