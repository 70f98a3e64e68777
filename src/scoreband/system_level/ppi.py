"""Prediction-powered inference for a mean (Angelopoulos et al., Science 2023) with power
tuning (PPI++, Angelopoulos, Duchi and Zrnic 2023), and what ``scoreband systems`` builds on
it: paired and unpaired differences, Holm's adjustment, rank sets, label planning.

Pure numpy / scipy on arrays. For ``n`` labeled rows (human target ``y``, metric prediction
``f``) and ``N`` unlabeled rows (prediction ``f~`` only), with ``lam`` in [0, 1] and sample
variances with ``ddof = 1``::

    theta = lam * mean(f~) + mean(y - lam * f)
    se^2  = lam^2 * var(f~) / N + var(y - lam * f) / n
    CI    = theta +/- t_{df, 1 - alpha/2} * se     (df = n - 1; n - 2 when lam is tuned
                                                 on fewer than TUNED_PENALTY_BELOW labels)

``lam = 1`` is PPI, ``lam = 0`` the classical mean of the labels (Student's t interval,
``n - 1`` degrees of freedom). PPI++ takes the ``lam`` in [0, 1] that minimises this
estimated variance; because that ``lam`` is fitted on the same labels, its interval uses
``ddof = 2`` and ``n - 2`` degrees of freedom below :data:`TUNED_PENALTY_BELOW` labels
(:func:`ppi_arrays`). It is therefore not always narrower than the classical interval: it
can be wider by at most :func:`ppi_width_bound` (1.27x at 5 labels and nominal 0.90, 1.08x
at 10 labels at 0.95; from 30 labels on never wider), the price of estimating ``lam``; with a metric that tracks the humans it is
much narrower. Picking whichever of the two intervals is narrower on the same data is not
done: that choice under-covers (0.84 at 5 labels with a weak metric, nominal 0.90).

What the coverage rests on: the labeled rows are a random sample of the system's rows (every
row equally likely to be labeled, independently of its target and score), the unlabeled rows
come from the same population, and the t quantile is right for the studentised estimate -
exact for the classical interval of normal targets, approximate otherwise (skewed, discrete
or bounded targets at few labels). Simulated with
metric biases of -0.8 .. +1.2 on a 1-5 scale, the intervals cover within 0.02 of nominal from
:data:`MIN_LABELS` labels on (``tests/system_level``).

``ppi_py`` (the method's authors' package, the tests' reference and the optional extra
``scoreband[systems]``) uses normal quantiles with ``ddof = 0`` variances, which under-cover
at few labels (0.69-0.78 at 5 labels, nominal 0.90); at fixed ``lam`` the point estimates agree
exactly and the standard errors differ only by ``ddof`` (tested). ppi_py is not imported
here: it pulls numba, statsmodels and gdown into every install for a few lines of arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from scoreband.system_level import MIN_LABELS

__all__ = ["MeanEstimate", "classical_mean", "ppi_mean", "tuned_lambda", "difference",
           "holm", "rank_sets", "labels_for_width", "t_crit", "p_value", "ppi_arrays",
           "worst_case_mean", "ppi_width_bound", "welch_df", "MIN_LABELS",
           "unlabeled_variance", "TUNED_PENALTY_BELOW"]

#: PPI++ pays for fitting its weight on the labels (``ddof = 2``, ``n - 2`` degrees of
#: freedom) below this many labels only. The price is what keeps few labels covered (10
#: labels, nominal 0.90: 0.868-0.873 without it, 0.891-0.893 with it), but it shrinks as
#: ``1 / n`` while its width stays ~2 %: at 30 labels the uncorrected interval covers
#: 0.890-0.899 at nominal 0.90 (``tests/system_level/test_coverage.py``) and is 0.891x the
#: classical width where the metric-human correlation is 0.54, against 0.908x with the
#: price (``benchmarks/systems_efficiency.py``; theory 0.874x). A rule on the count only.
TUNED_PENALTY_BELOW = 30


def t_crit(alpha: float, df: float) -> float | np.ndarray:
    """The two-sided Student-t critical value (``df = inf``: the normal one)."""
    return stats.t.ppf(1 - alpha / 2, df)


@dataclass
class MeanEstimate:
    """A mean with its standard error, degrees of freedom and ``1 - alpha`` interval
    ``estimate +/- t_{df} se``."""

    estimate: float
    se: float
    ci: tuple[float, float]
    lam: float
    n: int
    N: int
    df: float

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ci"] = [float(v) for v in self.ci]
        return d


def _interval(est: float, se: float, alpha: float, df: float) -> tuple[float, float]:
    h = float(t_crit(alpha, df)) * se
    return (est - h, est + h)


def _var1(a: np.ndarray) -> np.ndarray:
    """Sample variance (``ddof = 1``) along the last axis; 0 for a single value."""
    n = a.shape[-1]
    return np.var(a, axis=-1, ddof=1) if n > 1 else np.zeros(a.shape[:-1])


def unlabeled_variance(f, f_unlabeled) -> np.ndarray:
    """The variance of the metric on unlabeled items, for the unlabeled mean's share of the
    PPI variance: the pooled sample variance (``ddof = 1``) of the metric on labeled and
    unlabeled items together. The labeled items are a random sample of the same items
    (the assumption PPI rests on), so both hold the same distribution of ``f``; the
    unlabeled items' own variance alone is worthless when they are few (a user who labels
    nearly everything: 3 unlabeled verdicts, all 0, gave variance 0, a tuned ``lam`` of
    0.45 and 90 % win-rate intervals that covered 0.63 of the time on MLLM-as-a-Judge).
    Vectorised over leading axes.

    >>> float(unlabeled_variance([0.0, 1.0, 0.0, 1.0], [0.0, 0.0])) > 0
    True
    """
    f, fu = np.asarray(f, dtype=float), np.asarray(f_unlabeled, dtype=float)
    return _var1(np.concatenate([f, fu], axis=-1))


def tuned_lambda(y, f, f_unlabeled):
    """The power-tuning weight of PPI++ for a mean: the ``lam`` in [0, 1] that minimises
    the estimated variance ``lam^2 var(f~) / N + var(y - lam f) / n``, i.e.
    ``cov(y, f) / (var(f) + (n / N) var(f~))`` clipped (``ddof = 1`` throughout;
    ``var(f~)`` is :func:`unlabeled_variance`). With equal variances this is the published
    ``cov / ((1 + n/N) var)``; the exact minimiser of the variance :func:`ppi_arrays`
    reports, so the ``ddof = 1`` variance is never above the classical one, which bounds
    :func:`ppi_width_bound`. 0 when the predictions are constant or ``N < 2``.
    Vectorised over leading axes (the rows are the last axis).

    >>> round(float(tuned_lambda([1.0, 2, 3, 4], [1.1, 2.2, 2.8, 4.1], [1.0, 2, 3, 4, 5])), 3)
    0.52
    """
    y, f, fu = (np.asarray(a, dtype=float) for a in (y, f, f_unlabeled))
    n, N = y.shape[-1], fu.shape[-1]
    if N < 2 or n < 2:
        return np.zeros(y.shape[:-1]) if y.ndim > 1 else 0.0
    cov = np.sum((y - y.mean(-1, keepdims=True)) * (f - f.mean(-1, keepdims=True)),
                 axis=-1) / (n - 1)
    den = _var1(f) + n / N * unlabeled_variance(f, fu)
    lam = np.where(den > 1e-15, np.clip(cov / np.where(den > 1e-15, den, 1.0), 0.0, 1.0),
                   0.0)
    return lam if y.ndim > 1 else float(lam)


def ppi_arrays(y, f, f_unlabeled, lam=None):
    """Estimate, standard error, ``lam`` and degrees of freedom of the PPI mean,
    vectorised: ``y`` and ``f`` are (..., n), ``f_unlabeled`` (..., N); the interval is
    ``est +/- t_crit(alpha, df) * se``.

    A fixed ``lam`` (1: PPI, 0: classical): ``ddof = 1`` residual variance, ``df = n - 1``.
    ``lam=None`` (PPI++) estimates ``lam`` from the same labels, as a regression slope: the
    residual variance then takes ``ddof = 2`` and ``df = n - 2`` below
    :data:`TUNED_PENALTY_BELOW` labels, like any regression
    estimator with one fitted slope. Without that, choosing ``lam`` to minimise the
    estimated variance on the labels it is judged by under-covers at few labels (0.82 at 5
    labels, 0.865 at 10, nominal 0.90; 0.88-0.89 with it, ``tests/system_level``). The price
    is bounded: the PPI++ interval is at most ``t_{n-2} / t_{n-1} * sqrt((n - 1) / (n - 2))``
    times as wide as the classical one on the same labels (:func:`ppi_width_bound`), because
    ``lam`` minimises the ``ddof = 1`` variance and 0 is a candidate. Tuning needs n >= 3.
    """
    y, f, fu = (np.asarray(a, dtype=float) for a in (y, f, f_unlabeled))
    n, N = y.shape[-1], fu.shape[-1]
    if n < 2:
        raise ValueError(f"a mean's interval needs at least 2 labels, got {n}")
    tuned = lam is None and n >= 3 and N >= 2
    if tuned:
        lam = tuned_lambda(y, f, fu)
    elif lam is None or N == 0:
        lam = 0.0
    lam = np.broadcast_to(np.asarray(lam, dtype=float), y.shape[:-1])
    ddof = 2 if tuned and n < TUNED_PENALTY_BELOW else 1
    resid = y - lam[..., None] * f
    est = resid.mean(-1) + (lam * fu.mean(-1) if N else 0.0)
    var = np.var(resid, axis=-1, ddof=ddof) / n + \
        (lam ** 2 * unlabeled_variance(f, fu) / N if N else 0.0)
    return est, np.sqrt(var), lam, float(n - ddof)


def ppi_width_bound(n: int, alpha: float) -> float:
    """The most a PPI++ interval (``lam`` tuned, ``n`` labels) can be wider than the
    classical interval on the same labels: ``t_{n-2} / t_{n-1} * sqrt((n-1) / (n-2))``
    below :data:`TUNED_PENALTY_BELOW` labels, 1 from there on (``lam`` minimises the
    ``ddof = 1`` variance and 0 is a candidate).

    >>> round(ppi_width_bound(10, 0.05), 3), round(ppi_width_bound(40, 0.05), 3)
    (1.081, 1.0)
    """
    if n >= TUNED_PENALTY_BELOW:
        return 1.0
    return float(t_crit(alpha, n - 2) / t_crit(alpha, n - 1) * math.sqrt((n - 1) / (n - 2)))


def classical_mean(y, alpha: float = 0.05) -> MeanEstimate:
    """The mean of the labels with its Student-t interval (``n - 1`` degrees of freedom,
    ``ddof = 1``): exact for normal labels, approximate otherwise.

    >>> classical_mean([1.0, 2.0, 3.0], 0.05).ci[1].__round__(3)
    4.484
    """
    y = np.asarray(y, dtype=float)
    n = len(y)
    se = float(math.sqrt(_var1(y) / n))
    est = float(y.mean())
    return MeanEstimate(est, se, _interval(est, se, alpha, n - 1), 0.0, n, 0, n - 1)


def worst_case_mean(y, alpha: float = 0.05) -> MeanEstimate:
    """The mean of labels on [0, 1] whose sample variance cannot be trusted (every label
    equal): the t interval with the largest variance a [0, 1] target can have (1/4,
    Popoviciu's inequality) instead of the sample's 0.

    >>> worst_case_mean([1.0] * 16, 0.05).se
    0.125
    """
    y = np.asarray(y, dtype=float)
    n = len(y)
    se = 0.5 / math.sqrt(n)
    est = float(y.mean())
    return MeanEstimate(est, se, _interval(est, se, alpha, n - 1), 0.0, n, 0, n - 1)


def ppi_mean(y, f, f_unlabeled, alpha: float = 0.05, lam: float | None = None
             ) -> MeanEstimate:
    """The prediction-powered mean; ``lam=None`` tunes it (PPI++: ``n - 2`` degrees of
    freedom, see :func:`ppi_arrays`), 1 is plain PPI, 0 the classical mean (``n - 1``).

    >>> rng = np.random.default_rng(0)
    >>> truth = rng.normal(size=20_100)
    >>> f = truth + rng.normal(0, 0.3, 20_100)             # an informative metric
    >>> est = ppi_mean(truth[:100], f[:100], f[100:])
    >>> bool(est.se < classical_mean(truth[:100]).se / 2), round(est.lam, 2)
    (True, 0.91)
    """
    y, f, fu = (np.asarray(a, dtype=float) for a in (y, f, f_unlabeled))
    n, N = len(y), len(fu)
    est, se, lam, df = ppi_arrays(y, f, fu, lam)
    est, se, lam = float(est), float(se), float(lam)
    return MeanEstimate(est, se, _interval(est, se, alpha, df), lam, n, N, df)


def welch_df(se_a: float, df_a: float, se_b: float, df_b: float) -> float:
    """Welch-Satterthwaite degrees of freedom of a difference of independent estimates."""
    num = (se_a ** 2 + se_b ** 2) ** 2
    den = se_a ** 4 / df_a + se_b ** 4 / df_b
    return float(num / den) if den > 0 else float(min(df_a, df_b))


def difference(a: MeanEstimate, b: MeanEstimate, alpha: float) -> MeanEstimate:
    """``a - b`` for estimates from independent labels (unpaired): variances added,
    Welch-Satterthwaite degrees of freedom. Shared unlabeled items make the two unlabeled
    means positively correlated for a metric that tracks item difficulty, which makes
    the added variances conservative."""
    est = a.estimate - b.estimate
    se = math.sqrt(a.se ** 2 + b.se ** 2)
    df = welch_df(a.se, a.df, b.se, b.df)
    return MeanEstimate(est, se, _interval(est, se, alpha, df), float("nan"), min(a.n, b.n),
                        min(a.N, b.N), df)


def p_value(est: MeanEstimate) -> float:
    """Two-sided Student-t p-value of ``estimate = 0`` (``est.df`` degrees of freedom);
    1 when the standard error is 0 (no evidence can be read from a degenerate interval)."""
    if not est.se > 0:
        return 1.0
    return float(2 * stats.t.sf(abs(est.estimate) / est.se, est.df))


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
    so every rank set holds at once with probability ``>= 1 - alpha`` when the pairwise
    p-values are valid)."""
    k = len(names)
    better = {s: 0 for s in names}  # systems significantly better than s
    worse = {s: 0 for s in names}
    for p in pairs:
        if p["p_adjusted"] < alpha:
            hi, lo = (p["a"], p["b"]) if p["estimate"] > 0 else (p["b"], p["a"])
            better[lo] += 1
            worse[hi] += 1
    return {s: (1 + better[s], k - worse[s]) for s in names}


def _labels_needed(var: float, room) -> int:
    """Smallest ``n >= MIN_LABELS`` with ``var / n <= room(n)`` (``room``: the squared
    half-width over ``t_{n-1}^2`` left for the labeled part, increasing in ``n``), by
    bisection up to 10^7 (:func:`scoreband.conformal.core.first_passing`)."""
    from scoreband.conformal.core import first_passing  # lazy: the conformal package

    def ok(n):
        r = room(n)
        return r > 0 and var / n <= r

    return first_passing(ok, MIN_LABELS, 10 ** 7)


def labels_for_width(width: float, alpha: float, var_y: float, var_resid: float,
                     lam: float, var_f: float, n_unlabeled: int, tuned: bool = True) -> dict:
    """Labels that give a Student-t interval of ``width`` (full width,
    ``2 t_{n-1} se``): for the labels alone ``var(y) / n <= (width / 2 t)^2``; for PPI++
    with this ``lam`` and ``n_unlabeled`` unlabeled rows
    ``var(y - lam f) / n <= (width / 2 t)^2 - lam^2 var(f) / N`` - None when the unlabeled
    rows' own variance already exceeds the width (more unlabeled rows are needed, not more
    labels). ``tuned``: PPI++'s weight is fitted on the labels, so its interval takes
    ``t_{n-2}`` (:func:`ppi_arrays`). At least :data:`MIN_LABELS`.

    >>> labels_for_width(0.2, 0.05, 1.0, 0.25, 0.9, 1.0, 10_000)["classical"]
    387
    """
    h = width / 2

    def room_classical(n):
        return (h / t_crit(alpha, n - 1)) ** 2

    def room_ppi(n):
        t = t_crit(alpha, n - 2 if tuned and n < TUNED_PENALTY_BELOW else n - 1)
        return (h / t) ** 2 - lam ** 2 * var_f / max(n_unlabeled, 1)

    classical = _labels_needed(var_y, room_classical) if var_y > 0 else MIN_LABELS
    reachable = (h / t_crit(alpha, 10 ** 7)) ** 2 > lam ** 2 * var_f / max(n_unlabeled, 1)
    ppi = _labels_needed(var_resid, room_ppi) if reachable else None
    return {"width": width, "classical": int(classical),
            "ppi++": None if ppi is None else int(ppi)}
