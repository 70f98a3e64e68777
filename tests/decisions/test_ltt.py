"""The Learn-then-Test maths against a direct computation."""

import math

import numpy as np
import pytest
from scipy.stats import binom

from scoreband.decisions.ltt import (
    accepted_counts,
    binomial_pvalues,
    choose_start,
    critical_losses,
    fixed_sequence,
    ltt_threshold,
    min_rejectable,
    predicted_rejection,
    threshold_grid,
)


def test_counts_and_pvalues_match_a_direct_computation():
    rng = np.random.default_rng(0)
    u = rng.choice(np.linspace(0, 1, 37), 300)  # ties: whole blocks enter at once
    loss = (rng.uniform(size=300) < 0.1 + 0.3 * u).astype(float)
    grid = np.append(np.quantile(u, np.linspace(0.05, 0.95, 19)), np.inf)
    n, k = accepted_counts(u, loss, grid)
    p = binomial_pvalues(k, n, 0.15)
    for j, lam in enumerate(grid):
        acc = u <= lam
        assert n[j] == acc.sum() and k[j] == loss[acc].sum()
        assert p[j] == pytest.approx(binom.cdf(loss[acc].sum(), acc.sum(), 0.15), rel=1e-12)
    # batched (B, n) equals one at a time
    U, L = np.stack([u, u[::-1]]), np.stack([loss, loss[::-1]])
    nb, kb = accepted_counts(U, L, grid)
    assert np.array_equal(nb[1], accepted_counts(u[::-1], loss[::-1], grid)[0])
    assert np.array_equal(kb[0], k)


def test_empty_acceptance_has_pvalue_one():
    assert binomial_pvalues(0, 0, 0.1) == 1.0


def _fixed_sequence_loop(p, delta, start):
    last = -1
    for j in range(start, len(p)):
        if p[j] > delta:
            break
        last = j
    return last


def test_fixed_sequence_matches_the_loop():
    rng = np.random.default_rng(1)
    P = rng.uniform(0, 0.2, (500, 12))
    starts = rng.integers(0, 12, 500)
    got = fixed_sequence(P, 0.1, starts)
    want = [_fixed_sequence_loop(P[b], 0.1, starts[b]) for b in range(500)]
    assert np.array_equal(got, want)
    assert fixed_sequence(np.array([0.01, 0.01, 0.01]), 0.05) == 2


def test_min_rejectable_and_critical_losses():
    for alpha, delta in [(0.1, 0.1), (0.2, 0.05), (0.05, 0.1)]:
        n = min_rejectable(alpha, delta)
        assert (1 - alpha) ** n <= delta < (1 - alpha) ** (n - 1)
        for m in (n - 1, n, 3 * n, 500):
            kc = int(critical_losses(m, alpha, delta))
            if kc >= 0:
                assert binom.cdf(kc, m, alpha) <= delta < binom.cdf(kc + 1, m, alpha)
            else:
                assert binom.cdf(0, m, alpha) > delta


def test_ltt_threshold_is_the_last_rejected_from_the_start():
    rng = np.random.default_rng(2)
    u = rng.uniform(size=800)
    loss = (rng.uniform(size=800) < 0.02 + 0.4 * u ** 2).astype(float)
    grid = threshold_grid(rng.uniform(size=400), 50)
    assert grid[-1] == np.inf and np.all(np.diff(grid[:-1]) > 0)
    res = ltt_threshold(u, loss, grid, 0.1, 0.1, start=5)
    p = [binom.cdf(loss[u <= g].sum(), (u <= g).sum(), 0.1) if (u <= g).any() else 1.0
         for g in grid]
    j = _fixed_sequence_loop(np.array(p), 0.1, 5)
    assert res["index"] == j and res["threshold"] == grid[j]
    assert res["accepted"] == pytest.approx(np.mean(u <= grid[j]))
    # a start where no test can reject accepts nothing
    none = ltt_threshold(u, loss, grid, 0.1, 0.1, start=0)
    assert (u <= grid[0]).sum() < min_rejectable(0.1, 0.1)
    assert none["index"] == -1 and none["threshold"] == -math.inf and none["accepted"] == 0


def test_predicted_rejection_matches_monte_carlo():
    rng = np.random.default_rng(3)
    share, nt, kt, n_cal = np.array([0.3, 0.6]), np.array([150, 300]), np.array([6, 24]), 400
    pr = predicted_rejection(share, nt, kt, n_cal, 0.1, 0.1, draws=64)
    B = 40_000
    for j in range(2):
        r = rng.beta(kt[j] + 0.5, nt[j] - kt[j] + 0.5, B)
        N = rng.binomial(n_cal, share[j], B)
        K = rng.binomial(N, r)
        mc = np.mean(binom.cdf(K, N, 0.1) <= 0.1)
        assert pr[j] == pytest.approx(mc, abs=0.02)


def test_start_rules():
    share = np.linspace(0.01, 1, 100)
    risk = np.where(share < 0.5, 0.02, 0.3)
    nt = np.round(share * 500)
    kt = np.round(nt * risk)
    first = choose_start(share, nt, kt, 500, 0.1, 0.1, rule="first")
    likely = choose_start(share, nt, kt, 500, 0.1, 0.1, rule="likely")
    assert np.round(500 * share[first]) >= min_rejectable(0.1, 0.1) > np.round(
        500 * share[first - 1])
    assert first < likely and share[likely] < 0.6  # far into the safe part, not past it
    with pytest.raises(ValueError, match="likely, expected or first"):
        choose_start(share, nt, kt, 500, 0.1, 0.1, rule="best")
