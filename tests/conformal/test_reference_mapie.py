"""Split CP bounds against MAPIE's SplitConformalRegressor on the same prefit predictions."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, RegressorMixin

from scoreband.conformal import SplitConformal, absolute_residual_interval
from scoreband.records import Predictions

mapie_regression = pytest.importorskip("mapie.regression")


class Prefit(RegressorMixin, BaseEstimator):
    """A 'model' whose prediction is the first feature: the scorer's given predictions."""

    def fit(self, X, y):
        self.fitted_ = True
        return self

    def predict(self, X):
        return np.asarray(X)[:, 0]


@pytest.mark.parametrize("n_cal,alpha,seed", [(50, 0.1, 0), (333, 0.1, 1), (1000, 0.05, 2),
                                              (77, 0.2, 3)])
def test_split_cp_matches_mapie(n_cal, alpha, seed):
    rng = np.random.default_rng(seed)
    m = rng.uniform(0, 1, n_cal + 200)
    y = m + rng.normal(0, 0.1, len(m))
    mp = mapie_regression.SplitConformalRegressor(Prefit().fit(None, None),
                                                  confidence_level=1 - alpha, prefit=True)
    mp.conformalize(m[:n_cal, None], y[:n_cal])
    _, iv = mp.predict_interval(m[n_cal:, None])
    lo, hi, _ = absolute_residual_interval(m[:n_cal], y[:n_cal], m[n_cal:], alpha)
    np.testing.assert_allclose(lo, iv[:, 0, 0], atol=1e-9, rtol=0)
    np.testing.assert_allclose(hi, iv[:, 1, 0], atol=1e-9, rtol=0)
    # the estimator gives the same bounds (unclipped)
    b = SplitConformal(alpha, clip=False).fit(Predictions(m[:n_cal]), np.clip(y[:n_cal], 0, 1))
    assert b.params_["q"] > 0
