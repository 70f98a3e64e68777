"""A user's own label design at small counts (`systems --inclusion-prob COL`): independent
(Poisson) labels with probabilities spanning a 20x range and no floor, 3 systems x 300 items,
alpha 0.1, 20 / 50 / 100 expected labels per system. The truth is each system's mean over
its 300 rows. Designs: probabilities unrelated to the rows, rising with the metric, falling
with it (the two that put the heaviest weights on one end of the scale).

Measured before the fix (Kish's degrees of freedom, PPI++ at any count): 0.73-0.85 at 20
expected labels. Tolerance: >= 0.88 over 1,000 draws x 3 systems (SE ~0.005)."""

from __future__ import annotations

import numpy as np
import pytest

from scoreband.system_level.active import MIN_PPI_EFFECTIVE, active_arrays
from scoreband.system_level.betting import betting_arrays, ipw_terms, predictable_fit
from scoreband.system_level.ppi import t_crit
from scoreband.system_level.simulate import spread_design, spread_tables

ALPHA, N, R = 0.10, 300, 1000


# the simulation benchmarks/label_designs.py shares
_tables, _design = spread_tables, spread_design


@pytest.mark.statistical
@pytest.mark.parametrize("mode", ["unrelated", "rising", "falling"])
def test_a_users_spread_design_covers_at_20_50_100_expected_labels(mode):
    rng = np.random.default_rng(["unrelated", "rising", "falling"].index(mode) + 70)
    for n in (20, 50, 100):
        y, f = _tables(rng, (R, 3, N))
        pi = _design(rng, mode, f, n)
        lab = rng.random(pi.shape) < pi
        ok = lab.sum(-1) >= 2
        est, se, lam, df, _ = active_arrays(y, f, pi, lab)
        cover = np.abs(est - y.mean(-1)) <= t_crit(ALPHA, df) * se
        c = float(np.mean(cover[ok]))
        assert c >= 0.88, (mode, n, c)
        # the labels alone below MIN_PPI_EFFECTIVE effective labels (the rule reads the
        # weights only)
        w = np.where(lab, 1 / pi, 0)
        kish = w.sum(-1) ** 2 / np.maximum((w ** 2).sum(-1), 1e-300)
        assert np.all(lam[kish < MIN_PPI_EFFECTIVE] == 0)


def test_without_the_corrections_the_same_designs_under_cover():
    """The check can fail: the t interval with Kish's degrees of freedom and PPI++ at every
    count covers < 0.88 at 20 expected labels where weights fall with the metric."""
    rng = np.random.default_rng(74)
    y, f = _tables(rng, (400, 3, N))
    pi = _design(rng, "falling", f, 20)
    lab = rng.random(pi.shape) < pi
    w = np.where(lab, 1 / pi, 0.0)
    kish = w.sum(-1) ** 2 / np.maximum((w ** 2).sum(-1), 1e-300)
    # the old interval: PPI++ weight fitted, Kish df, no spread rule
    import scoreband.system_level.active as active

    saved = active.SPREAD_LIMIT, active.MIN_PPI_EFFECTIVE
    try:
        active.SPREAD_LIMIT, active.MIN_PPI_EFFECTIVE = np.inf, 0
        est, se, _, df, _ = active_arrays(y, f, pi, lab)
    finally:
        active.SPREAD_LIMIT, active.MIN_PPI_EFFECTIVE = saved
    assert np.allclose(df, np.maximum(kish - 2, 1))
    c = float(np.mean(np.abs(est - y.mean(-1)) <= t_crit(ALPHA, df) * se))
    assert c < 0.88, c


def test_the_betting_interval_is_valid_for_the_population_mean():
    """The finite-sample interval (betting on inverse-probability-weighted terms with a
    predictable control variate) covers the population mean at a fixed design function:
    >= 0.90 - 2.5 SE over 600 draws at 50 expected labels of 300 - and says how wide the
    guarantee is where weights span 20x (the reason the command does not print it)."""
    rng = np.random.default_rng(75)
    y, f = _tables(rng, (600, N))
    v = np.exp(rng.uniform(0, np.log(20), f.shape))
    pi = np.minimum(v * 50 / (N * (19 / np.log(20))), 1.0)  # a fixed function: E v known
    lab = rng.random(pi.shape) < pi
    z, lo, hi = ipw_terms(y, pi, lab, predictable_fit(f, y, lab))
    # bets may not read the current row's range: the design's bounds for every row
    pmin = pi.min(-1, keepdims=True)
    lo, hi = np.broadcast_to(1 - 1 / pmin, z.shape), np.broadcast_to(1 / pmin, z.shape)
    low, up = betting_arrays(z, lo, hi, ALPHA)
    mu = 0.5 + 0.0  # E[y]: the rating is symmetric about 3 (q uniform, noise symmetric)
    c = float(np.mean((low <= mu) & (mu <= up)))
    assert c >= 0.9 - 2.5 * np.sqrt(0.09 / 600), c
    assert np.all(low <= up)
