"""A pairwise rule's verdicts keep every input cell and column: the three commands that apply
one (`triage --pairwise --apply`, `triage --rule --apply`, `apply --calibrator RULE`) run the
pairwise stage on the row engine, like `apply` with a calibrator, and give the same file."""

import csv
import json

import numpy as np
import pandas as pd
import pytest

from scoreband.cli import app
from tests.conftest import runner

from .sim import sample

PROBS = "pair_p_a,pair_p_b,pair_p_tie"
#: cells a reader that parses would change: 00017 -> 17, NA / nan / null / None -> empty,
#: FALSE -> False, 5 in a column with an empty cell -> 5.0
TRICKY = ["00017", "NA", "nan", "null", "None", "FALSE", "5", "", " x ", "1e5", "-0"]


def _labeled(path, n=400, seed=0):
    rng = np.random.default_rng(seed)
    _, y, _, J = sample(n, rng)
    pd.DataFrame({"pair_p_a": J[:, 0], "pair_p_b": J[:, 1], "pair_p_tie": J[:, 2],
                  "human": y}).to_csv(path, index=False)


def _tricky(path, sep=","):
    """A pair table whose id and other cells are written as a reader would not keep them;
    two rows are not judged (probabilities summing to 1.9, a negative one)."""
    probs = [("0.8", "0.15", "0.05"), ("0.1", "0.85", "0.05"), ("0.4", "0.35", "0.25")]
    rows = [[cid, cid, "5" if i % 2 else "", *probs[i % 3], "counting"]
            for i, cid in enumerate(TRICKY)]
    rows[3][3:6] = ["0.9", "0.9", "0.1"]   # sum 1.9
    rows[5][3:6] = ["-0.1", "0.9", "0.2"]  # outside [0, 1]
    with open(path, "w", newline="") as f:
        w = csv.writer(f, delimiter=sep, lineterminator="\n")
        w.writerow(["cid", "note", "k", "pair_p_a", "pair_p_b", "pair_p_tie", "task"])
        w.writerows(rows)


def _said(result) -> str:
    """The command's output with its line wrapping undone."""
    return " ".join(result.output.split())


def _cells(path, sep=","):
    with open(path, newline="") as f:
        return list(csv.reader(f, delimiter=sep))


@pytest.fixture
def rule(tmp_path):
    _labeled(tmp_path / "lab.csv")
    r = runner.invoke(app, ["triage", "--pairwise", str(tmp_path / "lab.csv"), "--label-col",
                            "human", "--probs", PROBS, "--risk", "0.2",
                            "--out", str(tmp_path / "rule.json")])
    assert r.exit_code == 0, r.output
    return tmp_path / "rule.json"


@pytest.mark.parametrize("suffix", ["csv", "tsv"])
def test_three_commands_keep_every_cell_and_agree(tmp_path, rule, suffix):
    sep = "\t" if suffix == "tsv" else ","
    src = tmp_path / f"t.{suffix}"
    _tricky(src, sep)
    outs = {k: tmp_path / f"{k}.{suffix}" for k in ("fit", "rule", "apply", "alias")}
    cmds = {"fit": ["triage", "--pairwise", str(tmp_path / "lab.csv"), "--label-col", "human",
                    "--probs", PROBS, "--risk", "0.2", "--out", str(tmp_path / "r2.json"),
                    "--apply", str(src), "--apply-out", str(outs["fit"])],
            "rule": ["triage", "--rule", str(rule), "--apply", str(src), "--apply-out",
                     str(outs["rule"])],
            "apply": ["apply", str(src), "--calibrator", str(rule), "--out",
                      str(outs["apply"])],
            "alias": ["triage", "--pairwise", "--rule", str(rule), "--apply", str(src),
                      "--apply-out", str(outs["alias"])]}
    for k, cmd in cmds.items():
        r = runner.invoke(app, cmd)
        assert r.exit_code == 0, (k, r.output)
        # the summary counts agree with the rows: two of 11 not judged, never decided
        assert "of 11 pairs" in _said(r) and "2 of them could not be judged" in _said(r)
    data = {k: p.read_bytes() for k, p in outs.items()}
    assert data["fit"] == data["rule"] == data["apply"] == data["alias"]
    src_cells, out_cells = _cells(src, sep), _cells(outs["apply"], sep)
    width = len(src_cells[0])
    assert len(out_cells) == len(src_cells)
    for a, b in zip(src_cells, out_cells, strict=True):
        assert b[:width] == a  # 00017, NA, nan, null, None, FALSE, 5, empty: as written
    # the raw bytes of each input line open the output line
    for a, b in zip(src.read_text().splitlines(), outs["apply"].read_text().splitlines(),
                    strict=True):
        assert b.startswith(a + sep)


def test_one_row_alone_and_chunks_give_the_whole_tables_rows(tmp_path, rule):
    from scoreband.decisions.rule import RuleStage
    from scoreband.engine.rows import run_file

    src = tmp_path / "t.csv"
    _tricky(src)
    whole = tmp_path / "whole.csv"
    assert runner.invoke(app, ["apply", str(src), "--calibrator", str(rule), "--out",
                               str(whole)]).exit_code == 0
    lines = whole.read_text().splitlines()
    header, body = src.read_text().splitlines()[0], src.read_text().splitlines()[1:]
    for i, line in enumerate(body):
        one = tmp_path / f"one{i}.csv"
        one.write_text(header + "\n" + line + "\n")
        out = tmp_path / f"one{i}_out.csv"
        assert runner.invoke(app, ["apply", str(one), "--calibrator", str(rule), "--out",
                                   str(out)]).exit_code in (0, 2)  # a bad row alone: exit 2
        assert out.read_text().splitlines() == [lines[0], lines[i + 1]]
    chunked = tmp_path / "chunked.csv"
    run_file(src, RuleStage(rule), chunked, chunk_rows=3)
    assert chunked.read_bytes() == whole.read_bytes()


def test_rows_not_judged_get_no_verdict(tmp_path, rule):
    src = tmp_path / "t.csv"
    _tricky(src)
    out = tmp_path / "o.csv"
    r = runner.invoke(app, ["apply", str(src), "--calibrator", str(rule), "--out", str(out)])
    assert r.exit_code == 0, r.output
    v = pd.read_csv(out, dtype=str, keep_default_na=False)
    for i, why in ((3, "sum to 1.9"), (5, "-0.1 is not a probability")):
        row = v.iloc[i]
        assert row.verdict == "" and row.decided == "False" and row.pair_set == ""
        assert row.p_a == row.p_b == row.p_tie == row.pair_uncertainty == ""
        assert why in row.verdict_error and "not judged" in row.verdict_error
    judged = v.verdict_error == ""
    decided = int((v.decided == "True").sum())
    assert decided == int((v.verdict != "").sum()) and decided <= judged.sum()
    assert f"decided {decided} of 11 pairs" in _said(r)
    # rows named from 1, as every command names them: row 4 is TRICKY[3]
    assert "row 4," in _said(r) and "row 6," in _said(r)


def test_a_rule_on_a_judged_table_keeps_the_judges_error(tmp_path, rule):
    """judge --pairwise writes pair_error; the rule writes its own verdict_error beside it
    and says the judge's reason for a pair the judge could not judge."""
    src = tmp_path / "judged.csv"
    src.write_text("item,true_a,pair_p_a,pair_p_b,pair_p_tie,pair_error\n"
                   "w0,0.5,,,,the two responses are identical: nothing to prefer\n"
                   "w1,nan,0.8,0.15,0.05,\n"
                   "w2,0.3,0.1,0.8,0.1,\n")
    out = tmp_path / "o.csv"
    r = runner.invoke(app, ["triage", "--rule", str(rule), "--apply", str(src),
                            "--apply-out", str(out)])
    assert r.exit_code == 0, r.output
    v = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert v.pair_error[0] == "the two responses are identical: nothing to prefer"
    assert "the judge could not judge this pair: the two responses are identical" in \
        v.verdict_error[0]
    assert v.true_a[1] == "nan" and v.verdict_error[1] == ""
    assert "the two responses are identical" in _said(r)


def test_a_table_with_the_rules_columns_is_refused_before_any_work(tmp_path, rule):
    src = tmp_path / "t.csv"
    _tricky(src)
    once = tmp_path / "once.csv"
    assert runner.invoke(app, ["apply", str(src), "--calibrator", str(rule), "--out",
                               str(once)]).exit_code == 0
    # fitting and applying: refused before the fit (no rule written)
    r = runner.invoke(app, ["triage", "--pairwise", str(tmp_path / "lab.csv"), "--label-col",
                            "human", "--probs", PROBS, "--out", str(tmp_path / "new.json"),
                            "--apply", str(once), "--apply-out", str(tmp_path / "o.csv")])
    assert r.exit_code == 2 and "'verdict'" in _said(r) and "'verdict_error'" in _said(r)
    assert not (tmp_path / "new.json").exists() and not (tmp_path / "o.csv").exists()
    for cmd in (["apply", str(once), "--calibrator", str(rule), "--out",
                 str(tmp_path / "o.csv")],
                ["triage", "--rule", str(rule), "--apply", str(once), "--apply-out",
                 str(tmp_path / "o.csv")]):
        r = runner.invoke(app, cmd)
        assert r.exit_code == 2 and "never overwrites" in _said(r), r.output
        assert not (tmp_path / "o.csv").exists()
    # one column of the rule's is enough; the library refuses it too
    from scoreband.decisions.rule import load_rule
    from scoreband.errors import InputError

    df = pd.read_csv(src, dtype=str, keep_default_na=False).assign(pair_set="mine")
    with pytest.raises(InputError, match="'pair_set'"):
        load_rule(rule).apply(df)


def test_the_rules_error_column_is_registered():
    from scoreband.errors import ERROR_COLUMN
    from scoreband.pairwise.selective import PAIR_COLUMNS, PairRule

    assert PairRule.error_column == ERROR_COLUMN["pairwise-rule"] == "verdict_error"
    assert ERROR_COLUMN["pairwise-rule"] != ERROR_COLUMN["pairwise"]
    assert not set(PAIR_COLUMNS) & {ERROR_COLUMN["pairwise"], "pair_p_a", "pair_pref"}


def test_jsonl_values_kept(tmp_path, rule):
    src = tmp_path / "t.jsonl"
    recs = [{"cid": "00017", "k": 5, "pair_p_a": 0.8, "pair_p_b": 0.15, "pair_p_tie": 0.05},
            {"cid": None, "k": None, "pair_p_a": 0.1, "pair_p_b": 0.85, "pair_p_tie": 0.05}]
    src.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "o.jsonl"
    r = runner.invoke(app, ["apply", str(src), "--calibrator", str(rule), "--out", str(out)])
    assert r.exit_code == 0, r.output
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [{k: g[k] for k in recs[0]} for g in got] == recs
