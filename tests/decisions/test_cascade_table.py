"""The cascade on a table and `scoreband cascade`: fit, decide, save, apply with --rule;
cells as written, bad rows reported and skipped, bad input named, inputs never overwritten."""

import json

import numpy as np
import pandas as pd
import pytest

from scoreband.cli import app
from scoreband.decisions.cascade_inputs import Judge, as_costs, as_judges
from scoreband.decisions.cascade_rule import CascadeRule, cascade, load_cascade_rule
from scoreband.errors import InputError
from tests.conftest import runner
from tests.decisions.test_cascade import _world

JUDGES = ["cheap=cheap_p:cheap", "mid=mid_p:mid", "strong=strong_p:strong"]


def _table(n=900, seed=0):
    c, a, y = _world(n, np.random.default_rng(seed))
    ab = np.array(["A", "B"])
    df = pd.DataFrame({"id": [f"r{i}" for i in range(n)]})
    for j, name in enumerate(("cheap", "mid", "strong")):
        df[f"{name}_p"] = [f"{x:.6f}" for x in c[:, j]]
        df[name] = ab[a[:, j]]
    df["human"] = ab[y]
    return df


def run(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in res.output, res.output
    return res


def said(res) -> str:
    return " ".join(res.output.split())


def test_fit_decides_rows_and_names_the_judge():
    res = cascade(_table(), JUDGES, "human", 0.1, 0.1, costs={"cheap": 1, "mid": 5,
                                                                 "strong": 20})
    t = res.table
    assert set(t["decided_by"]) <= {"cheap", "mid", "strong", "human"}
    assert 0.3 < (t["decided_by"] != "human").mean() < 0.9
    d = t["decided_by"] != "human"
    assert (t.loc[~d, "decided_answer"] == "").all()
    assert set(t.loc[d, "decided_answer"]) <= {"A", "B"}
    # a row the cheap judge decides gets the cheap judge's own answer
    cheap = t["decided_by"] == "cheap"
    assert cheap.any() and (t.loc[cheap, "decided_answer"] == t.loc[cheap, "cheap"]).all()
    rep = res.rule.report
    assert rep["risk_on_calibration"] <= 0.1 and rep["cost_per_row"] < 20
    assert abs(sum(rep["shares_on_calibration"].values()) - 1) < 1e-9
    assert "at most 0.1" in rep["guarantee"] and "0.9" in rep["guarantee"]
    assert res.shares["human"] == pytest.approx(1 - rep["decided_share"])


def test_human_cost_counts(tmp_path):
    js = as_judges(JUDGES)
    assert as_costs(["cheap=1", "mid=5", "strong=20", "human=100"], js) == ([1, 5, 20], 100)
    assert as_costs(None, js) == (None, 0.0)
    with pytest.raises(InputError, match="finite number >= 0"):
        as_costs({"cheap": 1, "mid": 5, "strong": "x"}, js)
    res = cascade(_table(), JUDGES, "human",
                  costs={"cheap": 1, "mid": 5, "strong": 20, "human": 100})
    rep = res.rule.report
    assert rep["cost_per_row"] == pytest.approx(rep["judge_cost_per_row"]
                                                + 100 * (1 - rep["decided_share"]))
    assert load_cascade_rule(res.rule.save(tmp_path / "r.json")).human_cost == 100


def test_answers_compared_by_value_and_written_as_they_are():
    n = 80
    df = pd.DataFrame({"p": ["0.99"] * n, "score": ["4.0"] * n, "human": ["4"] * n})
    res = cascade(df, ["j=p:score"], "human", 0.1, 0.1)
    assert (res.table["decided_by"] == "j").all()
    assert (res.table["decided_answer"] == "4.0").all()  # the judge's cell as written


def test_rule_round_trip_and_refusals(tmp_path):
    res = cascade(_table(600), JUDGES, "human", 0.1, 0.1)
    p = res.rule.save(tmp_path / "r.json")
    back = load_cascade_rule(p)
    assert back.to_dict() == json.loads(p.read_text())
    new = _table(300, seed=5).drop(columns="human")
    a = back.decide(new).table["decided_by"]
    assert a.equals(res.rule.decide(new).table["decided_by"])
    doc = json.loads(p.read_text())
    for change, match in (({"format_version": 99}, "format_version 99"),
                          ({"format": "x"}, "not a scoreband cascade rule"),
                          ({"stages": [7]}, "key 'stages'"),
                          ({"view": "other"}, "key 'view'")):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({**doc, **change}))
        with pytest.raises(InputError, match=match):
            load_cascade_rule(bad)


def test_bad_rows_are_reported_and_skipped():
    df = _table(600)
    df.loc[3, "cheap_p"] = "high"
    df.loc[4, "mid_p"] = "1.7"
    df.loc[5, "strong"] = ""
    df.loc[6, ["cheap_p", "cheap"]] = ""  # the cheap judge was not run: no error
    res = cascade(df, JUDGES, "human", 0.1, 0.1)
    rows = {e.row: e.column for e in res.errors}
    assert rows == {"4 (id=r3)": "cheap_p", "5 (id=r4)": "mid_p", "6 (id=r5)": "strong"}
    assert "not a number in [0, 1]" in res.table.loc[3, "cascade_error"]
    assert res.table.loc[6, "cascade_error"] == "" and len(res.table) == 600
    assert res.table.loc[3, "decided_by"] != "cheap"


def test_a_rule_of_the_one_base_chunks_agree(tmp_path):
    """The cascade rule is a registered :class:`Rule`: the one ``load_rule`` reads its
    file, and chunk by chunk (the row engine's way) it decides as on the whole table, with
    its row errors named by their row in the table."""
    from scoreband.decisions.rule import Rule, load_rule

    res = cascade(_table(600), JUDGES, "human", 0.1, 0.1)
    rule = load_rule(res.rule.save(tmp_path / "r.json"))
    assert isinstance(rule, Rule) and rule.to_dict() == res.rule.to_dict()
    new = _table(200, seed=9)
    new.loc[150, "mid_p"] = "x"
    whole = rule.apply(new)
    parts = [rule.decide_frame(new.iloc[a:b].reset_index(drop=True), a)
             for a, b in ((0, 120), (120, 200))]
    for col in ("decided_by", "decided_answer", "cascade_error"):
        assert whole[col].tolist() == [*parts[0].columns[col], *parts[1].columns[col]]
    assert [e.row for e in parts[1].errors] == ["151 (id=r150)"]
    assert rule.last_errors[0].position == 150
    assert rule.predict(new).tolist() == (whole["decided_by"] != "human").tolist()


def test_bad_input_names_the_fix():
    df = _table(300)
    with pytest.raises(InputError, match="'nope'.*not in the table; available"):
        cascade(df, ["a=nope:cheap"], "human")
    with pytest.raises(InputError, match="`label` column 'missing'"):
        cascade(df, JUDGES, "missing")
    empty = df.assign(mid_p="", mid="")
    with pytest.raises(InputError, match="judge 'mid' gave no verdict on any labeled row"):
        cascade(empty, JUDGES, "human")
    with pytest.raises(InputError, match="no labeled row"):
        cascade(df.assign(human=""), JUDGES, "human")
    with pytest.raises(InputError, match="NAME=CONF_COL:ANSWER_COL"):
        as_judges(["cheap"])
    with pytest.raises(InputError, match="'a' is given twice"):
        as_judges(["a=x:y", "a=z:w"])
    with pytest.raises(InputError, match="not 'human'"):
        as_judges(["human=x:y"])
    js = [Judge("a", "x", "y"), Judge("b", "z", "w")]
    with pytest.raises(InputError, match="'c', which is not a judge"):
        as_costs(["a=1", "c=2"], js)
    with pytest.raises(InputError, match="'b' has none"):
        as_costs({"a": 1}, js)
    with pytest.raises(InputError, match="already has the column 'decided_by'"):
        cascade(df.assign(decided_by="x"), JUDGES, "human")


def test_nothing_passes_says_so():
    res = cascade(_table(30), JUDGES, "human", 0.01, 0.1)
    assert (res.table["decided_by"] == "human").all()
    assert "label more rows" in res.warnings[0]
    assert isinstance(res.rule, CascadeRule) and res.rule.stages == []


def test_cli_fit_then_apply(tmp_path):
    lab, new = tmp_path / "lab.csv", tmp_path / "new.csv"
    _table(800).to_csv(lab, index=False)
    _table(300, seed=3).assign(human="").to_csv(new, index=False)
    args = [a for j in JUDGES for a in ("--judge", j)]
    res = run("cascade", lab, *args, "--label-col", "human", "--cost", "cheap=1",
              "--cost", "mid=5", "--cost", "strong=20", "--out", tmp_path / "d.csv",
              "--rule-out", tmp_path / "r.json")
    assert res.exit_code == 0, res.output
    assert "with probability at least 0.9" in said(res) and "judge cost per row" in said(res)
    d = pd.read_csv(tmp_path / "d.csv", dtype=str, keep_default_na=False)
    assert list(d.columns)[-3:] == ["decided_by", "decided_answer", "cascade_error"]
    assert (d["cheap_p"] == _table(800)["cheap_p"]).all()  # cells as written
    res = run("cascade", new, "--rule", tmp_path / "r.json", "--out", tmp_path / "d2.csv")
    assert res.exit_code == 0, res.output
    d2 = pd.read_csv(tmp_path / "d2.csv", dtype=str, keep_default_na=False)
    assert len(d2) == 300 and (d2["decided_by"] != "human").any()
    res = run("cascade", new, "--rule", tmp_path / "r.json", "--risk", "0.05", "--out",
              tmp_path / "d4.csv")
    assert res.exit_code == 2 and "keeps the risk, delta" in said(res)
    # a cascade rule is a rule like the others: `apply --calibrator RULE` decides the same
    res = run("apply", new, "--calibrator", tmp_path / "r.json", "--out", tmp_path / "d3.csv")
    assert res.exit_code == 0, res.output
    assert "go to a human" in said(res)
    d3 = pd.read_csv(tmp_path / "d3.csv", dtype=str, keep_default_na=False)
    assert d3.equals(d2)


def test_cli_refusals(tmp_path):
    lab = tmp_path / "lab.csv"
    _table(200).to_csv(lab, index=False)
    before = lab.read_bytes()
    args = [a for j in JUDGES for a in ("--judge", j)]
    res = run("cascade", lab, *args, "--label-col", "human", "--out", lab)
    assert res.exit_code == 2 and "never writes over one of its own inputs" in said(res)
    assert lab.read_bytes() == before
    res = run("cascade", lab, *args, "--label-col", "human", "--out", tmp_path / "a.csv",
              "--rule-out", tmp_path / "a.csv")
    assert res.exit_code == 2 and "same path" in said(res)
    res = run("cascade", lab, *args, "--label-col", "human", "--rule-out", lab)
    assert res.exit_code == 2 and "own inputs" in said(res)
    res = run("cascade", lab, *args)
    assert res.exit_code == 2 and "--label-col" in said(res)
    res = run("cascade", lab, "--judge", "cheap=cheap_p:nope", "--label-col", "human",
              "--out", tmp_path / "b.csv")
    assert res.exit_code == 2 and "'nope' is not in the table" in said(res)
    assert not (tmp_path / "b.csv").exists()
    res = run("cascade", lab, "--rule", tmp_path / "none.json", "--out", tmp_path / "c.csv")
    assert res.exit_code == 2 and "does not exist" in said(res)
    res = run("cascade", lab, "--rule", lab, "--judge", "a=b:c", "--out", tmp_path / "c.csv")
    assert res.exit_code == 2 and "--judge is read only when fitting" in said(res)


def test_cli_help_has_an_example():
    res = run("cascade", "--help")
    assert res.exit_code == 0
    assert "scoreband cascade judged.csv --judge cheap=cheap_p:cheap_answer" in said(res)


def test_codes_are_compared_as_written_and_the_label_is_no_judge():
    """A judge answering the code '01' where the human wrote '1' is wrong (a code read as
    a number would count it right and understate the error); '4.0' and '4' are one answer.
    A judge reading the label column is refused."""
    from scoreband.decisions.cascade_inputs import answer_key

    assert answer_key("01") != answer_key("1") and answer_key("4.0") == answer_key("4")
    assert answer_key("+1") != answer_key("1") and answer_key(" B ") == "B"
    df = _table(400)
    with pytest.raises(InputError, match=r"read the `label` column 'human'"):
        cascade(df, ["cheap=cheap_p:human"], "human", 0.1, 0.1)
    coded = df.assign(cheap=df["cheap"].map({"A": "01", "B": "02"}),
                      human=df["human"].map({"A": "1", "B": "2"}))
    res = cascade(coded, ["cheap=cheap_p:cheap"], "human", 0.1, 0.1)
    assert (res.table["decided_by"] == "human").all()  # every answer differs as written


def test_triage_result_save_refuses_one_path_for_the_rule_and_its_report(tmp_path):
    from scoreband.decisions import fit_triage

    rng = np.random.default_rng(0)
    y = rng.integers(1, 6, 300).astype(float)
    df = pd.DataFrame({"human": y, "judge": np.clip(y + rng.normal(0, 0.5, 300), 1, 5)})
    res = fit_triage(df, target="human", score="judge", scale=(1, 5), tolerance=0.5)
    with pytest.raises(InputError, match="same path"):
        res.save(tmp_path / "r.json", html=tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()


def test_cli_messages_name_the_flags(tmp_path):
    """The library says `label` and (for triage's score) `median`; the commands say the
    flags the user typed."""
    _table(200).to_csv(tmp_path / "c.csv", index=False)
    res = run("cascade", tmp_path / "c.csv", "--judge", "cheap=cheap_p:cheap", "--label-col",
              "nope", "--out", tmp_path / "o.csv")
    assert res.exit_code == 2 and "--label-col column 'nope' is not in the table" in said(res)
    rng = np.random.default_rng(0)
    y = rng.integers(1, 6, 200)
    pd.DataFrame({"human": y, "judge": y}).to_csv(tmp_path / "t.csv", index=False)
    res = run("triage", tmp_path / "t.csv", "--target", "human", "--scale", "1,5", "--score",
              "nope", "--tolerance", "0.5", "--out", tmp_path / "r.json")
    assert res.exit_code == 2 and "--score column 'nope' is not in the table" in said(res)


def test_percentages_are_refused_naming_the_column():
    """Confidences written as percentages (or a pair judge's p(A) as 90) would make every
    row a row error and send every row to a human: refused, the column named."""
    df = pd.DataFrame({"p": ["99"] * 60, "a": ["A"] * 60, "human": ["A"] * 60})
    with pytest.raises(InputError, match=r"column 'p' holds numbers above 1.*divide "
                                         r"percentages by 100"):
        cascade(df, ["j=p:a"], "human")
    df = pd.DataFrame({"pa": ["90"] * 60, "pb": ["10"] * 60, "human": ["A"] * 60})
    with pytest.raises(InputError, match="column 'pa' holds numbers above 1"):
        cascade(df, ["j=pa,pb"], "human")
