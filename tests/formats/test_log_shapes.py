"""Eval logs told from plain tables by their real structure, and read without losing a
field silently (field round 4): a pandas-default JSON table with columns ``eval`` and
``status``, a JSONL table with a ``custom_id`` column, a ``doc_id`` table, a ``results``
table are tables; every "is it a log?" message names the ``json:`` / ``jsonl:`` address that
forces the table; an Inspect version-1 log keeps its scores; fields of the wrong type are a
named per-row error; ``apply --out`` never writes over another tool's log."""

from __future__ import annotations

import json
import warnings
import zipfile

import numpy as np
import pandas as pd
import pytest

from scoreband.errors import InputError
from scoreband.formats import SNIFF_BYTES, all_formats, resolve
from scoreband.tables import read_table
from tests.conftest import runner
from tests.formats.examples import HERE, chat_answer, example

LOGS = [f for f in all_formats() if f.sniffs]


def _cli(*args):
    from scoreband.cli import app

    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def _inspect_doc() -> dict:
    return json.loads((HERE / "inspect_log.json").read_text())


# ------------------------------------------------------------------ tables stay tables
@pytest.mark.parametrize("fmt", [f for f in LOGS if f.markers], ids=lambda f: f.name)
def test_a_table_with_a_logs_keys_is_a_table_told_how_to_force_the_log(tmp_path, fmt):
    """Every log format: a plain table whose columns are the log's marker keys (and the
    user's own) is read as a table, every column kept, with a warning naming the address
    that reads it as the log."""
    cols = {k: [f"v{k}1", f"v{k}2"] for k in sorted(fmt.markers)}
    df = pd.DataFrame({**cols, "human": [3, 4], "judge": [2.5, 4.0]})
    suffix = next(s for s in fmt.suffixes if s in (".json", ".jsonl"))
    p = tmp_path / f"t{suffix}"
    if suffix == ".json":
        df.to_json(p)  # pandas' default layout: {column: {row: value}}
    else:
        df.to_json(p, orient="records", lines=True)
    with pytest.warns(UserWarning, match=f"read as a plain .*write {fmt.name}:"):
        got = read_table(p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert resolve(p)[0].name in ("json", "jsonl")
    assert got["human"].tolist() == [3, 4] and got["judge"].tolist() == [2.5, 4.0]
    assert set(df.columns) <= set(got.columns)


def test_the_field_cases(tmp_path):
    """The reported cases: a pandas-default JSON table with columns eval and status (was
    'an Inspect log with no samples'), a JSONL table with custom_id, human, judge (was
    read as answers, human and judge gone)."""
    p = tmp_path / "t.json"
    pd.DataFrame({"eval": ["a", "b"], "status": ["ok", "ok"], "human": [1, 2]}).to_json(p)
    with pytest.warns(UserWarning, match="inspect:"):
        assert read_table(p)["human"].tolist() == [1, 2]
    q = tmp_path / "t.jsonl"
    pd.DataFrame({"custom_id": ["r1", "r2"], "human": [1, 5], "judge": [2, 4]}).to_json(
        q, orient="records", lines=True)
    with pytest.warns(UserWarning, match="openai-batch:"):
        got = read_table(q)
    assert got["human"].tolist() == [1, 5] and got["judge"].tolist() == [2, 4]


def test_every_log_example_is_still_found_by_its_content(tmp_path):
    for fmt in LOGS:
        (tmp_path / fmt.name).mkdir()
        p, _ = example(fmt.name, tmp_path / fmt.name)
        assert resolve(p)[0].name == fmt.name


def test_logs_longer_than_the_sniffed_head_are_still_found(tmp_path):
    """The structure is read from the head even where the first value or line runs past
    it (a long ``eval`` spec, a long answer with log-probs)."""
    doc = _inspect_doc()
    doc["eval"]["task_args"] = {"pad": "x" * (2 * SNIFF_BYTES)}
    p = tmp_path / "big.json"
    p.write_text(json.dumps(doc))
    assert resolve(p)[0].name == "inspect"
    line = {"id": "batch_req_1", "custom_id": "r1", "response": {
        "status_code": 200, "body": {**chat_answer(3), "pad": "x" * (2 * SNIFF_BYTES)}},
        "error": None}
    q = tmp_path / "big.jsonl"
    q.write_text(json.dumps(line) + "\n")
    assert resolve(q)[0].name == "openai-batch"
    a = chat_answer(3)
    a["choices"][0]["message"]["content"] = "y" * (2 * SNIFF_BYTES)
    r = tmp_path / "chat.jsonl"
    r.write_text(json.dumps(a) + "\n")
    assert resolve(r)[0].name == "openai-batch"


# ------------------------------------------------------------------ "is it a log?" messages
@pytest.mark.parametrize("name,suffix,plain", [("inspect", ".json", "json"),
                                               ("promptfoo", ".json", "json")])
def test_a_table_forced_as_a_log_names_the_plain_address(tmp_path, name, suffix, plain):
    p = tmp_path / f"t{suffix}"
    pd.DataFrame({"eval": ["a"], "status": ["ok"]}).to_json(p)
    with pytest.raises(InputError, match=f"was read as .*name its format: {plain}:") as e:
        read_table(f"{name}:{p}")
    assert str(p) in str(e.value)


def test_an_inspect_log_without_samples_names_the_plain_address(tmp_path):
    doc = _inspect_doc()
    doc["samples"] = []
    p = tmp_path / "run.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="no samples.*json:"):
        read_table(p)
    bad = tmp_path / "bad.eval"
    bad.write_text("not a zip")
    with pytest.raises(InputError, match="was read as an Inspect .*e.g. csv:"):
        read_table(bad)  # by inspect_ai where installed, else by the zip reader


def test_answers_keys_that_are_not_read_are_named(tmp_path):
    """A table forced as OpenAI answers: its own columns are named as not read, with the
    jsonl: address; its lines without choices say so per row."""
    p = tmp_path / "t.jsonl"
    p.write_text('{"custom_id": "r1", "human": 3, "judge": 2}\n')
    with pytest.warns(UserWarning, match="'human' \\(line 1\\).*write jsonl:"):
        got = read_table(f"openai-batch:{p}")
    assert "jsonl:" in got["batch_error"][0]


# ------------------------------------------------------------------ Inspect versions
def _v1(doc: dict, *, results: dict | None) -> dict:
    """``doc`` as a version-1 log: each sample's first score as its one ``score``."""
    doc = {**doc, "version": 1, "results": results}
    doc["samples"] = [{**{k: v for k, v in s.items() if k != "scores"},
                       "score": next(iter(s["scores"].values()))} for s in doc["samples"]]
    return doc


@pytest.mark.parametrize("results,name", [
    ({"scores": [{"name": "match"}]}, "match"),  # results as version 2 writes them
    ({"scorer": {"name": "exact"}}, "exact"),  # version 1's one scorer
    (None, "score")])
def test_a_version_1_inspect_log_keeps_its_scores(tmp_path, results, name):
    doc = _inspect_doc()
    v2 = read_table(_write(tmp_path / "v2.json", doc))
    first = next(iter(doc["samples"][0]["scores"]))
    doc["eval"].pop("scorers", None)  # the names come from the results (or nowhere)
    p = _write(tmp_path / "v1.json", _v1(doc, results=results))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        v1 = read_table(p)
    assert v1[f"score_{name}"].tolist() == v2[f"score_{first}"].tolist()
    assert not v1[f"score_{name}"].isna().all()


def test_an_unknown_inspect_version_is_refused_naming_it(tmp_path):
    doc = {**_inspect_doc(), "version": 7}
    with pytest.raises(InputError, match="version 7"):  # by scoreband or by inspect_ai
        read_table(_write(tmp_path / "run.json", doc))


def _write(p, doc):
    p.write_text(json.dumps(doc))
    return p


# ------------------------------------------------------------------ fields of the wrong type
def test_inspect_fields_of_the_wrong_type_are_named_row_errors(tmp_path):
    doc = _inspect_doc()
    first = doc["samples"][0]
    first["scores"] = [first["scores"]]
    doc["samples"][1]["metadata"] = ["human", 3]
    with pytest.warns(UserWarning, match=f"sample {first['id']!r} \\(epoch 1\\): `scores` is "
                                         "a list"):
        df = read_table(_write(tmp_path / "run.json", doc))
    assert len(df) == 2
    assert "`scores` is a list" in df["sample_error"][0]
    assert "`metadata` is a list" in df["sample_error"][1]
    assert not np.isnan(df.filter(like="score_").iloc[1].astype(float)).all()
    z = tmp_path / "run.eval"  # the same through the .eval reader
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("header.json", json.dumps({k: v for k, v in doc.items() if k != "samples"}))
        for s in doc["samples"]:
            f.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
    with pytest.warns(UserWarning, match="`scores` is a list"):
        assert "`scores` is a list" in read_table(z)["sample_error"][0]


def test_promptfoo_fields_of_the_wrong_type_are_named_row_errors(tmp_path):
    doc = json.loads((HERE / "promptfoo_results.json").read_text())
    res = doc["results"]["results"]
    res[0]["vars"] = ["caption", "a dog"]
    res[1]["namedScores"] = [1, 2]
    p = _write(tmp_path / "results.json", doc)
    with pytest.warns(UserWarning, match="result 1 .*`vars` is a list"):
        df = read_table(p)
    assert len(df) == 2
    assert "`vars` is a list" in df["result_error"][0]
    assert "`namedScores` is a list" in df["result_error"][1]


# ------------------------------------------------------------------ the CLI: never onto a log
@pytest.mark.parametrize("name", [f.name for f in LOGS])
def test_apply_out_onto_a_log_that_is_not_an_input_is_refused(tmp_path, name):
    """``apply --out LOG`` where LOG is another tool's log the command does not read: refused
    before any work, the log unchanged (README: logs are never written)."""
    table = tmp_path / "t.csv"
    pd.DataFrame({"judge_expected": np.linspace(1, 5, 40),
                  "human": np.clip(np.round(np.linspace(1, 5, 40) + 0.3), 1, 5)}).to_csv(
        table, index=False)
    cal = tmp_path / "cal.json"
    r = _cli("calibrate", table, "--target", "human", "--scale", "1,5", "--median",
             "judge_expected", "--out", cal)
    assert r.exit_code == 0, r.output
    (tmp_path / "log").mkdir()
    log, _ = example(name, tmp_path / "log")
    before = log.read_bytes()
    r = _cli("apply", table, "--calibrator", cal, "--out", log)
    said = " ".join(r.output.split())
    # the console wraps a long temporary path anywhere, even inside the file's name
    assert r.exit_code == 2 and f"--out {str(log)!r} exists and is" in \
        " ".join(r.output.replace("\n", "").split()), said
    assert "another tool" in said and log.read_bytes() == before
