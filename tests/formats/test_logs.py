"""Other tools' logs, read as they are: files made by the tools themselves, offline (an
Inspect eval on its mock model, skipped without inspect_ai: ``pip install
"scoreband[harness]"``; a promptfoo results file, checked in and remade with ``npx promptfoo``
where it is installed; LM Evaluation Harness samples in its documented layout, a real harness
run on a tiny model being tests/formats/test_lm_eval_real.py; answers shaped as a llama.cpp
server's, compared with what ``scoreband judge`` makes of the same answers), and logs told from
plain tables by their real structure (field round 4): a table with a log's keys is a table,
every "is it a log?" message names the ``json:`` / ``jsonl:`` address that forces the table, an
Inspect version-1 log keeps its scores, fields of the wrong type are a named per-row error, and
``apply --out`` never writes over a log (another tool's, or one of its own inputs)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import warnings
import zipfile

import numpy as np
import pandas as pd
import pytest

from scoreband.errors import InputError
from scoreband.formats import SNIFF_BYTES, all_formats, get_format, resolve
from scoreband.tables import read_table, write_table
from tests.conftest import runner
from tests.formats.examples import HERE, chat_answer, example, lm_eval_lines

LOGS = [f for f in all_formats() if f.sniffs]
LABELS5 = [str(v) for v in range(1, 6)]


def _sha(p):
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _cli(*args):
    from scoreband.cli import app

    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def _inspect_doc() -> dict:
    return json.loads((HERE / "inspect_log.json").read_text())


def _write(p, doc):
    p.write_text(json.dumps(doc))
    return p


# ------------------------------------------------------------------ tables stay tables
def _marker_case(fmt):
    """A plain table whose columns are a log format's marker keys (and the user's own)."""
    cols = {k: [f"v{k}1", f"v{k}2"] for k in sorted(fmt.markers)}
    suffix = next(s for s in fmt.suffixes if s in (".json", ".jsonl"))
    return pytest.param({**cols, "human": [3, 4], "judge": [2.5, 4.0]}, suffix, "pandas",
                        f"read as a plain .*write {fmt.name}:", id=f"{fmt.name}-keys")


TABLES = [
    *[_marker_case(f) for f in LOGS if f.markers],
    # the reported field cases: a pandas-default JSON table with columns eval and status (was
    # 'an Inspect log with no samples'), a JSONL table with custom_id, human, judge (was read
    # as answers, human and judge gone)
    pytest.param({"eval": ["a", "b"], "status": ["ok", "ok"], "human": [1, 2]}, ".json",
                 "pandas", "inspect:", id="eval-status"),
    pytest.param({"custom_id": ["r1", "r2"], "human": [1, 5], "judge": [2, 4]}, ".jsonl",
                 "pandas", "openai-batch:", id="custom_id"),
    # tables written by scoreband with a log's words in their column names: no warning
    pytest.param({"a": [1, 2], "choices_made": ["x", "y"]}, ".jsonl", "scoreband", None,
                 id="choices_made"),
    pytest.param({"results": [1, 2], "eval": [3, 4]}, ".json", "scoreband", None,
                 id="results-eval"),
]


@pytest.mark.parametrize("cols,suffix,writer,warns", TABLES)
def test_a_table_with_a_logs_keys_is_a_table_told_how_to_force_the_log(
        tmp_path, cols, suffix, writer, warns):
    """A plain table with a log's keys is read as a table, every column and value kept; where
    it looks like a log, with a warning naming the address that reads it as the log."""
    df = pd.DataFrame(cols)
    p = tmp_path / f"t{suffix}"
    if writer == "scoreband":
        write_table(df, p)
    elif suffix == ".json":
        df.to_json(p)  # pandas' default layout: {column: {row: value}}
    else:
        df.to_json(p, orient="records", lines=True)
    if warns:
        with pytest.warns(UserWarning, match=warns):
            got = read_table(p)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = read_table(p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert resolve(p)[0].name == suffix[1:]
    for c in df.columns:
        assert got[c].tolist() == df[c].tolist(), c

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


# ------------------------------------------------------------------ Inspect
@pytest.fixture(scope="module")
def inspect_logs(tmp_path_factory):
    pytest.importorskip("inspect_ai", reason="a real Inspect eval needs inspect_ai: "
                        'pip install -c constraints.txt -e ".[harness]"')
    from tests.formats.inspect_mock import run

    ratings = [1 + (i * 7) % 5 for i in range(40)]
    logs = run(tmp_path_factory.mktemp("inspect"), ratings, epochs=1)
    return logs, ratings


def test_inspect_logs_one_row_per_sample_with_scores_and_judge_features(inspect_logs):
    from tests.formats.inspect_mock import expected_logp

    logs, ratings = inspect_logs
    for fmt, path in logs.items():
        before = _sha(path)
        assert resolve(path)[0] is get_format("inspect")
        df = read_table(f"inspect@1-5:{path}")
        assert len(df) == len(ratings), fmt
        assert list(df.columns[:6]) == ["sample_id", "epoch", "task", "model", "target",
                                        "answer"]
        assert set(df["task"]) == {"captions"} and set(df["epoch"]) == {1}
        assert sorted(df["sample_id"]) == sorted(f"item{i}" for i in range(len(ratings)))
        np.testing.assert_array_equal(df["score_match"], 1.0)   # "C" counted as 1
        np.testing.assert_array_equal(df["score_includes"], 1.0)
        mine = [ratings[int(s[4:])] for s in df["sample_id"]]  # the log keeps its own order
        for i, n in enumerate(mine):
            for col, v in expected_logp(n, LABELS5).items():
                assert df[col][i] == pytest.approx(v, abs=1e-9), (fmt, i, col)
        np.testing.assert_array_equal(df["judge_argmax"], mine)
        assert (df["judge_error"] == "").all()
        assert _sha(path) == before, "the log was modified"


def test_inspect_json_log_reads_the_same_without_inspect_ai(inspect_logs, monkeypatch):
    """The documented JSON log format, parsed without inspect_ai, gives the table its own
    reader gives; a zstd .eval log without inspect_ai is refused, naming the extra."""
    logs, _ = inspect_logs
    with_lib = read_table(logs["json"])
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    without = read_table(logs["json"])
    pd.testing.assert_frame_equal(with_lib, without)
    try:
        pd.testing.assert_frame_equal(read_table(logs["eval"]), with_lib)
    except InputError as e:  # zstd members: the stdlib zip module cannot read them
        assert "scoreband[harness]" in str(e)


def test_inspect_log_calibrate_then_apply_with_no_converter(inspect_logs, tmp_path):
    logs, ratings = inspect_logs
    cal = tmp_path / "cal.json"
    r = _cli("calibrate", f"inspect@1-5:{logs['json']}", "--target", "metadata_human",
             "--scale", "1,5", "--median", "judge_expected", "--out", cal)
    assert r.exit_code == 0, r.output
    out = tmp_path / "banded.csv"
    before = _sha(logs["eval"])
    r = _cli("apply", f"inspect@1-5:{logs['eval']}", "--calibrator", cal, "--out", out)
    assert r.exit_code == 0, r.output
    df = pd.read_csv(out)
    assert len(df) == len(ratings)
    assert {"sample_id", "score_match", "band_lo", "band_hi"} <= set(df.columns)
    assert (df["band_lo"] <= df["band_hi"]).all()
    assert _sha(logs["eval"]) == before


# ------------------------------------------------------------------ OpenAI-style answers
def test_batch_answers_give_what_scoreband_judge_gives(tmp_path):
    """The same llama.cpp-shaped answers through ``scoreband judge`` (a fake server) and
    read from a file of answers: the same logp_<label> and judge_* columns."""
    from PIL import Image

    from scoreband.judge_stage import JudgePrompt, extract_judge_table, make_judge
    from tests.judges.fake_openai import FakeOpenAI, image_url, user_text

    n = 12
    rng = np.random.default_rng(0)
    for i in range(n):
        Image.fromarray(rng.integers(0, 255, (20, 24, 3), dtype=np.uint8)).save(
            tmp_path / f"img{i}.png")
    df = pd.DataFrame({"image": [f"img{i}.png" for i in range(n)],
                       "instruction": ["Rate it."] * n,
                       "response": [f"row {i} text" for i in range(n)]})
    answers = {}

    def respond(body):
        i = int(user_text(body).split("row ")[1].split()[0])
        a = chat_answer(1 + i % 5, k=body.get("top_logprobs") or 1, idx=i)
        if i == 5:  # a label list too short to hold a score: the same refusal in both
            a = chat_answer(3, k=1, idx=i)
        if image_url(body) is not None:  # not the one text-only probe of the image check
            answers[i] = a
        return 200, a

    with FakeOpenAI(respond) as srv:
        judge = make_judge("openai:m", JudgePrompt(1, 5), base_url=srv.url, allow_blind=True)
        judged, bad = extract_judge_table(df, judge, base_dir=tmp_path)
    assert bad == 1
    lines = []
    for i in range(n):  # half as plain answers, half as Batch API output lines
        lines.append(answers[i] if i % 2 else
                     {"id": f"batch_req_{i}", "custom_id": f"row-{i}", "error": None,
                      "response": {"status_code": 200, "request_id": f"r{i}",
                                   "body": answers[i]}})
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    before = _sha(path)
    assert resolve(path)[0] is get_format("openai-batch")
    got = read_table(f"openai-batch@1-5:{path}")
    assert len(got) == n
    cols = [f"logp_{lab}" for lab in LABELS5] + [
        "judge_expected", "judge_argmax", "judge_entropy", "judge_max_prob",
        "judge_missing_mass", "judge_unseen_mass", "judge_position"]
    pd.testing.assert_frame_equal(got[cols], judged[cols], check_dtype=False)
    assert (got["judge_error"] == "").tolist() == (judged["judge_error"] == "").tolist()
    # the same reason; the k named is the list the answer has (the judge names the k asked)
    assert re.sub(r"top-\d+", "top-k", got["judge_error"][5]) == \
        re.sub(r"top-\d+", "top-k", judged["judge_error"][5]) != ""
    assert "top-1 list" in got["judge_error"][5]
    assert got["custom_id"][0] == "row-0" and pd.isna(got["custom_id"][1])
    assert got["answer"][0] == "Fine. Score: 1" and got["model"][0] == "tiny.gguf"
    assert _sha(path) == before


def test_batch_failed_requests_and_bad_lines_are_row_errors(tmp_path):
    path = tmp_path / "out.jsonl"
    lines = [json.dumps({"custom_id": "a", "response": {"status_code": 200,
                                                        "body": chat_answer(4)}}),
             json.dumps({"custom_id": "b", "response": {"status_code": 429, "body": {
                 "error": {"message": "rate limited"}}}, "error": None}),
             json.dumps({"custom_id": "c", "response": None,
                         "error": {"code": "timeout", "message": "took too long"}}),
             "{torn"]
    path.write_text("\n".join(lines) + "\n")
    df = read_table(path)
    assert df["custom_id"].tolist()[:3] == ["a", "b", "c"]
    assert df["batch_error"].tolist()[:3] == ["", "status 429: rate limited", "took too long"]
    assert "not JSON" in df["batch_error"][3]
    assert df["judge_error"][0] == "" and df["judge_argmax"][0] == 4
    assert (df["judge_error"][1:] != "").all()
    with pytest.raises(InputError, match="read only"):
        write_table(df, f"openai-batch:{tmp_path / 'x.jsonl'}")


# ------------------------------------------------------------------ lm-eval
def test_lm_eval_samples_log_likelihood_choices_as_features(tmp_path):
    p = tmp_path / "samples_arc_easy_2026-01-01T00-00-00.123456.jsonl"
    recs = lm_eval_lines(5)
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert resolve(p)[0] is get_format("lm-eval")
    df = read_table(p)
    assert df["task"].unique().tolist() == ["arc_easy"]
    assert df["doc_id"].tolist() == list(range(5))
    assert df["doc_question"].tolist() == [f"q{i}" for i in range(5)]
    for i, r in enumerate(recs):
        for j, (lp, greedy) in enumerate(r["filtered_resps"]):
            assert df[f"logprob_{j}"][i] == float(lp)
            assert bool(df[f"is_greedy_{j}"][i]) == (greedy == "True")
        assert df["acc"][i] == r["acc"] and df["acc_norm"][i] == 1.0
    # a generation task: the filtered answer
    g = tmp_path / "samples_gsm8k_2026-01-01T00-00-00.jsonl"
    g.write_text(json.dumps({"doc_id": 0, "doc": {"q": "1+1"}, "target": "2",
                             "arguments": {"gen_args_0": {"arg_0": "1+1=", "arg_1": {}}},
                             "resps": [["The answer is 2"]], "filtered_resps": ["2"],
                             "filter": "strict-match", "metrics": ["exact_match"],
                             "exact_match": 1.0}) + "\n")
    got = read_table(g)
    assert got.loc[0, ["task", "filter", "answer", "exact_match"]].tolist() == [
        "gsm8k", "strict-match", "2", 1.0]


# ------------------------------------------------------------------ promptfoo
def _check_promptfoo(df):
    assert len(df) == 2
    assert set(df["provider"]) == {"echo"}
    by = df.set_index("vars_caption")
    assert by.loc["a red cube", "answer"] == "Caption: a red cube. Score: 4"
    assert bool(by.loc["a red cube", "success"]) and not bool(by.loc["two dogs", "success"])
    assert by.loc["two dogs", "score_has_score"] == 0.0
    assert by.loc["a red cube", "score_length"] == pytest.approx(0.29)
    assert by.loc["two dogs", "result_error"] == ""        # a failed assertion, not an error
    assert "contain" in by.loc["two dogs", "grading_reason"]


def test_promptfoo_results_file(tmp_path):
    src = HERE / "promptfoo_results.json"
    p = tmp_path / "results.json"
    shutil.copy(src, p)
    assert resolve(p)[0] is get_format("promptfoo")
    _check_promptfoo(read_table(p))


PROMPTFOO_CONFIG = """\
prompts:
  - "Caption: {{caption}}. Score: {{score}}"
providers:
  - echo
tests:
  - vars: {caption: "a red cube", score: 4}
    assert:
      - {type: contains, value: "4", metric: has_score}
      - {type: javascript, value: "output.length / 100", metric: length}
  - vars: {caption: "two dogs", score: 2}
    assert:
      - {type: contains, value: "5", metric: has_score}
"""


@pytest.mark.slow
def test_promptfoo_made_by_promptfoo(tmp_path):
    """``npx promptfoo eval`` with its echo provider, offline (skipped where promptfoo is
    not installed: ``npm install promptfoo``)."""
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("a real promptfoo run needs node / npx: apt-get install nodejs npm, "
                    "then npm install -g promptfoo")
    tool = [shutil.which("promptfoo")] if shutil.which("promptfoo") else \
        [npx, "--no-install", "promptfoo"]
    env = {"PATH": __import__("os").environ["PATH"], "HOME": str(tmp_path),
           "PROMPTFOO_DISABLE_TELEMETRY": "1", "PROMPTFOO_DISABLE_UPDATE": "1"}
    try:
        subprocess.run([*tool, "--version"], check=True,
                       capture_output=True, timeout=120, env=env, cwd=tmp_path)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        pytest.skip("promptfoo is not installed here: npm install -g promptfoo")
    (tmp_path / "promptfooconfig.yaml").write_text(PROMPTFOO_CONFIG)
    subprocess.run([*tool, "eval", "-c", "promptfooconfig.yaml",
                    "-o", "results.json", "--no-cache", "--no-progress-bar", "--no-write"],
                   capture_output=True, timeout=300, env=env, cwd=tmp_path)
    out = tmp_path / "results.json"  # promptfoo exits 100 when a test fails
    assert out.is_file()
    _check_promptfoo(read_table(out))


# ------------------------------------------------------------------ the CLI: never onto a log
@pytest.fixture
def calibrated(tmp_path):
    """A 40-row table and a calibrator fitted on it."""
    table = tmp_path / "t.csv"
    pd.DataFrame({"judge_expected": np.linspace(1, 5, 40),
                  "human": np.clip(np.round(np.linspace(1, 5, 40) + 0.3), 1, 5)}).to_csv(
        table, index=False)
    cal = tmp_path / "cal.json"
    r = _cli("calibrate", table, "--target", "human", "--scale", "1,5", "--median",
             "judge_expected", "--out", cal)
    assert r.exit_code == 0, r.output
    return table, cal


@pytest.mark.parametrize("name", [f.name for f in LOGS])
def test_apply_out_onto_a_log_that_is_not_an_input_is_refused(tmp_path, calibrated, name):
    """``apply --out LOG`` where LOG is another tool's log the command does not read: refused
    before any work, the log unchanged (README: logs are never written)."""
    table, cal = calibrated
    (tmp_path / "log").mkdir()
    log, _ = example(name, tmp_path / "log")
    before = log.read_bytes()
    r = _cli("apply", table, "--calibrator", cal, "--out", log)
    said = " ".join(r.output.split())
    # the console wraps a long temporary path anywhere, even inside the file's name
    assert r.exit_code == 2 and f"--out {str(log)!r} exists and is" in \
        " ".join(r.output.replace("\n", "").split()), said
    assert "another tool" in said and log.read_bytes() == before


def test_no_output_over_a_file_named_with_a_format_prefix(tmp_path, calibrated):
    """``NAME:PATH`` names no file the command can see; the file behind it is still one of
    its inputs, and an output onto it is refused, the file left as it was."""
    from tests.formats.examples import _batch

    _, cal = calibrated
    src = _batch(tmp_path / "answers.jsonl")
    before = _sha(src)
    r = _cli("apply", f"openai-batch@1-5:{src}", "--calibrator", cal, "--out", src)
    assert r.exit_code != 0 and "never writes over one of its own inputs" in r.output
    assert _sha(src) == before
    r = _cli("apply", f"openai-batch@1-5:{src}", "--calibrator", cal, "--out",
             tmp_path / "banded.csv")
    assert r.exit_code == 0, r.output
    assert len(pd.read_csv(tmp_path / "banded.csv")) == 5
