"""Faults: a `judge --pairwise` run (the simulated pairwise judge, 6,000 pair rows) killed with
SIGKILL at five random points resumes from its journal and ends with exactly the table an
uninterrupted run writes (no pair lost or duplicated, no temp file left behind)."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from scoreband.world.pairwise import world_pairs
from tests.killing import kill_five_times

pytestmark = pytest.mark.slow  # processes killed with SIGKILL and restarted


def _run(table, out):
    return subprocess.Popen([sys.executable, "-m", "scoreband.cli", "judge", "--pairwise",
                             str(table), "--judge", "sim-pair-biased", "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def test_killed_five_times_equals_an_uninterrupted_run(tmp_path):
    table = tmp_path / "pairs.csv"
    world_pairs(1000, seed=3).to_csv(table, index=False)
    rows = len(pd.read_csv(table))
    ref = tmp_path / "ref.csv"
    assert _run(table, ref).wait(timeout=600) == 0
    out, journal = tmp_path / "out.csv", tmp_path / "out.csv.partial.jsonl"
    sizes, p = kill_five_times(lambda: _run(table, out), journal, rows,
                               np.random.default_rng(0))
    assert p.returncode != 0 and not out.exists()  # the last run was really killed
    assert all(b > a for a, b in zip([0, *sizes], sizes, strict=False))  # each run added
    assert _run(table, out).wait(timeout=600) == 0
    pd.testing.assert_frame_equal(pd.read_csv(ref), pd.read_csv(out))
    assert not journal.exists()
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".") or f.endswith(".tmp")]
