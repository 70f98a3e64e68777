"""Faults: a `judge --pairwise` run (the simulated pairwise judge, 6,000 pair rows) killed with
SIGKILL at five random points resumes from its journal and ends with exactly the table an
uninterrupted run writes (no pair lost or duplicated, no temp file left behind)."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from scoreband.world.pairwise import world_pairs

pytestmark = pytest.mark.slow  # processes killed with SIGKILL and restarted


def _run(table, out):
    return subprocess.Popen([sys.executable, "-m", "scoreband.cli", "judge", "--pairwise",
                             str(table), "--judge", "sim-pair-biased", "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _lines(journal) -> int:
    try:
        with open(journal, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def test_killed_five_times_equals_an_uninterrupted_run(tmp_path):
    table = tmp_path / "pairs.csv"
    world_pairs(1000, seed=3).to_csv(table, index=False)
    rows = len(pd.read_csv(table))
    ref = tmp_path / "ref.csv"
    assert _run(table, ref).wait(timeout=600) == 0
    out, journal = tmp_path / "out.csv", tmp_path / "out.csv.partial.jsonl"
    rng = np.random.default_rng(0)
    sizes = []
    for _ in range(5):
        p = _run(table, out)
        done = _lines(journal)  # kill once a random 10-40 % of the rows left are journaled
        target = done + max(1, int((rows - done) * rng.uniform(0.1, 0.4)))
        deadline = time.time() + 120
        while time.time() < deadline and p.poll() is None and _lines(journal) < target:
            time.sleep(0.01)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        sizes.append(journal.stat().st_size if journal.exists() else 0)
    assert p.returncode != 0 and not out.exists()  # the last run was really killed
    assert all(b > a for a, b in zip([0, *sizes], sizes, strict=False))  # each run added
    assert _run(table, out).wait(timeout=600) == 0
    pd.testing.assert_frame_equal(pd.read_csv(ref), pd.read_csv(out))
    assert not journal.exists()
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".") or f.endswith(".tmp")]
