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
import warnings
from pathlib import Path

import pandas as pd

from scoreband.formats.base import ReadOnlyFormat
from scoreband.formats.common import Cut, top_level

__all__ = ["PROMPTFOO"]


class Promptfoo(ReadOnlyFormat):
    name = "promptfoo"
    help = "a promptfoo results file (promptfoo eval --output results.json)"
    suffixes = (".json",)
    markers = frozenset({"evalId"})

    def sniff(self, path: Path, head: str) -> bool:
        """Claimed by the results file's structure: a top-level ``evalId`` beside
        ``results``, or ``results`` holding the result list (``{"version", ..., "results":
        [...]}`` or the list itself) whose results carry promptfoo's keys."""
        doc = top_level(head)
        if not isinstance(doc, dict) or "results" not in doc:
            return False
        res = doc["results"]
        if isinstance(doc.get("evalId"), str):
            return isinstance(res, (dict, list)) or res in ("{", "[")
        if isinstance(res, Cut):  # too long to see whole: promptfoo's keys in what is seen
            return res in ("{", "[") and any(f'"{k}"' in head for k in _RESULT_KEYS)
        if isinstance(res, dict):
            res = res.get("results")
        return (isinstance(res, list) and bool(res) and isinstance(res[0], dict)
                and any(k in res[0] for k in _RESULT_KEYS))

    def read(self, path: Path, columns=None, *, text: bool = False) -> pd.DataFrame:
        with open(path, encoding="utf-8-sig") as f:
            doc = json.load(f)
        results = _results(doc)
        if results is None:
            raise self.not_this(path, "no `results` list; write it with `promptfoo eval "
                                      "--output results.json`")
        rows, bad = [], []
        for k, r in enumerate(results):
            row, problems = _row(r) if isinstance(r, dict) else (
                {"test_idx": None}, [f"the result is a {type(r).__name__}, not an object"])
            if problems:
                bad.append(f"result {k + 1} (testIdx {row.get('test_idx')!r}): "
                           + "; ".join(problems))
                row["result_error"] = "; ".join(filter(None, [row.get("result_error")]
                                                       + problems))
            rows.append(row)
        if bad:
            more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
            warnings.warn(f"promptfoo results {str(path)!r}: {' | '.join(bad[:3])}{more}; "
                          "those fields are not read (each row's result_error says why)",
                          stacklevel=2)
        return pd.DataFrame.from_records(rows)


#: keys of one promptfoo result (the sniffer looks for them)
_RESULT_KEYS = ("promptIdx", "testIdx", "gradingResult")


def _results(doc):
    res = doc.get("results") if isinstance(doc, dict) else None
    if isinstance(res, dict):
        res = res.get("results")
    return res if isinstance(res, list) else None


def _mapping(r: dict, key: str, problems: list, *more) -> dict:
    """``r[key]`` (else the first of ``more`` that is there) as an object; another type is
    a problem of the row, named, and read as empty."""
    for v in (r.get(key), *more):
        if v is None:
            continue
        if isinstance(v, dict):
            return v
        shown = json.dumps(v, default=str)
        problems.append(f"`{key}` is a {type(v).__name__} "
                        f"({shown if len(shown) <= 60 else shown[:57] + '...'}), expected an "
                        "object")
        return {}
    return {}


def _row(r: dict) -> tuple[dict, list[str]]:
    """One result as a row, and the fields that could not be read (named)."""
    problems: list[str] = []
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
    for k, v in _mapping(r, "vars", problems, test.get("vars")).items():
        if v is None or isinstance(v, (str, int, float, bool)):
            row[f"vars_{k}"] = v
    row["answer"] = output if output is None or isinstance(output, str) else json.dumps(output)
    row["success"] = r.get("success", grading.get("pass"))
    score = r.get("score", grading.get("score"))
    row["score"] = float(score) if isinstance(score, (int, float)) else score
    row["grading_reason"] = grading.get("reason")
    named = {**_mapping(grading, "namedScores", problems), **_mapping(r, "namedScores",
                                                                     problems)}
    for k, v in named.items():
        row[f"score_{k}"] = float(v) if isinstance(v, (int, float)) else v
    row["latency_ms"] = r.get("latencyMs")
    row["cost"] = r.get("cost")
    # ``error`` also holds why an assertion failed (``failureReason`` 1); a request that
    # failed is ``failureReason`` 2 (older files without it: an error and no grading)
    err, why = r.get("error"), r.get("failureReason")
    failed = why == 2 or (why is None and not grading)
    row["result_error"] = str(err) if err and failed else ""
    return row, problems


PROMPTFOO = Promptfoo()
