"""Learn-then-Test for trust-or-escalate (SPEC section 12): binomial p-values over a grid of
uncertainty thresholds and fixed-sequence testing.

Pure functions on arrays. Items are accepted when their uncertainty ``u <= lambda``; the loss
of an item is 1 when its mapped score is off by more than the tolerance. For a grid
``lambda_1 < ... < lambda_J`` the null ``H_j: R(lambda_j) > alpha`` is tested with the exact
binomial p-value ``p_j = BinomCDF(k_j; n_j, alpha)`` (``n_j`` accepted items, ``k_j`` of them
wrong); testing ``H_start, H_start+1, ...`` in that fixed order at level ``delta`` and
stopping at the first one not rejected controls the family-wise error, so the last rejected
threshold has ``P(R(lambda_hat) <= alpha) >= 1 - delta`` over the calibration draw
(Angelopoulos et al. 2021, Learn then Test, section 4; Jung et al. 2024, Trust or Escalate).
The start is a fixed choice as long as it never looks at the calibration rows.

>>> import numpy as np
>>> u = np.linspace(0, 1, 400); loss = (np.arange(400) % 10 == 0) & (u > 0.5)
>>> res = ltt_threshold(u, loss, grid=np.linspace(0.1, 1, 10), alpha=0.1, delta=0.1)
>>> float(res["threshold"])
1.0
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["binomial_pvalues", "accepted_counts", "fixed_sequence", "ltt_threshold",
           "min_rejectable", "rejection_probability", "chained_sequences", "predicted_rejection", "choose_start",
           "threshold_grid", "stated_risk_curve", "label_free_start", "TOP_BLOCK_RESOLUTION",
           "STATED_RISK_PESSIMISM", "LIKELY_TOLERANCE"]

#: the published rule's resolution on a confidence (Jung et al., ICLR 2025, Trust or Escalate:
#: 5,000 thresholds evenly spaced on [0, 1]): uncertainties this close to the smallest one
#: form the top block, which enters the sequence whole (:func:`threshold_grid`)
TOP_BLOCK_RESOLUTION = 1 / 5000
#: the label-free prediction of a judge's risk curve adds this share of the risk level to the
#: error the judge states (:func:`stated_risk_curve`): judges are over-confident
STATED_RISK_PESSIMISM = 0.5
#: ``choose_start(rule="likely")`` takes the largest share among the thresholds whose
#: predicted rejection is within this of the best: a test nearly as sure to reject on more
#: items skips tests that could only stop the sequence
LIKELY_TOLERANCE = 0.01


def accepted_counts(u, loss, grid) -> tuple[np.ndarray, np.ndarray]:
    """``(n_j, k_j)``: items with ``u <= grid[j]`` and the wrong ones among them.

    ``u``, ``loss``: (n,) or (B, n) arrays (B resplits at once); ``grid``: (J,) ascending.
    Returns arrays of shape (J,) or (B, J).
    """
    u = np.asarray(u, dtype=float)
    loss = np.asarray(loss, dtype=float)
    grid = np.asarray(grid, dtype=float)
    if u.ndim == 1:
        n, k = accepted_counts(u[None], loss[None], grid)
        return n[0], k[0]
    order = np.argsort(u, axis=1, kind="stable")
    us = np.take_along_axis(u, order, axis=1)
    cum = np.concatenate([np.zeros((len(u), 1)),
                          np.cumsum(np.take_along_axis(loss, order, axis=1), axis=1)], axis=1)
    n = np.stack([np.searchsorted(row, grid, side="right") for row in us])
    k = np.take_along_axis(cum, n, axis=1)
    return n.astype(float), k


def binomial_pvalues(k, n, alpha: float) -> np.ndarray:
    """Exact binomial p-values of ``H: risk > alpha`` with ``k`` losses among ``n`` accepted
    items: ``P(Binom(n, alpha) <= k)``; 1 where ``n == 0`` (nothing accepted, nothing shown).

    >>> float(binomial_pvalues(0, 22, 0.1)) < 0.1 < float(binomial_pvalues(0, 21, 0.1))
    True
    """
    from scipy.stats import binom

    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    p = binom.cdf(k, n, alpha)
    return np.where(n > 0, p, 1.0)


def fixed_sequence(p, delta: float, start=0) -> int | np.ndarray:
    """Index of the last hypothesis rejected by fixed-sequence testing from ``start``
    upward (``p[start] <= delta``, ``p[start + 1] <= delta``, ... stop at the first above);
    -1 where ``p[start]`` is not rejected. ``p``: (J,) or (B, J); ``start``: int or (B,).

    >>> fixed_sequence(np.array([0.5, 0.01, 0.02, 0.2, 0.01]), 0.05, start=1)
    2
    >>> fixed_sequence(np.array([0.5, 0.01]), 0.05)
    -1
    """
    p = np.asarray(p, dtype=float)
    one = p.ndim == 1
    p = np.atleast_2d(p)
    B, J = p.shape
    start = np.broadcast_to(np.asarray(start, dtype=int), (B,))
    cols = np.arange(J)[None, :]
    fail = (p > delta) & (cols >= start[:, None])
    # the first failure at or after the start; J when every later test rejects
    first = np.where(fail.any(axis=1), np.argmax(fail, axis=1), J)
    out = np.where(first > start, first - 1, -1)
    return int(out[0]) if one else out


def chained_sequences(p, delta: float, starts, weights, *, mask: bool = False):
    """The largest index rejected by fixed sequences from several ``starts`` sharing
    ``delta`` (``weights``, summing to at most 1), joined into one chain: the graphical
    procedure of Bretz et al. (2009) on the graph ``j -> next unrejected j' > j`` (the last
    back to the first unrejected). Each start is tested at ``weights[i] * delta``; a rejected
    hypothesis hands its level to the next one up, so a sequence that reaches another's
    start tests on at their summed level. The family-wise error is at most ``delta`` (a
    closed test with Bonferroni local tests), so any rejected threshold keeps the
    guarantee; -1 when none is rejected. ``p``: (J,) ascending thresholds. ``mask``: the
    (J,) booleans of every rejected hypothesis instead.

    >>> p = np.array([0.01, 0.2, 0.06, 0.01, 0.3])
    >>> chained_sequences(p, 0.1, [0, 2], [0.5, 0.5])  # the second start at 0.05 fails
    0
    >>> chained_sequences(p, 0.1, [0, 3], [0.5, 0.5])  # 3 rejects at 0.05, its level to 4
    3
    >>> fixed_sequence(p, 0.1, 2) == chained_sequences(p, 0.1, [2], [1.0])
    True
    """
    p = np.asarray(p, dtype=float)
    J = len(p)
    w = np.zeros(J)
    for s, wt in zip(starts, weights, strict=True):
        w[int(s)] += float(wt)
    lo = int(min(starts))
    rejected = np.zeros(J, bool)
    while True:
        hit = np.flatnonzero(~rejected & (w > 0) & (p <= w * delta + 1e-15))
        if not len(hit):
            break
        j = int(hit[0])
        rejected[j] = True
        free = np.flatnonzero(~rejected[lo:]) + lo
        if len(free):
            up = free[free > j]
            w[int(up[0]) if len(up) else int(free[0])] += w[j]
        w[j] = 0.0
    if mask:
        return rejected
    got = np.flatnonzero(rejected)
    return int(got[-1]) if len(got) else -1


def min_rejectable(alpha: float, delta: float) -> int:
    """The fewest accepted items that can reject ``H: risk > alpha`` at level ``delta``
    (all of them right: ``(1 - alpha)^n <= delta``); a group with fewer calibration items
    cannot accept anything.

    >>> min_rejectable(0.1, 0.1), min_rejectable(0.2, 0.1)
    (22, 11)
    """
    return int(math.ceil(math.log(delta) / math.log1p(-alpha) - 1e-12))


def critical_losses(n, alpha: float, delta: float) -> np.ndarray:
    """The most losses among ``n`` accepted items that still reject (p-value <= delta);
    -1 where none does."""
    from scipy.stats import binom

    n = np.asarray(n, dtype=float)
    k = binom.ppf(delta, n, alpha)
    k = np.where(binom.cdf(k, n, alpha) <= delta, k, k - 1)
    return np.where(n > 0, k, -1)


def rejection_probability(n, risk, alpha: float, delta: float) -> np.ndarray:
    """Probability that ``n`` accepted items whose true risk is ``risk`` reject
    ``H: risk > alpha`` at level ``delta``: ``P(Binom(n, risk) <= k*(n))``."""
    from scipy.stats import binom

    kc = critical_losses(n, alpha, delta)
    return np.where(kc >= 0, binom.cdf(kc, np.asarray(n, float), np.clip(risk, 0, 1)), 0.0)


def predicted_rejection(share, n_train, k_train, n_cal: int, alpha: float,
                        delta: float, draws: int = 8) -> np.ndarray:
    """Probability that the test at each threshold rejects on ``n_cal`` calibration items,
    predicted from a training share where ``n_train[j]`` items were accepted (a share
    ``share[j]`` of them) and ``k_train[j]`` of those were wrong. Both draws count: the
    accepted count is ``Binom(n_cal, share)`` and the risk is uncertain around the training
    one (its Jeffreys posterior, at ``draws`` quantiles), so a threshold that trains on a
    handful of items is not taken for a sure thing.

    >>> p = predicted_rejection([0.05, 0.5], [25, 250], [0, 10], 500, 0.1, 0.1)
    >>> bool(p[1] > 0.9 > p[0] > 0.3)
    True
    """
    from scipy.special import betainc
    from scipy.stats import beta, binom

    share = np.clip(np.asarray(share, float), 0, 1)
    nt, kt = np.asarray(n_train, float), np.asarray(k_train, float)
    out = np.zeros(len(share))
    # only thresholds that can reject: enough items expected, a risk not surely above alpha
    live = (n_cal * share + 3 * np.sqrt(n_cal * share * (1 - share))
            >= min_rejectable(alpha, delta)) & \
        (beta.ppf(0.001, kt + 0.5, nt - kt + 0.5) <= alpha)
    if not live.any():
        return out
    share, nt, kt = share[live], nt[live], kt[live]
    mean, sd = n_cal * share, np.sqrt(n_cal * share * (1 - share))
    lo = np.maximum(0, np.floor(mean - 5 * sd - 1))
    width = int(np.max(np.minimum(n_cal, np.ceil(mean + 5 * sd + 1)) - lo)) + 1
    N = lo[:, None] + np.arange(width)[None, :]  # (J, W) accepted counts
    valid = N <= n_cal
    w = np.where(valid, binom.pmf(np.minimum(N, n_cal), n_cal, share[:, None]), 0.0)
    kc = critical_losses(np.arange(n_cal + 1), alpha, delta)[np.minimum(N, n_cal).astype(int)]
    q = (np.arange(draws) + 0.5) / draws
    r = beta.ppf(q[None, :], kt[:, None] + 0.5, nt[:, None] - kt[:, None] + 0.5)  # (J, Q)
    # P(Binom(N, r) <= kc) = I_{1 - r}(N - kc, kc + 1), where 0 <= kc < N
    ok = (kc >= 0) & (kc < N)
    a = np.where(ok, N - kc, 1.0)[:, :, None]
    b = np.where(ok, kc + 1, 1.0)[:, :, None]
    pr = betainc(a, b, 1 - r[:, None, :]).mean(axis=2)
    pr = np.where(ok, pr, np.where((kc >= N) & (N > 0), 1.0, 0.0))
    out[live] = np.sum(w * pr, axis=1)
    return out


def choose_start(share, n_train, k_train, n_cal: int, alpha: float, delta: float, *,
                 rule: str = "likely", min_share: float = 0.0,
                 tolerance: float = 0.0) -> int:
    """Where the fixed sequence starts, from a risk curve measured on rows the test never
    sees (at threshold j of the training share: ``share[j]`` accepted, ``n_train[j]``
    items, ``k_train[j]`` wrong) or predicted without labels (:func:`stated_risk_curve`).
    ``rule``:

    * ``"likely"``: the threshold whose test is predicted most likely to reject
      (:func:`predicted_rejection`; the first of equals); with ``tolerance`` > 0, among
      thresholds within ``tolerance`` of the best, the one accepting the most (the tests it
      skips could only stop the sequence). The label-free pairwise start takes
      :data:`LIKELY_TOLERANCE`; score triage keeps 0: on a 1,000-row judge table the
      tolerant start decided nothing on 3 of 20 splits (mean share 0.64, 0.73 without);
    * ``"expected"``: the threshold with the largest predicted accepted share if the
      sequence stopped there (``share * P(reject)``);
    * ``"first"``: the first threshold where enough items are accepted for a test to reject
      (``n_cal * share >= min_rejectable``).

    ``min_share``: no start accepting a smaller share (the first tests, on the few most
    confident items, are the sequence's weakest link). A start at the most confident 1 %
    decides nothing: too few items to reject.
    """
    share = np.asarray(share, float)
    floor = np.flatnonzero(share >= min_share - 1e-12)
    lo = int(floor[0]) if len(floor) else len(share) - 1
    if rule == "first":
        ok = np.flatnonzero(np.round(n_cal * share) >= min_rejectable(alpha, delta))
        ok = ok[ok >= lo]
        return int(ok[0]) if len(ok) else len(share) - 1
    if rule not in ("likely", "expected"):
        raise ValueError(f"start rule {rule!r}: choose likely, expected or first")
    pr = predicted_rejection(share, n_train, k_train, n_cal, alpha, delta)
    pr[:lo] = 0.0
    if pr.max() <= 0:
        return len(share) - 1
    if rule == "expected":
        return int(np.argmax(share * pr))
    if tolerance <= 0:
        return int(np.argmax(pr))
    return int(np.flatnonzero(pr >= pr.max() - tolerance)[-1])


def threshold_grid(u_train, size: int = 200, top_block: float = 0.0) -> np.ndarray:
    """The thresholds tested: up to ``size`` distinct quantiles of the uncertainties of the
    training share (never of the calibration rows' labels), ascending, the last one +inf
    (accept every item). Tied values enter together; ``top_block`` > 0: every uncertainty
    within ``top_block`` of the smallest enters with it (the first threshold ends that
    block: :data:`TOP_BLOCK_RESOLUTION` is the published rule's grid step, whose first
    test holds the whole pile of near-certain verdicts).

    >>> threshold_grid([0.0, 0.0001, 0.0001, 0.2, 0.5], 5, top_block=1 / 5000).tolist()
    [0.0001, 0.2, inf]
    """
    u = np.asarray(u_train, dtype=float)
    u = u[np.isfinite(u)]
    q = np.unique(np.quantile(u, np.linspace(0, 1, size + 1)[1:], method="inverted_cdf")) \
        if len(u) else np.array([])
    grid = np.append(q[:-1] if len(q) else q, np.inf)
    if top_block > 0 and len(u):
        end = float(np.max(u[u <= u.min() + top_block]))
        grid = np.unique(np.append(grid[grid > end], end))
    return grid


def stated_risk_curve(u, grid, alpha: float,
                      pessimism: float = STATED_RISK_PESSIMISM) -> tuple[np.ndarray, ...]:
    """A risk curve predicted without any label, for :func:`choose_start`: where ``u`` is
    the error a judge states for its verdict (``1 - max p``), the items accepted at
    ``grid[j]`` are predicted to err at their mean stated error plus ``pessimism * alpha``
    (judges are over-confident: a pile of verdicts stated at 99.99 % errs a few percent
    of the time). Returns ``(share, n, k)`` with ``k = n * predicted risk`` (pseudo-counts:
    the prediction is as uncertain as a measured risk on ``n`` items)."""
    us = np.sort(np.asarray(u, float))
    us = us[np.isfinite(us)]
    n = np.searchsorted(us, grid, side="right").astype(float)
    cum = np.concatenate([[0.0], np.cumsum(us)])
    mean = cum[n.astype(int)] / np.maximum(n, 1)
    risk = np.clip(mean + pessimism * alpha, 0, 1)
    return n / max(len(us), 1), n, n * risk


def label_free_start(u, grid, alpha: float, delta: float, min_share: float = 0.0) -> int:
    """The start of a fixed sequence whose items' stated errors ``u`` are the only thing
    read (no label): the threshold of ``grid`` whose test is predicted most likely to
    reject under :func:`stated_risk_curve` (``choose_start(rule="likely")``), accepting at
    least ``min_share``. Where the judge states near-certainty for a large pile of items
    the predicted risk stays flat across it and the start takes the pile whole: a first
    test on many items has the power a test on the most confident few lacks.

    >>> u = np.r_[np.full(150, 1e-5), np.linspace(0.01, 0.5, 250)]
    >>> grid = threshold_grid(u, 80, top_block=TOP_BLOCK_RESOLUTION)
    >>> int((u <= grid[label_free_start(u, grid, 0.15, 0.1, 0.2)]).sum()) >= 150
    True
    """
    share, n, k = stated_risk_curve(u, grid, alpha)
    return choose_start(share, n, k, int(len(np.asarray(u))), alpha, delta, rule="likely",
                        min_share=min_share, tolerance=LIKELY_TOLERANCE)


def ltt_threshold(u, loss, grid, alpha: float, delta: float, start: int = 0,
                  starts=None, weights=None) -> dict:
    """The trust-or-escalate threshold on calibration items ``(u, loss)``: fixed-sequence
    testing of ``H_j: R(grid[j]) > alpha`` from ``start`` upward at level ``delta``; with
    ``starts`` (and ``weights``, default equal) several sequences sharing ``delta``
    (:func:`chained_sequences`; ``start`` is then the first of them).

    Returns a dict: ``index`` (of the chosen threshold in ``grid``, -1 when nothing can be
    accepted), ``threshold`` (-inf then), ``n`` / ``k`` / ``p`` (per threshold) and
    ``accepted`` / ``risk`` (on these calibration items at the chosen threshold).
    """
    u, loss = np.asarray(u, dtype=float), np.asarray(loss, dtype=float)
    n, k = accepted_counts(u, loss, grid)
    p = binomial_pvalues(k, n, alpha)
    if starts is not None and len(starts) > 1:
        weights = [1 / len(starts)] * len(starts) if weights is None else weights
        j = chained_sequences(p, delta, starts, weights)
        start = int(min(starts))
    else:
        start = int(starts[0]) if starts is not None else int(start)
        j = int(fixed_sequence(p, delta, start))
    thr = float(grid[j]) if j >= 0 else -math.inf
    acc = u <= thr
    return {"index": j, "threshold": thr, "n": n, "k": k, "p": p, "start": int(start),
            "starts": [int(x) for x in starts] if starts is not None else [int(start)],
            "accepted": float(acc.mean()) if len(u) else 0.0,
            "risk": float(loss[acc].mean()) if acc.any() else 0.0}
