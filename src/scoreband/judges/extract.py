"""Extract score-token log-probs from a real VLM judge for every row of a table.

One data flow for both kinds of judge (a local transformers model, an OpenAI-compatible
endpoint): render the judge prompt, ask the judge, fold the score token's distribution onto
the K labels, add the summary features, keep every row. A row that fails (missing image,
endpoint error, no score in the answer) keeps NaN features and the reason in
``judge_error``; it is never given a score.

Resume: every finished row is appended (and flushed) to ``OUT.partial.jsonl``; a rerun
with the same inputs reuses those rows and only asks the judge for the rest, and the
journal is removed once the table is written.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.batch import (
    RowJournal,
    cell_text,
    file_digest,
    resolve_path,
    row_key,
    row_progress,
)
from scoreband.errors import InputError
from scoreband.judges.base import (  # noqa: F401  (re-exported)
    DEFAULT_RUBRIC,
    DEFAULT_TEMPLATE,
    Judge,
    JudgeError,
    JudgePrompt,
    JudgeResult,
)
from scoreband.judges.registry import JUDGES
from scoreband.logprobs import entropy, expected_score, max_prob

__all__ = ["JudgePrompt", "JudgeResult", "Judge", "JudgeError", "make_judge",
           "extract_judge_table", "DEFAULT_TEMPLATE", "JUDGES"]

def make_judge(spec: str, prompt: JudgePrompt, **kw) -> Judge:
    """``hf:DIR_OR_ID`` or ``openai:MODEL`` (see ``JUDGES``); options a judge does not take
    are ignored."""
    return JUDGES.create(spec, prompt, **kw)


def _row_key(judge: Judge, image: str | None, instruction: str | None, response: str | None,
             image_file: Path | None) -> str:
    return row_key(json.dumps(judge.describe(), sort_keys=True), image, file_digest(image_file),
                   instruction, response, judge.prompt.template, judge.prompt.rubric,
                   judge.prompt.delimiter)


def _judge_row(judge: Judge, key: str, img, ins, resp, img_file, cols) -> dict:
    """Judge one row; the journal record (``error`` says why a row failed)."""
    from scoreband.images import load_image

    image_col, instruction_col, response_col = cols
    rec = {"key": key, "logp": None, "missing": None, "position": "", "error": ""}
    try:
        for col, v in ((instruction_col, ins), (response_col, resp)):
            if v is None:
                raise JudgeError(f"{col}: empty cell")
        if img is None:
            raise JudgeError(f"{image_col}: no image path (empty cell)")
        try:
            load_image(img_file, None)  # validates: exists, decodes, not a bomb
        except ValueError as e:
            raise JudgeError(f"{image_col}: {e}") from None
        res = judge.judge(img_file, judge.prompt.render(ins, resp))
        if not np.isfinite(res.logp).any():
            raise JudgeError(f"none of the score labels {judge.prompt.labels} is among the "
                             "judge's tokens at the score position")
        rec.update(logp=[float(x) if np.isfinite(x) else None for x in res.logp],
                   missing=res.missing_mass, position=res.position)
    except JudgeError as e:
        rec["error"] = str(e)
    return rec


def _feature_columns(raw: np.ndarray, ok: np.ndarray, labels) -> dict[str, np.ndarray]:
    """logp_<label> (log-softmax over the labels) and the summaries of the distribution."""
    n, k = raw.shape
    norm = np.full((n, k), np.nan)
    if ok.any():
        from scipy.special import logsumexp

        norm[ok] = raw[ok] - logsumexp(raw[ok], axis=1, keepdims=True)
    out = {}
    for j, lab in enumerate(labels):
        # -inf (a label the judge gave no mass in its top-k) is kept out of tables as a
        # large negative number: CSV and Parquet readers treat it alike
        out[f"logp_{lab}"] = np.where(np.isneginf(norm[:, j]), -1e4, norm[:, j])
    values = np.array([float(x) for x in labels])
    summaries = {k2: np.full(n, np.nan) for k2 in ("judge_expected", "judge_argmax",
                                                   "judge_entropy", "judge_max_prob")}
    if ok.any():
        summaries["judge_expected"][ok] = expected_score(norm[ok], values)
        summaries["judge_argmax"][ok] = values[np.argmax(norm[ok], axis=1)]
        summaries["judge_entropy"][ok] = entropy(norm[ok])
        summaries["judge_max_prob"][ok] = max_prob(norm[ok])
    return {**out, **summaries}


def extract_judge_table(df: pd.DataFrame, judge: Judge, *, image_col: str = "image",
                        instruction_col: str = "instruction", response_col: str = "response",
                        base_dir=None, journal: Path | None = None,
                        progress=None) -> tuple[pd.DataFrame, int]:
    """Judge every row; returns ``(table with feature columns, number of failed rows)``.

    Added columns: ``logp_<label>`` per label (log-softmax over the labels, so they can be
    fed to ``--features 'logp_*'``), ``judge_expected``, ``judge_argmax``, ``judge_entropy``,
    ``judge_max_prob``, ``judge_missing_mass``, ``judge_position``, ``judge_error``,
    ``judge_model``.
    """
    for flag, col in (("`image_col`", image_col), ("`instruction_col`", instruction_col),
                      ("`response_col`", response_col)):
        if col not in df.columns:
            raise InputError(f"{flag} column {col!r} is not in the table; available: "
                             f"{', '.join(map(str, df.columns))}")
    labels = judge.prompt.labels
    n, k = len(df), len(labels)
    raw = np.full((n, k), np.nan)
    missing = np.full(n, np.nan)
    position = np.full(n, "", dtype=object)
    errors = np.full(n, "", dtype=object)
    reused = 0
    with RowJournal(journal) as jr, row_progress(progress, f"judging with {judge.name}",
                                                 n) as update:
        for i in range(n):
            img, ins, resp = (cell_text(df, c, i) for c in (image_col, instruction_col,
                                                           response_col))
            img_file = resolve_path(img, base_dir) if img else None
            key = _row_key(judge, img, ins, resp, img_file)
            rec = jr.get(key)
            if rec is None:
                rec = _judge_row(judge, key, img, ins, resp, img_file,
                                 (image_col, instruction_col, response_col))
                jr.add(rec)
            else:
                reused += 1
            if rec["logp"] is not None:
                raw[i] = [-np.inf if x is None else x for x in rec["logp"]]
                missing[i] = rec["missing"]
            position[i], errors[i] = rec["position"], rec["error"]
            update(i + 1)
    ok = errors == ""
    out = df.copy()
    for col, v in _feature_columns(raw, ok, labels).items():
        out[col] = v
    out["judge_missing_mass"] = missing
    out["judge_position"] = position
    out["judge_error"] = errors
    out["judge_model"] = judge.name
    out.attrs["reused_rows"] = reused
    return out, int((~ok).sum())
