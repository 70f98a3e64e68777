"""Per-group triage that keeps nothing says why and offers pooling; `pool = true` fits one
threshold over the mixture of groups and reports each group's kept share (issue 44, item 5)."""

import json

import numpy as np
import pandas as pd

from scoreband.decisions.triage import fit_triage
from tests.decisions.test_cascade_table import run, said


def _table(n=1400, groups=7, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.uniform(1, 5, n)
    sd = 0.1 + rng.uniform(size=n) * 0.6
    return pd.DataFrame({"human": y, "judge": y + rng.normal(0, sd), "u": sd,
                         "task": rng.choice([f"t{i}" for i in range(groups)], n)})


def test_small_groups_say_why_and_offer_pooling():
    df = _table(n=700, groups=7)
    res = fit_triage(df, target="human", score="judge", scale=(1, 5), tolerance=0.5,
                     alpha=0.05, delta=0.1, groups="task", uncertainty="u")
    assert all(v["accepted_share"] == 0 for v in res.rule.groups.values())
    text = " ".join(res.warnings)
    assert "keeps nothing" in text and "calibration rows per group" in text
    assert "pool = true" in text
    pooled = fit_triage(df, target="human", score="judge", scale=(1, 5), tolerance=0.5,
                        alpha=0.05, delta=0.1, groups="task", uncertainty="u", pool=True)
    rule = pooled.rule
    assert not rule.per_group and rule.report["accepted_share"] > 0.2
    per = rule.report["per_group"]
    assert sorted(per) == sorted(df["task"].unique())
    assert sum(v["n_calibration"] for v in per.values()) == rule.report["n_calibration"]
    assert "mixture of the groups of column 'task'" in rule.to_dict()["guarantee"]
    # the pooled threshold decides every group's rows, each reported
    t = pooled.table()
    assert len(t) == 1 + df["task"].nunique() and (t["accepted"].iloc[1:] > 0).all()


def test_pooled_rule_keeps_its_guarantee_over_the_mixture():
    """300 draws: the pooled rule's population risk among kept items (groups of unequal
    difficulty, one of them much harder) exceeds alpha in at most delta of the draws."""
    rng = np.random.default_rng(5)
    P = _table(n=20000, seed=99)
    P.loc[P.task == "t0", "judge"] = P.loc[P.task == "t0", "human"] + rng.normal(0, 0.8, (P.task == "t0").sum())
    fail = 0
    for s in range(300):
        df = _table(n=700, seed=1000 + s)
        hard = df.task == "t0"
        df.loc[hard, "judge"] = df.loc[hard, "human"] + rng.normal(0, 0.8, hard.sum())
        rule = fit_triage(df, target="human", score="judge", scale=(1, 5), tolerance=0.5,
                          alpha=0.1, delta=0.1, groups="task", uncertainty="u", pool=True,
                          seed=s).rule
        m, u, kept = rule.decide(P["judge"].to_numpy(float), _signals(P),
                                 P["task"].to_numpy())
        if kept.any():
            fail += np.mean(np.abs(m[kept] - P["human"].to_numpy()[kept]) > 0.5 + 1e-9) > 0.1
    assert fail / 300 <= 0.1 + 2.5 * np.sqrt(0.09 / 300), fail


def _signals(P):
    from scoreband.decisions.uncertainty import Signals

    return Signals(P["judge"].to_numpy(float), None, P["u"].to_numpy(float))


def test_pool_from_the_command_line(tmp_path):
    _table(n=700).to_csv(tmp_path / "lab.csv", index=False)
    (tmp_path / "k.toml").write_text("pool = true\n")
    args = ["triage", tmp_path / "lab.csv", "--target", "human", "--score", "judge", "--scale",
            "1,5", "--tolerance", "0.5", "--risk", "0.05", "--uncertainty", "u", "--groups",
            "task", "--out", tmp_path / "r.json"]
    r = run(*args)
    assert r.exit_code == 0 and "pool = true" in said(r), r.output
    r = run(*args, "--config", tmp_path / "k.toml")
    assert r.exit_code == 0, r.output
    assert "(pooled)" in r.output
    doc = json.loads((tmp_path / "r.json").read_text())
    assert set(doc["report"]["per_group"]) == {f"t{i}" for i in range(7)}
    r = run("triage", tmp_path / "lab.csv", "--target", "human", "--score", "judge", "--scale",
            "1,5", "--tolerance", "0.5", "--out", tmp_path / "r2.json", "--config",
            tmp_path / "k.toml")
    assert r.exit_code == 2 and "--groups" in said(r)


def test_a_pooled_rule_escalates_groups_it_never_saw():
    """The pooled guarantee covers the mixture of the groups it was fitted on: at apply a
    row of an unseen group is escalated (said once), an empty group cell is a row error,
    and the rows say their group."""
    df = _table(n=1400)
    rule = fit_triage(df, target="human", score="judge", scale=(1, 5), tolerance=0.5,
                      alpha=0.2, delta=0.1, groups="task", uncertainty="u", pool=True).rule
    new = _table(n=60, seed=3)
    new.loc[:9, "task"] = "unseen"
    new["task"] = new["task"].astype(object)
    new.loc[10:13, "task"] = None
    out = rule.apply(new)
    assert not out.loc[:13, "trusted"].any()
    assert out.loc[:9, "triage_error"].str.startswith("unseen_group").all()
    assert out.loc[14:, "trusted"].any()
    assert any("'unseen'" in w and "escalated" in w for w in rule.last_warnings)
    assert len(rule.last_errors) == 4 and "triage_group" in out.columns
    back = type(rule).from_dict(rule.to_dict())
    assert back.apply(new)["trusted"].tolist() == out["trusted"].tolist()


def test_id_col_with_a_saved_rule_is_refused_not_ignored(tmp_path):
    _table(n=400).to_csv(tmp_path / "lab.csv", index=False)
    r = run("triage", tmp_path / "lab.csv", "--target", "human", "--score", "judge", "--scale",
            "1,5", "--tolerance", "0.5", "--uncertainty", "u", "--out", tmp_path / "r.json")
    assert r.exit_code == 0, r.output
    r = run("triage", "--rule", tmp_path / "r.json", "--apply", tmp_path / "lab.csv",
            "--apply-out", tmp_path / "o.csv", "--id-col", "nope")
    assert r.exit_code == 2 and "--id-col" in said(r) and not (tmp_path / "o.csv").exists()
