"""The judge stage of the row engine: score-token log-probs from a real VLM judge for every
row of a table (`scoreband judge`).

One data flow for both kinds of judge (a local transformers model, an OpenAI-compatible
endpoint): render the judge prompt, ask the judge, fold the score token's distribution onto
the K labels, add the summary features, keep every row. A row that fails (missing image,
endpoint error, no score in the answer) keeps NaN features and the reason in
``judge_error``; it is never given a score.

Resume: every finished row is appended (and flushed) to ``OUT.partial.jsonl``; a rerun
with the same inputs reuses those rows and only asks the judge for the rest, and the
journal is removed once the table is written.

Concurrency: a judge that may be called from several threads (an endpoint) gets
``concurrency`` rows in flight at once, inside the engine's batch (records come back in row
order; the batch is journaled when it is done, and an endpoint's answers are cached as they
arrive, so a kill loses no request). Stop: after ``stop_after`` rows in a row fail at the
judge (not for their own input), or at once when the judge says no row can be judged, the
rest of the rows are not asked; each gets the reason, and the run's summary names it.
"""

from __future__ import annotations

import contextvars
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.engine.cells import cell_text
from scoreband.engine.journal import row_key
from scoreband.engine.rows import Stage, run_rows
from scoreband.errors import ERROR_COLUMN, InputError
from scoreband.files import resolve_path
from scoreband.images import image_digest
from scoreband.judges.answers import Breaker as _Breaker
from scoreband.judges.answers import feature_columns as _feature_columns
from scoreband.judges.answers import judge_row as _judge_row
from scoreband.judges.base import (  # noqa: F401  (re-exported)
    DEFAULT_RUBRIC,
    DEFAULT_TEMPLATE,
    MAX_UNSEEN_SHARE,
    Judge,
    JudgeError,
    JudgeInputError,
    JudgePrompt,
    JudgeResult,
    JudgeStop,
)
from scoreband.judges.registry import JUDGES

__all__ = ["JudgePrompt", "JudgeResult", "Judge", "JudgeError", "make_judge",
           "extract_judge_table", "JudgeStage", "judge_stage", "DEFAULT_TEMPLATE", "JUDGES",
           "RowPool"]


class RowPool:
    """Rows judged ``concurrency`` at a time (one judge call at a time for 1): the one
    mechanism of the score and the pairwise judge stages. A judge that may not be called
    from several threads (a local model) is refused more than one; each row runs in a copy
    of the caller's context (the output policy lives in one); results come back in row
    order; ``fn`` must not raise (it returns the row's record, an error in it)."""

    def __init__(self, judge, concurrency: int, what: str = "judge"):
        self.concurrency = int(concurrency)
        if self.concurrency < 1:
            raise InputError(f"`concurrency` {concurrency}: give 1 or more")
        if self.concurrency > 1 and not getattr(judge, "concurrent", False):
            raise InputError(f"`concurrency` {concurrency}: {judge.name} judges one row at a "
                             "time (a local model); several requests at once are for "
                             "endpoint judges (openai:)")
        self._pool = None
        self._what = what

    @property
    def batch_size(self) -> int:
        """Rows per engine batch: 1 (each row journaled at once) or 8 per thread."""
        return 1 if self.concurrency == 1 else 8 * self.concurrency

    def map(self, fn, items) -> list:
        items = list(items)
        if self.concurrency == 1 or len(items) <= 1:
            return [fn(x) for x in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrency,
                                            thread_name_prefix=f"scoreband-{self._what}")
        futures = [self._pool.submit(contextvars.copy_context().run, fn, x) for x in items]
        return [f.result() for f in futures]

def make_judge(spec: str, prompt: JudgePrompt, *, offered: dict | None = None, **kw) -> Judge:
    """``hf:DIR_OR_ID`` or ``openai:MODEL`` (see ``JUDGES``) with its options ``kw`` (an
    option the judge does not take is an error naming it); ``offered``: options given to
    every judge alike (the CLI's), each judge taking those it knows."""
    return JUDGES.create(spec, prompt, offered=offered, **kw)


class JudgeStage(Stage):
    """The judge on the row engine: one row per request, ``concurrency`` requests in
    flight for a judge that allows it (see the module docstring). With one request at a
    time each finished row is journaled at once (a judge call is the expensive part); with
    more, a batch of ``8 * concurrency`` rows at a time."""

    error_column = ERROR_COLUMN["judge"]
    batch_size = 1
    outputs = {"judge_missing_mass": np.nan, "judge_unseen_mass": np.nan,
               "judge_position": "", ERROR_COLUMN["judge"]: ""}

    def __init__(self, judge: Judge, *, image_col: str = "image",
                 instruction_col: str = "instruction", response_col: str = "response",
                 base_dir=None, concurrency: int = 1, stop_after: int = 10):
        super().__init__(base_dir)
        self.judge, self.cols = judge, (image_col, instruction_col, response_col)
        self.inputs = {"image_col": image_col, "instruction_col": instruction_col,
                       "response_col": response_col}
        self.label = f"judging with {judge.name}"
        self._setup = json.dumps(judge.describe(), sort_keys=True)
        self.pool = RowPool(judge, concurrency)
        self.concurrency = self.pool.concurrency
        self.batch_size = self.pool.batch_size
        self.breaker = _Breaker(stop_after)

    def _cells(self, df, i):
        img, ins, resp = (cell_text(df, c, i) for c in self.cols)
        return img, ins, resp, resolve_path(img, self.base_dir) if img else None

    def key(self, df, i):
        img, ins, resp, f = self._cells(df, i)
        p = self.judge.prompt
        return row_key(self._setup, img, image_digest(f), ins, resp, p.template, p.rubric,
                       p.delimiter)

    def _one(self, cells) -> dict:
        try:
            return _judge_row(self.judge, *cells, self.cols, self.breaker)
        except Exception as e:  # noqa: BLE001 - as the engine does: one row never ends a batch
            msg = " ".join(str(e).split())[:300]
            return {"error": f"unexpected {type(e).__name__}: {msg}"}

    def process(self, df, positions):
        return self.pool.map(self._one, [self._cells(df, i) for i in positions])

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
        info = self.judge.run_info() if hasattr(self.judge, "run_info") else {}
        return {"judge": {**self.judge.describe(), **info,
                          "concurrency": self.concurrency}}

    def summary(self):
        out = {}
        if self.breaker.cause is not None:
            out["stopped"] = self.breaker.cause
        check = getattr(self.judge, "image_check", None)
        if check and check.get("image_seen") is False:
            out["blind"] = check.get("message", "the model does not see the images")
        return out


def judge_stage(judge_spec: str, prompt: dict, judge_options: dict, *,
                concurrency: int = 1, stop_after: int = 10, **cols) -> JudgeStage:
    """A :class:`JudgeStage` built from plain values (what a Ray actor receives):
    ``prompt`` holds :class:`JudgePrompt`'s arguments."""
    judge = make_judge(judge_spec, JudgePrompt(**prompt),
                       offered={**judge_options, "concurrency": concurrency})
    return JudgeStage(judge, concurrency=concurrency, stop_after=stop_after, **cols)


def extract_judge_table(df: pd.DataFrame, judge: Judge, *, image_col: str = "image",
                        instruction_col: str = "instruction", response_col: str = "response",
                        base_dir=None, journal: Path | None = None,
                        progress=None, concurrency: int = 1,
                        stop_after: int = 10) -> tuple[pd.DataFrame, int]:
    """Judge every row; returns ``(table with feature columns, number of failed rows)``.

    Added columns: ``logp_<label>`` per label (log-softmax over the labels, so they can be
    fed to ``--features 'logp_*'``), ``judge_expected``, ``judge_argmax``, ``judge_entropy``,
    ``judge_max_prob``, ``judge_missing_mass``, ``judge_unseen_mass``, ``judge_position``,
    ``judge_error``, ``judge_model``. ``concurrency``: rows in flight at once (a judge that
    allows it); ``stop_after``: rows failing at the judge in a row before the rest are not
    asked (0: never). ``table.attrs`` holds ``reused_rows`` and the run's ``summary``
    (``stopped``: why it stopped asking).
    """
    stage = JudgeStage(judge, image_col=image_col, instruction_col=instruction_col,
                       response_col=response_col, base_dir=base_dir,
                       concurrency=concurrency, stop_after=stop_after)
    run = run_rows(df, stage, journal=journal, progress=progress)
    run.table.attrs["reused_rows"] = run.reused
    run.table.attrs["summary"] = run.summary
    return run.table, len(run.failures)
