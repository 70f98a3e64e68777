"""Pure conformal arithmetic: the order statistic every split method shares, randomised
tie-breaking at a threshold, and the small array helpers the methods build on. Public: other
packages of scoreband (metrics, the evaluation protocol, inference) import from here."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from scoreband.errors import InputError

__all__ = [
    "split_at",
    "unbounded",
    "whole_scale",
    "check_alpha",
    "check_delta",
    "conformal_rank",
    "conditional_rank",
    "first_passing",
    "min_calibration_size",
    "conformal_quantile",
    "coverage_bounds",
    "expected_coverage",
    "tie_keep_probability",
    "open_tied_edges",
    "OPEN_EDGE",
    "row_matmul",
]

#: How far an edge is moved inward to leave it out (far below any rating step, above the
#: 1e-9 tolerance of coverage and boundary snapping).
OPEN_EDGE = 1e-7


def check_alpha(alpha: float) -> float:
    """Validate a miscoverage level: a number strictly between 0 and 1."""
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise InputError(f"alpha must be a number in (0, 1), got {alpha!r}") from None
    if not (0.0 < a < 1.0) or math.isnan(a):
        raise InputError(f"alpha must lie strictly between 0 and 1 (e.g. 0.1), got {alpha!r}")
    return a


def check_delta(delta: float | None) -> float | None:
    """Validate the ``delta`` of a training-conditional guarantee: None (the marginal
    guarantee) or a number strictly between 0 and 1."""
    if delta is None:
        return None
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise InputError(f"delta must be a number in (0, 1), got {delta!r}") from None
    if not (0.0 < d < 1.0) or math.isnan(d):
        raise InputError(f"delta must lie strictly between 0 and 1 (e.g. 0.1: the guarantee "
                         f"holds with probability 0.9 over the calibration draw), got {delta!r}")
    return d


def _exact(alpha: float) -> Fraction:
    # The decimal the user typed (0.7 is 7/10, not 0.6999999999999999556...): float
    # arithmetic turns (19 + 1) * (1 - 0.7) into 6.000000000000001, whose ceiling is off by one.
    return Fraction(repr(float(alpha)))


def conformal_rank(n: int, alpha: float, delta: float | None = None) -> int:
    """The rank ``k = ceil((n + 1)(1 - alpha))`` of the conformal quantile, exactly; with
    ``delta``, the training-conditional rank (:func:`conditional_rank`). The one rank every
    method's conformal step takes.

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
    if delta is not None:
        return conditional_rank(n, alpha, delta)
    x = (n + 1) * (1 - _exact(check_alpha(alpha)))
    return -((-x.numerator) // x.denominator)


def conditional_rank(n: int, alpha: float, delta: float) -> int:
    """The smallest rank ``k`` at which the ``k``-th smallest of ``n`` calibration scores
    covers at least ``1 - alpha`` of new rows with probability at least ``1 - delta`` over
    the calibration draw (training-conditional, "PAC" conformal: Vovk 2012; Bates et al.
    2021). Given the calibration set, split-conformal coverage with continuous scores is
    ``Beta(k, n + 1 - k)`` distributed, so ``k`` is the smallest with
    ``BetaCDF(1 - alpha; k, n + 1 - k) = P(Binomial(n, 1 - alpha) >= k) <= delta``; never
    below the marginal rank (so the band keeps the marginal guarantee too, at any delta).
    ``n + 1`` when no rank up to ``n`` reaches it: the band is then the whole scale.

    >>> conditional_rank(100, 0.1, 0.1), conformal_rank(100, 0.1)
    (95, 91)
    >>> conditional_rank(500, 0.1, 0.1)
    460
    >>> conditional_rank(21, 0.1, 0.1), conditional_rank(22, 0.1, 0.1)  # 0.9^22 <= 0.1
    (22, 22)
    >>> conditional_rank(100, 0.1, 0.9)  # never below the marginal rank
    91
    """
    d = check_delta(delta)
    if d is None:
        raise InputError("conditional_rank needs a delta in (0, 1)")
    k0 = conformal_rank(n, alpha)
    if k0 > n:
        return k0
    from scipy.special import betainc  # lazy: only a delta needs scipy

    p = 1 - check_alpha(alpha)

    def ok(k: int) -> bool:  # P(coverage < 1 - alpha) = I_{1-alpha}(k, n + 1 - k) <= delta
        return k > n or float(betainc(k, n + 1 - k, p)) <= d

    return first_passing(ok, k0, n + 1)  # ok(n + 1) holds; the tail falls as k rises


def first_passing(ok, lo: int, hi: int) -> int:
    """The smallest integer ``k`` in ``[lo, hi]`` with ``ok(k)``, for a predicate that is
    false and then true from some point on, taken to hold at ``hi``: bisection, about
    ``log2(hi - lo)`` calls. The one integer search of :func:`conditional_rank` and of the
    label plans (:func:`scoreband.system_level.ppi.labels_for_width`).

    >>> first_passing(lambda k: k * k >= 50, 1, 100)
    8
    >>> first_passing(lambda k: True, 3, 10), first_passing(lambda k: k > 99, 0, 10)
    (3, 10)
    """
    if ok(lo):
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def min_calibration_size(alpha: float, delta: float | None = None) -> int:
    """Smallest n with ``conformal_rank(n, alpha, delta) <= n``, i.e. a finite band.

    >>> min_calibration_size(0.1)
    9
    >>> min_calibration_size(0.05)
    19
    >>> min_calibration_size(0.1, 0.1)  # the n-th score needs 0.9^n <= 0.1
    22
    """
    a = _exact(check_alpha(alpha))
    # k <= n  <=>  (n + 1)(1 - a) <= n  <=>  n >= (1 - a) / a
    x = (1 - a) / a
    n = -((-x.numerator) // x.denominator)
    if check_delta(delta) is None:
        return n
    # with delta, rank n (the largest score) is enough iff (1 - alpha)^n <= delta
    n = max(n, math.ceil(math.log(delta) / math.log1p(-float(a))) - 1, 1)
    while conformal_rank(n, alpha, delta) > n:  # the float guess is off by at most one
        n += 1
    return n


def conformal_quantile(scores, alpha: float, overwrite: bool = False,
                       delta: float | None = None) -> float:
    """The ``conformal_rank(n, alpha, delta)``-th smallest score, or ``+inf`` when that rank
    exceeds n.

    Parameters
    ----------
    scores : (n,) array of conformity scores (larger = worse fit)
    alpha : miscoverage level in (0, 1)
    overwrite : allow reordering ``scores`` in place (saves a copy of n floats)
    delta : None (coverage >= 1 - alpha on average over calibration draws), or the
        training-conditional level: coverage >= 1 - alpha with probability >= 1 - delta
        over the calibration draw (:func:`conditional_rank`)

    >>> conformal_quantile([0.3, 0.1, 0.2, 0.5, 0.4, 0.6, 0.9, 0.8, 0.7, 1.0], 0.2)
    0.9
    >>> conformal_quantile([0.1, 0.2], 0.1)
    inf
    """
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1:
        raise InputError(f"scores must be one-dimensional, got shape {s.shape}")
    n = len(s)
    k = conformal_rank(n, alpha, delta)
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


def expected_coverage(n: int, alpha: float, delta: float | None = None) -> float:
    """Exact expected coverage ``k / (n + 1)`` of split conformal with continuous scores
    (``k`` the rank at ``delta``, :func:`conformal_rank`).

    ``1.0`` when the rank exceeds ``n`` (the band is the whole range).

    >>> expected_coverage(19, 0.1)
    0.9
    >>> expected_coverage(20, 0.1)
    0.9047619047619048
    """
    k = conformal_rank(n, alpha, delta)
    return 1.0 if k > n else k / (n + 1)


def tie_keep_probability(scores, q: float, alpha: float, atol: float = 1e-9, *,
                         delta: float | None = None) -> float:
    """Randomised tie-breaking (smoothed conformal p-values) for a threshold ``q``.

    With discrete targets many conformity scores can equal ``q`` exactly (e.g. every item at
    the top of the scale when a quantile regression sits on the scale's end), and keeping all
    of them over-covers. Breaking the ties at random, a test item whose score equals ``q`` is
    covered with probability ``(k - L) / (E + 1)`` (``k`` the conformal rank, ``L`` the scores
    below ``q``, ``E`` those equal to it), which makes coverage ``1 - alpha`` in expectation
    instead of ``>= 1 - alpha``. Returns 1.0 (keep every edge) when fewer than two scores tie.
    ``delta``: the rank is the training-conditional one (:func:`conformal_rank`).

    >>> tie_keep_probability([0.1, 0.2, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], 0.5, 0.5)
    0.4444444444444444
    """
    s = np.asarray(scores, dtype=float)
    n = len(s)
    k = conformal_rank(n, alpha, delta)
    if k > n or not math.isfinite(q):
        return 1.0
    ties = int(np.sum(np.abs(s - q) <= atol))
    if ties < 2:
        return 1.0
    below = int(np.sum(s < q - atol))
    return float(min(1.0, max(0.0, (k - below) / (ties + 1))))


def open_tied_edges(lo, hi, keep: float, u) -> tuple[np.ndarray, np.ndarray]:
    """Leave both edges of each band out (moved in by :data:`OPEN_EDGE`) with probability
    ``1 - keep``: the band side of :func:`tie_keep_probability`. ``u``: one uniform per
    item, from :func:`scoreband.conformal.randomness.item_uniforms` (a function of the
    item's identity, never of its position). A band narrower than two such steps is kept
    whole."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    if keep >= 1.0 or len(lo) == 0:
        return lo, hi
    shut = (np.asarray(u) > keep) & (hi - lo > 2 * OPEN_EDGE)
    return np.where(shut, lo + OPEN_EDGE, lo), np.where(shut, hi - OPEN_EDGE, hi)


def row_matmul(A, B) -> np.ndarray:
    """``A @ B`` computed so that a row's result never depends on the other rows of the call.

    BLAS picks its kernel (and so its order of summation) by the shape of the whole matrix:
    one row alone can differ from the same row inside a table in its last digit, and a band
    edge can flip with it. ``einsum`` without its BLAS path sums each output in one fixed
    order, so a row applied alone, in a chunk or in another order gets the same bits.

    >>> A = np.random.default_rng(0).normal(size=(50, 5)); B = np.ones((5, 3))
    >>> bool(np.array_equal(row_matmul(A, B)[7:8], row_matmul(A[7:8], B)))
    True
    """
    A, B = np.asarray(A, dtype=float), np.asarray(B, dtype=float)
    return np.einsum("ij,j->i" if B.ndim == 1 else "ij,jk->ik", A, B, optimize=False)


def split_at(perm, *cuts) -> list[np.ndarray]:
    """The parts of a permutation of ``range(n)`` between ``cuts``, each as sorted indices:
    the same as ``np.sort(perm[a:b])`` per part, in O(n) (labels written through the
    permutation, then read back in order) rather than a sort of each part; 8x faster at
    n = 10^6, where the sorts were most of CRC's fit.

    >>> [p.tolist() for p in split_at(np.array([3, 0, 4, 1, 2]), 2)]
    [[0, 3], [1, 2, 4]]
    """
    perm = np.asarray(perm)
    label = np.empty(len(perm), dtype=np.int8 if len(cuts) < 127 else np.int32)
    edges = [0, *cuts, len(perm)]
    for j in range(len(edges) - 1):
        label[perm[edges[j]:edges[j + 1]]] = j
    return [np.flatnonzero(label == j) for j in range(len(edges) - 1)]


def unbounded(q: float, n: int, at: float = math.inf) -> tuple[np.ndarray, float]:
    """``(full-range flag per item, the q to build the bands with)``: a conformal quantile
    that is infinite (too few calibration items for alpha) - or at least ``at`` (a residual
    of 1 already spans [0, 1]) - makes every item's band the whole scale; the bands are then
    built with q = 0 and flagged, and the flag turns them into [0, 1]. The one place every
    method handles an unbounded quantile.

    >>> unbounded(float("inf"), 2)
    (array([ True,  True]), 0.0)
    """
    full = not math.isfinite(q) or q >= at
    return np.full(n, full), (0.0 if not math.isfinite(q) else q)


def whole_scale(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lo, hi, full_range)`` of ``n`` bands that are the whole of [0, 1], flagged."""
    return np.zeros(n), np.ones(n), np.ones(n, dtype=bool)

