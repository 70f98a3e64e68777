"""Extract score-token log-probs from a real VLM judge for every row of a table.

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
import threading
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.engine.cells import cell_text, resolve_path
from scoreband.engine.journal import row_key
from scoreband.engine.rows import Stage, run_rows
from scoreband.errors import InputError
from scoreband.images import image_digest
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
from scoreband.logprobs import entropy, expected_score, max_prob

__all__ = ["JudgePrompt", "JudgeResult", "Judge", "JudgeError", "make_judge",
           "extract_judge_table", "JudgeStage", "judge_stage", "DEFAULT_TEMPLATE", "JUDGES"]

def make_judge(spec: str, prompt: JudgePrompt, *, offered: dict | None = None, **kw) -> Judge:
    """``hf:DIR_OR_ID`` or ``openai:MODEL`` (see ``JUDGES``) with its options ``kw`` (an
    option the judge does not take is an error naming it); ``offered``: options given to
    every judge alike (the CLI's), each judge taking those it knows."""
    return JUDGES.create(spec, prompt, offered=offered, **kw)


class _Breaker:
    """Counts rows that fail at the judge one after another (in the order they finish);
    after ``limit`` of them (0: never), or at once on :class:`JudgeStop`, it opens: no
    further row is asked. Thread-safe."""

    def __init__(self, limit: int):
        self.limit = int(limit)
        self.streak = 0
        self.cause: str | None = None   # the whole reason (the run's summary)
        self.short = ""                 # what each row not asked says
        self._lock = threading.Lock()

    def record(self, error: str, *, stop: bool = False) -> None:
        with self._lock:
            if self.cause is not None:
                return
            if stop:
                self.cause, self.short = error, error.split(": ")[0]
                return
            self.streak = self.streak + 1 if error else 0
            if error and self.limit and self.streak >= self.limit:
                self.short = f"{self.streak} rows in a row failed at the judge"
                self.cause = f"{self.short}; the last: {error}"


def _judge_row(judge: Judge, img, ins, resp, img_file, cols, breaker: _Breaker | None = None
               ) -> dict:
    """Judge one row; the journal record (``error`` says why a row failed)."""
    image_col, instruction_col, response_col = cols
    rec = {"logp": None, "judge_missing_mass": None, "judge_unseen_mass": None,
           "judge_position": "", "error": ""}
    try:
        for col, v in ((instruction_col, ins), (response_col, resp)):
            if v is None:
                raise JudgeInputError(f"{col}: empty cell")
        if img is None:
            raise JudgeInputError(f"{image_col}: no image path (empty cell)")
        if breaker is not None and breaker.cause is not None:
            raise JudgeStop(f"not asked: the run stopped ({breaker.short})")
        try:
            res = judge.judge(img_file, judge.prompt.render(ins, resp))
        except JudgeInputError as e:
            raise JudgeInputError(f"{image_col}: {e}") from None
        rec.update(judge_missing_mass=res.missing_mass, judge_unseen_mass=res.unseen_share)
        if not np.isfinite(res.logp).any():
            raise JudgeError(f"none of the score labels {judge.prompt.labels} is among the "
                             "judge's tokens at the score position")
        if res.unseen_share > MAX_UNSEEN_SHARE:
            seen = [lab for lab, x in zip(judge.prompt.labels, res.logp, strict=True)
                    if np.isfinite(x)]
            k = getattr(judge, "top_logprobs", None)
            raise JudgeError(
                f"only the labels {seen} are in the judge's top-{k} list; the others may "
                f"hold up to {res.unseen_share:.0%} of the label probability (the list "
                f"leaves out {res.missing_mass:.2f} of the mass), so renormalising over the "
                "listed ones would read as a confident judge. Not scored: ask for more "
                f"top log-probs (at least {2 * len(judge.prompt.labels)})")
        rec.update(logp=[float(x) if np.isfinite(x) else None for x in res.logp],
                   judge_position=res.position)
    except JudgeStop as e:
        rec["error"] = str(e)
        if breaker is not None:
            breaker.record(str(e), stop=True)
    except JudgeInputError as e:
        rec["error"] = str(e)  # the row's own input: says nothing about the judge
    except JudgeError as e:
        rec["error"] = str(e)
        if breaker is not None:
            breaker.record(str(e))
    else:
        if breaker is not None:
            breaker.record("")
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
    """The judge on the row engine: one row per request, ``concurrency`` requests in
    flight for a judge that allows it (see the module docstring). With one request at a
    time each finished row is journaled at once (a judge call is the expensive part); with
    more, a batch of ``8 * concurrency`` rows at a time."""

    error_column = "judge_error"
    batch_size = 1
    outputs = {"judge_missing_mass": np.nan, "judge_unseen_mass": np.nan,
               "judge_position": "", "judge_error": ""}

    def __init__(self, judge: Judge, *, image_col: str = "image",
                 instruction_col: str = "instruction", response_col: str = "response",
                 base_dir=None, concurrency: int = 1, stop_after: int = 10):
        super().__init__(base_dir)
        self.judge, self.cols = judge, (image_col, instruction_col, response_col)
        self.inputs = {"image_col": image_col, "instruction_col": instruction_col,
                       "response_col": response_col}
        self.label = f"judging with {judge.name}"
        self._setup = json.dumps(judge.describe(), sort_keys=True)
        self.concurrency = int(concurrency)
        if self.concurrency < 1:
            raise InputError(f"`concurrency` {concurrency}: give 1 or more")
        if self.concurrency > 1 and not getattr(judge, "concurrent", False):
            raise InputError(f"`concurrency` {concurrency}: {judge.name} judges one row at a "
                             "time (a local model); several requests at once are for "
                             "endpoint judges (openai:)")
        self.batch_size = 1 if self.concurrency == 1 else 8 * self.concurrency
        self.breaker = _Breaker(stop_after)
        self._pool = None

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
        cells = [self._cells(df, i) for i in positions]
        if self.concurrency == 1 or len(cells) == 1:
            return [self._one(c) for c in cells]
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="scoreband-judge")
        # each row in a copy of this thread's context (the output policy lives in one)
        futures = [self._pool.submit(contextvars.copy_context().run, self._one, c)
                   for c in cells]
        return [f.result() for f in futures]

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
