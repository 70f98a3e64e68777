"""Split CP bounds against MAPIE's SplitConformalRegressor on the same prefit predictions."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, RegressorMixin

from scoreband.conformal import SplitConformal, absolute_residual_interval
from scoreband.conformal.scores import ABSOLUTE_RESIDUAL
from scoreband.datatypes import Predictions

mapie_regression = pytest.importorskip("mapie.regression")


class Prefit(RegressorMixin, BaseEstimator):
    """A 'model' whose prediction is the first feature: the scorer's given predictions."""

    def fit(self, X, y):
        self.fitted_ = True
        return self

    def predict(self, X):
        return np.asarray(X)[:, 0]


def _mapie_bounds(m_cal, y_cal, m_test, alpha):
    mp = mapie_regression.SplitConformalRegressor(Prefit().fit(None, None),
                                                  confidence_level=1 - alpha, prefit=True)
    mp.conformalize(m_cal[:, None], y_cal)
    _, iv = mp.predict_interval(m_test[:, None])
    return iv[:, 0, 0], iv[:, 1, 0]


CASES = [(50, 0.1, 0), (333, 0.1, 1), (1000, 0.05, 2), (77, 0.2, 3)]


@pytest.mark.parametrize("n_cal,alpha,seed", CASES)
def test_split_cp_matches_mapie(n_cal, alpha, seed):
    """The class users run (:class:`SplitConformal`, fit / predict, unclipped) and the pure
    function give MAPIE's bounds; both compute them through the one absolute-residual score
    (``score`` / ``interval`` of :data:`~scoreband.conformal.scores.ABSOLUTE_RESIDUAL`)."""
    assert SplitConformal(alpha).score is ABSOLUTE_RESIDUAL
    rng = np.random.default_rng(seed)
    m = rng.uniform(0, 1, n_cal + 200)
    y = np.clip(m + rng.normal(0, 0.1, len(m)), 0, 1)
    lo_ref, hi_ref = _mapie_bounds(m[:n_cal], y[:n_cal], m[n_cal:], alpha)
    band = SplitConformal(alpha, clip=False).fit(Predictions(m[:n_cal]), y[:n_cal]).predict(
        Predictions(m[n_cal:]))
    np.testing.assert_allclose(band.lo01, lo_ref, atol=1e-9, rtol=0)
    np.testing.assert_allclose(band.hi01, hi_ref, atol=1e-9, rtol=0)
    lo, hi, _ = absolute_residual_interval(m[:n_cal], y[:n_cal], m[n_cal:], alpha)
    np.testing.assert_allclose(lo, lo_ref, atol=1e-9, rtol=0)
    np.testing.assert_allclose(hi, hi_ref, atol=1e-9, rtol=0)


@pytest.mark.parametrize("n_cal,alpha,seed", CASES)
def test_calibrate_and_apply_on_a_table_match_mapie(n_cal, alpha, seed):
    """``scoreband.calibrate`` / ``scoreband.apply`` on a table on 1-5 (the path of the CLI's
    calibrate and apply): MAPIE's bounds on the native scale, clipped to the scale."""
    import pandas as pd

    from scoreband import api

    rng = np.random.default_rng(seed)
    m = rng.uniform(1, 5, n_cal + 200)
    y = np.clip(m + rng.normal(0, 0.4, len(m)), 1, 5)
    df = pd.DataFrame({"score": m, "human": y})
    cols = dict(target="human", scale=(1, 5), median="score")
    fit = api.calibrate(df.iloc[:n_cal], **cols, method="split", alpha=alpha)
    out = api.apply(df.iloc[n_cal:], fit).table
    lo_ref, hi_ref = _mapie_bounds(m[:n_cal], y[:n_cal], m[n_cal:], alpha)
    np.testing.assert_allclose(out["band_lo"], np.clip(lo_ref, 1, 5), atol=1e-9, rtol=0)
    np.testing.assert_allclose(out["band_hi"], np.clip(hi_ref, 1, 5), atol=1e-9, rtol=0)
