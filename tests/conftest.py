import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def heteroscedastic(rng, n, informative=True):
    """Exchangeable data on [0, 1]: median, an uncalibrated 90 % pair, targets."""
    sd = rng.uniform(0.02, 0.15, n)
    m = rng.uniform(0.15, 0.85, n)
    y = np.clip(m + rng.normal(0, 1, n) * sd, 0, 1)
    half = (sd if informative else np.full(n, 0.08)) * 1.0
    return m, np.clip(m - half, 0, 1), np.clip(m + half, 0, 1), y
