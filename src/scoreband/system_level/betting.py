"""Finite-sample valid intervals for a mean from labels drawn with known, unequal
probabilities: testing by betting (Waudby-Smith and Ramdas, JRSS-B 2024, "Estimating means
of bounded random variables by betting"), on inverse-probability-weighted terms with a
predictable control variate.

Each row ``t`` (in an order fixed before the labels are seen) contributes::

    Z_t = f_t + xi_t (y_t - f_t) / pi_t

with ``xi_t`` = 1 when the row is labeled (probability ``pi_t``, known), ``y_t`` its target
on [0, 1] and ``f_t`` a prediction made from the rows *before* ``t`` only (a least-squares
line of the score columns on the labeled rows seen so far, cut to [0, 1]; 1/2 before there
are any). Whatever ``f_t``, ``E[Z_t | the past] = E[y_t] = mu`` when rows are drawn
independently from one population and each is labeled with its probability, independently
of its target; and ``Z_t`` lies in ``[1 - 1/p, 1/p]``, ``p`` the design's smallest
probability. The bets must not read the current row (its own range
``[f_t (1 - 1/pi_t), f_t + (1 - f_t) / pi_t]`` would do so: given the row, ``Z_t``'s mean is
``E[y | row]``, not ``mu``, and coverage fell to 0.81 where probabilities follow the metric),
so every row takes the design's range. For a candidate mean ``m`` the two capital
processes::

    K+_t(m) = prod_{s <= t} (1 + l+_s (Z_s - m)),   K-_t(m) = prod (1 - l-_s (Z_s - m))

with predictable bets ``l+-_s >= 0`` kept small enough that no factor can be negative, are
nonnegative martingales when ``m = mu``; so is their average ``K = (K+ + K-) / 2``. By
Ville's inequality ``P(sup_t K_t(mu) >= 1 / alpha) <= alpha``: the set of ``m`` whose capital
never reaches ``1 / alpha`` is a ``1 - alpha`` confidence interval for every sample size,
with no normal approximation - the guarantee that the t interval of :mod:`.active` lacks
when a few heavily weighted labels carry the estimate (a 20x range of probabilities at 20
expected labels: 0.83 coverage at nominal 0.90). The bets are the predictable plug-in of the
paper (``sqrt(2 log(2 / alpha) / (n var_{t-1}))``, truncated at ``c / (m - lo_t)`` and
``c / (hi_t - m)``, ``c = 1/2``). The interval is found on a grid of ``m`` refined twice
and reported to the grid points just outside the accepted set (never narrower).

What it costs: with probabilities spanning 20x (smallest 0.05) the range is [-19, 20] and
the bets stay small; at 50 expected labels of 300 the 90 % interval is ~0.7 wide on [0, 1]
(``tests/system_level/test_small_designs.py``). ``systems`` therefore prints the t interval
with the small-count corrections of :mod:`.active` (Satterthwaite's degrees of freedom for a
spread design, the labels alone below ``MIN_PPI_EFFECTIVE`` effective labels), whose coverage
is checked by simulation, not proved; this module is the proved reference.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["betting_interval", "predictable_fit", "ipw_terms", "betting_arrays"]

#: the largest fraction of the room to ruin a bet may take (the paper's ``c``)
BET_CAP = 0.5


def predictable_fit(X, y, labeled, ridge: float = 1e-3) -> np.ndarray:
    """``f_t`` for every row ``t`` (last axis), from the labeled rows before ``t`` only:
    least squares of ``y`` on ``[1, X]`` (a small ridge), cut to [0, 1]; the mean of the
    labels seen while there are fewer than ``k + 2`` of them; 1/2 before any label.
    Vectorised over leading axes (``X``: (..., T, k); ``y``, ``labeled``: (..., T))."""
    y = np.where(labeled, np.asarray(y, float), 0.0)
    lab = np.asarray(labeled, float)
    X = np.asarray(X, float)
    if X.ndim == y.ndim:
        X = X[..., None]
    X = np.broadcast_to(X, y.shape + X.shape[-1:])
    phi = np.concatenate([np.ones(X.shape[:-1] + (1,)), X], -1)
    k = phi.shape[-1]
    # sums over the rows strictly before t
    A = np.cumsum(lab[..., None, None] * phi[..., :, None] * phi[..., None, :], -3)
    b = np.cumsum((lab * y)[..., None] * phi, -2)
    A = np.concatenate([np.zeros_like(A[..., :1, :, :]), A[..., :-1, :, :]], -3)
    b = np.concatenate([np.zeros_like(b[..., :1, :]), b[..., :-1, :]], -2)
    cnt = A[..., 0, 0]
    scale = np.maximum(np.trace(A, axis1=-2, axis2=-1), 1.0)
    reg = A + (ridge * scale)[..., None, None] * np.eye(k)
    beta = np.linalg.solve(reg, b[..., None])[..., 0]
    line = np.clip(np.sum(beta * phi, -1), 0.0, 1.0)
    mean = np.where(cnt > 0, b[..., 0] / np.maximum(cnt, 1), 0.5)
    return np.where(cnt >= k + 2, line, mean)


def ipw_terms(y, pi, labeled, f):
    """``Z_t`` and the range ``[lo_t, hi_t]`` it could take given its row (see the module
    docstring: bets take the design's range, not these)."""
    y = np.where(labeled, np.asarray(y, float), 0.0)
    pi = np.asarray(pi, float)
    f = np.asarray(f, float)
    z = f + np.where(labeled, (y - f) / np.where(labeled, pi, 1.0), 0.0)
    return z, f * (1 - 1 / pi), f + (1 - f) / pi


def _log_capital(z, lo, hi, lam, m):
    """``log sup_t (K+_t + K-_t) / 2`` for candidate means ``m`` (..., G); ``z``, ``lo``,
    ``hi``, ``lam``: (..., T)."""
    m = m[..., None]
    z, lo, hi, lam = (a[..., None, :] for a in (z, lo, hi, lam))
    up = np.minimum(lam, BET_CAP / np.maximum(m - lo, 1e-12))
    dn = np.minimum(lam, BET_CAP / np.maximum(hi - m, 1e-12))
    lp = np.cumsum(np.log1p(up * (z - m)), -1)
    ln = np.cumsum(np.log1p(-dn * (z - m)), -1)
    return np.max(np.logaddexp(lp, ln) - math.log(2), -1)


def _bets(z, lo, hi, alpha):
    """The predictable plug-in bet of every step: ``sqrt(2 log(2/alpha) / (n s2_{t-1}))``,
    ``s2`` a running variance of the terms started at a quarter of the squared range."""
    T = z.shape[-1]
    t = np.arange(1, T + 1)
    mu = (np.cumsum(z, -1) + 0.5) / (t + 1)
    prev_mu = np.concatenate([np.full(z.shape[:-1] + (1,), 0.5), mu[..., :-1]], -1)
    s2 = (np.cumsum((z - prev_mu) ** 2, -1) + 0.25) / (t + 1)
    s2 = np.concatenate([np.full(z.shape[:-1] + (1,), 0.25), s2[..., :-1]], -1)
    return np.sqrt(2 * math.log(2 / alpha) / (T * np.maximum(s2, 1e-8)))


def betting_arrays(z, lo, hi, alpha: float, lo_m: float = 0.0, hi_m: float = 1.0,
                   grid: int = 64, rounds: int = 3):
    """The ``1 - alpha`` betting interval for the common mean of the terms ``z`` with known
    ranges, vectorised over leading axes; the mean is known to lie in ``[lo_m, hi_m]``.
    Returns ``(lower, upper)``. A grid of ``grid`` candidates, refined ``rounds`` times
    around each end; each end is the grid point just outside the accepted set."""
    z, lo, hi = (np.asarray(a, float) for a in (z, lo, hi))
    shape, T = z.shape[:-1], z.shape[-1]
    rows = int(np.prod(shape)) if shape else 1
    step = max(1, 3_000_000 // (grid * T))
    if rows > step:  # in chunks: the capital is (rows, grid, T)
        z, lo, hi = (a.reshape(rows, T) for a in (z, lo, hi))
        parts = [betting_arrays(z[i:i + step], lo[i:i + step], hi[i:i + step], alpha, lo_m,
                                hi_m, grid, rounds) for i in range(0, rows, step)]
        return (np.concatenate([p[0] for p in parts]).reshape(shape),
                np.concatenate([p[1] for p in parts]).reshape(shape))
    lam = _bets(z, lo, hi, alpha)
    thr = math.log(1 / alpha)
    ends = []
    for side in (0, 1):
        a = np.full(shape, lo_m)
        b = np.full(shape, hi_m)
        for _ in range(rounds):
            m = a[..., None] + (b - a)[..., None] * np.linspace(0, 1, grid)
            ok = _log_capital(z, lo, hi, lam, m) < thr
            any_ok = ok.any(-1)
            if side == 0:
                j = np.where(any_ok, np.argmax(ok, -1), grid - 1)
                a, b = (np.take_along_axis(m, np.maximum(j - 1, 0)[..., None], -1)[..., 0],
                        np.take_along_axis(m, j[..., None], -1)[..., 0])
                a = np.where(j == 0, np.take_along_axis(m, j[..., None], -1)[..., 0], a)
            else:
                j = np.where(any_ok, grid - 1 - np.argmax(ok[..., ::-1], -1), 0)
                a, b = (np.take_along_axis(m, j[..., None], -1)[..., 0],
                        np.take_along_axis(m, np.minimum(j + 1, grid - 1)[..., None],
                                           -1)[..., 0])
                b = np.where(j == grid - 1, a, b)
        ends.append(a if side == 0 else b)
    return ends[0], ends[1]


def betting_interval(y, pi, labeled, X, alpha: float, order=None):
    """One system's ``1 - alpha`` betting interval for its mean target (on [0, 1]) from
    labels drawn with probabilities ``pi``, the score columns ``X`` (rows x k) as the
    predictable control variate, rows taken in ``order`` (positions; default: as given -
    pass an order drawn from the rows' identity, never from their labels). Returns
    ``(lower, upper, estimate)``; the estimate is the mean of the terms."""
    y, pi, labeled = np.asarray(y, float), np.asarray(pi, float), np.asarray(labeled, bool)
    X = np.asarray(X, float).reshape(len(y), -1)
    if order is not None:
        y, pi, labeled, X = y[order], pi[order], labeled[order], X[order]
    f = predictable_fit(X, y, labeled)
    z, _, _ = ipw_terms(y, pi, labeled, f)
    p = float(pi.min())
    lower, upper = betting_arrays(z, np.full(len(z), 1 - 1 / p), np.full(len(z), 1 / p),
                                  alpha)
    return float(lower), float(upper), float(np.clip(z.mean(), 0.0, 1.0))
