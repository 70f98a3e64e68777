"""Pure conformal arithmetic: the order statistic every split method shares."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from scoreband.errors import InputError

__all__ = [
    "check_alpha",
    "conformal_rank",
    "min_calibration_size",
    "conformal_quantile",
    "coverage_bounds",
    "expected_coverage",
]


def check_alpha(alpha: float) -> float:
    """Validate a miscoverage level: a number strictly between 0 and 1."""
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise InputError(f"alpha must be a number in (0, 1), got {alpha!r}") from None
    if not (0.0 < a < 1.0) or math.isnan(a):
        raise InputError(f"alpha must lie strictly between 0 and 1 (e.g. 0.1), got {alpha!r}")
    return a


def _exact(alpha: float) -> Fraction:
    # The decimal the user typed (0.7 is 7/10, not 0.6999999999999999556...): float
    # arithmetic turns (19 + 1) * (1 - 0.7) into 6.000000000000001, whose ceiling is off by one.
    return Fraction(repr(float(alpha)))


def conformal_rank(n: int, alpha: float) -> int:
    """The rank ``k = ceil((n + 1)(1 - alpha))`` of the conformal quantile, exactly.

    Computed with rational arithmetic on the decimal value of ``alpha``.

    >>> conformal_rank(19, 0.1)
    18
    >>> conformal_rank(9, 0.1)
    9
    >>> conformal_rank(8, 0.1)  # exceeds n: the band must be the whole range
    9
    """
    if n < 0:
        raise InputError(f"n must be >= 0, got {n}")
    x = (n + 1) * (1 - _exact(check_alpha(alpha)))
    return -((-x.numerator) // x.denominator)


def min_calibration_size(alpha: float) -> int:
    """Smallest n with ``conformal_rank(n, alpha) <= n``, i.e. a finite band.

    >>> min_calibration_size(0.1)
    9
    >>> min_calibration_size(0.05)
    19
    """
    a = _exact(check_alpha(alpha))
    # k <= n  <=>  (n + 1)(1 - a) <= n  <=>  n >= (1 - a) / a
    x = (1 - a) / a
    return -((-x.numerator) // x.denominator)


def conformal_quantile(scores, alpha: float, overwrite: bool = False) -> float:
    """The ``conformal_rank(n, alpha)``-th smallest score, or ``+inf`` when that rank exceeds n.

    Parameters
    ----------
    scores : (n,) array of conformity scores (larger = worse fit)
    alpha : miscoverage level in (0, 1)
    overwrite : allow reordering ``scores`` in place (saves a copy of n floats)

    >>> conformal_quantile([0.3, 0.1, 0.2, 0.5, 0.4, 0.6, 0.9, 0.8, 0.7, 1.0], 0.2)
    0.9
    >>> conformal_quantile([0.1, 0.2], 0.1)
    inf
    """
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1:
        raise InputError(f"scores must be one-dimensional, got shape {s.shape}")
    n = len(s)
    k = conformal_rank(n, alpha)
    if n and np.isnan(s.max()):
        raise InputError("conformity scores contain NaN; remove or fix the bad rows first")
    if k > n:
        return math.inf
    if overwrite and s is scores:
        s.partition(k - 1)
        return float(s[k - 1])
    return float(np.partition(s, k - 1)[k - 1])


def coverage_bounds(n: int, alpha: float) -> tuple[float, float]:
    """Theoretical expected coverage of split conformal with ``n`` calibration items.

    ``[1 - alpha, 1 - alpha + 1 / (n + 1)]`` (the upper bound holds for continuous scores
    without ties); exactly ``k / (n + 1)`` is the lower end for the rank used.

    >>> [round(b, 6) for b in coverage_bounds(19, 0.1)]
    [0.9, 0.95]
    """
    a = check_alpha(alpha)
    return (1 - a, min(1.0, 1 - a + 1 / (n + 1)))


def expected_coverage(n: int, alpha: float) -> float:
    """Exact expected coverage ``k / (n + 1)`` of split conformal with continuous scores.

    ``1.0`` when the rank exceeds ``n`` (the band is the whole range).

    >>> expected_coverage(19, 0.1)
    0.9
    >>> expected_coverage(20, 0.1)
    0.9047619047619048
    """
    k = conformal_rank(n, alpha)
    return 1.0 if k > n else k / (n + 1)
