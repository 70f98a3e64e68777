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

from scoreband.engine.cells import cell_text, resolve_path
from scoreband.engine.journal import row_key
from scoreband.engine.rows import Stage, run_rows
from scoreband.images import image_digest, load_image
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
           "extract_judge_table", "JudgeStage", "judge_stage", "DEFAULT_TEMPLATE", "JUDGES"]

def make_judge(spec: str, prompt: JudgePrompt, *, offered: dict | None = None, **kw) -> Judge:
    """``hf:DIR_OR_ID`` or ``openai:MODEL`` (see ``JUDGES``) with its options ``kw`` (an
    option the judge does not take is an error naming it); ``offered``: options given to
    every judge alike (the CLI's), each judge taking those it knows."""
    return JUDGES.create(spec, prompt, offered=offered, **kw)


def _judge_row(judge: Judge, img, ins, resp, img_file, cols) -> dict:
    """Judge one row; the journal record (``error`` says why a row failed)."""
    image_col, instruction_col, response_col = cols
    rec = {"logp": None, "judge_missing_mass": None, "judge_position": "", "error": ""}
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
                   judge_missing_mass=res.missing_mass, judge_position=res.position)
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


class JudgeStage(Stage):
    """The judge on the row engine: one row per request (each finished row is journaled
    at once: a judge call is the expensive part)."""

    error_column = "judge_error"
    batch_size = 1
    outputs = {"judge_missing_mass": np.nan, "judge_position": "", "judge_error": ""}

    def __init__(self, judge: Judge, *, image_col: str = "image",
                 instruction_col: str = "instruction", response_col: str = "response",
                 base_dir=None):
        super().__init__(base_dir)
        self.judge, self.cols = judge, (image_col, instruction_col, response_col)
        self.inputs = {"image_col": image_col, "instruction_col": instruction_col,
                       "response_col": response_col}
        self.label = f"judging with {judge.name}"
        self._setup = json.dumps(judge.describe(), sort_keys=True)

    def _cells(self, df, i):
        img, ins, resp = (cell_text(df, c, i) for c in self.cols)
        return img, ins, resp, resolve_path(img, self.base_dir) if img else None

    def key(self, df, i):
        img, ins, resp, f = self._cells(df, i)
        p = self.judge.prompt
        return row_key(self._setup, img, image_digest(f), ins, resp, p.template, p.rubric,
                       p.delimiter)

    def process(self, df, positions):
        return [_judge_row(self.judge, *self._cells(df, i), self.cols) for i in positions]

    def columns(self, records):
        labels = self.judge.prompt.labels
        raw = np.full((len(records), len(labels)), np.nan)
        for i, rec in enumerate(records):
            if rec.get("logp") is not None:
                raw[i] = [-np.inf if x is None else x for x in rec["logp"]]
        out = _feature_columns(raw, np.array([r["error"] == "" for r in records], dtype=bool),
                               labels)
        return {**out, **super().columns(records)}

    def constants(self):
        return {"judge_model": self.judge.name}

    def components(self):
        return {"judge": self.judge.describe()}


def judge_stage(judge_spec: str, prompt: dict, judge_options: dict, **cols) -> JudgeStage:
    """A :class:`JudgeStage` built from plain values (what a Ray actor receives):
    ``prompt`` holds :class:`JudgePrompt`'s arguments."""
    return JudgeStage(make_judge(judge_spec, JudgePrompt(**prompt), offered=judge_options),
                      **cols)


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
    stage = JudgeStage(judge, image_col=image_col, instruction_col=instruction_col,
                       response_col=response_col, base_dir=base_dir)
    run = run_rows(df, stage, journal=journal, progress=progress)
    run.table.attrs["reused_rows"] = run.reused
    return run.table, len(run.failures)
