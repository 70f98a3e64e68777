"""What the tests share: the one CLI runner, the bundled example table and the flags that map
its columns, the world table (written once per session by ``scoreband world``), and
exchangeable synthetic data for the conformal tests.

Import the plain names (``from tests.conftest import runner, EXAMPLE_FLAGS``); take the world
as the fixtures ``world_dir`` (read only) or ``world`` (a private copy to change)."""

from __future__ import annotations

import os
import shutil
from importlib import resources
from pathlib import Path

# Under pytest-xdist (-n N) each worker gets its share of the cores for BLAS / OpenMP / torch
# threads, set before numpy or torch load: N workers with a thread per core each would run
# N times more threads than cores, and torch's spinning threads then slow every worker down.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, str(_share))

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from scoreband.cli import app

__all__ = ["runner", "invoke", "EXAMPLE", "EXAMPLE_FLAGS", "EXAMPLE_INTERVAL",
           "WORLD_ITEMS", "copy_world", "heteroscedastic"]

#: the suite's one CLI runner (Click's runner keeps no state between ``invoke`` calls)
runner = CliRunner()

#: the bundled example predictions table (read only: write copies elsewhere)
EXAMPLE = str(resources.files("scoreband") / "data" / "example_predictions.csv")
#: the flags that map the example table's columns: 3 ratings per item on 1-5, the quantile
#: head's median on [0, 1]
EXAMPLE_FLAGS = ["--ratings", "ratings", "--scale", "1,5", "--median", "median",
                 "--pred-scale", "0,1"]
#: the example table's uncalibrated 90 % interval (for CRC)
EXAMPLE_INTERVAL = ["--lo", "q05", "--hi", "q95"]

#: items in the session's world table
WORLD_ITEMS = 40


def invoke(*args, **kwargs):
    """``scoreband ARGS...`` through the shared runner (paths and numbers as text)."""
    return runner.invoke(app, [str(a) for a in args], **kwargs)


def copy_world(source: Path, dest: Path, n: int | None = None) -> Path:
    """A copy of the world folder ``source`` at ``dest``: its table cut to the first ``n``
    items (all when ``None``; a cut table leaves its provenance file behind) and the images
    those rows name. Returns ``dest``."""
    df = pd.read_csv(source / "world.csv")
    if n is not None:
        df = df.head(n)
    dest.mkdir(parents=True, exist_ok=True)
    for image in df["image"]:
        (dest / image).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / image, dest / image)
    if n is None or n >= WORLD_ITEMS:
        shutil.copyfile(source / "world.csv", dest / "world.csv")
        shutil.copyfile(source / "world.csv.provenance.json",
                        dest / "world.csv.provenance.json")
    else:
        df.to_csv(dest / "world.csv", index=False)
    return dest


@pytest.fixture(scope="session")
def world_dir(tmp_path_factory) -> Path:
    """The world table (``world.csv``, ``WORLD_ITEMS`` photo-style items, 3 ratings each) and
    its PNGs under ``images/``, written once per session through the CLI. Read only: take
    ``world`` or :func:`copy_world` to change anything."""
    d = tmp_path_factory.mktemp("world") / "w"
    r = invoke("world", "--out", d, "--n", WORLD_ITEMS)
    assert r.exit_code == 0, r.output
    return d


@pytest.fixture
def world(world_dir, tmp_path) -> Path:
    """A private copy of the session's world folder, in this test's temp folder."""
    return copy_world(world_dir, tmp_path / "world")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def heteroscedastic(rng, n, informative=True):
    """Exchangeable data on [0, 1]: median, an uncalibrated 90 % pair, targets."""
    sd = rng.uniform(0.02, 0.15, n)
    m = rng.uniform(0.15, 0.85, n)
    y = np.clip(m + rng.normal(0, 1, n) * sd, 0, 1)
    half = (sd if informative else np.full(n, 0.08)) * 1.0
    return m, np.clip(m - half, 0, 1), np.clip(m + half, 0, 1), y
