"""The conformity-score seam (:mod:`scoreband.conformal.scores`): each score's band is
exactly the set its threshold admits, the methods rank the score they declare, and split,
weighted and Mondrian calibration, with or without randomised tie-breaking, take any score
and save and load it."""

import warnings

import numpy as np
import pytest

from scoreband.conformal import (
    CQR,
    CRC,
    Fitted,
    Marginal,
    Mondrian,
    SplitConformal,
    WeightedSplit,
    absolute_residual_interval,
    conformal_quantile,
    load_calibrator,
    save_calibrator,
)
from scoreband.conformal.scores import (
    ABSOLUTE_RESIDUAL,
    QUANTILE_RESIDUAL,
    SCORES,
    AbsoluteResidual,
    CRCResidual,
    ModelOutput,
    QuantileResidual,
    score_from_config,
)
from scoreband.datatypes import Predictions
from scoreband.errors import CalibratorMismatch, InputError


def _pred(n, seed, emb_shift=0.0):
    rng = np.random.default_rng(seed)
    m = rng.uniform(0.2, 0.8, n)
    sd = rng.uniform(0.02, 0.1, n)
    y = np.clip(m + rng.normal(0, 1, n) * sd, 0, 1)
    emb = rng.normal(emb_shift, 1, (n, 2))
    return Predictions(m, lo=m - sd, hi=m + sd, embedding=emb), y


@pytest.mark.parametrize("score", [AbsoluteResidual(), QuantileResidual(), CRCResidual(1.7)])
def test_the_band_is_the_set_the_threshold_admits(score):
    pred, y = _pred(500, 0)
    s = score.score(pred, y)
    for q in (float(np.quantile(s, 0.8)), np.quantile(s, 0.5) + 0.01 * np.arange(500) / 500):
        lo, hi = score.interval(pred, q)
        inside = (lo - 1e-12 <= y) & (y <= hi + 1e-12)
        np.testing.assert_array_equal(inside, s <= q + 1e-12)


def test_each_method_ranks_the_score_it_declares():
    assert SplitConformal(0.1).score is ABSOLUTE_RESIDUAL and Fitted.score is ABSOLUTE_RESIDUAL
    assert CQR.score is QUANTILE_RESIDUAL and Marginal.score is QUANTILE_RESIDUAL
    assert WeightedSplit(0.1).score == ABSOLUTE_RESIDUAL


def test_absolute_residual_interval_is_the_class_on_its_default_score():
    pred, y = _pred(300, 1)
    test, _ = _pred(50, 2)
    band = SplitConformal(0.1, clip=False).fit(pred, y).predict(test)
    lo, hi, q = absolute_residual_interval(pred.median, y, test.median, 0.1)
    np.testing.assert_array_equal(band.lo01, lo)
    np.testing.assert_array_equal(band.hi01, hi)


def test_split_conformal_on_the_quantile_residual_is_cqr_on_the_given_interval(tmp_path):
    pred, y = _pred(400, 3)
    test, _ = _pred(80, 4)
    cal = SplitConformal(0.1, score="quantile-residual").fit(pred, y)
    q = conformal_quantile(np.maximum(pred.lo - y, y - pred.hi), 0.1)
    assert cal.params_["q"] == q and cal.params_["score"] == "quantile-residual"
    band = cal.predict(test)
    np.testing.assert_allclose(band.lo01, np.clip(test.lo - q, 0, 1), rtol=0, atol=0)
    np.testing.assert_allclose(band.hi01, np.clip(test.hi + q, 0, 1), rtol=0, atol=0)
    again, _ = load_calibrator(save_calibrator(tmp_path / "c.json", cal))
    assert again.score == QUANTILE_RESIDUAL
    np.testing.assert_array_equal(again.predict(test).lo01, band.lo01)
    with pytest.raises(InputError, match="quantile-residual score needs the uncalibrated"):
        SplitConformal(0.1, score="quantile-residual").fit(Predictions(pred.median), y)


def test_the_crc_residual_at_one_omega_is_crc_with_that_omega():
    pred, y = _pred(600, 5)
    test, _ = _pred(100, 6)
    crc = CRC(0.1, omegas=[1.3]).fit(pred, y).predict(test)
    split = SplitConformal(0.1, score=CRCResidual(1.3)).fit(pred, y).predict(test)
    np.testing.assert_allclose(split.lo01, crc.lo01, rtol=0, atol=1e-15)
    np.testing.assert_allclose(split.hi01, crc.hi01, rtol=0, atol=1e-15)


@pytest.mark.parametrize("score", ["absolute-residual", "quantile-residual",
                                   {"name": "crc-residual", "omega": 0.8}])
def test_mondrian_and_randomisation_take_any_score(tmp_path, score):
    pred, y = _pred(600, 7)
    groups = np.where(pred.median > 0.5, "high", "low")
    test, _ = _pred(120, 8)
    tgroups = np.where(test.median > 0.5, "high", "low")
    cal = Mondrian(SplitConformal(0.2, score=score, randomize=True, seed=3)).fit(pred, y,
                                                                                 groups)
    band = cal.predict(test, tgroups)
    assert cal.params_["groups"]["high"]["q"] != cal.params_["groups"]["low"]["q"]
    assert all("tie_keep" in p for p in cal.params_["groups"].values())
    again, _ = load_calibrator(save_calibrator(tmp_path / "c.json", cal))
    b2 = again.predict(test, tgroups)
    np.testing.assert_array_equal(b2.lo01, band.lo01)
    np.testing.assert_array_equal(b2.hi01, band.hi01)


@pytest.mark.parametrize("score", ["quantile-residual", {"name": "crc-residual", "omega": 1.0}])
def test_weighted_split_takes_any_score(tmp_path, score):
    pred, y = _pred(300, 9)
    test, _ = _pred(200, 10, emb_shift=0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = WeightedSplit(0.1, score=score).fit(pred, y)
        band = cal.predict(test)
        again, _ = load_calibrator(save_calibrator(tmp_path / "c.json", cal))
        b2 = again.predict(test)
    from scoreband.conformal.weighted import likelihood_ratio_weights, weighted_thresholds

    s = score_from_config(score)
    assert cal.params_["scores"] == s.score(pred, y).tolist()
    # each test item's band is the score's interval at its own weighted threshold
    w_cal, w_test = likelihood_ratio_weights(pred.embedding, test.embedding)
    q = weighted_thresholds(s.score(pred, y), w_cal, w_test, 0.1)
    assert np.isfinite(q).all() and not band.full_range.any()
    lo, hi = s.interval(test, q)
    np.testing.assert_array_equal(band.lo01, np.clip(lo, 0, 1))
    np.testing.assert_array_equal(band.hi01, np.clip(hi, 0, 1))
    np.testing.assert_array_equal(b2.lo01, band.lo01)


def test_a_negative_saved_threshold_is_refused_only_for_a_nonnegative_score():
    number_calls = []

    def number(v, name, lo=None, inf_ok=True):
        number_calls.append((name, lo))
        if lo is not None and v < lo:
            raise CalibratorMismatch(name)

    with pytest.raises(CalibratorMismatch):
        SplitConformal.check_params({"q": -0.1, "n": 10}, "p", number)
    SplitConformal.check_params({"q": -0.1, "n": 10, "score": "quantile-residual"}, "p", number)
    with pytest.raises(CalibratorMismatch, match="unknown conformity score"):
        SplitConformal.check_params({"q": 0.1, "score": "cubic"}, "p", number)
    with pytest.raises(CalibratorMismatch, match="is above 1"):
        SplitConformal.check_params({"q": 1.5, "n": 10}, "p", number)


def test_scores_by_name_and_bad_names():
    assert set(SCORES) == {"absolute-residual", "quantile-residual", "crc-residual"}
    assert score_from_config(ABSOLUTE_RESIDUAL) is ABSOLUTE_RESIDUAL
    assert score_from_config({"name": "crc-residual", "omega": 2}) == CRCResidual(2.0)
    with pytest.raises(InputError, match="unknown conformity score 'cubic'"):
        SplitConformal(0.1, score="cubic")
    with pytest.raises(InputError, match="omega"):
        CRCResidual(-1)
    with pytest.raises(InputError, match="crc-residual"):
        score_from_config({"name": "crc-residual", "beta": 1})
    out = ModelOutput(median=np.array([0.5]))
    assert ABSOLUTE_RESIDUAL.score(out, np.array([0.25])).tolist() == [0.25]


# ------------------------------------------------------------------ prediction-set scores
@pytest.mark.parametrize("name", ["lac", "aps"])
def test_set_scores_admit_what_the_threshold_admits_and_cover(name):
    """LAC / APS (:data:`SET_SCORES`): a label is in the set exactly when its score is at
    most q; over 2,000 seeded calibrations of 50 rows (labels drawn from the stated
    probabilities) the set of a fresh row covers >= 1 - alpha - 2.5 SE."""
    from scoreband.conformal.core import conformal_quantile
    from scoreband.conformal.scores import SET_SCORES, set_score

    sc = set_score(name)
    assert sc is SET_SCORES[name] and sc.name == name
    rng = np.random.default_rng(5)
    R, n, alpha = 2000, 50, 0.1
    P = rng.dirichlet([1.0, 1.0, 0.5], size=(R, n + 1))
    u = rng.random((R, n + 1, 1))
    y = (u > np.cumsum(P, axis=2)).sum(axis=2)  # label drawn from each row's P
    S = sc.score(P[:, :n].reshape(-1, 3), y[:, :n].ravel()).reshape(R, n)
    q = np.array([conformal_quantile(s, alpha) for s in S])
    sets = sc.sets(P[:, n], q)
    covered = sets[np.arange(R), y[:, n]]
    se = np.sqrt(alpha * (1 - alpha) / R)
    assert covered.mean() >= 1 - alpha - 2.5 * se
    all_scores = np.column_stack([sc.score(P[:, n], np.full(R, j)) for j in range(3)])
    np.testing.assert_array_equal(sets, all_scores <= q[:, None] + 1e-12)
    nan_row = sc.sets(np.array([[np.nan, 0.5, 0.5]]), 0.9)
    assert not nan_row.any()


def test_set_score_names():
    from scoreband.conformal.scores import set_score

    with pytest.raises(InputError, match="set method 'top1': choose lac or aps"):
        set_score("top1")
