import numpy as np
import pytest
from scipy import stats

from scoreband import metrics as M
from scoreband.errors import InputError


def test_tau_c_equals_scipy_on_ties_heavy_likert(rng):
    x = rng.integers(1, 6, 500).astype(float)
    y = np.clip(x + rng.integers(-1, 2, 500), 1, 5)
    assert M.kendall_tau_c(x, y) == pytest.approx(
        stats.kendalltau(x, y, variant="c").statistic, abs=1e-12)
    # tau-c differs from tau-b on a non-square contingency table
    y3 = np.clip(np.round(y / 2), 1, 3)
    assert M.kendall_tau_c(x, y3) != pytest.approx(stats.kendalltau(x, y3).statistic)


def test_coverage_sharpness_ups():
    lo, hi, y = np.array([0, 0.2, 0.4]), np.array([0.5, 0.3, 0.9]), np.array([0.6, 0.25, 0.5])
    assert M.coverage(lo, hi, y) == pytest.approx(2 / 3)
    assert M.sharpness(lo, hi) == pytest.approx((0.5 + 0.1 + 0.5) / 3)
    m = np.array([0.1, 0.25, 0.9])
    assert M.ups(m, lo, hi, y) == pytest.approx(
        stats.pearsonr(np.abs(m - y), hi - lo).statistic)


def test_constant_inputs_give_nan_not_crash():
    assert np.isnan(M.pearson([1, 1, 1], [1, 2, 3]))
    assert np.isnan(M.ups([0.5, 0.5], [0, 0], [1, 1], [0.2, 0.7]))


def test_rsg_and_agreement():
    assert M.ranking_scoring_gap(0.9, 3.0, 5) == pytest.approx(0.9 - 0.25)
    assert M.exact_agreement([2.5, 3.49], [3, 3]) == 1.0
    assert M.overconfidence_rate([0.995, 0.5, 0.999, 0.98]) == 0.5


def test_group_coverage_ci_contains_estimate(rng):
    y = rng.uniform(size=300)
    g = rng.choice(["a", "b"], 300)
    res = M.group_coverage(np.zeros(300), np.full(300, 0.9), y, g)
    for v in res.values():
        assert v["ci_low"] <= v["coverage"] <= v["ci_high"]
    assert M.worst_group_coverage(np.zeros(300), np.full(300, 0.9), y, g) == min(
        v["coverage"] for v in res.values())


def test_length_mismatch_refused():
    with pytest.raises(InputError, match="n=2"):
        M.coverage([0, 0], [1, 1], [0.5])


def test_theoretical():
    t = M.theoretical_coverage(99, 0.1)
    assert t["low"] == pytest.approx(0.9) and t["high"] == pytest.approx(0.91)
