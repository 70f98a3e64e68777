"""Cyclic preferences (X > Y, Y > Z, Z > X, each significant): rank sets that no ranking
contradicts, and the cycle said in the JSON and on the console (issue 43: all three got
rank set [2, 2] "at 95 %", the cycle unmentioned)."""

import json

import numpy as np
import pandas as pd
import pytest

from scoreband.cli import app
from scoreband.pairwise.ranking import cyclic_preferences, rank_arrays
from tests.conftest import runner


def _cycle_table(n=100, seed=0, extra=False) -> pd.DataFrame:
    """X beats Y, Y beats Z, Z beats X on 90 % of their pairs (judge and humans agree);
    with ``extra``, W loses to all three."""
    rng = np.random.default_rng(seed)
    rows = []
    duels = [("X", "Y"), ("Y", "Z"), ("Z", "X")]
    if extra:
        duels += [("X", "W"), ("Y", "W"), ("Z", "W")]
    for s1, s2 in duels:
        for i in range(n):
            win = rng.uniform() < 0.9
            rows.append({"system_a": s1, "system_b": s2, "verdict": "A" if win else "B",
                         "human": ("A" if win else "B") if i < 60 else ""})
    return pd.DataFrame(rows)


def _ranks(doc) -> dict:
    return {r["system"]: tuple(r["ranks"]) for r in doc["ranking"]}


def _consistent(ranks: dict) -> bool:
    """Some ranking (a permutation of 1..k) puts every system inside its rank set."""
    import itertools

    names = list(ranks)
    return any(all(ranks[s][0] <= r <= ranks[s][1] for s, r in zip(names, perm, strict=True))
               for perm in itertools.permutations(range(1, len(names) + 1)))


def test_cycle_leaves_its_systems_unordered_and_is_said():
    df = _cycle_table()
    y = df["human"].map({"A": 1.0, "B": 0.0, "": np.nan}).to_numpy()
    f = df["verdict"].map({"A": 1.0, "B": 0.0}).to_numpy()
    doc = rank_arrays(df.system_a, df.system_b, f, y, alpha=0.05)
    assert all(p["significant"] for p in doc["pairs"])  # the cycle is significant
    assert _ranks(doc) == {"X": (1, 3), "Y": (1, 3), "Z": (1, 3)}
    assert doc["transitive"] is False
    assert doc["cycles"][0]["systems"] == ["X", "Y", "Z"]
    assert sorted(map(tuple, doc["cycles"][0]["preferences"])) == [("X", "Y"), ("Y", "Z"),
                                                                    ("Z", "X")]
    assert any("cyclic (not transitive)" in w for w in doc["warnings"])


def test_a_system_outside_the_cycle_keeps_its_place():
    df = _cycle_table(extra=True)
    y = df["human"].map({"A": 1.0, "B": 0.0, "": np.nan}).to_numpy()
    f = df["verdict"].map({"A": 1.0, "B": 0.0}).to_numpy()
    doc = rank_arrays(df.system_a, df.system_b, f, y, alpha=0.05)
    r = _ranks(doc)
    assert r["W"] == (4, 4) and r["X"] == r["Y"] == r["Z"] == (1, 3)
    assert _consistent(r)
    assert [c["systems"] for c in doc["cycles"]] == [["X", "Y", "Z"]]


def test_transitive_preferences_are_untouched():
    ps = [{"a": "A", "b": "B", "estimate": 0.2, "p_adjusted": 0.001},
          {"a": "B", "b": "C", "estimate": 0.2, "p_adjusted": 0.001},
          {"a": "A", "b": "C", "estimate": 0.3, "p_adjusted": 0.001}]
    assert cyclic_preferences(["A", "B", "C"], ps, 0.05) == []
    rng = np.random.default_rng(1)
    a = np.repeat(["A", "A", "B"], 80)
    b = np.repeat(["B", "C", "C"], 80)
    f = (rng.uniform(size=240) < 0.85).astype(float)
    y = np.where(np.arange(240) % 80 < 50, f, np.nan)
    doc = rank_arrays(a, b, f, y, alpha=0.05)
    assert doc["transitive"] is True and doc["cycles"] == []
    assert _ranks(doc) == {"A": (1, 1), "B": (2, 2), "C": (3, 3)}


@pytest.mark.parametrize("ext", [".csv", ".jsonl", ".parquet"])
@pytest.mark.parametrize("cmd", [["systems", "--pairwise"]])
def test_cycle_said_by_the_commands(tmp_path, ext, cmd):
    df = _cycle_table()
    p = tmp_path / f"j{ext}"
    if ext == ".csv":
        df.to_csv(p, index=False)
    elif ext == ".jsonl":
        df.to_json(p, orient="records", lines=True)
    else:
        df.to_parquet(p, index=False)
    r = runner.invoke(app, [*cmd, str(p), "--label-col", "human", "--verdict", "verdict",
                            "--out", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "cyclic (not transitive)" in text and "'Z' > 'X'" in text, text
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["transitive"] is False and doc["cycles"][0]["systems"] == ["X", "Y", "Z"]
    assert _ranks(doc) == {"X": (1, 3), "Y": (1, 3), "Z": (1, 3)}
    assert "1-3" in text
