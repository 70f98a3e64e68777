"""Faults: a `score` (3,000 rows), `judge` (1,000 rows, a tiny LLaVA run by transformers) or
`roundtrip` (600 rows) run killed with SIGKILL at five random points resumes from its journal
and ends with exactly the table an uninterrupted run writes (no row lost or duplicated, no
temp file left behind)."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tests.killing import kill_five_times

N_ROWS = 3000
JUDGE_ROWS = 1000

pytestmark = pytest.mark.slow  # processes killed with SIGKILL and restarted


ARGS = {"score": ["--batch-size", "64"], "roundtrip": ["--n-gen", "2"], "judge": []}


def _run(cmd, table, out):
    extra = ["--judge", f"hf:{table.parent / 'llava'}"] if cmd == "judge" else []
    return subprocess.Popen([sys.executable, "-m", "scoreband.cli", cmd, str(table),
                             "--out", str(out), *ARGS[cmd], *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    d = tmp_path_factory.mktemp("kill")
    r = subprocess.run([sys.executable, "-m", "scoreband.cli", "world", "--out", str(d),
                        "--n", "300"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(d / "world.csv")
    big = pd.concat([df] * (N_ROWS // len(df)), ignore_index=True)
    big["caption"] = [f"{c} {'.' * (i // len(df))}" for i, c in enumerate(big["caption"])]
    big.to_csv(d / "big.csv", index=False)
    big.head(600).to_csv(d / "small.csv", index=False)
    from tiny_models import tiny_llava

    tiny_llava(d / "llava")
    # 1,000 rows: seven judge processes (each loading transformers) at 3,000 took 67 s
    pd.DataFrame({"image": big["image"], "instruction": "Describe the image.",
                  "response": big["caption"]}).head(JUDGE_ROWS).to_csv(d / "judge.csv",
                                                                        index=False)
    return d


@pytest.mark.parametrize("cmd,name,rows", [("score", "big.csv", N_ROWS),
                                           ("judge", "judge.csv", JUDGE_ROWS),
                                           ("roundtrip", "small.csv", 600)])
def test_killed_five_times_equals_an_uninterrupted_run(table, tmp_path, cmd, name, rows):
    table = table / name
    ref = tmp_path / "ref.csv"
    assert _run(cmd, table, ref).wait(timeout=600) == 0
    out = tmp_path / "out.csv"
    journal = tmp_path / "out.csv.partial.jsonl"
    sizes, p = kill_five_times(lambda: _run(cmd, table, out), journal, rows,
                               np.random.default_rng(0))
    assert p.returncode != 0 and not out.exists()  # the last run was really killed
    assert all(b > a for a, b in zip([0, *sizes], sizes, strict=False))  # each run added
    assert _run(cmd, table, out).wait(timeout=600) == 0
    a, b = pd.read_csv(ref), pd.read_csv(out)
    assert len(b) == rows
    pd.testing.assert_frame_equal(a, b)
    assert not journal.exists()
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".") or f.endswith(".tmp")]
