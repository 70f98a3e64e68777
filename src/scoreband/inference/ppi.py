"""Prediction-powered inference for a mean (Angelopoulos et al., Science 2023) with power
tuning (PPI++, Angelopoulos, Duchi and Zrnic 2023), and what ``scoreband systems`` builds on
it: paired and unpaired differences, Holm's adjustment, rank sets, label planning.

Pure numpy / scipy on arrays. For ``n`` labeled rows (human target ``y``, metric prediction
``f``) and ``N`` unlabeled rows (prediction ``f~`` only), with ``lam`` in [0, 1]::

    theta = lam * mean(f~) + mean(y - lam * f)
    se^2  = var(lam * f~) / N + var(y - lam * f) / n

``lam = 1`` is PPI, ``lam = 0`` the classical mean of the labels; PPI++ takes the ``lam``
that minimises ``se`` (estimated from the data, clipped to [0, 1]), so the interval is
never wider than the classical one asymptotically, whatever the metric's quality.
Intervals are normal (z), as in ``ppi_py``; these functions agree with ``ppi_py``'s
``ppi_mean_ci`` / ``classical_mean_ci`` to rounding (tested). They are written here, not
imported, because ``ppi-python`` pulls numba, statsmodels and gdown into every install for
four lines of arithmetic; it is the optional extra ``scoreband[systems]`` and the tests'
reference.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

__all__ = ["MeanEstimate", "classical_mean", "ppi_mean", "tuned_lambda", "difference",
           "holm", "rank_sets", "labels_for_width", "z_crit"]


def z_crit(alpha: float) -> float:
    """The two-sided normal critical value."""
    return float(stats.norm.ppf(1 - alpha / 2))


@dataclass
class MeanEstimate:
    """A mean with its standard error and ``1 - alpha`` interval."""

    estimate: float
    se: float
    ci: tuple[float, float]
    lam: float
    n: int
    N: int

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ci"] = [float(v) for v in self.ci]
        return d


def _interval(est: float, se: float, alpha: float) -> tuple[float, float]:
    z = z_crit(alpha)
    return (est - z * se, est + z * se)


def classical_mean(y, alpha: float = 0.05) -> MeanEstimate:
    """The mean of the labels with its CLT interval.

    >>> classical_mean([1.0, 2.0, 3.0], 0.05).ci[1].__round__(3)
    2.924
    """
    y = np.asarray(y, dtype=float)
    se = float(y.std() / math.sqrt(len(y)))
    est = float(y.mean())
    return MeanEstimate(est, se, _interval(est, se, alpha), 0.0, len(y), 0)


def tuned_lambda(y, f, f_unlabeled) -> float:
    """The power-tuning weight of PPI++ for a mean: ``cov(y, f) / ((1 + n/N) var(f))``
    with ``var`` over every prediction, clipped to [0, 1]; 0 when the predictions are
    constant (they carry no information)."""
    y, f, fu = (np.asarray(a, dtype=float) for a in (y, f, f_unlabeled))
    n, N = len(y), len(fu)
    var = float(np.var(np.concatenate([f, fu]), ddof=1)) if n + N > 1 else 0.0
    if N == 0 or not var > 1e-15:
        return 0.0
    cov = float(np.mean((y - y.mean()) * (f - f.mean())))
    return float(np.clip(cov / ((1 + n / N) * var), 0.0, 1.0))


def ppi_mean(y, f, f_unlabeled, alpha: float = 0.05, lam: float | None = None
             ) -> MeanEstimate:
    """The prediction-powered mean; ``lam=None`` tunes it (PPI++), 1 is plain PPI.

    >>> rng = np.random.default_rng(0)
    >>> truth = rng.normal(size=20_100)
    >>> f = truth + rng.normal(0, 0.3, 20_100)             # an informative metric
    >>> est = ppi_mean(truth[:100], f[:100], f[100:])
    >>> bool(est.se < classical_mean(truth[:100]).se / 2), round(est.lam, 2)
    (True, 0.87)
    """
    y, f, fu = (np.asarray(a, dtype=float) for a in (y, f, f_unlabeled))
    n, N = len(y), len(fu)
    if N == 0:
        return classical_mean(y, alpha)
    lam = tuned_lambda(y, f, fu) if lam is None else float(lam)
    est = float(lam * fu.mean() + np.mean(y - lam * f))
    se = float(math.sqrt(np.var(lam * fu) / N + np.var(y - lam * f) / n))
    return MeanEstimate(est, se, _interval(est, se, alpha), lam, n, N)


def difference(a: MeanEstimate, b: MeanEstimate, alpha: float) -> MeanEstimate:
    """``a - b`` for estimates from independent rows (unpaired systems)."""
    est = a.estimate - b.estimate
    se = math.sqrt(a.se ** 2 + b.se ** 2)
    return MeanEstimate(est, se, _interval(est, se, alpha), float("nan"), min(a.n, b.n),
                        min(a.N, b.N))


def p_value(est: MeanEstimate) -> float:
    """Two-sided normal p-value of ``estimate = 0``."""
    if est.se <= 0:
        return 0.0 if est.estimate != 0 else 1.0
    return float(2 * stats.norm.sf(abs(est.estimate) / est.se))


def holm(p) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control over all pairs).
    Written here: scipy has only Benjamini-Hochberg, and statsmodels is not a dependency.

    >>> holm([0.01, 0.04, 0.03]).round(3).tolist()
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(p, dtype=float)
    m = len(p)
    order = np.argsort(p)
    adj = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return out


def rank_sets(names, pairs: list[dict], alpha: float) -> dict[str, tuple[int, int]]:
    """Which ranks each system can hold (1 = best), simultaneously at ``1 - alpha``: a
    system is placed below every system significantly better than it and above every
    one significantly worse (Holm-adjusted p-values, which control the family-wise error,
    so every rank set holds at once with probability ``>= 1 - alpha``)."""
    k = len(names)
    better = {s: 0 for s in names}  # systems significantly better than s
    worse = {s: 0 for s in names}
    for p in pairs:
        if p["p_adjusted"] < alpha:
            hi, lo = (p["a"], p["b"]) if p["estimate"] > 0 else (p["b"], p["a"])
            better[lo] += 1
            worse[hi] += 1
    return {s: (1 + better[s], k - worse[s]) for s in names}


def labels_for_width(width: float, alpha: float, var_y: float, var_resid: float,
                     lam: float, var_f: float, n_unlabeled: int) -> dict:
    """Labels that give an interval of ``width`` (full width, ``2 z se``): for the labels
    alone ``(2 z)^2 var(y) / width^2``; for PPI++ with this ``lam`` and ``n_unlabeled``
    unlabeled rows, ``var(y - lam f) / ((width / 2z)^2 - lam^2 var(f) / N)`` - None when
    the unlabeled rows' own variance already exceeds the width (more unlabeled rows are
    needed, not more labels).

    >>> labels_for_width(0.2, 0.05, 1.0, 0.25, 0.9, 1.0, 10_000)["classical"]
    385
    """
    h2 = (width / (2 * z_crit(alpha))) ** 2
    classical = math.ceil(var_y / h2) if var_y > 0 else 1
    room = h2 - (lam ** 2) * var_f / max(n_unlabeled, 1)
    ppi = math.ceil(var_resid / room) if room > 0 else None
    return {"width": width, "classical": int(classical),
            "ppi++": None if ppi is None else int(max(ppi, 2))}
