"""The Python API (scoreband.api): its docstring example runs, and it gives what the CLI
commands of the same names write."""

import doctest

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import scoreband.api as sb
from scoreband.cli import app
from scoreband.errors import InputError

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
    fit = sb.calibrate(cal_df, COLS, {"method": "split"})
    fit.save(tmp_path / "api.json")
    runner = CliRunner()
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
        sb.calibrate(df, {"median": "median"})
    with pytest.raises(InputError, match="unknown calibration option"):
        sb.calibrate(df, COLS, {"methd": "split"})
    with pytest.raises(InputError, match="unknown calibration method 'nope'"):
        sb.evaluate(df, COLS, {"method": "nope"})


def test_top_level_names_are_the_api():
    import scoreband

    assert scoreband.evaluate is sb.evaluate and scoreband.apply is sb.apply
    with pytest.raises(AttributeError):
        scoreband.nothing_here  # noqa: B018


def test_the_api_is_discoverable_and_takes_python_values():
    import scoreband as sb
    from scoreband.errors import InputError

    assert {"evaluate", "calibrate", "recalibrate", "apply", "read_table"} <= set(dir(sb))
    df = sb.read_table(sb.example_table())
    cols = dict(ratings="ratings", median="median", pred_scale=(0, 1))
    a = sb.evaluate(df, {**cols, "scale": (1, 5)}, {"method": "split"}, seeds=2)
    b = sb.evaluate(df, {**cols, "scale": "1,5", "pred_scale": "0,1"}, {"method": "split"},
                    seeds=2)
    assert a["after"]["coverage"] == b["after"]["coverage"]
    with pytest.raises(InputError, match="unknown column key.*feature; known: .*features"):
        sb.evaluate(df, {**cols, "scale": (1, 5), "feature": "x"}, {"method": "split"})
