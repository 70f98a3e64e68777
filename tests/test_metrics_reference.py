"""The agreement metrics counted without scipy.stats (its import is half of evaluate's
start-up budget) agree with scipy to rounding: Kendall's tau-c, Pearson, Spearman and the
Clopper-Pearson interval, on ties-heavy and continuous data."""

import numpy as np
import pytest
from scipy import stats

from scoreband import metrics as M


def _pairs(seed):
    rng = np.random.default_rng(seed)
    for t in range(200):
        n = int(rng.integers(2, 300))
        kind = t % 5
        if kind == 0:
            yield rng.integers(1, 6, n).astype(float), rng.normal(size=n)
        elif kind == 1:
            yield rng.normal(size=n), np.round(rng.uniform(1, 5, n) * 3) / 3
        elif kind == 2:
            yield rng.integers(0, 3, n).astype(float), rng.integers(0, 100, n).astype(float)
        elif kind == 3:  # over 64 levels in both: scipy's own path
            yield rng.normal(size=n), rng.normal(size=n)
        else:
            yield rng.integers(1, 3, n).astype(float), rng.integers(1, 3, n).astype(float)


@pytest.mark.parametrize("seed", [0, 1])
def test_agreement_metrics_match_scipy(seed):
    checked = 0
    for x, y in _pairs(seed):
        tau = stats.kendalltau(x, y, variant="c").statistic
        ours = M.kendall_tau_c(x, y)
        assert np.isnan(ours) == np.isnan(tau)
        if not np.isnan(tau):
            assert ours == float(tau)
            checked += 1
        if np.ptp(x) > 0 and np.ptp(y) > 0:
            # bit for bit: the golden evaluate outputs must not move
            assert M.pearson(x, y) == float(stats.pearsonr(x, y).statistic)
            assert M.spearman(x, y) == float(stats.spearmanr(x, y).statistic)
    assert checked > 150


def test_clopper_pearson_matches_scipy():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, 2000))
        k = int(rng.integers(0, n + 1))
        conf = float(rng.choice([0.8, 0.9, 0.95, 0.99]))
        ref = stats.binomtest(k, n).proportion_ci(confidence_level=conf, method="exact")
        lo, hi = M.binomial_ci(k, n, conf)
        assert lo == pytest.approx(ref.low, abs=1e-10)
        assert hi == pytest.approx(ref.high, abs=1e-10)
