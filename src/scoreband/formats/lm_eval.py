"""LM Evaluation Harness per-sample logs (``lm_eval --log_samples``:
``<output_path>/<model>/samples_<task>_<date>.jsonl``, one JSON object per document and
filter). Read only; checked against files written by a real harness run (lm-eval 0.4.13,
``tests/formats/test_lm_eval_real.py``).

One row per line:

* ``doc_id``, ``task`` (from the file name), ``model`` (``model_name`` of the run's
  ``results_<date>.json`` beside the samples file; empty when that file is not there),
  ``filter`` and ``target`` (for a multiple-choice task the index of the right choice: the
  harness writes it as text, ``"2"``, and it is read as the number);
* ``doc_<field>`` for each plain field of the document (a human rating kept in the dataset
  is a target);
* each metric the line lists (``acc``, ``acc_norm``, ``exact_match`` ...);
* a generation task: ``answer``, the filtered answer;
* a log-likelihood task (multiple choice): per choice ``i``, ``choice_<i>`` (the continuation
  scored, ``" 4"``), ``logprob_<i>`` and ``is_greedy_<i>``, read from ``filtered_resps``
  (the harness writes them as text, ``[["-1.5", "False"], ...]``);
* where the choices are integer labels (a rating task: ``" 1"`` ... ``" 5"``), or the address
  names the scale (``lm-eval@1-5:samples.jsonl``), the score-token columns of
  ``scoreband judge`` (``logp_<label>``, ``judge_expected``, ``judge_argmax``,
  ``judge_entropy``, ``judge_max_prob``, ``judge_missing_mass``, ``judge_error``): the
  choices' log-likelihoods folded by the endpoint judge's own folding
  (:func:`scoreband.judges.tokens.fold_top_logprobs`: ``"4"`` and ``" 4"`` are one label)
  and turned into columns by :func:`scoreband.judges.answers.feature_columns`. A label of
  the scale that is not among a row's choices gives that row no score and says so in
  ``judge_error``.

The documented sample layout is parsed here rather than through ``lm_eval`` itself: the
harness is a heavy install (torch, transformers, datasets, evaluate ...) and has no reader of
its own for these files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.formats._answers import parse_scale
from scoreband.formats.base import ReadOnlyFormat
from scoreband.formats.common import count_lines, json_lines, jsonl_records

__all__ = ["LM_EVAL", "LMEval", "task_of", "results_file"]

#: the keys of a logged sample that are not metrics
BOOKKEEPING = frozenset({"doc_id", "doc", "target", "arguments", "resps", "filtered_resps",
                         "filter", "metrics", "doc_hash", "prompt_hash", "target_hash"})

#: the most labels a scale read from the choices alone may have (0-10 ratings)
MAX_AUTO_LABELS = 11

_NAME = re.compile(r"samples_(.+?)_(\d{4}-\d\d-\d\dT[\d\-.:]+)\.jsonl$")
# the start of a sample line, for a first line longer than the sniffed head (few-shot
# prompts are repeated once per choice in ``arguments``)
_START = re.compile(r'^\s*\{\s*"doc_id"\s*:\s*\d+\s*,\s*"doc"\s*:')


def task_of(path: Path) -> str | None:
    """The task a ``samples_<task>_<date>.jsonl`` file is of (None for another name)."""
    m = _NAME.match(path.name)
    return m.group(1) if m else None


def results_file(path: Path) -> Path | None:
    """The ``results_<date>.json`` the harness wrote beside ``samples_<task>_<date>.jsonl``
    in the same run (None when it is not there)."""
    m = _NAME.match(path.name)
    if not m:
        return None
    p = path.with_name(f"results_{m.group(2)}.json")
    return p if p.is_file() else None


class LMEval(ReadOnlyFormat):
    name = "lm-eval"
    help = "LM Evaluation Harness samples (--log_samples)"
    suffixes = (".jsonl",)
    markers = frozenset({"doc_id", "doc"})

    def __init__(self, scale: tuple[int, int] | None = None):
        self.scale = scale  # None: read from the choices where they are integer labels

    def configure(self, options: str) -> LMEval:
        return LMEval(parse_scale(options))

    def sniff(self, path: Path, head: str) -> bool:
        """Claimed by the samples' structure: every line of the head has a ``doc_id``, the
        ``doc`` object and the harness's ``resps`` / ``filtered_resps`` / ``arguments`` (a
        table with a ``doc_id`` column is a table)."""
        recs = [r for r in json_lines(head) if r is not None]
        if not recs:  # a first line longer than the head
            return bool(_START.match(head))
        return all(isinstance(r, dict) and "doc_id" in r and isinstance(r.get("doc"), dict)
                   and any(k in r for k in ("filtered_resps", "resps", "arguments"))
                   for r in recs)

    def rows(self, path: Path, max_bytes: int = 2 << 30) -> int | None:
        return count_lines(path, max_bytes)

    def read(self, path: Path, columns=None, *, text: bool = False) -> pd.DataFrame:
        with open(path, encoding="utf-8-sig") as f:  # a torn line is reported and skipped
            recs = jsonl_records(f, path, text=True)
        task, model = task_of(path), _model_of(path)
        rows = [_row(r, task, model) for r in recs.to_dict("records")]
        df = pd.DataFrame.from_records(rows)
        choices = [_choices(r) for r in rows]
        labels = _labels(choices, self.scale)
        if labels is not None:
            for k, v in judge_columns(rows, choices, labels).items():
                df[k] = v
        return df


def _model_of(path: Path) -> str:
    p = results_file(path)
    if p is None:
        return ""
    try:
        res = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    name = res.get("model_name") if isinstance(res, dict) else None
    if not name and isinstance(res, dict) and isinstance(res.get("config"), dict):
        name = res["config"].get("model")
    return str(name) if name else ""


def _row(rec: dict, task: str | None, model: str) -> dict:
    row = {"doc_id": rec.get("doc_id"), "task": task, "model": model}
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
        conts = _continuations(rec.get("arguments"), len(resps))
        if isinstance(row["target"], str) and row["target"].strip().isdigit():
            row["target"] = int(row["target"])  # the right choice's index, written as text
        for i, (lp, greedy) in enumerate(resps):
            if conts is not None:
                row[f"choice_{i}"] = conts[i]
            row[f"logprob_{i}"] = _number(lp)
            row[f"is_greedy_{i}"] = _boolean(greedy)
    elif isinstance(resps, list) and resps:
        first = resps[0]
        while isinstance(first, list) and first:  # [[text]] for some tasks
            first = first[0]
        row["answer"] = first if isinstance(first, str) else json.dumps(first)
    return row


def _continuations(arguments, n: int) -> list[str] | None:
    """The continuation scored for each choice: ``arguments`` as the harness logs it
    (``{"gen_args_0": {"arg_0": context, "arg_1": continuation}, ...}``) or as its Python
    API returns it (a list of ``(context, continuation)``)."""
    if isinstance(arguments, dict):
        args = [arguments.get(f"gen_args_{i}") for i in range(n)]
        conts = [a.get("arg_1") if isinstance(a, dict) else None for a in args]
    elif isinstance(arguments, list) and len(arguments) == n:
        conts = [a[1] if isinstance(a, (list, tuple)) and len(a) == 2 else None
                 for a in arguments]
    else:
        return None
    return conts if all(isinstance(c, str) for c in conts) else None


def _choices(row: dict) -> list[tuple[str, float]] | None:
    """``(continuation, log-likelihood)`` per choice of a log-likelihood row (else None)."""
    out, i = [], 0
    while f"logprob_{i}" in row:
        cont = row.get(f"choice_{i}")
        if not isinstance(cont, str):
            return None
        out.append((cont, row[f"logprob_{i}"]))
        i += 1
    return out or None


def _labels(choices: list, scale: tuple[int, int] | None) -> list[str] | None:
    """The score labels: the address's scale, or the integers the choices spell when every
    log-likelihood row's choices are integers of a range of at most
    :data:`MAX_AUTO_LABELS` (None: no score-token columns)."""
    from scoreband.judges.tokens import canonical_token, scale_labels

    if scale is not None:
        return scale_labels(*scale)
    spelled = [canonical_token(c) for ch in choices if ch for c, _ in ch]
    if not spelled or any(ch is None for ch in choices) or \
            not all(re.fullmatch(r"-?\d+", s) for s in spelled):
        return None
    values = [int(s) for s in spelled]
    lo, hi = min(values), max(values)
    if hi <= lo or hi - lo + 1 > MAX_AUTO_LABELS:
        return None
    return scale_labels(lo, hi)


def judge_columns(rows: list[dict], choices: list, labels: list[str]) -> dict:
    """The score-token columns of ``scoreband judge`` from each row's choices
    (``(continuation, log-likelihood)`` pairs, or None): ``logp_<label>``, ``judge_*`` and
    ``judge_error`` (why a row has no score)."""
    # scipy (through judges.tokens / judges.answers) only when score columns are made
    from scoreband.judges.answers import feature_columns
    from scoreband.judges.tokens import canonical_token, fold_top_logprobs

    n, k = len(rows), len(labels)
    raw = np.full((n, k), np.nan)
    missing = np.full(n, np.nan)
    errors = [""] * n
    for i, ch in enumerate(choices):
        if not ch:
            errors[i] = "no log-likelihood choices (not a multiple-choice sample)"
            continue
        offered = {canonical_token(c) for c, _ in ch}
        absent = [lab for lab in labels if lab not in offered]
        if absent:
            errors[i] = (f"label(s) {', '.join(absent)} of the scale {labels[0]}-{labels[-1]} "
                         "are not among the choices; name the task's scale "
                         "(lm-eval@LO-HI:PATH)")
            continue
        try:
            raw[i], missing[i] = fold_top_logprobs(ch, labels)
        except ValueError as e:  # e.g. choices "1" and "10": not one next-token outcome
            errors[i] = f"the choices are not one distribution over the labels: {e}"
    ok = np.array([e == "" for e in errors], dtype=bool)
    out = feature_columns(raw, ok, labels)
    out["judge_missing_mass"] = np.where(ok, missing, np.nan)
    out["judge_error"] = np.array(errors, dtype=object)
    return out


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
