"""``scoreband judge`` against a real llama.cpp server (llama-cpp-python's OpenAI-compatible
server) serving a tiny GGUF model written here (tests/judges/tiny_gguf.py).

Not run by CI: building llama-cpp-python from source takes ~30 min on one core. To run::

    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF" \\
        pip install "llama-cpp-python[server]" gguf
    python -m pytest -m server tests/judges/test_llama_server.py
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from judges.llama_fixture import HOW
from PIL import Image

from tests.conftest import runner

pytest.importorskip("llama_cpp", reason=HOW)
pytest.importorskip("llama_cpp.server.app", reason=HOW)   # fastapi, uvicorn ...
pytest.importorskip("gguf", reason=HOW)

from judges import llama_fixture  # noqa: E402

from tests.knobs import knobs

pytestmark = [pytest.mark.server, pytest.mark.slow]
llama_server = llama_fixture.llama_server   # the module's server (one per module)

LABELS = [str(v) for v in range(1, 6)]
TEMPLATE = ("Instruction: {instruction}\nResponse: {response}\nRubric: {rubric}\n"
            "End with '{delimiter} N', N from {lo} to {hi}. ")


def _table(tmp_path, words, fmt="PNG"):
    rng = np.random.default_rng(0)
    rows = []
    for i, w in enumerate(words):
        p = tmp_path / f"img{i}.{fmt.lower()}"
        Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(p, format=fmt)
        rows.append({"image": p.name, "instruction": "Rate the fit.",
                     "response": f"A picture number {i}.", "word": w})
    df = pd.DataFrame(rows)
    df.to_csv(tmp_path / "t.csv", index=False)
    return tmp_path / "t.csv"


def _judge(table, out, url, *extra):
    from scoreband.cli import app

    return runner.invoke(app, ["judge", str(table), "--judge", "openai:tiny",
                               "--base-url", url, "--out", str(out), *extra],
                         env={"COLUMNS": "200"})


def _hand(resp: dict) -> tuple[np.ndarray, float]:
    """From the server's raw answer: the label log-probs at the token after "Score:",
    every spelling added, log-softmax over the labels; and the missing mass."""
    content = resp["choices"][0]["logprobs"]["content"]
    toks = [c["token"] for c in content]
    i = toks.index(":") + 1
    assert toks[:i] == ["Score", ":"] and toks[i] == " 4"
    mass = dict.fromkeys(LABELS, 0.0)
    seen = set()
    for t in content[i]["top_logprobs"]:
        if t["token"] in seen:
            continue
        seen.add(t["token"])
        if t["token"].strip() in mass:
            mass[t["token"].strip()] += math.exp(t["logprob"])
    p = np.array([mass[lab] for lab in LABELS])
    assert {" 4", "4"} <= seen                      # both spellings of the score are there
    return np.log(p / p.sum()), 1 - p.sum()


def test_logprobs_equal_a_hand_computation_from_the_raw_answer(llama_server, tmp_path):
    url, model = llama_server.url, llama_server.model
    table = _table(tmp_path, ["JUDGE"] * 4)
    out = tmp_path / "sub" / "judged.csv"
    r = _judge(table, out, url, "--template", TEMPLATE + "JUDGE", "--allow-blind",
               "--concurrency", "2")
    assert r.exit_code == 0, r.output
    assert "does not see the images" in " ".join(r.output.split())   # a text-only model
    res = pd.read_csv(out, keep_default_na=False)
    assert (res["judge_error"] == "").all()
    answers = [json.loads(f.read_text()) for f in sorted((tmp_path / "sub" /
                                                           "judged.csv.cache").glob("*.json"))]
    assert len(answers) == 4
    hand = [_hand(resp) for resp in answers]
    for _, row in res.iterrows():   # each row's features are one raw answer's, by hand
        lp = row[[f"logp_{v}" for v in LABELS]].to_numpy(float)
        diff = [np.abs(lp - h).max() + abs(row["judge_missing_mass"] - m) for h, m in hand]
        assert min(diff) < 1e-9, diff
        assert row["judge_position"] == "generated" and row["judge_argmax"] == 4
    prov = json.loads((tmp_path / "sub" / "judged.csv.provenance.json").read_text())
    judge = prov["components"]["judge"]
    assert judge["model_requested"] == "tiny"
    # llama-cpp-python's server echoes the name asked for; its /models says what it runs
    assert judge["model_served"] == ["tiny"]
    assert judge["endpoint_models"] == [str(model)]
    assert f"the server runs {model}" in " ".join(r.output.split())
    assert judge["image_check"]["image_seen"] is False


def test_a_text_only_model_stops_the_run(llama_server, tmp_path):
    url = llama_server.url
    table = _table(tmp_path, ["JUDGE"] * 5, fmt="WEBP")
    r = _judge(table, tmp_path / "o.csv", url, "--template", TEMPLATE + "JUDGE")
    assert r.exit_code == 1
    assert "does not see the images: its prompt counts" in " ".join(r.output.split())


def test_empty_and_cut_answers_are_said(llama_server, tmp_path):
    url = llama_server.url
    table = _table(tmp_path, ["x"])
    r = _judge(table, tmp_path / "silent.csv", url, "--template", TEMPLATE + "SILENT",
               "--allow-blind")
    assert r.exit_code == 1
    err = pd.read_csv(tmp_path / "silent.csv", keep_default_na=False)["judge_error"][0]
    assert "the model's answer is empty: no token" in err and "does not support" not in err
    r = _judge(table, tmp_path / "cut.csv", url, "--template", TEMPLATE + "RAMBLE",
               "--allow-blind", "--config", knobs(tmp_path / "k.json", max_tokens=6))
    err = pd.read_csv(tmp_path / "cut.csv", keep_default_na=False)["judge_error"][0]
    assert "the answer was cut at `max_tokens` 6" in err
