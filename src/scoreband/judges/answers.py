"""One judged row, apart from the row engine: the checks on a judge's answer
(:func:`judge_row`), the score-token columns of ``scoreband judge`` (:func:`feature_columns`)
and the breaker that stops a run after failures in a row. Used by the judge stage
(:mod:`scoreband.judges.extract`) and by the readers of answers written elsewhere
(:mod:`scoreband.formats`), which must not import the row engine."""

from __future__ import annotations

import threading

import numpy as np

from scoreband.judges.base import (
    MAX_UNSEEN_SHARE,
    Judge,
    JudgeError,
    JudgeInputError,
    JudgeStop,
)
from scoreband.logprobs import entropy, expected_score, max_prob

__all__ = ["Breaker", "judge_row", "feature_columns"]


class Breaker:
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


def judge_row(judge: Judge, img, ins, resp, img_file, cols, breaker: Breaker | None = None
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


def feature_columns(raw: np.ndarray, ok: np.ndarray, labels) -> dict[str, np.ndarray]:
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
