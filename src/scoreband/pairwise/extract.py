"""The pairwise judge: a rubric prompt showing two responses, the verdict tokens' log-probs
read at the verdict position, in both presentation orders (SPEC section 13).

The verdict labels are ``A``, ``B`` and optionally a tie token; every tokenizer spelling of
a label is merged as for scores (:mod:`scoreband.judges.tokens`, used by the endpoint and
local judges through :class:`PairPrompt`, a :class:`scoreband.judges.base.JudgePrompt` whose
labels are the verdicts). Each pair is asked twice, A/B and B/A; the second answer is mapped
back (its "A" is the original B), and

* ``pair_ab_p_a ...``, ``pair_ba_p_a ...``: p(A better), p(B better), p(tie) per order;
* ``pair_p_a`` = (p_AB(A) + p_BA(A)) / 2 (and B, tie alike): the order-averaged verdict;
* ``pair_pref`` = pair_p_a - pair_p_b (an antisymmetric feature for ``pairwise-triage``);
* ``pair_position_bias`` = (p_AB(A) - p_BA(A)) / 2: how much showing a response first
  helps it.

A pair whose responses are identical, or whose judge answered with no verdict token, gets
``pair_error`` and no verdict (reported, never a crash).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.engine.rows import Stage
from scoreband.errors import ERROR_COLUMN, InputError, RowError
from scoreband.judges.answers import Breaker, checked_answer
from scoreband.judges.base import JudgeError, JudgeInputError, JudgePrompt

__all__ = ["PairPrompt", "PAIR_TEMPLATE", "PAIR_RUBRIC", "PAIR_COLUMNS", "judge_pairs",
           "make_pair_judge", "order_average", "PairJudgeStage", "pair_judge_stage"]

PAIR_TEMPLATE = (
    "You are an impartial judge comparing two responses about an image.\n"
    "Instruction: {instruction}\n"
    "Response A: {response}\n"
    "Response B: {response_b}\n"
    "Rubric: {rubric}\n"
    "Explain briefly, then finish with '{delimiter} X' where X is A or B{tie_clause}."
)
PAIR_RUBRIC = ("prefer the response that fits the image more completely and correctly; "
               "ignore length and style, and the order in which the responses are shown.")
#: the columns judge_pairs adds
PAIR_COLUMNS = ("pair_ab_p_a", "pair_ab_p_b", "pair_ab_p_tie", "pair_ba_p_a", "pair_ba_p_b",
                "pair_ba_p_tie", "pair_p_a", "pair_p_b", "pair_p_tie", "pair_pref",
                "pair_position_bias", "pair_error")


@dataclass(frozen=True)
class PairPrompt(JudgePrompt):
    """A pairwise judge prompt; ``template`` may use {instruction}, {response} (the first
    response shown), {response_b} (the second), {rubric}, {delimiter}, {tie_clause}.
    ``tie``: the tie token (None: A or B only)."""

    lo: int = 1
    hi: int = 2
    template: str = PAIR_TEMPLATE
    rubric: str = PAIR_RUBRIC
    delimiter: str = "Verdict:"
    tie: str | None = "tie"
    first_token_fallback: bool = False  # "A careful look ..." is not a verdict
    label_kind = "verdict"
    label_fix = ("give a tie token this tokenizer keeps whole (`--tie-token`, e.g. C or "
                 "equal), or ask for A or B only (`--no-tie`)")

    def render(self, instruction: str, response: str, response_b: str = "r") -> str:
        try:
            return self.template.format(
                instruction=instruction, response=response, response_b=response_b,
                rubric=self.rubric, delimiter=self.delimiter,
                tie_clause=(f", or {self.tie} when neither is better" if self.tie else ""),
                lo=self.lo, hi=self.hi)
        except KeyError as e:
            raise InputError(f"the pairwise template names an unknown field {{{e.args[0]}}};"
                             " it may use {instruction}, {response}, {response_b}, {rubric}, "
                             "{delimiter}, {tie_clause}") from None

    @property
    def labels(self) -> list[str]:
        return ["A", "B"] + ([self.tie] if self.tie else [])


def order_average(p_ab, p_ba_shown) -> dict[str, np.ndarray]:
    """The columns from the verdict probabilities of both orders: ``p_ab`` (n, 3) with the
    original A shown first; ``p_ba_shown`` (n, 3) as answered with B shown first (its
    "A" is the original B).

    >>> c = order_average(np.array([[0.7, 0.2, 0.1]]), np.array([[0.5, 0.4, 0.1]]))
    >>> round(float(c["pair_p_a"][0]), 3), round(float(c["pair_position_bias"][0]), 3)
    (0.55, 0.15)
    """
    ab = np.asarray(p_ab, float)
    ba = np.asarray(p_ba_shown, float)[:, [1, 0, 2]]  # mapped back
    avg = (ab + ba) / 2
    return {"pair_ab_p_a": ab[:, 0], "pair_ab_p_b": ab[:, 1], "pair_ab_p_tie": ab[:, 2],
            "pair_ba_p_a": ba[:, 0], "pair_ba_p_b": ba[:, 1], "pair_ba_p_tie": ba[:, 2],
            "pair_p_a": avg[:, 0], "pair_p_b": avg[:, 1], "pair_p_tie": avg[:, 2],
            "pair_pref": avg[:, 0] - avg[:, 1],
            "pair_position_bias": (ab[:, 0] - ba[:, 0]) / 2}


def _normalise(logp) -> np.ndarray | None:
    """Probabilities over the verdict labels (3 columns, tie 0 without a tie token); None
    when the judge put no mass on any verdict token."""
    lp = np.asarray(logp, float)
    if not np.isfinite(lp).any():
        return None
    p = np.exp(lp - np.max(lp[np.isfinite(lp)]))
    p = np.where(np.isfinite(lp), p, 0.0)
    p = p / p.sum()
    return np.pad(p, (0, 3 - len(p)))


class SimulatedPairRunner:
    """The embedded world's simulated pairwise judge on a pair table with each response's
    true quality (``true_a`` / ``true_b`` columns). SIMULATED: no model runs."""

    simulated = True

    def __init__(self, spec: str, *, true_a: str = "true_a", true_b: str = "true_b",
                 seed: int = 0):
        from scoreband.world.pairwise import simulated_pair_judge

        self.judge = simulated_pair_judge(spec)
        self.name = f"simulated:{spec}"
        self.cols = (true_a, true_b)
        self.seed = seed

    def describe(self) -> dict:
        return {"judge": self.name, "simulated": True, **self.judge.__dict__}

    def run(self, df: pd.DataFrame, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from scoreband.tables import NA_TEXT
        from scoreband.world.pairwise import pair_logprobs

        missing = [c for c in self.cols if c not in df.columns]
        if missing:
            raise InputError(f"the simulated pairwise judge reads each response's true "
                             f"quality: column(s) {missing} not in the table (a table from "
                             "scoreband.world.pairwise.world_pairs has them)")
        a = pd.to_numeric(df[self.cols[0]], errors="coerce").to_numpy(float)[rows]
        b = pd.to_numeric(df[self.cols[1]], errors="coerce").to_numpy(float)[rows]
        # a row without both true qualities is not judged: a pair_error naming the column
        # (never a row silently left without probabilities)
        self.row_errors = {}
        for k, i in enumerate(rows):
            for col, v in ((self.cols[0], a[k]), (self.cols[1], b[k])):
                if not np.isfinite(v):
                    cell = df[col].iloc[int(i)]
                    text = "" if cell is None or (isinstance(cell, float) and np.isnan(cell)) \
                        else str(getattr(cell, "text", None) or cell)
                    what = "is empty" if not text.strip() else \
                        f"is empty ({text[:40]!r})" if text.strip() in NA_TEXT else \
                        f"holds {text[:40]!r}, not a number"
                    self.row_errors[int(i)] = (f"the simulated judge reads each response's "
                                               f"true quality: {col!r} {what}")
                    break
        ok = np.isfinite(a) & np.isfinite(b)
        # each row's reading noise from its own content: the same verdicts whatever the
        # batch or the rows around it (a resumed run equals an uninterrupted one)
        keys = [self.key(df, int(i)) for i in rows]
        ab = np.exp(pair_logprobs(self.judge, np.where(ok, a, 0.0), np.where(ok, b, 0.0),
                                  seed=self.seed, stream=0, row_keys=keys))
        ba = np.exp(pair_logprobs(self.judge, np.where(ok, b, 0.0), np.where(ok, a, 0.0),
                                  seed=self.seed, stream=1, row_keys=keys))
        return ab, ba

    def key(self, df: pd.DataFrame, i: int) -> str:
        """The row's journal key: the judge, the seed and the two qualities."""
        from scoreband.engine.journal import row_key

        return row_key(self.name, repr(self.judge), self.seed,
                       *(df[c].iloc[i] if c in df.columns else "" for c in self.cols))


class ModelPairRunner:
    """A model judge (``openai:MODEL`` endpoint or ``hf:MODEL`` local) asked each order
    through its public ``judge(image_path, text)``: the prompt's labels are the verdicts,
    so the judge folds every spelling of "A", "B" and the tie token at the verdict
    position. Each answer passes the score judge's checks
    (:func:`scoreband.judges.answers.checked_answer`: no verdict token, a top-k list too
    short to show the verdicts it leaves out); ``concurrency`` pairs in flight for an
    endpoint and the run stopped after ``stop_after`` pairs in a row fail at the judge -
    the score judge's mechanisms (:class:`scoreband.judge_stage.RowPool`,
    :class:`scoreband.judges.answers.Breaker`)."""

    simulated = False

    def __init__(self, judge, prompt: PairPrompt, *, image_col: str, response_a: str,
                 response_b: str, instruction_col: str | None = None,
                 instruction: str = "Which response describes the image better?",
                 root=None, concurrency: int = 1, stop_after: int = 10):
        from scoreband.judge_stage import RowPool  # the row engine's side: not at import

        self.judge, self.prompt = judge, prompt
        self.name = judge.name
        self.image_col, self.ra, self.rb = image_col, response_a, response_b
        self.instruction_col, self.instruction = instruction_col, instruction
        self.root = root
        self.pool = RowPool(judge, concurrency, "pairs")
        self.breaker = Breaker(stop_after)

    def describe(self) -> dict:
        return self.judge.describe()

    def _instruction(self, df: pd.DataFrame, i: int) -> str:
        """The row's instruction: its ``instruction_col`` cell where the table has that
        column (`judge --pairwise` names "instruction" by default), else the one given."""
        if self.instruction_col and self.instruction_col in df.columns:
            return str(df[self.instruction_col].iloc[i])
        return self.instruction

    def _image(self, df: pd.DataFrame, i: int):
        from scoreband.files import resolve_path

        return resolve_path(str(df[self.image_col].iloc[i]), self.root)

    def key(self, df: pd.DataFrame, i: int) -> str:
        """The row's journal key: the judge, the prompt, the image file's content, the
        instruction and both responses."""
        from scoreband.engine.journal import row_key
        from scoreband.images import image_digest

        p = self.prompt
        ins = self._instruction(df, i)
        return row_key(json.dumps(self.describe(), sort_keys=True, default=str), p.template,
                       p.rubric, p.delimiter, p.tie, image_digest(self._image(df, i)), ins,
                       df[self.ra].iloc[i], df[self.rb].iloc[i])

    def _one(self, cells) -> tuple:
        """Both orders of one pair: ``(p_ab, p_ba as answered, error)``."""
        img, ins, a, b = cells
        try:
            out = []
            for x, y in ((a, b), (b, a)):
                res = checked_answer(self.judge, img, self.prompt.render(ins, x, y),
                                     self.breaker)
                out.append(_normalise(res.logp))
        except JudgeError as e:
            self.breaker.settle(e)
            # the row's own input (a missing image) names its column
            return None, None, (f"{self.image_col}: {e}" if isinstance(e, JudgeInputError)
                                else str(e))
        except Exception as e:  # noqa: BLE001 - as the engine does: one row never ends a run
            return None, None, f"unexpected {type(e).__name__}: {' '.join(str(e).split())[:300]}"
        self.breaker.settle(None)
        return out[0], out[1], ""

    def run(self, df: pd.DataFrame, rows: np.ndarray):
        cells = [(self._image(df, i), self._instruction(df, i), str(df[self.ra].iloc[i]),
                  str(df[self.rb].iloc[i])) for i in rows]
        ab = np.full((len(rows), 3), np.nan)
        ba = np.full((len(rows), 3), np.nan)
        errors: dict[int, str] = {}
        for k, (i, (pab, pba, err)) in enumerate(zip(rows, self.pool.map(self._one, cells),
                                                     strict=True)):
            if err:
                errors[int(i)] = err
            else:
                ab[k], ba[k] = pab, pba
        self.row_errors = errors
        return ab, ba


def make_pair_judge(spec: str, *, prompt: PairPrompt | None = None, **kw):
    """``sim-pair-strong`` / ``sim-pair-biased[:bias=0.2]`` (simulated, reads ``true_a`` /
    ``true_b``), or ``openai:MODEL`` / ``hf:MODEL`` through the judge registry (``kw``: the
    judge's options and the runner's columns)."""
    if spec.startswith("sim-pair") or spec.startswith("sim:"):
        return SimulatedPairRunner(spec.removeprefix("sim:"),
                                   **{k: v for k, v in kw.items()
                                      if k in ("true_a", "true_b", "seed")})
    from scoreband.judge_stage import make_judge

    prompt = prompt or PairPrompt()
    runner_kw = {k: kw.pop(k) for k in ("image_col", "response_a", "response_b",
                                        "instruction_col", "instruction", "root",
                                        "concurrency", "stop_after")
                 if k in kw}
    for k in ("true_a", "true_b", "seed"):
        kw.pop(k, None)
    return ModelPairRunner(make_judge(spec, prompt, **kw), prompt, **runner_kw)


class PairJudgeStage(Stage):
    """The pairwise judge on the row engine (:mod:`scoreband.engine.rows`): both orders of
    each pair asked, the answers journaled row by row (``OUT.partial.jsonl``: a killed run
    resumes where it stopped), the columns of :data:`PAIR_COLUMNS` made from the records.
    A pair of identical responses, an answer with no verdict token or a judge error gets
    ``pair_error`` and no verdict."""

    error_column = ERROR_COLUMN["pairwise"]
    outputs = {c: np.nan for c in PAIR_COLUMNS if c != "pair_error"}

    def __init__(self, runner, *, response_a: str | None = None,
                 response_b: str | None = None, base_dir=None):
        super().__init__(base_dir)
        self.runner = runner
        self.ra, self.rb = response_a, response_b
        # the columns the judge reads, refused before any pair is asked when absent
        self.inputs = {k: v for k, v in (("--a-col", response_a), ("--b-col", response_b))
                       if v}
        if runner.simulated:
            self.inputs.update({"the simulated judge's true_a": runner.cols[0],
                                "the simulated judge's true_b": runner.cols[1]})
        if not runner.simulated and getattr(runner, "root", None) is None:
            runner.root = base_dir  # image paths relative to the table's folder
        # a model: every row journaled at once, or 8 per thread in flight
        self.batch_size = 256 if runner.simulated else runner.pool.batch_size
        self.label = f"judging pairs with {runner.name}"

    def key(self, df, i):
        return self.runner.key(df, i)

    def process(self, df, positions):
        recs: dict[int, dict] = {}
        ask = []
        for i in positions:
            if self.ra and self.rb and self.ra in df.columns and self.rb in df.columns and \
                    str(df[self.ra].iloc[i]).strip() == str(df[self.rb].iloc[i]).strip():
                recs[i] = {"ab": None, "ba": None,
                           "error": "the two responses are identical: nothing to prefer"}
            else:
                ask.append(i)
        if ask:
            ab, ba = self.runner.run(df, np.asarray(ask))
            why = getattr(self.runner, "row_errors", {})
            for k, i in enumerate(ask):
                if int(i) in why:
                    recs[i] = {"ab": None, "ba": None, "error": why[int(i)]}
                else:
                    recs[i] = {"ab": [float(v) for v in ab[k]],
                               "ba": [float(v) for v in ba[k]], "error": ""}
        return [recs[i] for i in positions]

    def columns(self, records):
        n = len(records)
        ab, ba = np.full((n, 3), np.nan), np.full((n, 3), np.nan)
        for i, r in enumerate(records):
            if r.get("ab") is not None and not r.get("error"):
                ab[i], ba[i] = r["ab"], r["ba"]
        out = order_average(ab, ba)  # ba as answered (its "A" is the original B)
        out["pair_error"] = np.array([r.get("error") or "" for r in records], dtype=object)
        return out

    def constants(self):
        return {}

    def components(self):
        judge = getattr(self.runner, "judge", None)
        info = judge.run_info() if hasattr(judge, "run_info") else {}
        extra = {"concurrency": self.runner.pool.concurrency} if hasattr(self.runner, "pool") \
            else {}
        return {"pair_judge": {**self.runner.describe(), **info, **extra}}

    def summary(self):
        """What the run's report must say: it stopped asking (the breaker), or the model
        does not see the images (``--allow-blind``)."""
        out = {}
        breaker = getattr(self.runner, "breaker", None)
        if breaker is not None and breaker.cause is not None:
            out["stopped"] = breaker.cause
        check = getattr(getattr(self.runner, "judge", None), "image_check", None)
        if check and check.get("image_seen") is False:
            out["blind"] = check.get("message", "the model does not see the images")
        return out


def pair_judge_stage(judge_spec: str, *, tie: str | None = "tie", judge_options=None,
                     response_a: str = "response_a", response_b: str = "response_b",
                     image_col: str = "image", instruction_col: str | None = None,
                     instruction: str = "Which response describes the image better?",
                     root=None, seed: int = 0, base_dir=None, rubric: str | None = None,
                     template: str | None = None) -> PairJudgeStage:
    """A :class:`PairJudgeStage` from plain values (what the CLI and a Ray actor build);
    ``rubric`` / ``template``: the pairwise prompt's (:class:`PairPrompt`; checked here)."""
    prompt = PairPrompt(tie=tie, **{k: v for k, v in (("rubric", rubric),
                                                      ("template", template))
                                    if v is not None})
    prompt.render("i", "a", "b")  # an unknown field in the template: said before any work
    kw: dict = {"seed": seed}
    if not judge_spec.startswith("sim"):
        kw.update(image_col=image_col, response_a=response_a, response_b=response_b,
                  instruction_col=instruction_col, instruction=instruction,
                  root=None if root is None else Path(root), **(judge_options or {}))
    runner = make_pair_judge(judge_spec, prompt=prompt, **kw)
    return PairJudgeStage(runner, response_a=response_a, response_b=response_b,
                          base_dir=base_dir)


def judge_pairs(df: pd.DataFrame, runner, *, response_a: str | None = None,
                response_b: str | None = None, journal: Path | None = None
                ) -> tuple[pd.DataFrame, list[RowError]]:
    """Every row of a pair table with :data:`PAIR_COLUMNS`; rows that cannot be judged
    (identical responses, no verdict token, a judge error) keep NaN and a ``pair_error``.
    Runs the row engine (:class:`PairJudgeStage`; ``journal``: where finished rows are kept
    for a resumed run)."""
    from scoreband.engine.rows import run_rows

    df = df.reset_index(drop=True)
    for c in (response_a, response_b):
        if c and c not in df.columns:
            raise InputError(f"response column {c!r} not in the table")
    stage = PairJudgeStage(runner, response_a=response_a, response_b=response_b)
    run = run_rows(df, stage, journal=journal)
    errors = [RowError(str(i), response_b if why.startswith("the two responses")
                       else "pair_error", why + "; the pair is skipped", int(i))
              for i, why in sorted(run.failures.items())]
    return run.table, errors
