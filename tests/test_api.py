"""The Python API (scoreband.api): its docstring example runs, and it gives what the CLI
commands of the same names write."""

import doctest

import numpy as np
import pandas as pd
import pytest

import scoreband.api as sb
from scoreband.cli import app
from scoreband.errors import InputError
from tests.conftest import runner

COLS = dict(ratings="ratings", scale="1,5", median="median", lo="q05", hi="q95",
            pred_scale="0,1", groups="task")


def test_docstring_example_runs():
    res = doctest.testmod(sb, verbose=False)
    assert res.attempted >= 5 and res.failed == 0


def test_api_equals_cli(tmp_path):
    df = sb.read_table(sb.example_table())
    cal_df, new_df = df.iloc[:1200], df.iloc[1200:].reset_index(drop=True)
    cal_df.to_csv(tmp_path / "cal.csv", index=False)
    new_df.to_csv(tmp_path / "new.csv", index=False)
    fit = sb.calibrate(cal_df, **COLS, method="split")
    fit.save(tmp_path / "api.json")
    r = runner.invoke(app, ["calibrate", str(tmp_path / "cal.csv"), "--ratings", "ratings",
                            "--scale", "1,5", "--median", "median", "--lo", "q05", "--hi",
                            "q95", "--pred-scale", "0,1", "--groups", "task",
                            "--out", str(tmp_path / "cli.json")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["apply", str(tmp_path / "new.csv"), "--calibrator",
                            str(tmp_path / "cli.json"), "--out", str(tmp_path / "b.csv")])
    assert r.exit_code == 0, r.output
    cli = pd.read_csv(tmp_path / "b.csv")
    for cal in (fit, tmp_path / "api.json"):
        out = sb.apply(new_df, cal).table
        np.testing.assert_allclose(out["band_lo"], cli["band_lo"], atol=1e-12)
        np.testing.assert_allclose(out["band_hi"], cli["band_hi"], atol=1e-12)


def test_api_errors_name_parameters():
    df = sb.read_table(sb.example_table())
    with pytest.raises(InputError, match="`scale`"):
        sb.calibrate(df, median="median")
    with pytest.raises(InputError, match="`mondrian_by` 'nope'"):
        sb.calibrate(df, **COLS, method="split", mondrian_by="nope")
    with pytest.raises(InputError, match="unknown calibration method 'nope'"):
        sb.evaluate(df, **COLS, method="nope")


def test_top_level_names_are_the_api():
    import scoreband

    assert scoreband.evaluate is sb.evaluate and scoreband.apply is sb.apply
    with pytest.raises(AttributeError):
        scoreband.nothing_here  # noqa: B018


def test_the_api_is_discoverable_and_takes_python_values():
    import scoreband as sb

    assert {"evaluate", "calibrate", "recalibrate", "apply", "read_table"} <= set(dir(sb))
    df = sb.read_table(sb.example_table())
    cols = dict(ratings="ratings", median="median", pred_scale=(0, 1))
    a = sb.evaluate(df, **cols, scale=(1, 5), method="split", seeds=2)
    b = sb.evaluate(df, **{**cols, "pred_scale": "0,1"}, scale="1,5", method="split",
                    seeds=2)
    assert a["after"]["coverage"] == b["after"]["coverage"]
    with pytest.raises(TypeError, match="unexpected keyword argument.*feature; .*features"):
        sb.evaluate(df, **cols, scale=(1, 5), feature="x", method="split")


def test_one_calling_convention_keywords():
    """evaluate / calibrate / apply take the column and config fields as keywords, as
    systems does; a keyword left out is the field's default."""
    df = sb.read_table(sb.example_table())
    kw = dict(ratings="ratings", scale=(1, 5), median="median", pred_scale=(0, 1))
    a = sb.evaluate(df, **kw, method="split", alpha=0.2, seeds=2)
    b = sb.evaluate(df, **kw, alpha=0.2, seeds=2)  # split is the default method
    assert a["after"] == b["after"]
    fit = sb.calibrate(df.iloc[:1000], **kw, method="split")
    assert fit.inputs["columns"]["ratings"] == "ratings"
    new = df.iloc[1000:]
    pd.testing.assert_frame_equal(fit.predict(new).table, sb.apply(new, fit).table)
    pd.testing.assert_frame_equal(fit.predict(new, median="median").table,
                                  sb.apply(new, fit, median="median").table)


@pytest.mark.parametrize("call", [
    lambda df: sb.calibrate(df, ratings="ratings", scale=(1, 5), median="median",
                            methd="split"),
    lambda df: sb.evaluate(df, ratings="ratings", scale=(1, 5), median="median", sead=1),
    lambda df: sb.apply(df, "never.json", mediam="median"),
    lambda df: sb.recalibrate("never.json", df, median="median", groups="task"),
])
def test_an_unknown_keyword_is_a_type_error_naming_it_and_the_valid_ones(call):
    df = sb.read_table(sb.example_table())
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \w+; .*median"):
        call(df)


@pytest.mark.parametrize("call", [
    lambda df: sb.evaluate(df, dict(COLS), {"method": "split"}, seeds=2),
    lambda df: sb.calibrate(df, dict(COLS)),
    lambda df: sb.calibration_curve(df, {}, dict(COLS), {"method": "split"}),
    lambda df: sb.reads_whole_rows(dict(COLS), {"method": "split"}),
    lambda df: sb.apply_options("never.json", {"median": "median"}),
])
def test_a_dict_of_options_is_a_type_error_naming_the_keywords(call):
    """Issue 42: the options are keywords only; the former ``columns`` / ``config`` dicts
    given as positional arguments are refused, naming the keywords to give instead."""
    df = sb.read_table(sb.example_table())
    with pytest.raises(TypeError, match=r"positional argument.*, got \d; give the options as "
                                        r"keywords: .*median"):
        call(df)


@pytest.mark.parametrize("fn", [sb.evaluate, sb.calibrate, sb.calibration_curve,
                                sb.reads_whole_rows, sb.recalibrate, sb.apply, sb.apply_file,
                                sb.apply_options])
def test_no_columns_or_config_parameter(fn):
    import inspect

    assert not {"columns", "config"} & set(inspect.signature(fn).parameters), fn.__name__
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) columns; .*median"):
        fn(*[None] * sum(p.kind is p.POSITIONAL_OR_KEYWORD
                         for p in inspect.signature(fn).parameters.values()),
           columns={"median": "median"})


def test_help_shows_the_functions():
    import pydoc

    import scoreband

    text = pydoc.render_doc(scoreband, renderer=pydoc.plaintext)
    funcs = text[text.index("FUNCTIONS"):]
    for name in ("evaluate(", "calibrate(", "apply(", "recalibrate(", "systems(",
                 "read_table("):
        assert name in funcs, name
    assert "calibrate(table, **options)" in text  # the list in the package docstring
    assert "Calibration" in dir(scoreband)


def test_split_conformal_takes_native_scale_targets_and_keeps_the_01_path():
    from scoreband.conformal import SplitConformal
    from scoreband.datatypes import Predictions, Scale

    rng = np.random.default_rng(0)
    m = rng.uniform(size=300)
    y = np.clip(m + rng.normal(0, 0.05, 300), 0, 1)
    sc = Scale(1, 4)
    on01 = SplitConformal(scale=sc).fit(Predictions(m), y)
    native = SplitConformal(scale=sc).fit(Predictions(sc.from01(m)), sc.from01(y))
    assert not on01.native_ and native.native_
    assert native.params_["q"] == pytest.approx(on01.params_["q"], abs=1e-12)
    b01 = on01.predict(Predictions([0.5]))
    bn = native.predict(np.array([sc.from01(0.5)]))  # an array of point predictions
    np.testing.assert_allclose([bn.lo[0], bn.hi[0]], [b01.lo[0], b01.hi[0]], atol=1e-12)
    assert 1 <= bn.lo[0] < 2.5 < bn.hi[0] <= 4
    # saved and loaded, it still reads the native scale; the 0-1 path saves as before
    from scoreband.conformal import calibrator_from_state

    again = calibrator_from_state(native.get_state(), sc)
    np.testing.assert_array_equal(again.predict([2.5]).lo01, native.predict([2.5]).lo01)
    assert "native" not in on01.get_config()
    with pytest.raises(InputError, match="outside the scale 1-4"):
        SplitConformal(scale=sc).fit(Predictions(np.full(20, 2.0)), np.r_[np.full(19, 2.0), 5])
    # where the targets cannot tell (all within [0, 1] on 0-10), native=True says so
    forced = SplitConformal(scale=Scale(0, 10), native=True).fit(np.full(50, 0.5),
                                                                 np.full(50, 0.6))
    assert forced.native_ and forced.params_["q"] == pytest.approx(0.01)


def test_the_calibration_curve_reports_progress_through_on_split():
    df = sb.read_table(sb.example_table())
    seen = []
    res = sb.evaluate(df, ratings="ratings", scale=(1, 5), median="median",
                      pred_scale=(0, 1), seeds=2, curve=True,
                      on_split=lambda k, n: seen.append((k, n)))
    total = 2 + sb.curve_splits(0.1, 2)
    assert seen == [(k, total) for k in range(1, total + 1)]
    curve = res["calibration_curve"]
    assert [p["alpha"] for p in curve] == list(sb.CURVE_ALPHAS)
    assert all(p["ci"] is not None and p["n_items"] > 0 for p in curve)
    # the evaluated alpha is the main result's own splits
    assert curve[1]["coverage"] == res["after"]["coverage"]["mean"]
