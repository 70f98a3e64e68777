"""Active labeling for means (Zrnic and Candes, ICML 2024) and stratified PPI++ (Fisch et al.
2024): which rows to send to humans, and the means and differences estimated from labels
drawn with known, unequal probabilities.

Design. Row (or item) ``i`` is labeled with probability ``pi_i`` (``xi_i ~ Bernoulli(pi_i)``),
``pi_i`` proportional to an estimate ``u_i`` of the metric's error spread
``sqrt(E[(Y - f(X))^2 | X])``, mixed with uniform (weight ``mix``, which is also the floor:
no row gets less than ``mix`` times the uniform probability) and capped at 1, the expected
number of labels fixed (:func:`inclusion_probabilities`).

Estimate. With ``w_i = xi_i / pi_i`` and the self-normalised (Hajek) residual mean::

    mu_r  = sum_i w_i (y_i - lam f_i) / sum_i w_i
    theta = lam * mean_i f_i + mu_r                  (mean over every row, labeled or not)
    Z_i   = lam f_i + s (N / sum w) w_i (y_i - lam f_i - mu_r),   se^2 = var(Z) / N

``s^2 = n / (n - k)`` (``k = 1``; 2 when ``lam`` is fitted) is the small-sample correction the
uniform estimator takes through ``ddof`` (:func:`scoreband.system_level.ppi.ppi_arrays`), and the
interval is ``theta +/- t_{df} se`` with ``df = n_eff - k``, ``n_eff = (sum w)^2 / sum w^2``
over the labeled rows (Kish's effective sample size: ``n`` for a uniform design); a design
whose probabilities span more than :data:`SPREAD_LIMIT` to one takes Satterthwaite's count of
its variance estimate where smaller (:func:`_variance_df`). ``lam``
minimises ``var(Z)`` (``Z`` is linear in ``lam``, so exactly) and is clipped to [0, 1]. Valid
for any ``pi`` fixed before the labels are seen: ``E[w_i] = 1`` whatever ``pi``. The plain
inverse-probability form (``mean_i lam f_i + w_i (y_i - lam f_i)``, ``hajek=False``) is kept
for comparison: its interval is wider because the number of labels is random and its
residuals are not centred (``benchmarks/active_labels.py``).

Strata (tasks, dimensions): each stratum gets its own estimate and ``lam``; the stratified
estimate weighs them by their number of rows, its variance adds the weighted variances and
its degrees of freedom are Welch-Satterthwaite's (:func:`stratified`).
"""

from __future__ import annotations

import math

import numpy as np

from scoreband.system_level import MIN_LABELS
from scoreband.system_level.ppi import (
    MeanEstimate,
    classical_mean,
    ppi_mean,
    t_crit,
    welch_df,
)

__all__ = ["inclusion_probabilities", "systematic_draw", "active_arrays", "active_mean", "stratified",
           "predicted_variance_ratio", "stratified_arrays", "DEFAULT_MIX",
           "uninformative_cost", "active_is_worth_it", "MIN_STRATUM_LABELS", "pooled_strata",
           "certain_and_drawn", "weighted_estimate", "design_variance_ratio"]

#: weight of the uniform design in the mixture (and the floor: no row is labeled with less
#: than this times the uniform probability). 0.5 keeps an uninformative uncertainty within
#: ~3 % of the uniform width when its coefficient of variation is 0.5 or less
#: (variance ratio ~ 1 + (1 - mix)^2 cv^2) and keeps most of the gain of an informative one.
DEFAULT_MIX = 0.5


#: a design whose largest inclusion probability is more than this times its smallest takes
#: Satterthwaite's degrees of freedom of its variance estimate where smaller than Kish's
#: (:func:`_variance_df`); ``propose_labels``' designs (uniform mixed in at 0.5) stay within
#: it in the simulations and keep Kish's count, which costs them nothing
SPREAD_LIMIT = 4.0


#: PPI++ fits its weight on the labels only where their Kish effective count reaches this;
#: below it the weighted labels alone (a user's design with a 20x range of probabilities
#: and 20 expected labels, 9-11 effective: PPI++ covered 0.87 at nominal 0.90, the labels
#: alone 0.90-0.93)
MIN_PPI_EFFECTIVE = 20


def inclusion_probabilities(u, n_expected: float, mix: float = DEFAULT_MIX) -> np.ndarray:
    """Probabilities ``pi`` (shape of ``u``) summing to ``n_expected``, proportional to
    ``(1 - mix) u / mean(u) + mix`` and capped at 1 (the excess is spread over the others).
    Non-finite or negative ``u`` count as the mean of the others; all-zero ``u``: uniform.

    >>> p = inclusion_probabilities([1.0, 1.0, 2.0, 4.0], 2, mix=0.5)
    >>> p.round(3).tolist(), round(float(p.sum()), 6)
    ([0.375, 0.375, 0.5, 0.75], 2.0)
    """
    u = np.asarray(u, dtype=float)
    N = u.size
    if N == 0:
        return u.copy()
    if not 0 <= mix <= 1:
        raise ValueError(f"mix must lie in [0, 1], got {mix}")
    ok = np.isfinite(u) & (u >= 0)
    u = np.where(ok, u, np.mean(u[ok]) if ok.any() else 1.0)
    m = u.mean()
    v = (1 - mix) * (u / m if m > 0 else np.ones(N)) + mix
    n = float(min(max(n_expected, 0.0), N))
    pi = np.zeros(N)
    free = np.ones(N, bool)
    left = n
    for _ in range(N + 1):  # water-filling: cap at 1, rescale the rest
        pi[free] = left * v[free] / v[free].sum()
        over = free & (pi > 1)
        if not over.any():
            break
        pi[over] = 1.0
        free &= ~over
        left = n - (~free).sum()
        if left <= 0 or not free.any():
            pi[free] = 0.0 if left <= 0 else pi[free]
            break
    return np.clip(pi, 0.0, 1.0)


def systematic_draw(pi, order_u, start):
    """Which units are labeled: systematic sampling with probabilities ``pi`` in the order of
    ``order_u`` (one uniform per unit, e.g. from a hash of the seed and the unit's identity)
    from ``start`` in [0, 1). Unit ``i`` is drawn with probability exactly ``pi_i`` and the
    number drawn is ``floor(sum pi)`` or ``ceil(sum pi)`` (exactly ``sum pi`` when it is a whole
    number): a fixed number of labels, which at 30 labels gives ~3 % narrower intervals than
    independent Bernoulli draws (whose count varies). Vectorised over leading axes.

    >>> systematic_draw(np.array([0.5, 0.5, 1.0, 0.25, 0.75]), np.arange(5) / 5, 0.3).tolist()
    [True, False, True, False, True]
    """
    pi, order_u = np.asarray(pi, float), np.asarray(order_u, float)
    order = np.argsort(order_u, axis=-1, kind="stable")
    c = np.cumsum(np.take_along_axis(np.broadcast_to(pi, order.shape), order, -1), -1)
    start = np.asarray(start, float)[..., None] if np.ndim(start) else start
    hit = np.floor(c - start + 1e-12) - np.floor(np.concatenate(
        [np.zeros(c.shape[:-1] + (1,)), c[..., :-1]], -1) - start + 1e-12) >= 1
    out = np.empty(order.shape, bool)
    np.put_along_axis(out, order, hit, -1)
    return out


def predicted_variance_ratio(r2, p) -> float:
    """Variance of the active estimate over the uniform one at equal expected labels, from
    squared residuals ``r2`` of a uniform sample and the design ``p`` (any scale) those rows
    would get: ``mean(r2 / p) * mean(p) / mean(r2)`` (the residual part, which dominates when
    unlabeled rows are many). Pass ``u^2`` as ``r2`` to predict from the uncertainty alone,
    which assumes ``u`` is proportional to the true error spread.

    >>> round(predicted_variance_ratio([1.0, 1.0], [0.5, 2.0]), 3)
    1.562
    """
    r2, p = np.asarray(r2, float), np.asarray(p, float)
    den = float(np.mean(r2))
    return float(np.mean(r2 / p) * np.mean(p) / den) if den > 0 else 1.0


def uninformative_cost(p) -> float:
    """Width of the active estimate over the uniform one at equal expected labels when the
    uncertainty behind the design ``p`` (any scale) says nothing about the errors (their
    spread the same everywhere): ``sqrt(mean(1 / p) * mean(p))`` >= 1, the price of unequal
    weights (Kish's design effect). With ``mix = 0.5`` it is ~1 + cv(u)^2 / 8.

    >>> round(uninformative_cost([1.0, 1.0]), 3), round(uninformative_cost([0.5, 1.5]), 3)
    (1.0, 1.155)
    """
    p = np.asarray(p, float)
    p = p[np.isfinite(p) & (p > 0)]
    return float(np.sqrt(np.mean(1.0 / p) * np.mean(p))) if len(p) else 1.0


def active_is_worth_it(predicted_ratio: float, p) -> bool:
    """Whether to label by the design ``p`` rather than uniformly: the predicted width
    ratio's gain ``1 - predicted_ratio`` must exceed what the design costs should its
    uncertainty be uninformative (:func:`uninformative_cost` - 1). A prediction read off a
    few labels, or off the uncertainty itself, is too noisy to trust for a gain smaller than
    that cost; below it uniform labels lose at most that small gain and never pay the cost
    (Dialsumm, a calibrator's band widths: predicted 0.98-1.00x, realised 1.044x active).

    >>> active_is_worth_it(0.86, [0.63, 0.77, 1.03, 1.57]), active_is_worth_it(0.98, [0.5, 1.5])
    (True, False)
    """
    return bool(1.0 - float(predicted_ratio) > uninformative_cost(p) - 1.0)


def _var(a, ddof=1):
    return np.var(a, axis=-1, ddof=ddof)


def _cov(a, b):
    n = a.shape[-1]
    return np.sum((a - a.mean(-1, keepdims=True)) * (b - b.mean(-1, keepdims=True)), -1) / (n - 1)


def active_arrays(y, f, pi, labeled, lam=None, hajek: bool = True, lam_floor: float = 0.0):
    """The inverse-probability-weighted PPI mean, vectorised over leading axes.

    Parameters
    ----------
    y, f, pi : arrays (..., N)
        Target (any value where unlabeled), prediction and inclusion probability of every row.
    labeled : bool array (..., N)
    lam : float or None
        None fits it (PPI++: minimises the estimated variance, clipped to [lam_floor, 1];
        0 where the labels' Kish effective count is below :data:`MIN_PPI_EFFECTIVE`);
        0 gives the weighted mean of the labels alone, 1 plain PPI.
    hajek : bool
        Self-normalised residual mean (default), else the plain inverse-probability sum.

    Returns
    -------
    est, se, lam, df, n : arrays (...)
        ``est +/- t_crit(alpha, df) * se`` is the interval; ``n`` the number of labels. With
        every label equal the residual part takes the largest [0, 1] variance (``1/4``).
    """
    f, labeled, pi = (np.asarray(f, dtype=float), np.asarray(labeled, dtype=bool),
                      np.asarray(pi, dtype=float))
    y = np.where(labeled, np.asarray(y, dtype=float), 0.0)
    N = f.shape[-1]
    w = np.where(labeled, 1.0 / np.where(labeled, pi, 1.0), 0.0)
    n = labeled.sum(-1)
    if f.ndim == 1 and n < 2:
        raise ValueError(f"an interval needs at least 2 labels, got {int(n)}")
    sw, tuned = w.sum(-1, keepdims=True), lam is None
    k = 2 if tuned and np.all(n >= 3) else 1
    s = np.sqrt(n / np.maximum(n - k, 1))[..., None]
    if hajek:
        mu_y = (w * y).sum(-1, keepdims=True) / sw
        mu_f = (w * f).sum(-1, keepdims=True) / sw
        b = s * (N / sw) * w * (y - mu_y)
        c = s * (N / sw) * w * (f - mu_f)
    else:
        b, c = s * w * y, s * w * f
        mu_y = mu_f = None
    d = f - c  # Z(lam) = b + lam * d
    if tuned:
        lam = _fitted_lambda(b, d, w, sw, lam_floor)
    lam = np.broadcast_to(np.asarray(lam, dtype=float), f.shape[:-1]).copy()
    Z = b + lam[..., None] * d
    var = _var(Z) / N
    est = lam * f.mean(-1) + ((mu_y - lam[..., None] * mu_f)[..., 0] if hajek else
                              (w * (y - lam[..., None] * f)).sum(-1) / N)
    # labels with no spread: the residual part's variance would rest on chance
    ly = np.where(labeled, y, np.nan)
    flat = (np.nanmax(ly, -1) - np.nanmin(ly, -1)) == 0
    if np.any(flat):
        wc = (0.25 * s[..., 0] ** 2 * (w ** 2).sum(-1) / sw[..., 0] ** 2
              + lam ** 2 * _var(f) / N)
        var = np.where(flat, np.maximum(var, wc), var)
    df = _degrees_of_freedom(Z, pi, w, sw, labeled, k)
    se = np.where(n >= 2, np.sqrt(var), np.inf)  # (vectorised) fewer than 2 labels
    return est, se, lam, df, n


def _fitted_lambda(b, d, w, sw, lam_floor):
    """PPI++'s weight: the ``lam`` minimising ``var(b + lam d)``, clipped to
    ``[lam_floor, 1]``; 0 (the labels alone) where the labels' Kish effective count is below
    :data:`MIN_PPI_EFFECTIVE` (a rule on the design and the count, never on the values)."""
    vd = _var(d)
    lam = np.where(vd > 1e-15, -_cov(b, d) / np.where(vd > 1e-15, vd, 1.0), 0.0)
    lam = np.clip(lam, lam_floor, 1.0)
    n_eff0 = sw[..., 0] ** 2 / np.maximum((w ** 2).sum(-1), 1e-300)
    return np.where(n_eff0 < MIN_PPI_EFFECTIVE, 0.0, lam)


def _degrees_of_freedom(Z, pi, w, sw, labeled, k):
    """Kish's effective count less ``k``; a design spread over more than
    :data:`SPREAD_LIMIT` to one takes Satterthwaite's count of ``var(Z)`` where smaller."""
    n_eff = sw[..., 0] ** 2 / (w ** 2).sum(-1)
    spread = pi.max(-1) > SPREAD_LIMIT * np.maximum(pi.min(-1), 1e-300)
    df = np.where(spread, np.minimum(n_eff, _variance_df(Z, labeled)), n_eff)
    return np.maximum(df - k, 1.0)


def _variance_df(Z, labeled):
    """Satterthwaite's degrees of freedom of the variance estimate ``var(Z) / N``: its
    labeled rows' squared deviations ``a_i`` are what varies from draw to draw, so
    ``(sum a)^2 / sum a^2`` - a handful of heavily weighted labels carrying the variance
    give a few degrees of freedom, where Kish's count of the weights alone does not see
    which labels carry it (a user's design with a 20x range of probabilities, 20 expected
    labels: 0.85 coverage at nominal 0.90 with Kish's count, 0.93 with this one;
    ``tests/system_level/test_small_designs.py``)."""
    a = np.where(labeled, (Z - Z.mean(-1, keepdims=True)) ** 2, 0.0)
    s2 = (a ** 2).sum(-1)
    return np.where(s2 > 0, a.sum(-1) ** 2 / np.where(s2 > 0, s2, 1.0), np.inf)


def active_mean(y, f, pi, labeled, alpha: float = 0.05, lam=None, hajek: bool = True,
                lam_floor: float = 0.0) -> MeanEstimate:
    """:func:`active_arrays` for one system, as a :class:`MeanEstimate` (``N``: rows not
    labeled).

    >>> rng = np.random.default_rng(0)
    >>> y = rng.normal(size=2000); f = y + rng.normal(0, 0.5, 2000)
    >>> lab = rng.random(2000) < 0.05
    >>> e = active_mean(y, f, np.full(2000, 0.05), lab)
    >>> bool(e.ci[0] < 0 < e.ci[1]), e.n
    (True, 100)
    """
    est, se, lam_, df, n = active_arrays(y, f, pi, labeled, lam, hajek, lam_floor)
    est, se, df = float(est), float(se), float(df)
    h = float(t_crit(alpha, df)) * se
    return MeanEstimate(est, se, (est - h, est + h), float(lam_), int(n),
                        int(len(np.asarray(f)) - n), df)


def stratified(parts: list[tuple[float, MeanEstimate]], alpha: float) -> MeanEstimate:
    """Strata combined by size: ``parts`` are ``(rows in the stratum, its estimate)``; the
    estimate is the row-weighted mean, the variance the squared-weight sum, the degrees of
    freedom Welch-Satterthwaite's; ``lam`` the row-weighted mean of the strata's weights.

    >>> a = MeanEstimate(1.0, 0.1, (0.8, 1.2), 0.5, 10, 90, 8.0)
    >>> b = MeanEstimate(3.0, 0.1, (2.8, 3.2), 0.5, 10, 290, 8.0)
    >>> e = stratified([(100, a), (300, b)], 0.05)
    >>> round(e.estimate, 3), round(e.df, 2)
    (2.5, 9.76)
    """
    sizes = np.array([p[0] for p in parts], dtype=float)
    g = sizes / sizes.sum()
    est = float(sum(gi * e.estimate for gi, (_, e) in zip(g, parts, strict=True)))
    terms = [(gi * e.se) ** 2 for gi, (_, e) in zip(g, parts, strict=True)]
    var = float(sum(terms))
    den = sum(t ** 2 / e.df for t, (_, e) in zip(terms, parts, strict=True))
    df = var ** 2 / den if den > 0 else float(min(e.df for _, e in parts))
    se = math.sqrt(var)
    h = float(t_crit(alpha, df)) * se
    lam = float(sum(gi * e.lam for gi, (_, e) in zip(g, parts, strict=True)))
    return MeanEstimate(est, se, (est - h, est + h), lam, sum(e.n for _, e in parts),
                        sum(e.N for _, e in parts), float(df))


def stratified_arrays(y, f, pi, labeled, strata, lam=None, hajek: bool = True,
                      lam_floor: float = 0.0):
    """:func:`stratified` vectorised over leading axes, ``strata`` a 1-D label per row
    (shared by every leading index). Returns ``est, se, df``."""
    strata = np.asarray(strata)
    N = strata.shape[-1]
    est = var = den = 0.0
    for k in np.unique(strata):
        m = strata == k
        g = m.sum() / N
        e, s, _, d, _ = active_arrays(y[..., m], f[..., m], pi[..., m], labeled[..., m],
                                      lam, hajek, lam_floor)
        est = est + g * e
        t = (g * s) ** 2
        var = var + t
        den = den + t ** 2 / d
    df = np.where(den > 0, var ** 2 / np.where(den > 0, den, 1.0), 1.0)
    return est, np.sqrt(var), df


# ------------------------------------------------------------------ estimates of the study
#: a stratum of a system (or pair) with fewer labels is pooled with the other small ones;
#: the choice reads the counts only. Simulated (tests/system_level/test_active.py), stratified
#: active PPI++ covered 0.90 at nominal 0.95 with 4 labels in the smallest stratum and
#: 0.96-0.98 from 9-11 on
MIN_STRATUM_LABELS = 8


def pooled_strata(st, labeled) -> tuple[np.ndarray, list[str]]:
    """Strata with fewer than :data:`MIN_STRATUM_LABELS` labels pooled into one; a pool still
    too small joins the stratum with the most labels. Reads the counts only."""
    st = np.asarray(st, dtype=object).copy()
    names = np.unique(st)
    counts = {k: int(labeled[st == k].sum()) for k in names}
    small = [k for k in names if counts[k] < MIN_STRATUM_LABELS]
    if not small:
        return st, []
    pool = "(pooled: " + ", ".join(map(str, small)) + ")"
    st[np.isin(st, small)] = pool
    if sum(counts[k] for k in small) < MIN_STRATUM_LABELS:
        big = [k for k in names if k not in small]
        if big:
            target = max(big, key=lambda k: counts[k])
            st[st == pool] = target
            pool = f"{target} (with {', '.join(map(str, small))})"
            st[st == target] = pool
    return st, [str(k) for k in small]


def certain_and_drawn(y, f, pi, labeled, alpha, lam) -> MeanEstimate:
    """One mean from labels of two kinds: rows labeled with certainty (probability 1: the
    labels that existed before a proposal, a uniform sample as ``systems`` without a design
    assumes) and rows drawn with probabilities below 1. Each kind gives its own estimate of
    the mean - PPI++ on the certain labels (every other row unlabeled), the weighted PPI++
    of :func:`active_mean` on the drawn ones - and the two are combined with the
    inverse-variance weight ``v_B / (v_A + v_B)``: the combined variance
    ``v_A v_B / (v_A + v_B)`` is below either, so the interval is never wider than the
    certain labels' own beyond the ratio of the t quantiles (Welch degrees of freedom).
    Weighting the few drawn labels by ``1 / pi`` beside certain labels of weight 1 in one
    Hajek mean instead let 30 drawn labels outweigh 50 certain ones (THumB-like: intervals
    0.38-0.52 wide where the 50 alone gave 0.32). With one kind only: that kind's
    estimate."""
    cert = labeled & (pi >= 1)
    drawn = pi < 1
    if cert.sum() < MIN_LABELS or (labeled & drawn).sum() < 2:
        return active_mean(y, f, pi, labeled, alpha, lam)
    a = (ppi_mean(y[cert], f[cert], f[~cert], alpha, lam) if lam != 0.0 else
         classical_mean(y[cert], alpha))
    b = active_mean(y[drawn], f[drawn], pi[drawn], labeled[drawn], alpha, lam)
    va, vb = a.se ** 2, b.se ** 2
    g = vb / (va + vb) if va + vb > 0 else 0.5
    est = g * a.estimate + (1 - g) * b.estimate
    se = float(np.sqrt(g ** 2 * va + (1 - g) ** 2 * vb))
    df = welch_df(g * a.se, a.df, (1 - g) * b.se, b.df)
    h = float(t_crit(alpha, df)) * se
    return MeanEstimate(est, se, (est - h, est + h), g * a.lam + (1 - g) * b.lam,
                        int(labeled.sum()), int((~labeled).sum()), df)


def weighted_estimate(y, f, pi, labeled, st, alpha, lam, name, notes) -> tuple:
    """One system's (or paired difference's) estimate from labels drawn with probabilities
    ``pi`` (inverse-probability-weighted, self-normalised PPI++; :mod:`.active`), stratified
    by ``st`` when given; its labels-alone counterpart (``lam = 0``, same weights); why it is
    degenerate (None) and the per-stratum records."""
    why = None
    yl = y[labeled]
    if np.ptp(yl) == 0:
        why = (f"{name}: its {len(yl)} labels are all equal (no spread in the labels): the "
               "interval uses the largest variance a target on the scale can have instead")
        notes.append(why)
    if st is None:
        parts = [(None, np.ones(len(y), bool))]
    else:
        st, small = pooled_strata(st, labeled)
        if small:
            notes.append(f"{name}: strata {', '.join(small)} have fewer than "
                         f"{MIN_STRATUM_LABELS} labels each and are pooled")
        parts = [(k, st == k) for k in np.unique(st)]
    est, cls, recs = [], [], {}
    for k, m in parts:
        e = (certain_and_drawn(y[m], f[m], pi[m], labeled[m], alpha, lam)
             if lam != 0.0 and why is None else None)
        cl = certain_and_drawn(y[m], f[m], pi[m], labeled[m], alpha, 0.0)
        if e is not None and e.lam > 0 and np.ptp((y - e.lam * f)[m & labeled]) < 1e-12:
            why = (f"{name}: the mapped score predicts every label exactly (no spread in the "
                   "residuals): the labels alone are used")
            notes.append(why)
            e = None
        est.append((int(m.sum()), e if e is not None else cl))
        cls.append((int(m.sum()), cl))
        if k is not None:
            recs[str(k)] = {"n_rows": int(m.sum()), "n_labeled": int(labeled[m].sum()),
                            "estimate": est[-1][1].estimate, "lambda": est[-1][1].lam}
    if st is None:
        return est[0][1], cls[0][1], why, None
    return stratified(est, alpha), stratified(cls, alpha), why, recs


def design_variance_ratio(y, f, pi, labeled, lam) -> float:
    """Predicted variance ratio of the design ``pi`` over a uniform one at equal expected
    labels, from the labeled rows weighted by ``1 / pi`` (estimates of population means)."""
    w = 1.0 / pi[labeled]
    r = (y - lam * f)[labeled]
    r2 = (r - np.sum(w * r) / np.sum(w)) ** 2
    # population means by weighting: E[r2 / p] and E[r2], p the design's probabilities
    p = pi / np.mean(pi)
    num = np.sum(w * r2 / p[labeled]) / np.sum(w)
    den = np.sum(w * r2) / np.sum(w)
    return float(num / den) if den > 0 else 1.0
