"""``delta``: the training-conditional guarantee (issue 45) - coverage >= 1 - alpha with
probability >= 1 - delta over the calibration draw.

(a) the rank against a brute-force binomial tail in exact rationals; (b) the guarantee over
500 calibration draws for split, CQR, CHR (discrete targets, randomised ties) and Mondrian
per given group, each measured on fresh rows; (c) fit -> save -> load -> apply keeps delta,
and a file without it loads as the marginal guarantee; (d) the methods without an exact rank
refuse delta, saying why; (e) evaluate's share of splits below 1 - alpha.

Monte-Carlo tolerance of (b): with R = 500 draws, a share's standard error at delta = 0.1 is
sqrt(0.1 * 0.9 / 500) = 0.013; a share may exceed delta by at most 3 of them (0.04). Each
draw's coverage is measured on 20,000 fresh rows (standard error 0.002), so a calibrator at
exactly 1 - alpha is counted below half the time: that noise can only add to the share.
"""

from __future__ import annotations

import json
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

from scoreband.conformal import (
    CHR,
    CQR,
    SplitConformal,
    WeightedSplit,
    conditional_rank,
    conformal_rank,
    load_calibrator,
    make_calibrator,
    min_calibration_size,
    save_calibrator,
)
from scoreband.conformal.base import calibrator_from_state, delta_of, guarantee_of
from scoreband.conformal.core import conformal_quantile
from scoreband.conformal.persist import content_checksum
from scoreband.conformal.split import TooFewCalibrationItems
from scoreband.datatypes import Predictions, Scale
from scoreband.errors import InputError
from scoreband.evaluation import evaluate_splits
from scoreband.metrics import share_below

SCALE = Scale(1, 5)
DRAWS, FRESH, TOL = 500, 20_000, 0.04


def truth(rng, n):
    """The issue's simulated truth on [0, 1]: m ~ U(1, 5), y = clip(m + N(0, 0.5)) on 1-5."""
    m = rng.uniform(1, 5, n)
    return SCALE.to01(m), SCALE.to01(np.clip(m + rng.normal(0, 0.5, n), 1, 5))


# ------------------------------------------------------------------ (a) the rank
def _brute_rank(n: int, alpha: float, delta: float) -> int:
    """Smallest k >= the marginal rank with P(Binomial(n, 1 - alpha) >= k) <= delta, in
    exact rationals (the Beta(k, n + 1 - k) CDF at 1 - alpha); n + 1 when none is."""
    p = 1 - Fraction(repr(alpha))
    pmf = [math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(n + 1)]
    for k in range(conformal_rank(n, alpha), n + 1):
        if sum(pmf[k:]) <= Fraction(repr(delta)):
            return k
    return n + 1


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2, 0.45])
@pytest.mark.parametrize("delta", [0.01, 0.05, 0.1, 0.3, 0.7])
def test_rank_is_the_brute_force_binomial_tail(alpha, delta):
    for n in [*range(1, 80), 150, 233]:
        assert conditional_rank(n, alpha, delta) == _brute_rank(n, alpha, delta), n


def test_rank_reading_of_the_issue_and_large_n():
    assert (conformal_rank(100, 0.1), conditional_rank(100, 0.1, 0.1)) == (91, 95)
    k = conditional_rank(10**6, 0.1, 0.1)
    # normal approximation of the binomial tail: k ~ n p + z sqrt(n p q) + 1
    assert abs(k - (900_000 + 1.2816 * math.sqrt(10**6 * 0.09))) < 3


def test_min_calibration_size_is_the_first_finite_rank():
    for alpha in (0.05, 0.1, 0.2):
        for delta in (0.01, 0.1, 0.5):
            need = min_calibration_size(alpha, delta)
            assert conditional_rank(need, alpha, delta) <= need
            assert all(conditional_rank(n, alpha, delta) > n for n in range(1, need))


def test_too_few_rows_for_delta_give_the_whole_scale_flagged():
    rng = np.random.default_rng(0)
    m, y = truth(rng, 15)  # enough for alpha 0.1 (9), not for delta 0.1 (22)
    with pytest.warns(TooFewCalibrationItems, match="delta=0.1"):
        band = SplitConformal(0.1, delta=0.1).fit(Predictions(m), y).predict(Predictions(m))
    assert band.full_range.all() and (band.lo01 == 0).all() and (band.hi01 == 1).all()
    assert conformal_quantile(y, 0.1, delta=0.1) == math.inf


# ------------------------------------------------------------------ (b) the guarantee
def _share_below(coverages, alpha=0.1) -> float:
    return float(np.mean(np.asarray(coverages) < 1 - alpha))


def _coverage(band, y) -> float:
    return float(np.mean((band.lo01 <= y) & (y <= band.hi01)))


@pytest.mark.statistical
def test_split_guarantee_over_draws_and_the_marginal_band_misses_it():
    """The issue's target, at 500 draws: marginal bands fall below 0.90 on about half the
    calibrations, delta 0.1 bands on at most 0.10 (+ tolerance), at most 1.2x as wide."""
    rng = np.random.default_rng(45)
    n = 100
    m, y = truth(rng, DRAWS * n)
    mf, yf = truth(rng, FRESH)
    res = np.sort(np.abs(yf - mf))  # coverage of [m - q, m + q] is P(|y - m| <= q)
    cov, wid = {}, {}
    for d in (None, 0.1):
        qs = np.array([SplitConformal(0.1, delta=d).fit(Predictions(m[i::DRAWS]),
                                                      y[i::DRAWS]).params_["q"]
                       for i in range(DRAWS)])
        cov[d] = np.searchsorted(res, qs, side="right") / FRESH
        wid[d] = float(np.mean(qs))
    assert _share_below(cov[0.1]) <= 0.1 + TOL
    assert _share_below(cov[None]) >= 0.3  # the test can fail: the marginal rank does
    assert wid[0.1] / wid[None] <= 1.2


def _learned_share(cal, pred_train, y_train, draw_cal, fresh_pred, yf) -> float:
    """A learned method's model fitted once (the guarantee is conditional on it); its own
    conformal step on each calibration draw, its own bands on fresh rows."""
    cal.fit_model(pred_train, y_train)
    covs = []
    for i in range(DRAWS):
        p, y = draw_cal(i)
        cal.params_ = cal.fit_conformal(p, y)
        covs.append(_coverage(cal.predict(fresh_pred), yf))
    return _share_below(covs)


@pytest.mark.statistical
def test_cqr_guarantee_over_draws():
    rng = np.random.default_rng(7)
    n = 120

    def rows(k):
        m, y = truth(rng, k)
        return Predictions(m, features=np.c_[m, rng.normal(size=k)]), y

    train, y_tr = rows(400)
    cal_p, cal_y = rows(DRAWS * n)
    fresh, yf = rows(FRESH)
    share = _learned_share(CQR(0.1, delta=0.1), train, y_tr,
                           lambda i: (cal_p.take(slice(i * n, (i + 1) * n)),
                                      cal_y[i * n:(i + 1) * n]), fresh, yf)
    assert share <= 0.1 + TOL


@pytest.mark.statistical
def test_chr_guarantee_over_draws_on_discrete_targets():
    """Single integer ratings 1-5: CHR's classes are the five ratings and its randomised
    tie-breaking (on by default) runs at delta's rank."""
    rng = np.random.default_rng(11)
    n, scale = 100, Scale(1, 5, integer=True)

    def rows(k):
        m = rng.uniform(1, 5, k)
        y = scale.to01(np.clip(np.rint(m + rng.normal(0, 0.5, k)), 1, 5))
        return Predictions(np.full(k, np.nan), features=scale.to01(m)[:, None],
                           n_ratings=np.ones(k)), y

    train, y_tr = rows(600)
    cal_p, cal_y = rows(DRAWS * n)
    fresh, yf = rows(FRESH)
    share = _learned_share(CHR(0.1, delta=0.1, scale=scale), train, y_tr,
                           lambda i: (cal_p.take(slice(i * n, (i + 1) * n)),
                                      cal_y[i * n:(i + 1) * n]), fresh, yf)
    assert share <= 0.1 + TOL


@pytest.mark.statistical
def test_mondrian_given_guarantee_holds_in_each_group():
    """Two groups, one with twice the noise: each group's bands cover >= 0.9 of its fresh
    rows on all but delta of the calibrations."""
    rng = np.random.default_rng(3)
    n = 160

    def rows(k):
        g = rng.integers(0, 2, k)
        m = rng.uniform(1, 5, k)
        y = np.clip(m + rng.normal(0, 0.5, k) * (1 + g), 1, 5)
        return Predictions(SCALE.to01(m)), SCALE.to01(y), g.astype(str)

    fresh, yf, gf = rows(FRESH)
    # coverage of a group's [m - q, m + q] is P(|y - m| <= q) in that group
    res = {k: np.sort(np.abs(yf - fresh.median)[gf == k]) for k in ("0", "1")}
    covs = {"0": [], "1": []}
    for _ in range(DRAWS):
        p, y, g = rows(n)
        cal = make_calibrator("split", 0.1, mondrian="given", delta=0.1).fit(p, y, groups=g)
        for k in covs:
            q = cal.params_["groups"][k]["q"]
            covs[k].append(np.searchsorted(res[k], q, side="right") / len(res[k]))
    assert "per group" in guarantee_of(cal)
    band = cal.predict(fresh.take(slice(0, 2000)), groups=gf[:2000])  # the same q, applied
    k0 = gf[:2000] == "0"
    assert np.allclose((band.hi01 - band.lo01)[k0 & ~band.full_range
                                               & (band.lo01 > 0) & (band.hi01 < 1)],
                       2 * cal.params_["groups"]["0"]["q"])
    for k in covs:
        assert _share_below(covs[k]) <= 0.1 + TOL, k


# ------------------------------------------------------------------ (c) the contract
@pytest.mark.parametrize("method,mondrian", [("split", None), ("crc", None), ("cqr", None),
                                             ("split", "given"), ("auto", None)])
def test_fit_save_load_apply_keeps_delta(tmp_path, method, mondrian):
    rng = np.random.default_rng(0)
    m, y = truth(rng, 600)
    pred = Predictions(m, lo=np.clip(m - 0.1, 0, 1), hi=np.clip(m + 0.1, 0, 1),
                       features=None if method == "auto" else np.c_[m, rng.normal(size=600)])
    g = (m > 0.5).astype(int).astype(str)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = make_calibrator(method, 0.1, mondrian=mondrian, delta=0.05).fit(pred, y, groups=g)
        plain = make_calibrator(method, 0.1, mondrian=mondrian).fit(pred, y, groups=g)
        path = save_calibrator(tmp_path / "cal.json", cal)
        back, doc = load_calibrator(path)
        a, b = cal.predict(pred, groups=g), back.predict(pred, groups=g)
        wider = plain.predict(pred, groups=g)
    assert delta_of(back) == 0.05 and delta_of(plain) is None
    assert doc["guarantee"]["delta"] == 0.05 and doc["guarantee"]["alpha"] == 0.1
    assert "with probability at least 95 % over the calibration draw" in doc["guarantee"]["text"]
    assert np.array_equal(a.lo01, b.lo01) and np.array_equal(a.hi01, b.hi01)
    # a later rank: never narrower than the marginal band on the same rows
    assert np.mean(a.hi01 - a.lo01) >= np.mean(wider.hi01 - wider.lo01) - 1e-12


def test_a_file_without_delta_loads_as_the_marginal_guarantee(tmp_path):
    rng = np.random.default_rng(1)
    m, y = truth(rng, 200)
    path = save_calibrator(tmp_path / "c.json", SplitConformal(0.1).fit(Predictions(m), y))
    doc = json.loads(path.read_text())
    assert "delta" not in doc["calibrator"]["config"]  # the marginal state as it always was
    del doc["guarantee"]  # a file written before the guarantee was recorded
    doc["checksum"] = content_checksum(doc)
    path.write_text(json.dumps(doc))
    cal, _ = load_calibrator(path)
    assert cal.delta is None and guarantee_of(cal).startswith("marginal")
    assert calibrator_from_state({**doc["calibrator"]}).delta is None


# ------------------------------------------------------------------ (d) refusals
@pytest.mark.parametrize("method,why", [
    ("weighted-split", "likelihood ratio behind its weights is estimated"),
    ("crc-same", "chooses omega and beta on the same items"),
    ("crc-cluster", "does not take a training-conditional level"),
])
def test_methods_without_an_exact_rank_refuse_delta_saying_why(method, why):
    with pytest.raises(InputError, match=why):
        make_calibrator(method, 0.1, delta=0.1)
    make_calibrator(method, 0.1)  # without delta they build as before


def test_a_directly_built_refusing_method_refuses_at_fit():
    rng = np.random.default_rng(2)
    m, y = truth(rng, 100)
    with pytest.raises(InputError, match="`delta`.*weighted-split"):
        WeightedSplit(0.1, delta=0.1).fit(Predictions(m, embedding=m[:, None]), y)


@pytest.mark.parametrize("bad", [0, 1, -0.1, 1.5, "x", float("nan")])
def test_delta_out_of_range_is_refused(bad):
    with pytest.raises(InputError, match="delta"):
        make_calibrator("split", 0.1, delta=bad)


# ------------------------------------------------------------------ (e) evaluate's measure
def test_share_below_counts_splits_strictly_below_target():
    r = share_below([0.95, 0.89, 0.9, 0.899999, 0.91], 0.1)
    assert (r["splits_below"], r["splits"], r["share"]) == (2, 5, 0.4)
    assert r["ci"][0] < 0.4 < r["ci"][1]


def test_evaluate_reports_the_guarantee_and_the_share_below():
    rng = np.random.default_rng(5)
    m, y = truth(rng, 300)
    res = {d: evaluate_splits(Predictions(m), y, lambda seed=0, d=d: make_calibrator(
        "split", 0.1, delta=d, seed=seed), seeds=40) for d in (None, 0.1)}
    marg, cond = res[None], res[0.1]
    assert marg["delta"] is None and cond["delta"] == 0.1
    assert cond["guarantee"].startswith("training-conditional: covers at least 90 % of new rows")
    for r in (marg, cond):
        b = r["coverage_below_target"]
        assert b["splits"] == 40 and b["share"] == b["splits_below"] / 40
    # the later rank: fewer splits below target, and coverage above the marginal bands'
    assert (cond["coverage_below_target"]["splits_below"]
            < marg["coverage_below_target"]["splits_below"])
    assert cond["after"]["coverage"]["mean"] > marg["after"]["coverage"]["mean"]
    assert cond["theoretical_coverage"]["high"] == pytest.approx(
        conditional_rank(150, 0.1, 0.1) / 151)


# ------------------------------------------------------------------ the table API and CLI
def _has_delta_option() -> bool:
    from scoreband.api import config_fields

    return "delta" in config_fields()


needs_option = pytest.mark.skipif(not _has_delta_option(), reason=(
    "api.CalibrationConfig.delta needs its CLI declaration in cli/_options.py first"))


def _table(n=600, seed=0):
    import pandas as pd

    rng = np.random.default_rng(seed)
    m = rng.uniform(1, 5, n)
    return pd.DataFrame({"pred": m, "human": np.clip(m + rng.normal(0, 0.5, n), 1, 5),
                         "g": np.where(m > 3, "hi", "lo")})


@needs_option
def test_api_calibrate_save_apply_keeps_delta(tmp_path):
    from scoreband import api

    df = _table()
    cols = dict(target="human", scale="1,5", median="pred")
    fit = api.calibrate(df, **cols, delta=0.1, mondrian=True, groups="g")
    path = fit.save(tmp_path / "cal.json")
    cal, doc = load_calibrator(path)
    assert delta_of(cal) == 0.1 and doc["guarantee"]["delta"] == 0.1
    assert "per group" in doc["guarantee"]["text"]
    a, b = api.apply(df, fit).table, api.apply(df, path).table
    assert a["band_lo"].equals(b["band_lo"]) and a["band_hi"].equals(b["band_hi"])
    plain = api.apply(df, api.calibrate(df, **cols, mondrian=True, groups="g")).table
    assert (a["band_hi"] - a["band_lo"]).mean() > (plain["band_hi"] - plain["band_lo"]).mean()
    res = api.evaluate(df, **cols, delta=0.1, seeds=3)
    assert res["delta"] == 0.1 and res["coverage_below_target"]["splits"] == 3
    with pytest.raises(InputError, match="crc-same chooses omega and beta"):
        api.calibrate(df, **cols, lo="pred", hi="pred", method="crc-same", delta=0.1)


@needs_option
def test_cli_delta_gives_the_api_calibrator(tmp_path):
    from typer.testing import CliRunner

    from scoreband import api
    from scoreband.cli import app

    df = _table()
    df.to_csv(tmp_path / "t.csv", index=False)
    r = CliRunner().invoke(app, ["calibrate", str(tmp_path / "t.csv"), "--target", "human",
                                 "--scale", "1,5", "--median", "pred", "--delta", "0.05",
                                 "--out", str(tmp_path / "c.json")])
    assert r.exit_code == 0, r.output
    assert "probability at least 95 %" in " ".join(r.output.split())
    cal, _ = load_calibrator(tmp_path / "c.json")
    fit = api.calibrate(tmp_path / "t.csv", target="human", scale="1,5", median="pred",
                        delta=0.05)
    assert cal.delta == 0.05 and cal.params_["q"] == fit.calibrator.params_["q"]


def test_mondrian_groups_too_small_for_delta_are_small_groups():
    """A group with enough rows for alpha (9) but not for delta (22) is a small group: the
    whole scale, flagged (the default policy), never a band from a rank it cannot reach."""
    rng = np.random.default_rng(8)
    m, y = truth(rng, 215)
    g = np.r_[np.full(200, "big"), np.full(15, "few")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = make_calibrator("split", 0.1, mondrian="given", delta=0.1).fit(
            Predictions(m), y, groups=g)
        band = cal.predict(Predictions(m), groups=g)
    assert cal.params_["need"] == min_calibration_size(0.1, 0.1) == 22
    assert cal.params_["groups"]["few"] is None
    assert band.full_range[g == "few"].all() and not band.full_range[g == "big"].any()
