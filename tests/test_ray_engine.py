"""--engine ray on a local Ray (two CPU actors): the same rows in the same order, and the
same bands, as the local engine; clear errors without Ray or without a cluster."""

import sys

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from scoreband.cli import app

ray = pytest.importorskip("ray")
runner = CliRunner()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("ray")
    assert runner.invoke(app, ["world", "--out", str(d), "--n", "30"]).exit_code == 0
    df = pd.read_csv(d / "world.csv")
    df.loc[4, "image"] = "images/missing.png"  # a row that fails on a worker
    df.to_csv(d / "t.csv", index=False)
    yield d
    ray.shutdown()


def _same(a, b, cols):
    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    for c in cols:
        np.testing.assert_allclose(a[c], b[c], atol=1e-6, equal_nan=True)


def test_score_on_ray_equals_local(world):
    for engine in ("local", "ray"):
        r = runner.invoke(app, ["score", str(world / "t.csv"), "--out",
                                str(world / f"{engine}.csv"), "--engine", engine,
                                "--actors", "2"])
        assert r.exit_code == 0, r.output
    a, b = pd.read_csv(world / "local.csv"), pd.read_csv(world / "ray.csv")
    _same(a, b, ["band_lo", "band_median", "band_hi"])
    assert list(a["id"]) == list(b["id"])  # same order
    assert isinstance(b.loc[4, "band_error"], str) and "missing" in b.loc[4, "band_error"]


def test_apply_on_ray_equals_local(world, tmp_path):
    assert runner.invoke(app, ["example", "--out", str(tmp_path / "ex.csv")]).exit_code == 0
    args = ["--ratings", "ratings", "--scale", "1,5", "--median", "median", "--lo", "q05",
            "--hi", "q95", "--pred-scale", "0,1", "--method", "crc"]
    r = runner.invoke(app, ["calibrate", str(tmp_path / "ex.csv"), *args, "--out",
                            str(tmp_path / "c.json")])
    assert r.exit_code == 0, r.output
    pd.read_csv(tmp_path / "ex.csv").to_parquet(tmp_path / "ex.parquet")
    for engine in ("local", "ray"):
        r = runner.invoke(app, ["apply", str(tmp_path / "ex.parquet"), "--calibrator",
                                str(tmp_path / "c.json"), "--out",
                                str(tmp_path / f"{engine}.parquet"), "--engine", engine])
        assert r.exit_code == 0, r.output
    _same(pd.read_parquet(tmp_path / "local.parquet"), pd.read_parquet(tmp_path / "ray.parquet"),
          ["band_lo", "band_median", "band_hi"])


def test_engine_errors(world, monkeypatch):
    r = runner.invoke(app, ["score", str(world / "t.csv"), "--out", str(world / "x.csv"),
                            "--engine", "spark"])
    assert r.exit_code == 2 and "choose local or ray" in r.output
    from scoreband.engine import ray_engine

    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(Exception, match=r"scoreband\[ray\]"):
        ray_engine.connect()
