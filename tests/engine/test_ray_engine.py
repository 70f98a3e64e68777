"""--engine ray on a local Ray (two CPU actors): the same rows in the same order, and the
same bands, as the local engine; clear errors without Ray or without a cluster."""

import sys

import numpy as np
import pandas as pd
import pytest

from scoreband.cli import app
from tests.conftest import runner

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow  # a local Ray cluster per module


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


def test_roundtrip_and_judge_on_ray_equal_local(world, tmp_path):
    """The other two row commands on Ray: the same stage runs in each actor."""
    from tiny_models import tiny_llava

    llava = tiny_llava(tmp_path / "llava")
    df = pd.read_csv(world / "t.csv").head(12)
    df.to_csv(world / "rt.csv", index=False)
    pd.DataFrame({"image": df["image"], "instruction": "Describe the image.",
                  "response": df["caption"]}).to_csv(world / "j.csv", index=False)
    runs = {"roundtrip": (["roundtrip", str(world / "rt.csv"), "--n-gen", "2"],
                          ["roundtrip_score", "roundtrip_spread"], "roundtrip_error"),
            "judge": (["judge", str(world / "j.csv"), "--judge", f"hf:{llava}"],
                      ["logp_1", "logp_5", "judge_expected"], "judge_error")}
    for name, (args, cols, err_col) in runs.items():
        for engine in ("local", "ray"):
            r = runner.invoke(app, [*args, "--out", str(tmp_path / f"{name}-{engine}.csv"),
                                    "--engine", engine, "--actors", "2"])
            assert r.exit_code == 0, r.output
        a, b = (pd.read_csv(tmp_path / f"{name}-{e}.csv") for e in ("local", "ray"))
        _same(a, b, cols)
        b = pd.read_csv(tmp_path / f"{name}-ray.csv", keep_default_na=False)
        assert "missing" in b.loc[4, err_col] and (b[err_col] != "").sum() == 1


def _actor_pids():
    """PIDs of the Ray worker processes that host scoreband's map actors."""
    import os

    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if cmd.startswith("ray::") and ("MapWorker" in cmd or "_Stage" in cmd):
            pids.append(int(d))
    return pids


def test_a_worker_killed_mid_run_loses_no_row(world, tmp_path):
    """SIGKILL one actor's process after the first batches come back: Ray restarts it and
    retries its batch; the output equals the local engine's (no row lost or duplicated)."""
    import os
    import signal

    from scoreband.engine.ray_engine import stage_ray

    df = pd.read_csv(world / "t.csv")
    big = pd.concat([df] * 4, ignore_index=True)
    big["id"] = range(len(big))
    big.to_csv(world / "big.csv", index=False)
    kw = dict(image_col="image", text_col="caption", batch_size=8)
    killed = []

    def on_rows(done):
        pids = _actor_pids()
        if not killed and done >= 8 and pids:
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    n, failures = stage_ray(world / "big.csv", tmp_path / "ray.csv",
                            "scoreband.scorers.stages:score_stage", kw,
                            error_column="band_error", actors=2, batch_rows=8,
                            on_rows=on_rows, write_rows=8)
    assert killed, "no actor process was found to kill"
    r = runner.invoke(app, ["score", str(world / "big.csv"), "--out",
                            str(tmp_path / "local.csv"), "--batch-size", "8"])
    assert r.exit_code == 0, r.output
    a, b = pd.read_csv(tmp_path / "local.csv"), pd.read_csv(tmp_path / "ray.csv")
    assert n == len(big) and list(b["id"]) == list(range(len(big)))
    _same(a, b, ["band_lo", "band_median", "band_hi"])
    assert sorted(failures) == [4, 34, 64, 94]


def test_an_unreachable_cluster_is_a_clear_error_within_the_timeout():
    """--ray-address pointing at nothing: a clear error naming the address, in time (a
    fresh process: the module's local Ray would be reused otherwise)."""
    import subprocess
    import time

    code = ("from scoreband.engine.ray_engine import connect\n"
            "try:\n    connect('127.0.0.1:9', timeout=10)\n"
            "except Exception as e:\n    print(type(e).__name__, e)\n")
    t0 = time.time()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert time.time() - t0 < 60
    assert "InputError" in r.stdout and "127.0.0.1:9" in r.stdout, r.stdout + r.stderr[-1000:]
