"""OpenAI-compatible chat answers written one JSON object a line: what a vLLM or llama.cpp
server answers to ``/v1/chat/completions`` (``{"id", "model", "choices": [...]}``), or the
OpenAI Batch API's output lines (``{"custom_id", "response": {"status_code", "body":
{...}}, "error"}``). One row per line: ``custom_id``, ``model``, ``answer`` (the message),
``finish_reason``, ``batch_error`` (a failed request: its error, or a status other than 200)
and, where the answers carry ``logprobs.content[]``, the score-token columns of
``scoreband judge`` through its own parser (:mod:`scoreband.formats._answers`). Read only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from scoreband.formats._answers import DEFAULT_SCALE, answer_features, has_logprobs, parse_scale
from scoreband.formats.base import ReadOnlyFormat
from scoreband.formats.common import count_lines, json_lines

__all__ = ["OPENAI_BATCH", "OpenAIBatch", "answer_shape"]


#: the keys of an OpenAI Batch API output line
BATCH_KEYS = frozenset({"id", "custom_id", "response", "error"})
#: the keys of a ``/v1/chat/completions`` answer (OpenAI, vLLM, llama.cpp)
CHAT_KEYS = frozenset({"id", "object", "created", "model", "system_fingerprint", "choices",
                       "usage", "timings", "service_tier", "prompt_filter_results",
                       "prompt_logprobs", "kv_transfer_params", "error"})

# a first line longer than the sniffed head: a Batch API line or a chat answer, by its start
_CUT_BATCH = re.compile(r'^\s*\{\s*"id"\s*:\s*"[^"]*"\s*,\s*"custom_id"\s*:\s*"[^"]*"\s*,'
                        r'\s*"response"\s*:\s*\{\s*"status_code"')
_CUT_CHAT = re.compile(r'^\s*\{[^\n]*"object"\s*:\s*"chat\.completion"')


def answer_shape(rec) -> bool:
    """Whether one parsed line is an answer: a Batch API output line (``custom_id`` and a
    ``response`` object with a ``body``, or a failed request's ``error``, and no other
    keys) or a chat-completions answer (a ``choices`` list of choice objects)."""
    if not isinstance(rec, dict):
        return False
    if "custom_id" in rec and set(rec) <= BATCH_KEYS:
        resp = rec.get("response")
        return (isinstance(resp, dict) and isinstance(resp.get("body"), dict)) or (
            resp is None and isinstance(rec.get("error"), dict))
    choices = rec.get("choices")
    return (isinstance(choices, list) and bool(choices) and isinstance(choices[0], dict)
            and ("message" in choices[0] or rec.get("object") == "chat.completion"))


class OpenAIBatch(ReadOnlyFormat):
    name = "openai-batch"
    help = "OpenAI-compatible chat answers, one a line (vLLM, llama.cpp, the Batch API)"
    suffixes = (".jsonl", ".ndjson")
    markers = frozenset({"custom_id"})

    def __init__(self, scale: tuple[int, int] = DEFAULT_SCALE):
        self.scale = scale

    def configure(self, options: str) -> OpenAIBatch:
        return OpenAIBatch(parse_scale(options))

    def sniff(self, path: Path, head: str) -> bool:
        """Claimed by the answers' structure alone (:func:`answer_shape`, every line of the
        head): a table with a ``custom_id`` column (and its own columns) is a table."""
        recs = [r for r in json_lines(head) if r is not None]
        if not recs:
            return bool(_CUT_BATCH.match(head) or _CUT_CHAT.match(head))
        return all(answer_shape(r) for r in recs)

    def rows(self, path: Path, max_bytes: int = 2 << 30) -> int | None:
        return count_lines(path, max_bytes)

    def read(self, path: Path, columns=None, *, text: bool = False) -> pd.DataFrame:
        rows, answers, unread = [], [], {}
        with open(path, encoding="utf-8-sig") as f:
            for k, line in enumerate(f, 1):
                if not line.strip():
                    continue
                row, answer, extra = _line(line, k)
                rows.append(row)
                answers.append(answer if has_logprobs(answer) else None)
                for key in extra:
                    unread.setdefault(key, k)
        if unread:
            self.unread(path, unread)
        df = pd.DataFrame.from_records(rows)
        if any(a is not None for a in answers):
            feats = answer_features(answers, self.scale)
            df = pd.concat([df, pd.DataFrame(feats, index=df.index)], axis=1)
        return df


def _line(line: str, k: int) -> tuple[dict, dict | None, list[str]]:
    """One line as ``(row, chat-completions answer or None, its keys that are not an
    answer's)``; a line that is not JSON, or a request that failed, is a row with its
    ``batch_error``."""
    row = {"custom_id": None, "model": None, "answer": None, "finish_reason": None,
           "batch_error": ""}
    try:
        rec = json.loads(line)
    except ValueError as e:
        row["batch_error"] = f"line {k} is not JSON ({e})"
        return row, None, []
    if not isinstance(rec, dict):
        row["batch_error"] = f"line {k} is not a JSON object"
        return row, None, []
    extra = sorted(set(rec) - BATCH_KEYS - CHAT_KEYS)
    row["custom_id"] = rec.get("custom_id")
    body = rec
    resp = rec.get("response")
    if isinstance(resp, dict) and "body" in resp:  # the Batch API's output line
        body = resp.get("body")
        status = resp.get("status_code")
        if status not in (None, 200):
            row["batch_error"] = f"status {status}: {_error_text(body)}"
    if rec.get("error"):
        row["batch_error"] = _error_text(rec["error"])
    if not isinstance(body, dict):
        return row, None, extra
    row["model"] = body.get("model")
    choices = body.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        msg = choices[0].get("message")
        row["answer"] = msg.get("content") if isinstance(msg, dict) else None
        row["finish_reason"] = choices[0].get("finish_reason")
    elif not row["batch_error"]:
        row["batch_error"] = (f"line {k} has no choices: not an OpenAI answer (a plain "
                              "table? read it as jsonl:FILE)")
    return row, (body if not row["batch_error"] else None), extra


def _error_text(err) -> str:
    if isinstance(err, dict):
        inner = err.get("error", err)
        if isinstance(inner, dict):
            return str(inner.get("message") or inner.get("code") or json.dumps(inner))[:300]
        return str(inner)[:300]
    return str(err)[:300]


OPENAI_BATCH = OpenAIBatch()
