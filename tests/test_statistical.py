"""Coverage validity over many random splits, with tolerances from the binomial SE.

Theory (split conformal, exchangeable continuous scores): the expected coverage of a fresh
item is exactly k / (n + 1), k = ceil((n + 1)(1 - alpha)), which lies in
[1 - alpha, 1 - alpha + 1 / (n + 1)]. Each test below averages coverage over R splits; the
Monte-Carlo standard error is estimated from the per-split coverages and the mean must lie
within 4 SE (two-sided p ~ 6e-5 per check) of the theoretical interval.
"""

import warnings

import numpy as np
import pytest

from scoreband.conformal import (
    CRC,
    ClusterConservative,
    Mondrian,
    SplitConformal,
    conformal_rank,
    coverage_bounds,
)
from scoreband.conformal.split import TooFewCalibrationItems
from scoreband.metrics import covered
from scoreband.records import Predictions
from tests.conftest import heteroscedastic

pytestmark = pytest.mark.statistical
Z = 4.0


def _run(make, n_cal, n_test, reps, seed, data=heteroscedastic, groups=None):
    rng = np.random.default_rng(seed)
    covs = []
    for _ in range(reps):
        m, lo, hi, y = data(rng, n_cal + n_test)
        p = Predictions(m, lo=lo, hi=hi)
        cal = make().fit(p.take(slice(0, n_cal)), y[:n_cal])
        b = cal.predict(p.take(slice(n_cal, None)))
        covs.append(covered(b.lo01, b.hi01, y[n_cal:]).mean())
    covs = np.array(covs)
    return covs.mean(), covs.std(ddof=1) / np.sqrt(reps)


def _assert_in_band(mean, se, lo, hi):
    assert lo - Z * se <= mean <= hi + Z * se, (mean, se, lo, hi)


@pytest.mark.parametrize("n_cal", [19, 20, 100, 500])
def test_split_cp_coverage_in_theoretical_band(n_cal):
    mean, se = _run(lambda: SplitConformal(0.1), n_cal, 50, 1000, seed=n_cal)
    lo, hi = coverage_bounds(n_cal, 0.1)
    _assert_in_band(mean, se, lo, hi)


@pytest.mark.parametrize("n_cal", [19, 20])
def test_split_cp_small_n_exact(n_cal):
    # exact expected coverage k / (n + 1): 18/20 for n = 19, 19/21 for n = 20
    mean, se = _run(lambda: SplitConformal(0.1), n_cal, 100, 3000, seed=7 + n_cal)
    exact = conformal_rank(n_cal, 0.1) / (n_cal + 1)
    assert abs(mean - exact) <= Z * se, (mean, exact, se)


def test_split_cp_n6_full_range_exact():
    rng = np.random.default_rng(0)
    m, lo, hi, y = heteroscedastic(rng, 56)
    p = Predictions(m)
    with pytest.warns(TooFewCalibrationItems, match="At least 9 items"):
        cal = SplitConformal(0.1).fit(p.take(slice(0, 6)), y[:6])
    b = cal.predict(p.take(slice(6, None)))
    assert b.full_range.all()
    assert (b.lo01 == 0).all() and (b.hi01 == 1).all()
    assert covered(b.lo01, b.hi01, y[6:]).mean() == 1.0


@pytest.mark.parametrize("n_cal", [20, 200])
def test_crc_exact_variant_coverage(n_cal):
    # omega picked on one half, beta on the other: split-CP guarantee with n = n_cal / 2
    mean, se = _run(lambda: CRC(0.1, exact=True, omegas=np.arange(0, 3.01, 0.1)), n_cal, 50,
                    1000, seed=100 + n_cal)
    n_beta = n_cal - int(round(n_cal / 2))
    lo, hi = coverage_bounds(n_beta, 0.1)
    _assert_in_band(mean, se, lo, hi)


def test_crc_coverage_near_target():
    # picking omega and beta on the same items is slightly optimistic; with n = 500 the
    # shortfall is far below 1 point (allowed: 0.01 below 1 - alpha, stated in SPEC)
    mean, se = _run(lambda: CRC(0.1), 500, 100, 1000, seed=3)
    lo, hi = coverage_bounds(500, 0.1)
    _assert_in_band(mean, se, lo - 0.01, hi)


def test_crc_fallback_for_crossed_quantiles_is_valid():
    def crossed(rng, n):
        m, lo, hi, y = heteroscedastic(rng, n)
        return m, hi, lo, y  # swapped: every item crossed

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mean, se = _run(lambda: CRC(0.1), 100, 50, 1000, seed=11, data=crossed)
    _assert_in_band(mean, se, *coverage_bounds(100, 0.1))


def test_mondrian_group_conditional_coverage():
    rng = np.random.default_rng(5)
    reps, n_cal, n_test = 1000, 300, 150
    per_group = {"a": [], "b": [], "c": []}
    for _ in range(reps):
        n = n_cal + n_test
        g = rng.choice(["a", "b", "c"], size=n, p=[0.5, 0.3, 0.2])
        sd = np.where(g == "a", 0.03, np.where(g == "b", 0.08, 0.15))
        m = rng.uniform(0.2, 0.8, n)
        y = np.clip(m + rng.normal(0, 1, n) * sd, 0, 1)
        p = Predictions(m)
        cal = Mondrian(SplitConformal(0.1)).fit(p.take(slice(0, n_cal)), y[:n_cal], g[:n_cal])
        b = cal.predict(p.take(slice(n_cal, None)), g[n_cal:])
        cov = covered(b.lo01, b.hi01, y[n_cal:])
        for k in per_group:
            sel = g[n_cal:] == k
            per_group[k].append(cov[sel].mean())
    for v in per_group.values():
        v = np.array(v)
        se = v.std(ddof=1) / np.sqrt(reps)
        # smallest group has ~60 calibration items: upper end 1 - alpha + 1/61
        _assert_in_band(v.mean(), se, 0.9, 0.9 + 1 / 50)


def test_cluster_mondrian_coverage():
    rng = np.random.default_rng(9)
    reps, n_cal, n_test = 300, 400, 100
    covs = []
    for _ in range(reps):
        n = n_cal + n_test
        c = rng.integers(0, 3, n)
        emb = np.eye(3)[c] * 5 + rng.normal(0, 0.3, (n, 3))
        sd = np.array([0.03, 0.08, 0.15])[c]
        m = rng.uniform(0.2, 0.8, n)
        y = np.clip(m + rng.normal(0, 1, n) * sd, 0, 1)
        p = Predictions(m, lo=m - 0.05, hi=m + 0.05, embedding=emb)
        cal = ClusterConservative(CRC(0.1, omegas=[0, 1]), n_clusters=3, rule="mondrian")
        cal.fit(p.take(slice(0, n_cal)), y[:n_cal])
        b = cal.predict(p.take(slice(n_cal, None)))
        covs.append(covered(b.lo01, b.hi01, y[n_cal:]).mean())
    covs = np.array(covs)
    _assert_in_band(covs.mean(), covs.std(ddof=1) / np.sqrt(reps), 0.9 - 0.01, 0.9 + 1 / 100)
