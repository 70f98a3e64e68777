"""promptfoo results files (``promptfoo eval --output results.json``): one row per result
(test case x prompt x provider): ``test_idx``, ``prompt_idx``, ``provider``, ``prompt``,
``description``, ``vars_<name>`` per plain test variable, ``answer`` (the provider's output),
``success``, ``score`` (the grading score), ``grading_reason``, ``score_<name>`` per named
score (``namedScores``), ``latency_ms``, ``cost`` and ``result_error``. The documented
layout: ``{"evalId", "results": {"version", "timestamp", "prompts", "results": [...],
"stats"}, "config", "shareableUrl"}``, each result with ``promptIdx``, ``testIdx``,
``testCase``, ``vars``, ``provider``, ``prompt``, ``response``, ``success``, ``score``,
``namedScores``, ``gradingResult`` (``pass``, ``score``, ``reason``, ``namedScores``,
``componentResults``), ``latencyMs``, ``cost``, ``error``, ``failureReason`` (checked against
a file promptfoo 0.121 wrote with its ``echo`` provider). Read only."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from scoreband.errors import InputError
from scoreband.formats.base import ReadOnlyFormat

__all__ = ["PROMPTFOO"]


class Promptfoo(ReadOnlyFormat):
    name = "promptfoo"
    help = "a promptfoo results file (promptfoo eval --output results.json)"
    suffixes = (".json",)

    def sniff(self, path: Path, head: str) -> bool:
        start = head.lstrip()[:1] == "{"
        return start and ('"evalId"' in head or ('"results"' in head and (
            '"gradingResult"' in head or '"promptIdx"' in head or '"testIdx"' in head)))

    def read(self, path: Path, columns=None, *, text: bool = False) -> pd.DataFrame:
        with open(path, encoding="utf-8-sig") as f:
            doc = json.load(f)
        results = _results(doc)
        if results is None:
            raise InputError(f"{str(path)!r} is not a promptfoo results file (no `results` "
                             "list); write it with `promptfoo eval --output results.json`")
        return pd.DataFrame.from_records([_row(r) for r in results if isinstance(r, dict)])


def _results(doc):
    res = doc.get("results") if isinstance(doc, dict) else None
    if isinstance(res, dict):
        res = res.get("results")
    return res if isinstance(res, list) else None


def _row(r: dict) -> dict:
    grading = r.get("gradingResult") if isinstance(r.get("gradingResult"), dict) else {}
    provider = r.get("provider")
    prompt = r.get("prompt")
    test = r.get("testCase") if isinstance(r.get("testCase"), dict) else {}
    response = r.get("response") if isinstance(r.get("response"), dict) else {}
    output = response.get("output")
    row = {"test_idx": r.get("testIdx"), "prompt_idx": r.get("promptIdx"),
           "provider": (provider.get("label") or provider.get("id"))
           if isinstance(provider, dict) else provider,
           "prompt": (prompt.get("label") or prompt.get("raw"))
           if isinstance(prompt, dict) else prompt,
           "description": test.get("description")}
    for k, v in (r.get("vars") or test.get("vars") or {}).items():
        if v is None or isinstance(v, (str, int, float, bool)):
            row[f"vars_{k}"] = v
    row["answer"] = output if output is None or isinstance(output, str) else json.dumps(output)
    row["success"] = r.get("success", grading.get("pass"))
    score = r.get("score", grading.get("score"))
    row["score"] = float(score) if isinstance(score, (int, float)) else score
    row["grading_reason"] = grading.get("reason")
    named = {**(grading.get("namedScores") or {}), **(r.get("namedScores") or {})}
    for k, v in named.items():
        row[f"score_{k}"] = float(v) if isinstance(v, (int, float)) else v
    row["latency_ms"] = r.get("latencyMs")
    row["cost"] = r.get("cost")
    # ``error`` also holds why an assertion failed (``failureReason`` 1); a request that
    # failed is ``failureReason`` 2 (older files without it: an error and no grading)
    err, why = r.get("error"), r.get("failureReason")
    failed = why == 2 or (why is None and not grading)
    row["result_error"] = str(err) if err and failed else ""
    return row


PROMPTFOO = Promptfoo()
