"""LM Evaluation Harness per-sample logs (``lm_eval --log_samples``:
``samples_<task>_<date>.jsonl``, one JSON object per document and filter). One row per line:
``doc_id``, ``task`` (from the file name), ``filter``, ``target``, ``doc_<field>`` for each
plain field of the document (a human rating in the dataset is a target), each metric the line
lists (``acc``, ``exact_match`` ...), ``answer`` for a generation task (the filtered
answer) and, for a log-likelihood task (multiple choice), ``logprob_<i>`` and
``is_greedy_<i>`` per choice, read from ``filtered_resps`` (the harness writes them as
text, ``[["-1.5", "False"], ...]``). Read only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from scoreband.formats.base import ReadOnlyFormat
from scoreband.formats.common import jsonl_records
from scoreband.formats.openai_batch import first_json_line

__all__ = ["LM_EVAL", "task_of"]

#: the keys of a logged sample that are not metrics
BOOKKEEPING = frozenset({"doc_id", "doc", "target", "arguments", "resps", "filtered_resps",
                         "filter", "metrics", "doc_hash", "prompt_hash", "target_hash"})

_NAME = re.compile(r"samples_(.+?)_(\d{4}-\d\d-\d\dT[\d\-.:]+)\.jsonl$")


def task_of(path: Path) -> str | None:
    """The task a ``samples_<task>_<date>.jsonl`` file is of (None for another name)."""
    m = _NAME.match(path.name)
    return m.group(1) if m else None


class LMEval(ReadOnlyFormat):
    name = "lm-eval"
    help = "LM Evaluation Harness samples (--log_samples)"
    suffixes = (".jsonl",)

    def sniff(self, path: Path, head: str) -> bool:
        rec = first_json_line(head)
        return isinstance(rec, dict) and "doc_id" in rec and (
            "filtered_resps" in rec or "resps" in rec or task_of(path) is not None)

    def rows(self, path: Path, max_bytes: int = 2 << 30) -> int | None:
        if path.stat().st_size > max_bytes:
            return None
        with open(path, encoding="utf-8-sig") as f:
            return sum(1 for line in f if line.strip())

    def read(self, path: Path, columns=None, *, text: bool = False) -> pd.DataFrame:
        with open(path, encoding="utf-8-sig") as f:  # a torn line is reported and skipped
            recs = jsonl_records(f, path, text=True)
        task = task_of(path)
        rows = [_row(r, task) for r in recs.to_dict("records")]
        return pd.DataFrame.from_records(rows)


def _row(rec: dict, task: str | None) -> dict:
    row = {"doc_id": rec.get("doc_id"), "task": task}
    if rec.get("filter") is not None:
        row["filter"] = rec.get("filter")
    target = rec.get("target")
    row["target"] = target if target is None or isinstance(target, (str, int, float)) \
        else json.dumps(target)
    doc = rec.get("doc")
    for k, v in (doc.items() if isinstance(doc, dict) else ()):
        if v is None or isinstance(v, (str, int, float, bool)):
            row[f"doc_{k}"] = v  # a rating in the dataset is a target
    listed = rec.get("metrics")
    names = listed if isinstance(listed, list) else [
        k for k, v in rec.items() if k not in BOOKKEEPING and _is_number(v)]
    for m in names:
        if m in rec:
            row[m] = _number(rec[m])
    resps = rec.get("filtered_resps")
    if isinstance(resps, list) and resps and all(_is_pair(x) for x in resps):
        for i, (lp, greedy) in enumerate(resps):
            row[f"logprob_{i}"] = _number(lp)
            row[f"is_greedy_{i}"] = _boolean(greedy)
    elif isinstance(resps, list) and resps:
        first = resps[0]
        while isinstance(first, list) and first:  # [[text]] for some tasks
            first = first[0]
        row["answer"] = first if isinstance(first, str) else json.dumps(first)
    return row


def _is_pair(x) -> bool:
    return isinstance(x, list) and len(x) == 2 and _is_number(x[0]) and \
        str(x[1]) in ("True", "False", "true", "false")


def _is_number(v) -> bool:
    if isinstance(v, bool):
        return True
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return isinstance(v, (int, float, str))


def _number(v):
    if isinstance(v, bool):
        return float(v)
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def _boolean(v) -> bool:
    return v is True or str(v).lower() == "true"


LM_EVAL = LMEval()
