"""The adaptive design of `systems --propose-labels`: label by the uncertainty only where the
predicted gain beats what the design would cost were the uncertainty uninformative
(:func:`scoreband.system_level.active.active_is_worth_it`), else uniformly.

Simulated tables with a known truth (each resampling's mean over all of its rows), the flow
of the command: a uniform burn-in of labels predicts the gain of the design from the
uncertainty, the decision fixes the probabilities, then the labels are drawn (systematic) and
the inverse-probability-weighted PPI++ interval computed. Coverage tolerance (HELPERS.md):
>= 0.95 - 0.02 - 2.5 SE over R resamplings (SE <= 0.006); widths are means over the same R.
"""

from __future__ import annotations

import numpy as np
import pytest

from scoreband.system_level.active import (
    active_arrays,
    active_is_worth_it,
    inclusion_probabilities,
    predicted_variance_ratio,
    systematic_draw,
    uninformative_cost,
)
from scoreband.system_level.ppi import t_crit

ALPHA = 0.05
R = 1500
N = 600
BURN_IN = 30


def _bound(n_intervals):
    se = np.sqrt(ALPHA * (1 - ALPHA) / n_intervals)
    assert se <= 0.006
    return 1 - ALPHA - 0.02 - 2.5 * se


def _run(seed, sigma, u, n, adaptive=True):
    """R resamplings of N rows: targets on [0, 1] with error spread ``sigma`` (N,) around a
    biased metric; ``u`` (N,) the uncertainty the design reads. Returns coverage, mean
    width of the design's interval over the uniform one's, and the share of resamplings
    that chose the active design."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(0, 1, (R, N))
    y = np.clip(0.3 + 0.4 * q + rng.normal(0, 1, (R, N)) * sigma, 0, 1)
    f = 0.4 + 0.4 * q
    truth = y.mean(axis=1)
    p_active = inclusion_probabilities(u, n)
    p_uniform = np.full(N, n / N)
    # the burn-in: BURN_IN rows labeled uniformly (other draws of the same population),
    # their residuals around the metric (its bias removed, as the command's fitted map
    # does) predict the design's gain
    burn = rng.random((R, N)).argsort(axis=1)[:, :BURN_IN]
    r = np.take_along_axis(y - f, burn, axis=1)
    r2 = (r - r.mean(axis=1, keepdims=True)) ** 2
    pred = np.array([np.sqrt(predicted_variance_ratio(r2[i], p_active[burn[i]]))
                     for i in range(R)])
    use = np.array([active_is_worth_it(p, p_active) for p in pred]) if adaptive else \
        np.ones(R, bool)
    pi = np.where(use[:, None], p_active[None, :], p_uniform[None, :])
    lab = systematic_draw(pi, rng.random((R, N)), rng.random(R))
    est, se, _, df, _ = active_arrays(y, f, pi, lab)
    cover = np.abs(est - truth) <= t_crit(ALPHA, df) * se
    width = 2 * t_crit(ALPHA, df) * se
    lab_u = systematic_draw(np.broadcast_to(p_uniform, (R, N)), rng.random((R, N)),
                            rng.random(R))
    est_u, se_u, _, df_u, _ = active_arrays(y, f, np.broadcast_to(p_uniform, (R, N)), lab_u)
    width_u = 2 * t_crit(ALPHA, df_u) * se_u
    return float(cover.mean()), float(width.mean() / width_u.mean()), float(use.mean())


def test_the_rule_compares_the_predicted_gain_with_the_uninformative_cost():
    p = np.array([0.5, 1.0, 1.5])
    cost = uninformative_cost(p)
    assert cost == pytest.approx(np.sqrt(np.mean(1 / p) * np.mean(p)))
    assert uninformative_cost(np.ones(5)) == 1.0
    assert active_is_worth_it(1 - (cost - 1) - 0.01, p)
    assert not active_is_worth_it(1 - (cost - 1) + 0.01, p)
    assert not active_is_worth_it(1.0, np.ones(5))  # a uniform design never "pays"


@pytest.mark.statistical
@pytest.mark.slow
def test_an_uninformative_uncertainty_costs_nothing_and_covers():
    """The error spread is the same everywhere, the uncertainty varies (cv ~1) but says
    nothing: the plain design costs ~uninformative_cost (> 1.05x here), the adaptive one
    labels uniformly in most resamplings and stays within 3 % of uniform."""
    rng = np.random.default_rng(11)
    u = rng.gamma(1.0, 1.0, N)
    sigma = np.full(N, 0.12)
    cost = uninformative_cost(inclusion_probabilities(u, 30))
    assert cost > 1.05  # the case the rule exists for: the plain design would cost this
    cov, ratio, share = _run(1, sigma, u, 30, adaptive=False)
    assert ratio > 1.04, ratio  # the test can tell: without the rule it is wider
    cov, ratio, share = _run(1, sigma, u, 30)
    assert cov >= _bound(R), cov
    assert ratio <= 1.03, (ratio, share)
    assert share < 0.25, share


@pytest.mark.statistical
@pytest.mark.slow
@pytest.mark.parametrize("n", [30, 100])
def test_an_informative_uncertainty_keeps_its_gain_and_covers(n):
    """Error spread varying 8x across four strata, the uncertainty equal to it: the burn-in
    predicts the gain in almost every resampling and the design keeps it."""
    sigma = np.array([0.03, 0.06, 0.12, 0.24])[np.arange(N) % 4]
    cov, ratio, share = _run(2 + n, sigma, sigma, n)
    assert cov >= _bound(R), cov
    assert share > 0.9, share
    assert ratio <= 0.93, ratio
