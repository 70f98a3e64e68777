"""Evaluation metrics: pure functions on arrays.

Each docstring says which direction is better. All take per-item arrays; none prints.
"""

from __future__ import annotations

import math

import numpy as np

from scoreband.conformal.core import check_alpha, check_delta, coverage_bounds, expected_coverage
from scoreband.errors import InputError

__all__ = [
    "set_coverage",
    "set_length",
    "covered",
    "coverage",
    "sharpness",
    "ups",
    "kendall_tau_c",
    "pearson",
    "spearman",
    "ranking_scoring_gap",
    "band_usefulness",
    "exact_agreement",
    "overconfidence_rate",
    "binomial_ci",
    "group_coverage",
    "worst_group_coverage",
    "theoretical_coverage",
    "interval_metrics",
]


def _arrays(*xs):
    arrs = [np.asarray(x, dtype=float) for x in xs]
    n = len(arrs[0])
    for a in arrs:
        if a.ndim != 1 or len(a) != n:
            raise InputError(f"expected arrays of one value per item (n={n}), got shape {a.shape}")
    return arrs


def covered(lo, hi, y, tol: float = 1e-9) -> np.ndarray:
    """Per item: True where ``lo <= y <= hi`` (with a float tolerance)."""
    lo, hi, y = _arrays(lo, hi, y)
    return (lo - tol <= y) & (y <= hi + tol)


def coverage(lo, hi, y) -> float:
    """Share of targets inside their band. Closer to ``1 - alpha`` (from above) is better.

    >>> coverage([0, 0.5], [1, 0.6], [0.5, 0.7])
    0.5
    """
    return float(np.mean(covered(lo, hi, y)))


def sharpness(lo, hi) -> float:
    """Mean band width. Lower is better (at the same coverage).

    >>> sharpness([0.1, 0.2], [0.3, 0.6])
    0.3
    """
    lo, hi = _arrays(lo, hi)
    return float(np.round(np.mean(hi - lo), 12))


def set_coverage(sets, y, tol: float = 1e-9) -> float:
    """Coverage of union-of-intervals prediction sets (R2CCP): y in any of its intervals.

    >>> set_coverage([[(0.0, 0.2), (0.6, 0.8)], [(0.4, 0.5)]], [0.7, 0.3])
    0.5
    """
    y = np.asarray(y, dtype=float)
    return float(np.mean([any(a - tol <= v <= b + tol for a, b in s)
                          for s, v in zip(sets, y, strict=True)]))


def set_length(sets, span: float = 1.0) -> float:
    """Mean total length of union-of-intervals sets, times ``span`` (e.g. K - 1 for the
    native scale).

    >>> round(set_length([[(0.0, 0.2), (0.6, 0.8)], [(0.4, 0.5)]], span=4), 6)
    1.0
    """
    return float(span * np.mean([sum(b - a for a, b in s) for s in sets]))


def ups(median, lo, hi, y) -> float:
    """Uncertainty-prediction score: Pearson(|m - y|, hi - lo). Higher is better.

    Wider bands should go with larger errors. NaN when either side is constant.
    """
    m, lo, hi, y = _arrays(median, lo, hi, y)
    return pearson(np.abs(m - y), hi - lo)


#: distinct values of the coarser variable up to which tau-c is counted here (below); above,
#: scipy's kendalltau (loaded then)
_TAU_LEVELS = 64


def _concordance(x: np.ndarray, y: np.ndarray) -> float:
    """``P - Q``: concordant minus discordant pairs, counted level by level of ``x`` (few
    distinct values) against the sorted ``y`` of every lower level: O(K n log n)."""
    levels, inv = np.unique(x, return_inverse=True)
    below = np.empty(0)
    s = 0.0
    for k in range(len(levels)):
        yk = y[inv == k]
        if len(below):
            lower = np.searchsorted(below, yk, side="left").sum()  # below's y < y_j
            higher = len(below) * len(yk) - np.searchsorted(below, yk, side="right").sum()
            s += float(lower - higher)
        below = np.sort(np.concatenate([below, yk]))
    return s


def kendall_tau_c(x, y) -> float:
    """Kendall's tau-c (Stuart's), scipy's ``variant="c"``: ``2 (P - Q) / (n^2 (m - 1) / m)``,
    m the smaller number of distinct values. Higher is better. Suited to ties-heavy Likert
    targets.

    Counted here where one variable has at most 64 distinct values (a rating scale, a mean
    of a few ratings): importing scipy.stats costs 0.75 s of every ``evaluate``'s start-up,
    half its budget (tests check this against scipy to 1e-12); scipy's otherwise.

    >>> round(kendall_tau_c([1, 2, 3, 4], [1, 3, 2, 4]), 6)
    0.666667
    """
    x, y = _arrays(x, y)
    if len(x) < 2:
        return math.nan
    nx, ny = len(np.unique(x)), len(np.unique(y))
    m = min(nx, ny)
    if m < 2:
        return math.nan
    if m > _TAU_LEVELS:
        from scipy import stats  # lazy: 0.75 s of start-up

        return float(stats.kendalltau(x, y, variant="c").statistic)
    s = _concordance(x, y) if nx <= ny else _concordance(y, x)
    n = len(x)
    return float(2 * s / (n * n * (m - 1) / m))


def _constant(a: np.ndarray) -> bool:
    return len(a) < 2 or np.ptp(a) == 0


def pearson(x, y) -> float:
    """Pearson correlation. Higher is better. NaN when an input is constant."""
    x, y = _arrays(x, y)
    if _constant(x) or _constant(y):
        return math.nan
    # scipy.stats.pearsonr's own arithmetic (centred, scaled norms, vecdot), so the value
    # is the same to the last bit (tests/test_metrics_reference.py)
    xm, ym = x - x.mean(), y - y.mean()
    xmax, ymax = np.max(np.abs(xm)), np.max(np.abs(ym))
    r = np.vecdot(xm / (xmax * np.linalg.vector_norm(xm / xmax)),
                  ym / (ymax * np.linalg.vector_norm(ym / ymax)))
    return float(np.clip(r, -1.0, 1.0))


def spearman(x, y) -> float:
    """Spearman rank correlation. Higher is better. NaN when an input is constant."""
    x, y = _arrays(x, y)
    if _constant(x) or _constant(y):
        return math.nan
    import pandas as pd  # average ranks of ties, as scipy's rankdata

    # scipy.stats.spearmanr's own arithmetic (corrcoef of the ranks as columns, its [1, 0])
    ranks = np.column_stack([pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()])
    return float(np.corrcoef(ranks, rowvar=False)[1, 0])


def band_usefulness(width: float, lo: float, hi: float) -> tuple[float, str]:
    """What a band of mean ``width`` (native units) can tell on the scale ``lo``-``hi``: its
    share of the scale and a verdict in words (the console and the report say the same).

    >>> band_usefulness(2.4, 1, 5)[0]
    0.6
    """
    share = width / (hi - lo)
    if share <= 0.25:
        what = "narrow enough to tell neighbouring levels apart for most items"
    elif share <= 0.5:
        what = ("enough to tell a low score from a high one, not neighbouring levels: use "
                "the scores to sort or screen, not as exact values")
    else:
        what = ("most of the scale: a band says little about a single item; use the scores "
                "for ranking, or a better scorer")
    return share, what


def ranking_scoring_gap(rho: float, mean_width: float, k: int) -> float:
    """Ranking-Scoring Gap: ``|rho| - (1 - w / (K - 1))``, w the mean width on the K-point
    scale. Lower is better: high RSG means the judge ranks well but its absolute scores
    cannot be trusted.

    >>> round(ranking_scoring_gap(0.8, 2.0, 5), 6)
    0.3
    """
    if k < 2:
        raise InputError(f"K must be >= 2 score levels, got {k}")
    return float(abs(rho) - (1 - mean_width / (k - 1)))


def exact_agreement(pred, y) -> float:
    """Share of items whose rounded prediction equals the (rounded) human score. Higher is
    better.

    >>> exact_agreement([1.2, 3.6, 4.4], [1, 4, 5])
    0.6666666666666666
    """
    p, y = _arrays(pred, y)
    # round half up, as a rater would (np.round rounds half to even)
    return float(np.mean(np.floor(p + 0.5) == np.floor(y + 0.5)))


def overconfidence_rate(max_prob, threshold: float = 0.99) -> float:
    """Share of items whose max softmax probability exceeds ``threshold``. Lower is better
    (for a judge whose bands are wide)."""
    (p,) = _arrays(max_prob)
    return float(np.mean(p > threshold))


def binomial_ci(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval for a proportion k / n: the Beta quantiles, through
    scipy.special (scipy.stats' binomtest gives the same to 1e-12 but costs 0.75 s to import).

    >>> [round(v, 4) for v in binomial_ci(9, 10)]
    [0.555, 0.9975]
    """
    if n == 0:
        return (math.nan, math.nan)
    from scipy.special import betaincinv  # lazy: scipy.special only where an interval is asked

    k, n = int(k), int(n)
    a = (1 - confidence) / 2
    lo = 0.0 if k == 0 else float(betaincinv(k, n - k + 1, a))
    hi = 1.0 if k == n else float(betaincinv(k + 1, n - k, 1 - a))
    return (lo, hi)


def group_coverage(lo, hi, y, groups, confidence: float = 0.95) -> dict:
    """Coverage per group with an exact binomial confidence interval.

    Returns ``{group: {"n", "coverage", "ci_low", "ci_high", "sharpness"}}``.
    """
    lo, hi, y = _arrays(lo, hi, y)
    g = np.asarray(groups).astype(str)
    cov = covered(lo, hi, y)
    out = {}
    for key in np.unique(g):
        m = g == key
        k, n = int(cov[m].sum()), int(m.sum())
        lo_ci, hi_ci = binomial_ci(k, n, confidence)
        out[str(key)] = {"n": n, "coverage": k / n, "ci_low": lo_ci, "ci_high": hi_ci,
                         "sharpness": float(np.mean(hi[m] - lo[m]))}
    return out


def worst_group_coverage(lo, hi, y, groups) -> float:
    """The lowest per-group coverage. Higher is better."""
    return min(v["coverage"] for v in group_coverage(lo, hi, y, groups).values())


def theoretical_coverage(n_cal: int, alpha: float, delta: float | None = None) -> dict:
    """The band ``[1 - alpha, 1 - alpha + 1/(n + 1)]`` that split-conformal coverage lies in,
    in expectation, for ``n_cal`` calibration items. With ``delta`` (the training-conditional
    rank ``k``): ``low`` is ``1 - alpha``, now reached with probability ``>= 1 - delta`` by
    each calibration, and ``high`` the expected coverage ``k / (n + 1)`` (continuous scores;
    1 when the band is the whole scale), with ``delta``.

    >>> theoretical_coverage(100, 0.1, 0.1)["high"]
    0.9405940594059405
    """
    a = check_alpha(alpha)
    lo, hi = coverage_bounds(n_cal, a)
    d = check_delta(delta)
    if d is None:
        return {"low": lo, "high": hi, "n_cal": int(n_cal)}
    return {"low": lo, "high": max(hi, expected_coverage(n_cal, a, d)), "n_cal": int(n_cal),
            "delta": d}


def share_below(coverages, alpha: float) -> dict:
    """How many of the splits' test coverages fall below ``1 - alpha``, and their share with
    its 95 % Clopper-Pearson interval: the measured side of the training-conditional
    guarantee (at most ``delta`` of calibrations below 1 - alpha). Each coverage is measured
    on a finite test side, so its sampling noise adds to the calibrator's own shortfall: the
    share overstates the calibrators' (marginal bands, at about ``1 - alpha``, sit near
    one half).

    >>> share_below([0.95, 0.89, 0.91, 0.9], 0.1)["splits_below"]
    1
    """
    a = check_alpha(alpha)
    c = np.asarray(coverages, dtype=float)
    c = c[np.isfinite(c)]
    k = int(np.sum(c < 1 - a - 1e-12))  # a coverage of exactly 1 - alpha is not below
    n = len(c)
    return {"target": 1 - a, "splits_below": k, "splits": n,
            "share": k / n if n else math.nan, "ci": list(binomial_ci(k, n))}


def interval_metrics(median, lo, hi, y) -> dict:
    """The standard set for one band: coverage, sharpness, UPS, Kendall tau-c, Pearson,
    Spearman (medians vs targets)."""
    m, lo, hi, y = _arrays(median, lo, hi, y)
    return {
        "coverage": coverage(lo, hi, y),
        "sharpness": sharpness(lo, hi),
        "ups": ups(m, lo, hi, y),
        "kendall_tau_c": kendall_tau_c(m, y),
        "pearson": pearson(m, y),
        "spearman": spearman(m, y),
    }
