"""One small example file per registered table format, for the contract test: a format added
to the registry without an example here fails ``test_every_format_has_an_example``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

#: a CSV-like cell set: leading zeros, NA spellings, booleans, empty cells, separators,
#: quotes, line breaks, unicode, number literals
TEXT_CELLS = {
    "id": ["00017", "2", "3", "4", "5", "6"],
    "na": ["NA", "", "nan", "NULL", "None", "#N/A"],
    "flag": ["FALSE", "TRUE", "true", "0", "1", ""],
    "num": ["1.50", "1e5", "-0", "007", "3.14159265358979323846", "+2"],
    "text": ["a,b", 'say "hi"', "tab\there", "line\nbreak", "caf\u00e9 \u2713", " pad "],
}

TYPED = pd.DataFrame({
    "item": ["a", "b", "c", "d", "e", "f", "g"],
    "score": [0.1, 0.25, 1 / 3, 0.5, 0.75, 0.9, 1.0],
    "n": [1, 2, 3, 4, 5, 6, 7],
})


def _parquet_folder(path: Path) -> Path:
    path.mkdir()
    TYPED.iloc[:3].to_parquet(path / "part-0.parquet", index=False)
    TYPED.iloc[3:].reset_index(drop=True).to_parquet(path / "part-1.parquet", index=False)
    return path


HERE = Path(__file__).parent


def _copy(name: str):
    def build(path: Path) -> Path:
        path.write_bytes((HERE / name).read_bytes())
        return path
    return build


def lm_eval_lines(n: int = 5) -> list[dict]:
    """Log-likelihood (multiple choice) samples in the harness's documented ``--log_samples``
    layout (``filtered_resps`` as ``[logprob, is_greedy]`` per choice, written as text by
    its ``sanitize_list``)."""
    out = []
    for i in range(n):
        lps = [-1.5 - i, -0.25 - 0.1 * i, -3.0, -2.125]
        best = max(range(4), key=lambda j: lps[j])
        out.append({
            "doc_id": i, "doc": {"question": f"q{i}", "choices": ["a", "b", "c", "d"]},
            "target": 1, "arguments": {f"gen_args_{j}": {"arg_0": f"Question: q{i}",
                                                         "arg_1": " " + "abcd"[j]}
                                       for j in range(4)},
            "resps": [[[str(lp), str(j == best)]] for j, lp in enumerate(lps)],
            "filtered_resps": [[str(lp), str(j == best)] for j, lp in enumerate(lps)],
            "filter": "none", "metrics": ["acc", "acc_norm"],
            "doc_hash": "d", "prompt_hash": "p", "target_hash": "t",
            "acc": float(best == 1), "acc_norm": 1.0})
    return out


def _lm_eval(path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in lm_eval_lines()), encoding="utf-8")
    return path


def chat_answer(n: int, *, k: int = 20, idx: int = 0) -> dict:
    """One answer shaped as a llama.cpp server's ``/v1/chat/completions`` answer with
    ``logprobs`` (token ids and bytes, ``timings``): ``... Score: n``."""
    toks = ["Fine", ".", " Score", ":", f" {n}"]
    probs = {f" {n}": 0.6, str(n): 0.1, f" {1 + n % 5}": 0.2, " The": 0.05}
    probs.update({f" w{j}": 0.001 for j in range(30)})
    top = sorted(probs.items(), key=lambda kv: -kv[1])[:k]

    def tok(t, lp, i):
        return {"id": 100 + i, "token": t, "bytes": list(t.encode()), "logprob": lp}

    content = [{**tok(t, -0.01, i), "top_logprobs": [tok(t, -0.01, i)]}
               for i, t in enumerate(toks)]
    content[-1]["top_logprobs"] = [tok(t, math.log(p), j) for j, (t, p) in enumerate(top)]
    return {"id": f"chatcmpl-{idx}", "object": "chat.completion", "created": 1790000000,
            "model": "tiny.gguf", "system_fingerprint": "b4000-abc",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "".join(toks)},
                         "logprobs": {"content": content}}],
            "usage": {"completion_tokens": 5, "prompt_tokens": 40, "total_tokens": 45},
            "timings": {"prompt_n": 40, "predicted_n": 5}}


def _batch(path: Path) -> Path:
    lines = [chat_answer(1 + i % 5, idx=i) for i in range(3)]
    lines += [{"id": f"batch_req_{i}", "custom_id": f"row-{i}",
               "response": {"status_code": 200, "request_id": f"req_{i}",
                            "body": chat_answer(2, idx=i)}, "error": None} for i in (3, 4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


#: format name -> (file name, builder(path) -> path, expected number of rows)
BUILDERS: dict = {
    "hf-dataset": ("ds", _parquet_folder, len(TYPED)),
    # a real Inspect log (its mock model, tests/formats/inspect_mock.py; events trimmed)
    "inspect": ("run.json", _copy("inspect_log.json"), 2),
    "lm-eval": ("samples_arc_easy_2026-01-01T00-00-00.123456.jsonl", _lm_eval, 5),
    # a real promptfoo 0.121 results file (its echo provider)
    "promptfoo": ("results.json", _copy("promptfoo_results.json"), 2),
    "openai-batch": ("answers.jsonl", _batch, 5),
}


def example(name: str, tmp: Path) -> tuple[Path, int]:
    """An example file of the read-only format ``name`` under ``tmp``, and its row count."""
    fname, build, n = BUILDERS[name]
    return build(tmp / fname), n
