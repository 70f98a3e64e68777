"""Judge extraction: token folding, the score position, a tiny local LLaVA-style model
built here, and an OpenAI-compatible endpoint served by a local HTTP server."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from scipy.special import logsumexp

from scoreband.errors import InputError
from scoreband.judge_stage import JudgePrompt, extract_judge_table, make_judge
from scoreband.judges.tokens import (
    ambiguous_labels,
    find_score_position,
    fold_top_logprobs,
    label_token_ids,
    scale_labels,
)
from tests.conftest import runner
from tests.knobs import knobs

LABELS = scale_labels(1, 5)


# ------------------------------------------------------------------ pure token functions
def test_variants_add_up():
    top = [(" 4", np.log(0.5)), ("4", np.log(0.1)), ("\u25814", np.log(0.05)),
           ("\u01203", np.log(0.2)), ("The", np.log(0.1))]
    lp, missing = fold_top_logprobs(top, LABELS)
    np.testing.assert_allclose(np.exp(lp[3]), 0.65)
    np.testing.assert_allclose(np.exp(lp[2]), 0.2)
    assert np.isneginf(lp[0]) and np.isneginf(lp[4])
    np.testing.assert_allclose(missing, 0.15)


def test_bad_logprob_rejected():
    with pytest.raises(ValueError, match="invalid log-prob"):
        fold_top_logprobs([("4", float("nan"))], LABELS)


def test_multi_token_label_refused_with_spelling():
    vocab = ["<s>", "1", "0", "\u01202", "3", "4", "5", "6", "7", "8", "9"]
    with pytest.raises(InputError, match=r"'10'.*\['1', '0'\].*single tokens"):
        label_token_ids(vocab, scale_labels(1, 10), split=lambda lab: list(lab))
    assert ambiguous_labels(scale_labels(1, 10)) == [("1", "10")]
    ids = label_token_ids(vocab, LABELS)
    assert ids["2"] == [3] and ids["1"] == [1]


def test_score_position_ignores_numbers_in_reasoning():
    toks = ["Score", ":", " 2", " was", " my", " first", " guess", ";", " Score", ":", " 5"]
    assert find_score_position(toks) == 10
    assert find_score_position(["Score:", " ", "\n", "3"]) == 3
    assert find_score_position(["Score: 3"]) == 0  # a token straddling the delimiter
    assert find_score_position(["Score", ":"]) == 2  # ends at the delimiter


def test_scale_must_be_integer():
    with pytest.raises(InputError, match="integer"):
        scale_labels(0, 0.5)


# ------------------------------------------------------------------ table fixtures
def _images(tmp_path, n):
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        p = tmp_path / f"img{i}.png"
        Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)).save(p)
        paths.append(p.name)
    return paths


# ------------------------------------------------------------------ local VLM
@pytest.fixture(scope="module")
def llava_dir(tmp_path_factory):
    from tiny_models import tiny_llava

    return tiny_llava(tmp_path_factory.mktemp("models") / "tiny-llava")


def test_local_judge_reads_the_model_logits(llava_dir, tmp_path):
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    prompt = JudgePrompt(1, 5)
    judge = make_judge(f"hf:{llava_dir}", prompt)
    (img,) = _images(tmp_path, 1)
    text = prompt.render("Describe the image.", "Two red circles.")
    res = judge.judge(tmp_path / img, text)
    assert res.position == "forced" and res.logp.shape == (5,)
    # the same number computed independently from the saved model
    proc = AutoProcessor.from_pretrained(llava_dir)
    model = AutoModelForImageTextToText.from_pretrained(llava_dir).eval()
    full = f"USER: <image>\n{text} ASSISTANT: Score:"
    with Image.open(tmp_path / img) as im:
        inputs = proc(images=im.convert("RGB"), text=full, return_tensors="pt")
    with torch.inference_mode():
        logp = torch.log_softmax(model(**inputs).logits[0, -1].float(), -1).numpy()
    tok = proc.tokenizer
    for j, lab in enumerate(LABELS):
        ids = [i for i in range(len(tok))
               if tok.convert_ids_to_tokens(i).lstrip("\u0120") == lab]
        assert len(ids) >= 2  # "5" and "Ġ5": both variants are folded
        np.testing.assert_allclose(res.logp[j], logsumexp(logp[ids]), atol=1e-5)
    np.testing.assert_allclose(res.missing_mass, 1 - np.exp(res.logp).sum(), atol=1e-9)


def test_local_judge_with_reasoning_and_cli(llava_dir, tmp_path):
    from scoreband.cli import app

    paths = _images(tmp_path, 6)
    df = pd.DataFrame({"image": paths + ["missing.png"],
                       "instruction": ["Describe the image."] * 7,
                       "response": ["A red circle."] * 5 + [""] + ["A square."]})
    df.to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "judged.csv"
    r = runner.invoke(app, ["judge", str(tmp_path / "t.csv"), "--judge",
                            f"hf:{llava_dir}", "--out", str(out),
                            "--config", knobs(tmp_path / "k.json", max_new_tokens=4)])
    assert r.exit_code == 0, r.output
    res = pd.read_csv(out, keep_default_na=False)
    assert len(res) == 7
    assert [c for c in res.columns if c.startswith("logp_")] == [f"logp_{v}" for v in LABELS]
    ok = res["judge_error"] == ""
    assert ok.sum() == 5
    assert "response: empty cell" in res.loc[5, "judge_error"]
    assert "image file not found" in res.loc[6, "judge_error"]
    lp = res.loc[ok, [f"logp_{v}" for v in LABELS]].to_numpy(float)
    np.testing.assert_allclose(np.exp(lp).sum(1), 1.0, atol=1e-6)
    assert set(res.loc[ok, "judge_position"]) <= {"generated", "forced"}
    assert not (tmp_path / "judged.csv.partial.jsonl").exists()


def test_local_judge_refuses_multi_token_scale(llava_dir):
    with pytest.raises(InputError, match="'10'.*single tokens"):
        make_judge(f"hf:{llava_dir}", JudgePrompt(1, 10))


# ------------------------------------------------------------------ endpoint
def _content(tokens, score_top):
    out = []
    for t in tokens:
        top = [{"token": t, "logprob": -0.01}, {"token": " 1", "logprob": -5.0}]
        out.append({"token": t, "logprob": -0.01, "top_logprobs": top})
    out[-1]["top_logprobs"] = score_top
    return out


class _Handler(BaseHTTPRequestHandler):
    calls: dict = {}

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["messages"][0]["content"][0]["text"]
        assert body["logprobs"] is True and body["top_logprobs"] == 20
        assert body["messages"][0]["content"][1]["image_url"]["url"].startswith(
            "data:image/png;base64,")
        kind = next(k for k in ("FLAKY", "DOWN", "SLOW", "NOLOGPROBS", "NOTOKENS", "BADREQ",
                                "DIRECT", "OK") if k in text)
        n = _Handler.calls[kind] = _Handler.calls.get(kind, 0) + 1
        if kind == "DOWN":
            return self._send(500, {"error": {"message": "internal error"}})
        if kind == "FLAKY" and n == 1:
            return self._send(503, {"error": {"message": "overloaded"}})
        if kind == "BADREQ":
            return self._send(400, {"error": {"message": "logprobs not allowed"}})
        if kind == "SLOW":
            time.sleep(1.0)
        top = [{"token": " 4", "logprob": float(np.log(0.6))},
               {"token": "4", "logprob": float(np.log(0.1))},
               {"token": " 3", "logprob": float(np.log(0.2))},
               {"token": " The", "logprob": float(np.log(0.05))}]
        # a full top-20 list: the unlisted labels can hold little (below its last entry)
        top += [{"token": f" w{i}", "logprob": float(np.log(0.001))} for i in range(16)]
        tokens = ["There", " are", " 3", " dogs", ".", " Score", ":", " 4"]
        if kind == "NOTOKENS":
            top = [{"token": " maybe", "logprob": -0.1}]
        if kind == "DIRECT":
            tokens = ["4"]
        msg = {"role": "assistant", "content": "".join(tokens)}
        choice = {"index": 0, "message": msg, "finish_reason": "stop",
                  "logprobs": None if kind == "NOLOGPROBS" else
                  {"content": _content(tokens, top)}}
        self._send(200, {"id": "x", "object": "chat.completion", "choices": [choice]})

    def _send(self, code, doc):
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def server():
    _Handler.calls = {}
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


def test_endpoint_judge_failures_cache_and_resume(server, tmp_path):
    kinds = ["OK", "FLAKY", "DOWN", "SLOW", "NOLOGPROBS", "NOTOKENS", "BADREQ", "DIRECT"]
    paths = _images(tmp_path, len(kinds))
    df = pd.DataFrame({"image": paths, "instruction": ["Rate it."] * len(kinds),
                       "response": kinds})
    prompt = JudgePrompt(1, 5)

    def run(journal):
        j = make_judge("openai:judge-model", prompt, base_url=server, timeout=0.5, retries=2,
                       backoff=0.01, cache_dir=tmp_path / "cache")
        res, bad = extract_judge_table(df, j, base_dir=tmp_path, journal=journal)
        return j, res.set_index("response"), bad

    j, res, bad = run(None)
    assert bad == 5
    p = np.exp(res.loc["OK", [f"logp_{v}" for v in LABELS]].to_numpy(float))
    # " 4" and "4" add up; the " 3" of the reasoning is never taken; log-softmax over labels
    np.testing.assert_allclose(p[3], 0.7 / 0.9)
    np.testing.assert_allclose(p[2], 0.2 / 0.9)
    np.testing.assert_allclose(res.loc["OK", "judge_missing_mass"], 0.1)
    assert res.loc["OK", "judge_position"] == "generated"
    assert res.loc["DIRECT", "judge_position"] == "first-token"
    assert res.loc["FLAKY", "judge_error"] == ""          # retried after one 503
    # a 500 repeats for the same request: not retried, said so
    assert "refused the request (HTTP 500: internal error; not retried" in \
        res.loc["DOWN", "judge_error"]
    assert "no answer within 0.5 s" in res.loc["SLOW", "judge_error"]
    assert "returned no log-probs" in res.loc["NOLOGPROBS", "judge_error"]
    assert "none of the score labels" in res.loc["NOTOKENS", "judge_error"]
    assert "refused the request (HTTP 400" in res.loc["BADREQ", "judge_error"]
    assert _Handler.calls["BADREQ"] == 1 and _Handler.calls["DOWN"] == 1
    assert _Handler.calls["SLOW"] == 1 and _Handler.calls["FLAKY"] == 2
    for k in ("DOWN", "NOLOGPROBS", "NOTOKENS"):
        assert np.isnan(res.loc[k, "judge_expected"])      # a failure is never a score
    # a rerun is answered from the cache for every success; failures are asked again
    before = dict(_Handler.calls)
    j2, res2, _ = run(None)
    assert _Handler.calls["OK"] == before["OK"] and _Handler.calls["FLAKY"] == before["FLAKY"]
    assert _Handler.calls["DOWN"] == before["DOWN"] + 1
    pd.testing.assert_series_equal(res2["judge_expected"], res["judge_expected"])


def test_endpoint_resume_from_journal(server, tmp_path):
    paths = _images(tmp_path, 4)
    df = pd.DataFrame({"image": paths, "instruction": ["Rate it."] * 4,
                       "response": ["OK a", "OK b", "OK c", "OK d"]})
    journal = tmp_path / "out.partial.jsonl"
    prompt = JudgePrompt(1, 5)
    j = make_judge("openai:m", prompt, base_url=server, retries=0)
    # simulate a crash after two rows: the journal holds them (plus a torn last line)
    extract_judge_table(df.iloc[:2], j, base_dir=tmp_path, journal=journal)
    with open(journal, "a") as f:
        f.write('{"key": "tor')
    calls = _Handler.calls["OK"]
    res, bad = extract_judge_table(df, j, base_dir=tmp_path, journal=journal)
    assert bad == 0 and res.attrs["reused_rows"] == 2
    assert _Handler.calls["OK"] == calls + 2


def test_unknown_judge_lists_choices():
    with pytest.raises(InputError, match="hf:.*openai:"):
        make_judge("llava:/x", JudgePrompt(1, 5))


def _judged_table(tmp_path, n=400):
    from scoreband.world import make_dataset
    from scoreband.world.judges import SIMULATED_JUDGES, judge_logprobs

    ds = make_dataset(n, 3, n_annotators=3, name="judged")
    df = pd.DataFrame({"task": ds.tasks, "human": 1 + 4 * ds.y01})
    for j in SIMULATED_JUDGES[:2]:
        lp = judge_logprobs(j, ds.true01, ds.tasks)
        for k in range(5):
            df[f"{j.name}_logp_{k + 1}"] = lp[:, k]
    df.loc[3, "sim-strong_logp_2"] = np.nan     # a bad row: reported and skipped
    df.loc[4, "human"] = 7                      # outside the scale
    df.to_csv(tmp_path / "judged.csv", index=False)
    return tmp_path / "judged.csv"


def test_judge_study_on_a_table(tmp_path):
    from scoreband.cli import app

    table = _judged_table(tmp_path)
    out = tmp_path / "study"
    r = runner.invoke(app, ["judge-study", str(table), "--judge", "a=sim-strong_logp_*",
                            "--judge", "b=sim-medium_logp_*", "--target", "human",
                            "--task-col", "task", "--n-ratings", "3", "--seeds", "2",
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "2 of 400 rows skipped" in r.output
    doc = json.loads((out / "results.json").read_text())
    assert doc["simulated"] is False and doc["n"] == 398
    assert set(doc["methods"]) == {"a", "b", "fusion"}
    assert set(doc["reliability_map"]["a"]) == {"colour", "shape", "counting", "spatial",
                                                "long_description"}
    assert (out / "reliability_map.png").stat().st_size > 1000


def test_judge_study_wrong_number_of_columns(tmp_path):
    from scoreband.cli import app

    table = _judged_table(tmp_path, 50)
    r = runner.invoke(app, ["judge-study", str(table), "--judge",
                            "a=sim-strong_logp_1,sim-strong_logp_2", "--target", "human",
                            "--task-col", "task", "--out", str(tmp_path / "s")])
    assert r.exit_code == 2
    assert "K = 5 labels" in r.output


# ------------------------------------------------------------------ properties
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_words = st.sampled_from(["I", " see", " 3", " dogs", ".", " Score", ":", " 4", "\n", " ",
                          "5", " the", " score", "2", "Score:"])


@settings(max_examples=300, deadline=None)
@given(reasoning=st.lists(_words, max_size=30), label=st.sampled_from(LABELS),
       pad=st.lists(st.sampled_from([" ", "\n"]), max_size=3),
       tail=st.lists(st.sampled_from([".", "</s>", " because"]), max_size=3))
def test_score_position_is_the_label_after_the_last_delimiter(reasoning, label, pad, tail):
    """Whatever numbers and delimiters the reasoning holds, the score is the first non-blank
    token after the last delimiter."""
    toks = reasoning + [" Score", ":"] + pad + [" " + label] + tail
    pos = find_score_position(toks)
    assert toks[pos].strip() == label
    assert pos == len(reasoning) + 2 + len(pad)


@settings(max_examples=300, deadline=None)
@given(entries=st.lists(st.tuples(st.sampled_from(["1", " 1", "\u25812", "\u01203", "4", " 5",
                                                   "x", " the"]),
                                  st.floats(-20, 0)), max_size=12,
                        unique_by=lambda e: e[0]))  # a top-k list names each token once
def test_folding_conserves_probability(entries):
    """Folded label mass + missing mass = 1 when the listed probabilities sum to <= 1; every
    variant's mass lands on its label. (A token listed twice counts once: see
    test_a_token_listed_twice_counts_once.)"""
    total = np.logaddexp.reduce([lp for _, lp in entries]) if entries else -np.inf
    entries = [(t, lp - max(total, 0.0)) for t, lp in entries]  # listed mass <= 1
    lp, missing = fold_top_logprobs(entries, LABELS)
    listed = sum(np.exp(v) for t, v in entries if t.strip("\u2581\u0120 ") in LABELS)
    np.testing.assert_allclose(np.exp(lp[np.isfinite(lp)]).sum() if np.isfinite(lp).any()
                               else 0.0, listed, atol=1e-9)
    np.testing.assert_allclose(np.exp(lp[np.isfinite(lp)]).sum() + missing
                               if np.isfinite(lp).any() else missing, max(1.0, listed),
                               atol=1e-9)


def test_a_token_listed_twice_counts_once():
    lp, missing = fold_top_logprobs([(" 4", np.log(0.5)), (" 4", np.log(0.5)),
                                     ("4", np.log(0.2))], LABELS)
    np.testing.assert_allclose(np.exp(lp[3]), 0.7)
    np.testing.assert_allclose(missing, 0.3)
    with pytest.raises(ValueError, match="add up to"):
        fold_top_logprobs([(" 4", np.log(0.9)), (" 3", np.log(0.9))], LABELS)


def test_judge_study_refuses_the_wrong_grid_and_runs_without_tasks(tmp_path):
    from scoreband.cli import app

    table = _judged_table(tmp_path, 200)
    args = ["judge-study", str(table), "--judge", "a=sim-strong_logp_*", "--target", "human",
            "--seeds", "2"]
    # means of 3 ratings read as single ratings: snapping would destroy coverage -> refused
    r = runner.invoke(app, [*args, "--out", str(tmp_path / "s1")])
    assert r.exit_code == 2 and "--n-ratings" in " ".join(r.output.split()), r.output
    assert not (tmp_path / "s1" / "results.json").exists()
    # no --task-col: one task
    r = runner.invoke(app, [*args, "--n-ratings", "3", "--out", str(tmp_path / "s2")])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "s2" / "results.json").read_text())
    assert set(doc["reliability_map"]["a"]) == {"all"}
    assert "chr" in doc["methods"]["a"] and "chr+mondrian" in doc["methods"]["a"]


def test_roundtrip_calibration_refuses_the_wrong_grid():
    from scoreband.datatypes import Scale
    from scoreband.studies.roundtrip import calibration_study

    rng = np.random.default_rng(0)
    y = rng.integers(3, 16, 300) / 3  # means of 3 ratings on 1-5
    with pytest.raises(InputError, match="`n_ratings`"):
        calibration_study(rng.uniform(size=300), rng.uniform(0.01, 0.05, 300),
                          (y - 1) / 4, scale=Scale(1, 5, integer=True))
