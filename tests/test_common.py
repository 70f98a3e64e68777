"""Tests across the package: calibration files keep the feature columns by name, bad
tables are clear errors, the conformal core stays light and the package has no import
cycles. The method contract (every registered method, fit -> save -> load -> apply, library
== CLI) is :mod:`tests.conformal.test_methods_contract`, with its cases declared once in
:mod:`tests.conformal.contract`.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from scoreband.cli import app
from scoreband.columns import ColumnSpec, load_inputs
from scoreband.datatypes import Predictions
from tests.conformal.contract import BASE, FEATURES, PRED, SCALE, library_band
from tests.conftest import runner
from tests.golden.cases import judge_table


@pytest.fixture(scope="module")
def halves():
    from scoreband.evaluation import split_indices

    df = judge_table(400)
    cal, test = split_indices(len(df), 0.5, np.random.default_rng(0))
    return df.iloc[cal].reset_index(drop=True), df.iloc[test].reset_index(drop=True)


def test_features_are_saved_as_column_names(tmp_path, halves):
    df_cal, df_test = halves
    df_cal.to_csv(tmp_path / "cal.csv", index=False)
    res = runner.invoke(app, ["calibrate", str(tmp_path / "cal.csv"), *BASE, *FEATURES,
                              "--method", "cqr", "--out", str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    cols = json.loads((tmp_path / "c.json").read_text())["inputs"]["columns"]
    assert cols["features"] == [f"logp_{k}" for k in range(1, 6)]
    # a table without one of those columns: a clear error naming it, exit 2, nothing written
    df_test.drop(columns=["logp_3"]).to_csv(tmp_path / "t.csv", index=False)
    res = runner.invoke(app, ["apply", str(tmp_path / "t.csv"), "--calibrator",
                              str(tmp_path / "c.json"), "--out", str(tmp_path / "o.csv")])
    assert res.exit_code == 2 and "logp_3" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o.csv").exists()


def test_feature_order_follows_the_saved_names_not_the_table(tmp_path, halves):
    df_cal, df_test = halves
    cal, band, test_in = library_band("cqr", df_cal, df_test)
    shuffled = df_test[list(reversed(df_test.columns))]
    spec = ColumnSpec(scale=SCALE, median="judge_expected",
                      features=[f"logp_{k}" for k in range(1, 6)])
    again = cal.predict(load_inputs(shuffled, spec, require_target=False).pred)
    np.testing.assert_array_equal(again.lo01, band.lo01)


def test_library_predictions_outside_the_scale_are_flagged(tmp_path, halves):
    df_cal, df_test = halves
    df_cal.to_csv(tmp_path / "cal.csv", index=False)
    assert runner.invoke(app, ["calibrate", str(tmp_path / "cal.csv"), *BASE, *PRED,
                               "--out", str(tmp_path / "c.json")]).exit_code == 0
    t = df_test.copy()
    t.loc[0, "judge_expected"] = 7.5
    t.to_csv(tmp_path / "t.csv", index=False)
    res = runner.invoke(app, ["apply", str(tmp_path / "t.csv"), "--calibrator",
                              str(tmp_path / "c.json"), "--out", str(tmp_path / "o.csv")])
    assert res.exit_code == 0, res.output
    out = pd.read_csv(tmp_path / "o.csv")
    assert "outside the prediction scale" in out.loc[0, "band_error"]
    assert np.isnan(out.loc[0, "band_lo"]) and out["band_lo"].iloc[1:].notna().all()


def test_predictions_object_roundtrip_keeps_n_ratings():
    p = Predictions([0.5, 0.6], n_ratings=[3, 3])
    assert p.take([1]).n_ratings.tolist() == [3.0]


@pytest.mark.parametrize("args,msg", [
    (["--median", "clip_score", "--map", "isotonic", "--method", "split"], "at least 10 items"),
    (["--median", "judge_expected", "--map", "cubic"], "unknown map"),
    (["--median", "judge_expected", "--features", "logp_*", "--method", "chr",
      "--lo", "lo"], "both --lo and --hi"),
])
def test_real_table_bad_input_is_a_clear_error(tmp_path, args, msg):
    df = judge_table(40 if "--map" in args and "isotonic" in args else 400)
    df.to_csv(tmp_path / "t.csv", index=False)
    if "at least 10 items" in msg:
        df.iloc[:20].to_csv(tmp_path / "t.csv", index=False)
    res = runner.invoke(app, ["calibrate", str(tmp_path / "t.csv"), *BASE, *args,
                              "--out", str(tmp_path / "c.json")])
    assert res.exit_code == 2, res.output
    assert msg in " ".join(res.output.split()) and "Traceback" not in res.output
    assert not (tmp_path / "c.json").exists()


def test_auto_on_a_point_column_alone_weighs_split_against_a_fitted_score(tmp_path):
    from scoreband.conformal import Auto

    df = judge_table(400)
    df.to_csv(tmp_path / "t.csv", index=False)
    res = runner.invoke(app, ["calibrate", str(tmp_path / "t.csv"), *BASE, "--median",
                              "judge_expected", "--method", "auto", "--out",
                              str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    state = json.loads((tmp_path / "c.json").read_text())
    assert set(state["calibrator"]["model"]["widths"]) == {"split", "fitted", "marginal"}
    with pytest.raises(Exception, match="at least two methods"):
        Auto(0.1, candidates=["split"]).fit(Predictions(np.linspace(0, 1, 400)),
                                            np.linspace(0, 1, 400))


def test_nan_features_are_reported_rows(tmp_path):
    df = judge_table(400)
    df.loc[3, "logp_2"] = np.nan
    df.loc[5, "logp_4"] = -np.inf
    df.to_csv(tmp_path / "t.csv", index=False)
    res = runner.invoke(app, ["calibrate", str(tmp_path / "t.csv"), *BASE, *FEATURES,
                              "--method", "chr", "--out", str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "2 of 400 rows skipped" in out and "logp_2" in out and "logp_4" in out


def test_conformal_core_imports_no_heavy_library():
    import subprocess
    import sys

    code = ("import sys, scoreband.conformal, scoreband.metrics, scoreband.conformal.persist; "
            "print(sorted(m for m in ('torch', 'pandas', 'sklearn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_no_import_cycles_in_the_package():
    import ast
    from pathlib import Path

    import scoreband

    root = Path(scoreband.__file__).parent
    mods = {}
    for f in root.rglob("*.py"):
        name = ".".join(("scoreband", *f.relative_to(root).with_suffix("").parts))
        mods[name.removesuffix(".__init__")] = f
    graph = {m: set() for m in mods}
    for m, f in mods.items():
        for node in ast.walk(ast.parse(f.read_text())):  # module-level and lazy imports alike
            if isinstance(node, ast.ImportFrom) and node.module in mods:
                graph[m].add(node.module)
                graph[m].update(f"{node.module}.{a.name}" for a in node.names
                                if f"{node.module}.{a.name}" in mods)
            elif isinstance(node, ast.Import):
                graph[m].update(a.name for a in node.names if a.name in mods)
        graph[m].discard(m)

    def reaches(src, dst, seen):
        for nxt in graph[src]:
            if nxt == dst:
                return True
            if nxt not in seen:
                seen.add(nxt)
                if reaches(nxt, dst, seen):
                    return True
        return False

    cyclic = sorted(m for m in graph if reaches(m, m, set()))
    assert not cyclic, cyclic
