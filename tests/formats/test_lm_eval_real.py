"""LM Evaluation Harness samples made by the harness itself, offline: ``lm_eval --model hf``
on a tiny random GPT-2 built here (nothing downloaded), the local tasks in
``tests/formats/lm_eval_task/`` (a multiple-choice rating and its generation twin) over
documents the test writes, ``--log_samples``; the ``samples_<task>_<date>.jsonl`` files it
writes are read back through the table layer and
calibrated / applied with the CLI. Skipped without the harness
(``pip install "lm-eval[hf]"``). The run takes about 13 s of CPU (the harness's imports
most of it; 30-70 s of wall time on a loaded 2-core machine): marked slow.

The fast tests at the end need no harness: what the real files showed beyond the
hand-written sample (a first line longer than the sniffed head, a scale named in the
address that the choices do not cover)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scoreband.formats import SNIFF_BYTES, get_format, resolve
from scoreband.tables import read_table
from tests.conftest import runner
from tests.formats.examples import lm_eval_lines

TASK_DIR = Path(__file__).parent / "lm_eval_task"
N_DOCS = 40
LABELS = ["1", "2", "3", "4", "5"]


def _sha(p):
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def _cli(*args):

    from scoreband.cli import app

    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def tiny_gpt2(path: Path, seed: int = 0) -> Path:
    """A GPT-2 of ~10k parameters with a byte-level BPE tokenizer trained here, saved with
    save_pretrained (loadable by ``lm_eval --model hf``)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    from tests.tiny_models import byte_bpe_tokenizer

    torch.manual_seed(seed)
    tok = byte_bpe_tokenizer(["Caption: a red cube 12. Rating: 1 2 3 4 5"] * 20,
                             vocab_size=300)
    ft = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                 eos_token="</s>", pad_token="<pad>")
    cfg = GPT2Config(vocab_size=len(ft), n_positions=128, n_embd=16, n_layer=1, n_head=2,
                     bos_token_id=ft.bos_token_id, eos_token_id=ft.eos_token_id)
    GPT2LMHeadModel(cfg).eval().save_pretrained(path)
    ft.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def harness_run(tmp_path_factory):
    lm_eval = pytest.importorskip(
        "lm_eval", reason="the LM Evaluation Harness is not installed: pip install "
        "'lm-eval[hf]' to run a real harness on a tiny local model")
    pytest.importorskip("accelerate", reason="lm_eval --model hf needs accelerate: "
                        "pip install 'lm-eval[hf]'")
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("lm_eval")
    model = tiny_gpt2(root / "model")
    ratings = [1 + (i * 7) % 5 for i in range(N_DOCS)]
    (root / "docs.jsonl").write_text("".join(
        json.dumps({"caption": f"a red cube {i}", "human": r}) + "\n"
        for i, r in enumerate(ratings)))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(root / "hf"),
           "HF_DATASETS_CACHE": str(root / "hf" / "datasets"),
           "TOKENIZERS_PARALLELISM": "false", "TQDM_DISABLE": "1"}
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args",
         f"pretrained={model}", "--tasks", "rate_captions,rate_captions_gen", "--include_path", str(TASK_DIR),
         "--log_samples", "--output_path", str(root / "out"), "--device", "cpu",
         "--batch_size", "8"],
        cwd=root, env=env, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr[-3000:]
    samples = sorted((root / "out").rglob("samples_rate_captions_2*.jsonl"))
    gen = sorted((root / "out").rglob("samples_rate_captions_gen_*.jsonl"))
    results = sorted((root / "out").rglob("results_*.json"))
    assert len(samples) == len(gen) == len(results) == 1, list((root / "out").rglob("*"))
    return {"samples": samples[0], "gen": gen[0], "results": results[0], "model": model,
            "ratings": ratings, "seconds": seconds, "version": lm_eval.__version__}


@pytest.mark.slow
def test_real_harness_samples_read_back(harness_run):
    """Every column checked against what the harness itself computed: its ``acc`` is the
    arg-max of the log-likelihoods read, its aggregate is their mean, the score-token
    columns are the log-softmax of the choices' log-likelihoods."""
    p, ratings = harness_run["samples"], harness_run["ratings"]
    before = _sha(p)
    assert resolve(p)[0] is get_format("lm-eval")
    df = read_table(p)
    assert len(df) == N_DOCS
    assert df["doc_id"].tolist() == list(range(N_DOCS))
    assert set(df["task"]) == {"rate_captions"} and set(df["filter"]) == {"none"}
    assert set(df["model"]) == {str(harness_run["model"])}  # from results_<date>.json
    assert df["doc_human"].tolist() == ratings
    assert df["target"].tolist() == [r - 1 for r in ratings]  # written as text "0"..."4"
    for j, lab in enumerate(LABELS):
        assert set(df[f"choice_{j}"]) == {f" {lab}"}  # the target delimiter is kept
    lp = df[[f"logprob_{j}" for j in range(5)]].to_numpy(float)
    assert np.isfinite(lp).all() and (lp < 0).all()
    assert df[[f"is_greedy_{j}" for j in range(5)]].dtypes.eq(bool).all()
    np.testing.assert_array_equal(df["acc"], (lp.argmax(1) == df["target"]).astype(float))
    res = json.loads(harness_run["results"].read_text())
    assert df["acc"].mean() == pytest.approx(res["results"]["rate_captions"]["acc,none"])
    # score-token columns: labels read from the choices, " 4" is label 4
    norm = lp - np.log(np.exp(lp).sum(1, keepdims=True))
    for j, lab in enumerate(LABELS):
        np.testing.assert_allclose(df[f"logp_{lab}"], norm[:, j], atol=1e-12)
    np.testing.assert_allclose(df["judge_expected"], np.exp(norm) @ np.arange(1, 6),
                               atol=1e-12)
    np.testing.assert_allclose(df["judge_missing_mass"], 1 - np.exp(lp).sum(1), atol=1e-12)
    assert (df["judge_error"] == "").all()
    # the same table through the address that names the scale
    pd.testing.assert_frame_equal(read_table(f"lm-eval@1-5:{p}"), df)
    assert _sha(p) == before, "the samples file was modified"


@pytest.mark.slow
def test_real_harness_samples_calibrate_then_apply(harness_run, tmp_path):
    p = harness_run["samples"]
    before = _sha(p)
    for method, extra in (("split", ["--median", "judge_expected"]),
                          ("cqr", ["--features", "logprob_*"])):
        cal = tmp_path / f"{method}.json"
        r = _cli("calibrate", p, "--target", "doc_human", "--scale", "1,5", *extra,
                 "--method", method, "--out", cal)
        assert r.exit_code == 0, r.output
        out = tmp_path / f"banded_{method}.csv"
        r = _cli("apply", p, "--calibrator", cal, "--out", out)
        assert r.exit_code == 0, r.output
        got = pd.read_csv(out)
        assert len(got) == N_DOCS
        assert {"doc_id", "doc_human", "logprob_0", "band_lo", "band_hi"} <= set(got.columns)
        assert ((got["band_lo"] <= got["band_hi"]) & (got["band_lo"] >= 1)
                & (got["band_hi"] <= 5)).all()
    assert _sha(p) == before


@pytest.mark.slow
def test_real_harness_generation_samples(harness_run):
    """A generation task of the same run: the model's answer, the target as written (text,
    not a choice index), the harness's exact_match agreeing with them."""
    p = harness_run["gen"]
    assert resolve(p)[0] is get_format("lm-eval")
    df = read_table(p)
    assert len(df) == N_DOCS and set(df["task"]) == {"rate_captions_gen"}
    assert df["target"].tolist() == [str(r) for r in harness_run["ratings"]]
    assert df["answer"].map(type).eq(str).all()
    assert [c for c in df.columns if c.startswith(("logprob_", "logp_", "judge_"))] == []
    np.testing.assert_array_equal(df["exact_match"].astype(float),
                                  (df["answer"] == df["target"]).astype(float))
    res = json.loads(harness_run["results"].read_text())
    assert df["exact_match"].astype(float).mean() == pytest.approx(
        res["results"]["rate_captions_gen"]["exact_match,none"])


# ------------------------------------------------------------------ no harness needed
def _rating_line(i: int, choices=LABELS, prompt: str = "Caption: x. Rating:") -> dict:
    lps = [-2.0 - 0.5 * abs(j - i % len(choices)) for j in range(len(choices))]
    best = int(np.argmax(lps))
    return {"doc_id": i, "doc": {"caption": prompt, "human": 1 + i % 5}, "target": str(i % 5),
            "arguments": {f"gen_args_{j}": {"arg_0": prompt, "arg_1": f" {c}"}
                          for j, c in enumerate(choices)},
            "resps": [[[str(v), str(j == best)]] for j, v in enumerate(lps)],
            "filtered_resps": [[str(v), str(j == best)] for j, v in enumerate(lps)],
            "filter": "none", "metrics": ["acc"], "doc_hash": "d", "prompt_hash": "p",
            "target_hash": "t", "acc": float(best == i % 5)}


def _write(path: Path, recs) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_first_line_longer_than_the_sniffed_head(tmp_path):
    """A few-shot prompt is logged once per choice: a first line longer than the bytes a
    format is sniffed from is still an lm-eval file, with or without the usual name."""
    long = "x" * SNIFF_BYTES
    for name in ("samples_rate_2026-01-01T00-00-00.123456.jsonl", "renamed.jsonl"):
        p = _write(tmp_path / name, [_rating_line(i, prompt=long) for i in range(3)])
        assert resolve(p)[0] is get_format("lm-eval"), name
        assert read_table(p)["judge_expected"].notna().all()


def test_scale_in_the_address_the_choices_do_not_cover(tmp_path):
    p = _write(tmp_path / "samples_rate_2026-01-01T00-00-00.jsonl",
               [_rating_line(i) for i in range(5)])
    df = read_table(f"lm-eval@1-6:{p}")
    assert df["judge_expected"].isna().all()
    assert df["judge_error"].str.contains("label(s) 6 of the scale 1-6", regex=False).all()
    # a narrower scale: the choice " 5" is mass on no label
    df = read_table(f"lm-eval@1-4:{p}")
    assert (df["judge_error"] == "").all()
    lp = df[[f"logprob_{j}" for j in range(5)]].to_numpy(float)
    np.testing.assert_allclose(df["judge_missing_mass"], 1 - np.exp(lp[:, :4]).sum(1))
    assert set(df.columns) >= {"logp_1", "logp_4"} and "logp_5" not in df.columns
    assert read_table(p)["model"].eq("").all()  # no results_<date>.json beside it


def test_letter_choices_give_no_score_columns(tmp_path):
    """arc-style choices (" a" ... " d") are no score labels: only logprob_<i> columns."""
    p = _write(tmp_path / "samples_arc_easy_2026-01-01T00-00-00.jsonl", lm_eval_lines(4))
    df = read_table(p)
    assert [c for c in df.columns if c.startswith(("logp_", "judge_"))] == []
    assert df["choice_2"].tolist() == [" c"] * 4 and df["target"].tolist() == [1] * 4
    assert math.isclose(df["logprob_0"][0], -1.5)
