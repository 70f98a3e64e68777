"""`scoreband pairs` keeps cells as written (README: CSV / TSV cells byte for byte): item
ids, --keep columns, responses and system names; systems are told apart by their text."""

import csv
import json

import pandas as pd
import pytest

from scoreband.cli import app
from scoreband.pairwise.pairs import make_pairs
from tests.conftest import runner

SCORES = """item,system,score,human,resp,zip
0000,01,0.5,1,  first answer ,00
0000,1,0.25,2,second,00
0000,002,0.75,,third,00
0001,01,0.1,3,a,01
0001,1,0.2,3,b,01
0001,003,0.3,1,NA,01
"""


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t" if str(path).endswith(".tsv") else ","))


@pytest.mark.parametrize("ext", ["csv", "tsv"])
def test_pairs_keeps_cells_and_names_as_written(tmp_path, ext):
    """0000, 00, 01, 002, 003 and the responses (spaces, NA) come out as they went in; 01
    and 1 are two systems (were 0, 0, 1, 2, 3 - and 01 and 1 one system)."""
    src = tmp_path / f"s.{ext}"
    src.write_text(SCORES if ext == "csv" else SCORES.replace(",", "\t"))
    out = tmp_path / f"p.{ext}"
    r = runner.invoke(app, ["pairs", str(src), "--system-col", "system", "--item-col", "item",
                            "--score", "score", "--target", "human", "--response-col", "resp",
                            "--keep", "zip", "--out", str(out)])
    assert r.exit_code == 0, r.output
    rows = _rows(out)
    assert {x["item"] for x in rows} == {"0000", "0001"}
    assert {x["zip"] for x in rows} == {"00", "01"}
    assert {(x["system_a"], x["system_b"]) for x in rows} == {
        ("002", "01"), ("002", "1"), ("01", "1"), ("003", "01"), ("003", "1")}
    by = {(x["item"], x["system_a"], x["system_b"]): x for x in rows}
    assert by[("0000", "01", "1")]["resp_a"] == "  first answer "
    assert by[("0001", "003", "01")]["resp_a"] == "NA"
    assert "6 pairs of 4 systems on 2 items" in " ".join(r.output.split())


def test_pairs_jsonl_keeps_values(tmp_path):
    src = tmp_path / "s.jsonl"
    df = pd.read_csv(pd.io.common.StringIO(SCORES), dtype=str, keep_default_na=False)
    src.write_text("".join(json.dumps(rec) + "\n" for rec in df.to_dict("records")))
    out = tmp_path / "p.jsonl"
    r = runner.invoke(app, ["pairs", str(src), "--system-col", "system", "--item-col", "item",
                            "--score", "score", "--keep", "zip", "--out", str(out)])
    assert r.exit_code == 0, r.output
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert {x["item"] for x in recs} == {"0000", "0001"} and {x["zip"] for x in recs} == \
        {"00", "01"}
    assert {x["system_a"] for x in recs} | {x["system_b"] for x in recs} == \
        {"01", "1", "002", "003"}


def test_systems_01_1_002_are_three_not_no_pair(tmp_path):
    """review bad/sysnames.csv: systems 01, 1, 002 failed with "no pair of systems on a
    shared item" (01 and 1 read as the number 1: every row a duplicate)."""
    rows = ["item,system,score,human"] + [f"img{i},{s},{0.1 * k + i},{k}"
                                          for i in range(3)
                                          for k, s in enumerate(["01", "1", "002"])]
    (tmp_path / "s.csv").write_text("\n".join(rows) + "\n")
    r = runner.invoke(app, ["pairs", str(tmp_path / "s.csv"), "--system-col", "system",
                            "--item-col", "item", "--score", "score", "--target", "human",
                            "--out", str(tmp_path / "p.csv")])
    assert r.exit_code == 0, r.output
    assert "no pair" not in r.output
    assert "9 pairs of 3 systems" in " ".join(r.output.split())


def test_no_pair_message_says_why_when_rows_were_duplicates():
    df = pd.DataFrame({"s": ["a", "a"], "i": ["x", "x"], "m": [1, 2]})
    from scoreband.errors import InputError

    with pytest.raises(InputError, match="more than once on an item"):
        make_pairs(df, system_col="s", item_col="i", scores=["m"])


def test_row_errors_named_from_1_without_numpy_reprs():
    df = pd.DataFrame({"s": ["a", "b", "c", "c"], "i": ["x", "x", "y", "y"],
                       "m": ["1", "oops", "2", "3"]})
    res = make_pairs(df, system_col="s", item_col="i", scores=["m"])
    text = " ".join(str(e) for e in res.errors)
    assert "row 2, column 'm': 'oops' is not a number" in text
    assert "np.str_" not in text and "system 'c' appears more than once" in text
