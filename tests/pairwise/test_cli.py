import numpy as np
import pandas as pd

from scoreband.cli import app
from tests.conftest import runner

from .sim import sample


def test_pairs_then_pairwise_triage(tmp_path):
    rng = np.random.default_rng(0)
    n_items, systems = 300, ["s1", "s2", "s3"]
    q = rng.normal(0, 1, (n_items, 3)) + np.array([0.0, 0.3, 0.6])
    rows = [{"system": s, "item": i, "metric": q[i, j] + rng.normal(0, 0.3),
             "human": q[i, j] + rng.normal(0, 0.3), "resp": f"{s}-{i}"}
            for i in range(n_items) for j, s in enumerate(systems)]
    pd.DataFrame(rows).to_csv(tmp_path / "scores.csv", index=False)
    r = runner.invoke(app, ["pairs", str(tmp_path / "scores.csv"), "--system-col",
                                 "system", "--item-col", "item", "--score", "metric",
                                 "--target", "human", "--tie-tol", "0.1", "--response-col",
                                 "resp", "--out", str(tmp_path / "pairs.csv")])
    assert r.exit_code == 0, r.output
    assert "900 pairs" in r.output
    r = runner.invoke(app, ["triage", "--pairwise", str(tmp_path / "pairs.csv"),
                                 "--label-col", "human", "--feature", "metric_diff",
                                 "--risk", "0.2", "--out", str(tmp_path / "rule.json"),
                                 "--apply", str(tmp_path / "pairs.csv"), "--apply-out",
                                 str(tmp_path / "v.csv")])
    assert r.exit_code == 0, r.output
    v = pd.read_csv(tmp_path / "v.csv", keep_default_na=False)
    assert {"verdict", "p_a", "pair_set", "decided"} <= set(v.columns)
    assert "decided" in r.output and "%" in r.output
    # the input is never overwritten
    r = runner.invoke(app, ["triage", "--rule", str(tmp_path / "rule.json"),
                                 "--apply", str(tmp_path / "pairs.csv"), "--apply-out",
                                 str(tmp_path / "pairs.csv")])
    assert r.exit_code != 0


def test_bad_verdict_values_named(tmp_path):
    rng = np.random.default_rng(1)
    x, y, _, _ = sample(400, rng)
    y = y.copy()
    y[5] = "maybe"
    pd.DataFrame({"d": x, "human": y}).to_csv(tmp_path / "p.csv", index=False)
    r = runner.invoke(app, ["triage", "--pairwise", str(tmp_path / "p.csv"), "--label-col",
                                 "human", "--feature", "d", "--out",
                                 str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    # rows named from 1 (RowIds): y[5] is the sixth data row
    assert "row 6" in r.output and "human" in r.output and "not a verdict" in r.output


def test_world_end_to_end_judge_triage_systems(tmp_path):
    import json

    from scoreband.world.pairwise import world_pairs

    df = world_pairs(400, seed=4)
    df.to_csv(tmp_path / "w.csv", index=False)
    run = runner.invoke
    r = run(app, ["judge", "--pairwise", str(tmp_path / "w.csv"), "--judge", "sim-pair-strong",
                  "--out", str(tmp_path / "j.csv")])
    assert r.exit_code == 0, r.output
    (tmp_path / "knobs.toml").write_text('sets = "aps"\n')
    r = run(app, ["triage", "--pairwise", str(tmp_path / "j.csv"), "--label-col", "human",
                  "--probs", "pair_p_a,pair_p_b,pair_p_tie", "--risk", "0.2", "--config",
                  str(tmp_path / "knobs.toml"), "--groups", "task", "--out",
                  str(tmp_path / "rule.json")])
    assert r.exit_code == 0, r.output
    rule = json.loads((tmp_path / "rule.json").read_text())
    assert set(rule["set_quantile"]) == set(df.task)
    j = pd.read_csv(tmp_path / "j.csv", keep_default_na=False)
    j.loc[j.index % 5 != 0, "human"] = ""
    j.to_csv(tmp_path / "j2.csv", index=False)
    r = run(app, ["systems", "--pairwise", str(tmp_path / "j2.csv"), "--label-col", "human",
                  "--out", str(tmp_path / "rank.json")])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "rank.json").read_text())
    assert doc["ranking"][0]["system"] == "sys-d"
