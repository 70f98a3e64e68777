"""A calibrator knows the domain it was fitted on (scoreband.domain): rows outside it are
flagged, a table mostly outside it is refused, group labels match as written; scales that
cannot be computed on are refused naming the option."""

import warnings

import numpy as np
import pandas as pd
import pytest

from scoreband import api
from scoreband.datatypes import Scale
from scoreband.errors import InputError


def _table(n=300, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(1, 6, n).astype(float)
    m = np.clip(y + rng.normal(0, 0.7, n), 1, 5)
    return pd.DataFrame({"y": y, "m": m, "f": m * 2 + rng.normal(0, 0.1, n),
                         "g": rng.choice([1.0, 2.0], n)})


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_a_table_on_another_scale_is_refused_naming_the_column():
    df = _table()
    fit = api.calibrate(df, target="y", scale=(1, 5), median="m", method="split")
    other = df.assign(m=np.r_[np.ones(5), np.random.default_rng(1).uniform(0, 0.99, 295)])
    with pytest.raises(InputError, match=r"295 of 300 rows.*column 'm'"):
        api.apply(other, fit)


@pytest.mark.parametrize("method", ["cqr", "fitted", "chr"])
def test_features_of_another_extractor_are_refused(method):
    df = _table()
    fit = api.calibrate(df, target="y", scale=(1, 5), features="f", method=method)
    with pytest.raises(InputError, match=r"column 'f'.*range seen at calibration"):
        api.apply(df.assign(f=df["f"] * 20), fit)


def test_a_few_rows_outside_are_flagged_and_said():
    df = _table()
    fit = api.calibrate(df, target="y", scale=(1, 5), features="f", method="cqr")
    odd = df.copy()
    odd.loc[:3, "f"] = 1e308
    said = []
    out = api.apply(odd, fit, on_warning=said.append).table
    assert out["band_flag"].iloc[:4].tolist() == ["out_of_domain"] * 4
    assert (out["band_flag"].iloc[4:] == "").all()
    assert any("4 of 300 rows lie outside" in s and "'f'" in s for s in said)


def test_isotonic_map_on_a_metric_times_100_is_refused():
    df = _table()
    fit = api.calibrate(df, target="y", scale=(1, 5), median="f", method="split",
                        map="isotonic")
    with pytest.raises(InputError, match="outside the domain"):
        api.apply(df.assign(f=df["f"] * 100), fit)


def test_a_0_1_table_within_the_margin_of_a_mapped_calibrator_is_refused():
    """A --map isotonic calibrator has no declared prediction scale: a 4-row 0-1 table
    (0.7-0.95, within the tenth-of-range margin of the judge's 1-5 range) was banded
    unflagged. The refusal counts rows outside the exact range (the event the
    Beta-binomial probability is about); a table drawn like the calibration rows is not
    refused, and its few rows just beyond the range are not flagged."""
    df = _table(400)
    df["j"] = df["y"]  # an integer judge score on 1-5
    fit = api.calibrate(df, target="y", scale=(1, 5), median="j", method="split",
                        map="isotonic")
    with pytest.raises(InputError, match=r"4 of 4 rows lie outside.*column 'j' \(4 of 4 rows "
                                         r"outside \[1, 5\], the range seen at calibration"):
        api.apply(pd.DataFrame({"j": [0.8, 0.9, 0.7, 0.95]}), fit)
    out = api.apply(_table(60, seed=9).assign(j=lambda d: d["y"]), fit).table
    assert out["band_lo"].notna().all() and not out["band_flag"].str.contains("out_of").any()


def test_recalibrate_on_a_table_on_another_scale_is_refused():
    df = _table()
    fit = api.calibrate(df, target="y", scale=(1, 5), features="f", method="cqr")
    with pytest.raises(InputError, match="recalibrate"):
        api.recalibrate(fit, df.assign(f=df["f"] / 10))


def test_group_labels_match_as_written():
    """Groups read as 1.0 / 2.0 at calibration and 1 / 2 at apply are the same groups."""
    df = _table()
    cols = dict(target="y", scale=(1, 5), median="m", groups="g")
    fit = api.calibrate(df, **cols, method="split", mondrian=True)
    out = api.apply(df.assign(g=df["g"].astype(int)), fit).table
    assert not out["band_flag"].str.contains("fallback").any()
    assert set(out["band_group"]) == {"1.0", "2.0"}


@pytest.mark.parametrize("text,name,match", [
    ("5,1", "pred_scale", "`pred_scale` expects A < B"),
    ("-1e308,1e308", "scale", "too wide or too narrow"),
    ("1,1", "scale", "A < B"),
])
def test_scales_that_cannot_be_computed_on_are_refused(text, name, match):
    with pytest.raises(InputError, match=match):
        Scale.parse(text, name=name)


# ------------------------------------------------------------ small calibration sets
def _rows(n, rng):
    """Rows of one population: a 1-5 judge score, a point score, two features."""
    y = rng.integers(1, 6, n).astype(float)
    m = np.clip(y + rng.normal(0, 0.7, n), 1, 5)
    return pd.DataFrame({"y": y, "m": m, "f": m * 2 + rng.normal(0, 0.5, n),
                         "h": rng.exponential(1.0, n)})


@pytest.mark.parametrize("n", [1, 5, 13, 30])
def test_rows_drawn_like_the_calibration_rows_are_never_refused(n):
    """The range of n rows is not the method's domain: a fresh row falls outside it with
    probability 2 / (n + 1) per input (at n = 5 half of 60 rows lie outside on a third of the
    calibrations; at n = 1 all). 2000 calibrations of the domain check, 20 through apply."""
    from scoreband.datatypes import Predictions
    from scoreband.domain import check_domain, fit_domain

    rng = np.random.default_rng(100 + n)
    flagged = 0
    for _ in range(2000):
        a, b = _rows(n, rng), _rows(60, rng)
        dom = fit_domain(Predictions(a["m"].to_numpy() / 5,
                                     features=a[["f", "h"]].to_numpy()))
        mask, _ = check_domain(dom, Predictions(b["m"].to_numpy() / 5,
                                                features=b[["f", "h"]].to_numpy()), "apply")
        flagged += mask.any()
    assert flagged > 0  # the rows outside are still flagged
    cols = dict(target="y", scale=(1, 5), median="m", pred_scale=(1, 5), features="f,h")
    for method in ("split", "cqr"):
        for _ in range(10):
            a = _rows(max(n, 4) if method == "cqr" else n, rng)
            fit = api.calibrate(a, **cols, method=method)
            out = api.apply(_rows(60, rng), fit).table  # never raises
            assert len(out) == 60


def test_a_small_calibration_flags_and_says_rather_than_refuses():
    df = _table(5, seed=3)
    fit = api.calibrate(df, target="y", scale=(1, 5), features="f", method="cqr")
    said = []
    out = api.apply(_table(60, seed=4).assign(f=lambda d: d["f"] * 3), fit,
                    on_warning=said.append).table
    assert out["band_flag"].str.contains("out_of_domain").mean() > 0.5
    assert any("with 5 calibration rows" in s and "not refused" in s for s in said)


@pytest.mark.parametrize("n_cal", [1, 300])
def test_a_0_1_table_of_four_rows_on_a_1_5_calibrator_is_refused(n_cal):
    """Refusal needed 5 rows: the 4-row table's best row (1.0) got [1, 2] unflagged."""
    df = _table(300)
    fit = api.calibrate(df.iloc[:n_cal], target="y", scale=(1, 5), median="m",
                        pred_scale=(1, 5), method="split")
    small = pd.DataFrame({"m": [0.2, 0.55, 0.9, 1.0]})
    with pytest.raises(InputError, match=r"of 4 rows.*column 'm' \(3 of 4 rows outside its "
                                         "prediction scale"):
        api.apply(small, fit)
    # one stray value off the scale is a row error, not a refusal
    out = api.apply(pd.DataFrame({"m": [0.5, 2.0, 3.0]}), fit).table
    assert out["band_error"].iloc[0] and out["band_lo"].iloc[1:].notna().all()


def test_old_domains_without_counts_use_the_recorded_calibration_count():
    from scoreband.datatypes import Predictions
    from scoreband.domain import check_domain

    old = {"ranges": {"median": [0.2, 0.8]}, "names": {"median": "m"}}
    far = Predictions(np.full(60, 0.99))
    with pytest.raises(InputError, match="60 of 60 rows"):
        check_domain(old, far, "apply", n_calibration=300)
    mask, note = check_domain(old, far, "apply", n_calibration=3)
    assert mask.all() and "not refused" in note


# ------------------------------------------------------------ the API for rules
def test_a_rule_records_a_domain_and_refuses_another_scale():
    """A triage rule fitted on 1-5 judge scores, applied to the same judge's 0-100 scores
    (439 of 600 rows trusted before): refused; scores like the fitted ones pass."""
    from scoreband.domain import check_domain, fit_domain

    rng = np.random.default_rng(7)
    fitted = rng.integers(1, 6, 200).astype(float)
    dom = fit_domain({"judge": fitted}, names={"judge": "judge"}, scales={"judge": (1, 5)})
    assert dom["n"] == {"judge": 200} and dom["scales"] == {"judge": [1.0, 5.0]}
    with pytest.raises(InputError, match=r"triage: .*column 'judge'"):
        check_domain(dom, {"judge": rng.uniform(0, 100, 600)}, "triage")
    with pytest.raises(InputError, match="column 'judge'"):  # few rows off the scale
        check_domain(dom, {"judge": [40.0, 70.0, 3.0]}, "triage")
    mask, note = check_domain(dom, {"judge": rng.integers(1, 6, 600).astype(float)}, "triage")
    assert not mask.any() and note is None
    # a rule fitted on one row: range says nothing, the declared scale still refuses
    one = fit_domain({"judge": [3.0]}, scales={"judge": (1, 5)})
    mask, _ = check_domain(one, {"judge": rng.integers(1, 6, 50).astype(float)}, "triage")
    assert mask.any()
    with pytest.raises(InputError):
        check_domain(one, {"judge": rng.uniform(0, 100, 50)}, "triage")


def test_the_refusal_level_holds_for_exchangeable_rows():
    """The Beta-binomial tail bounds the count outside the range of n exchangeable values:
    simulated, the share of draws at or beyond a count never exceeds the bound."""
    from scoreband.domain import outside_probability

    rng = np.random.default_rng(8)
    for n, m in ((5, 60), (13, 60), (30, 20)):
        cal, new = rng.uniform(size=(20000, n)), rng.uniform(size=(20000, m))
        k = ((new < cal.min(1, keepdims=True)) | (new > cal.max(1, keepdims=True))).sum(1)
        for q in (np.quantile(k, 0.9), np.quantile(k, 0.99), k.max()):
            p_sim = (k >= q).mean()
            assert p_sim <= outside_probability(int(q), m, n) + 3 * np.sqrt(p_sim / 20000)


def test_recalibrate_a_1_5_calibrator_on_a_0_1_table_is_refused():
    """It refitted on the 62 of 600 rows that happen to be 1.0 and printed a guarantee."""
    df = _table()
    fit = api.calibrate(df, target="y", scale=(1, 5), median="m", pred_scale=(1, 5),
                        method="split")
    rng = np.random.default_rng(9)
    m01 = np.where(rng.uniform(size=300) < 0.1, 1.0, rng.uniform(0, 0.99, 300))
    with pytest.raises(InputError, match="recalibrate: .*outside its prediction scale"):
        api.recalibrate(fit, df.assign(m=m01))
