"""One contract over every calibration method the registry holds, read from what each
method's class declares (names, needs, auto candidacy, whole-table application), with the
cases of :mod:`tests.conformal.contract` (every ``--method`` name, and the variants that put
a wrapper or a switch on one): fit -> save -> load -> apply gives exactly the bands of
``predict``, in Python and through the CLI (``calibrate`` + ``apply``), and ``evaluate``'s
bands are those of calibrate + apply on the same split. A method added in a module of its
own is tested here without a line of this file changing."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from scoreband.cli import app
from scoreband.conformal import (
    METHODS,
    Auto,
    list_methods,
    load_calibrator,
    make_calibrator,
    save_calibrator,
)
from scoreband.conformal.auto import usable_candidates
from scoreband.conformal.base import (
    INPUTS,
    SAVED,
    auto_candidates,
    calibrator_class,
    has_inputs,
    needs_whole_table,
)
from scoreband.datatypes import Predictions, Scale
from scoreband.errors import InputError
from scoreband.evaluation import split_indices
from scoreband.metrics import coverage, sharpness
from tests.conformal.contract import BASE, CASES, SCALE, library_band
from tests.conftest import runner
from tests.golden.cases import judge_table


@pytest.fixture(scope="module")
def halves():
    df = judge_table(400)
    cal, test = split_indices(len(df), 0.5, np.random.default_rng(0))
    return df.iloc[cal].reset_index(drop=True), df.iloc[test].reset_index(drop=True)


def test_the_cases_cover_every_method_and_every_saved_class():
    used = set()
    for method, kw, _ in CASES.values():
        cal = make_calibrator(method, 0.1, scale=SCALE, **kw)
        while cal is not None:
            used.add(cal.method)
            cal = getattr(cal, "base", None)
    assert set(list_methods()) <= used, set(list_methods()) - used
    assert set(METHODS.names()) <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fit_save_load_apply_equals_predict(tmp_path, halves, name):
    df_cal, df_test = halves
    method, _, _ = CASES[name]
    cls = calibrator_class(method)
    assert cls.method in SAVED and all(set(alt) <= set(INPUTS) for alt in cls.needs)
    cal, band, test_in = library_band(name, df_cal, df_test)
    assert needs_whole_table(cal) == cls.whole_table
    assert len(band.lo01) == len(test_in.pred) and (band.lo01 <= band.hi01 + 1e-12).all()
    assert (band.lo01 >= 0).all() and (band.hi01 <= 1).all()
    np.testing.assert_allclose(band.lo, SCALE.from01(band.lo01), rtol=0, atol=1e-12)
    path = save_calibrator(tmp_path / "c.json", cal)
    loaded, _ = load_calibrator(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = loaded.predict(test_in.pred, groups=test_in.groups)
    np.testing.assert_array_equal(again.lo01, band.lo01)
    np.testing.assert_array_equal(again.hi01, band.hi01)
    np.testing.assert_allclose(again.median01, band.median01, rtol=0, atol=1e-12)
    assert again.method == band.method
    assert (again.sets01 is None) == (band.sets01 is None)
    if band.sets01 is not None:
        assert again.sets01 == band.sets01
    assert band.width01.mean() < 1.0  # a real band, not the whole scale


@pytest.mark.parametrize("name", sorted(CASES))
def test_cli_calibrate_apply_equals_library(tmp_path, halves, name):
    df_cal, df_test = halves
    method, kw, flags = CASES[name]
    df_cal.to_csv(tmp_path / "cal.csv", index=False)
    df_test.drop(columns=["human", "ratings"]).to_csv(tmp_path / "test.csv", index=False)
    res = runner.invoke(app, ["calibrate", str(tmp_path / "cal.csv"), *BASE, "--method", method,
                              *flags, "--out", str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    saved = json.loads((tmp_path / "c.json").read_text())["inputs"]["columns"]
    assert all(len(c) > 1 for c in saved["features"] + saved["embedding"]), saved
    res = runner.invoke(app, ["apply", str(tmp_path / "test.csv"), "--calibrator",
                              str(tmp_path / "c.json"), "--out", str(tmp_path / "out.csv")])
    assert res.exit_code == 0, res.output
    out = pd.read_csv(tmp_path / "out.csv")
    _, band, _ = library_band(name, df_cal, df_test)
    if kw.get("adjust_boundary"):
        from scoreband.conformal import adjust_band

        band = adjust_band(band, 3)
    np.testing.assert_allclose(out["band_lo01"], band.lo01, atol=1e-12)
    np.testing.assert_allclose(out["band_hi01"], band.hi01, atol=1e-12)
    np.testing.assert_allclose(out["band_lo"], band.lo, atol=1e-9)
    assert len(out) == len(df_test) and out["band_error"].isna().all()
    if band.sets01 is not None:
        assert out["band_sets"].notna().all()


@pytest.mark.parametrize("name", ["split", "crc", "chr", "auto", "isotonic-split"])
def test_evaluate_is_calibrate_plus_apply_on_the_same_split(tmp_path, name):
    df = judge_table(400, seed=3)
    method, kw, flags = CASES[name]
    df.to_csv(tmp_path / "all.csv", index=False)
    extra = ["--adjust-boundary"] if "--adjust-boundary" in flags else []
    res = runner.invoke(app, ["evaluate", str(tmp_path / "all.csv"), *BASE, "--method", method,
                              *flags, *extra, "--seeds", "1", "--out", str(tmp_path / "m.json")])
    assert res.exit_code == 0, res.output
    ev = json.loads((tmp_path / "m.json").read_text())
    cal, test = split_indices(len(df), 0.5, np.random.default_rng(0))
    df.iloc[cal].to_csv(tmp_path / "cal.csv", index=False)
    df.iloc[test].to_csv(tmp_path / "test.csv", index=False)
    assert runner.invoke(app, ["calibrate", str(tmp_path / "cal.csv"), *BASE, "--method",
                               method, *flags, "--out", str(tmp_path / "c.json")]).exit_code == 0
    assert runner.invoke(app, ["apply", str(tmp_path / "test.csv"), "--calibrator",
                               str(tmp_path / "c.json"), "--out",
                               str(tmp_path / "o.csv")]).exit_code == 0
    out = pd.read_csv(tmp_path / "o.csv")
    y01 = SCALE.to01(out["human"].to_numpy())
    assert ev["after"]["coverage"]["mean"] == pytest.approx(
        coverage(out["band_lo01"], out["band_hi01"], y01), abs=1e-12)
    assert ev["after"]["sharpness"]["mean"] == pytest.approx(
        sharpness(out["band_lo01"], out["band_hi01"]), abs=1e-12)


def _data(n, seed, drop=()):
    rng = np.random.default_rng(seed)
    y = rng.uniform(0, 1, n)
    med = np.clip(y + rng.normal(0, 0.08, n), 0, 1)
    parts = {"median": med, "lo": np.clip(med - 0.1, 0, 1), "hi": np.clip(med + 0.1, 0, 1),
             "features": np.c_[med, rng.normal(0, 1, n), y + rng.normal(0, 0.2, n)],
             "embedding": rng.normal(0, 1, (n, 4))}
    if "median" in drop:
        parts["median"] = np.full(n, np.nan)
    if "interval" in drop:
        parts["lo"] = parts["hi"] = None
    for k in ("features", "embedding"):
        if k in drop:
            parts[k] = None
    return Predictions(**parts), y


@pytest.mark.parametrize("name", METHODS.names())
def test_every_method_round_trips_on_a_continuous_scale(name, tmp_path):
    """The cases above are on a 1-5 Likert table; here every registered method fits on
    continuous targets of a continuous scale, from arrays, and its saved file gives the same
    band back."""
    scale = Scale(1, 5)
    cls = calibrator_class(name)
    pred, y = _data(600, 0)
    test, _ = _data(200, 1)
    assert any(has_inputs(pred, alt) for alt in cls.needs)
    cal = make_calibrator(name, 0.1, scale=scale, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        band = cal.fit(pred, y).predict(test)
        again = load_calibrator(save_calibrator(tmp_path / "c.json", cal))[0].predict(test)
    assert len(band.lo01) == 200 and (band.lo01 <= band.hi01 + 1e-12).all()
    assert (band.lo01 >= 0).all() and (band.hi01 <= 1).all()
    np.testing.assert_allclose(band.lo, scale.from01(band.lo01), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(again.lo01, band.lo01)
    np.testing.assert_array_equal(again.hi01, band.hi01)


@pytest.mark.parametrize("name", [n for n in METHODS.names()
                                  if calibrator_class(n).needs != ((),) and n != "auto"])
def test_a_method_refuses_predictions_without_what_it_declares(name):
    """Predictions that meet none of a method's declared ``needs`` are refused by fit."""
    cls = calibrator_class(name)
    drop = {i for alt in cls.needs for i in alt}
    pred, y = _data(300, 2, drop=drop)
    assert not any(has_inputs(pred, alt) for alt in cls.needs)
    with pytest.raises(InputError):
        make_calibrator(name, 0.1, scale=Scale(1, 5)).fit(pred, y)


def test_auto_chooses_among_the_declared_candidates_that_the_inputs_allow():
    cands = auto_candidates()
    assert cands[0] == "split" and cands[-1] == "marginal"
    assert all(calibrator_class(c).auto_rank is not None for c in cands)
    pred, _ = _data(50, 3)
    assert usable_candidates(pred) == list(cands)
    only_median, _ = _data(50, 3, drop={"interval", "features", "embedding"})
    known = {"split", "fitted", "crc", "cqr", "chr", "r2ccp", "marginal"}
    assert [c for c in usable_candidates(only_median) if c in known] == ["split", "fitted",
                                                                         "marginal"]
    with pytest.raises(InputError, match="crc needs a point prediction .* and an uncalibrated"):
        Auto(0.1, candidates=["split", "crc"]).fit(*_data(400, 4, drop={"interval"}))
def test_the_registry_lists_the_methods_in_their_documented_order():
    """Modules of their own register in the order --help and the docs list them."""
    assert METHODS.names()[:10] == ["split", "crc", "crc-exact", "crc-same", "fitted", "cqr",
                                    "r2ccp", "chr", "marginal", "auto"]
