"""One judged row, apart from the row engine: the one parser of a chat-completions answer
(:func:`parse_chat_answer`), the checks on a judge's answer (:func:`judge_row`), the
score-token columns of ``scoreband judge`` (:func:`feature_columns`) and the breaker that
stops a run after failures in a row. Used by the judge stage
(:mod:`scoreband.judge_stage`) and by the readers of answers written elsewhere
(:mod:`scoreband.formats`), which must not import the row engine."""

from __future__ import annotations

import threading

import numpy as np

from scoreband.judges.base import (
    MAX_UNSEEN_SHARE,
    Judge,
    JudgeError,
    JudgeInputError,
    JudgePrompt,
    JudgeResult,
    JudgeStop,
)
from scoreband.judges.tokens import (
    canonical_token,
    find_score_position,
    fold_top_logprobs,
    unseen_label_share,
)
from scoreband.logprobs import entropy, expected_score, max_prob

__all__ = ["Breaker", "checked_answer", "judge_row", "feature_columns", "parse_chat_answer"]


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

    def settle(self, error: JudgeError | None) -> None:
        """Record how one row ended: ``None`` (judged), a :class:`JudgeStop` (opens the
        breaker at once), a :class:`JudgeInputError` (the row's own input: says nothing
        about the judge, not counted) or another :class:`JudgeError` (a failure at the
        judge)."""
        if isinstance(error, JudgeStop):
            self.record(str(error), stop=True)
        elif not isinstance(error, JudgeInputError):
            self.record("" if error is None else str(error))

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


def checked_answer(judge: Judge, img_file, text: str, breaker: Breaker | None = None
                   ) -> JudgeResult:
    """Ask ``judge`` one prompt and check its answer: the one rule for every judged answer,
    a score or a verdict (``judge.prompt.label_kind``). Raises :class:`JudgeStop` when
    ``breaker`` is open (not asked), :class:`JudgeError` when no label is among the
    judge's tokens at the label position, or when the top-k list is too short to show the
    labels it leaves out (they may hold more than ``MAX_UNSEEN_SHARE`` of the label
    probability: renormalising over the listed ones would read as a certain judge, e.g.
    p(A) = 1 from a top-1 list)."""
    if breaker is not None and breaker.cause is not None:
        raise JudgeStop(f"not asked: the run stopped ({breaker.short})")
    res = judge.judge(img_file, text)
    prompt = judge.prompt
    kind = getattr(prompt, "label_kind", "score")
    why = None
    if not np.isfinite(res.logp).any():
        why = (f"none of the {kind} labels {prompt.labels} is among the judge's tokens at "
               f"the {kind} position")
    elif res.unseen_share > MAX_UNSEEN_SHARE:
        seen = [lab for lab, x in zip(prompt.labels, res.logp, strict=True)
                if np.isfinite(x)]
        k = getattr(judge, "top_logprobs", None)
        why = (
            f"only the labels {seen} are in the judge's top-{k} list; the others may hold "
            f"up to {res.unseen_share:.0%} of the {kind} probability (the list leaves out "
            f"{res.missing_mass:.2f} of the mass), so renormalising over the listed ones "
            "would read as a confident judge. Not judged: ask for more top log-probs "
            f"(`--top-logprobs`, at least {2 * len(prompt.labels)})")
    if why is not None:
        err = JudgeError(why)
        err.result = res  # what was read, for the record (the masses)
        raise err
    return res


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
        try:
            res = checked_answer(judge, img_file, judge.prompt.render(ins, resp), breaker)
        except JudgeInputError as e:
            raise JudgeInputError(f"{image_col}: {e}") from None
        rec.update(judge_missing_mass=res.missing_mass, judge_unseen_mass=res.unseen_share)
        rec.update(logp=[float(x) if np.isfinite(x) else None for x in res.logp],
                   judge_position=res.position)
    except JudgeError as e:
        rec["error"] = str(e)
        read = getattr(e, "result", None)
        if read is not None:
            rec.update(judge_missing_mass=read.missing_mass,
                       judge_unseen_mass=read.unseen_share)
        if breaker is not None:
            breaker.settle(e)
    else:
        if breaker is not None:
            breaker.settle(None)
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


def parse_chat_answer(resp, prompt: JudgePrompt, *, top_logprobs: int = 20,
                      max_tokens: int = 256, model: str = "the model") -> JudgeResult:
    """The label distribution at the score (or verdict) position of one chat-completions
    answer (``choices[0].logprobs.content[]``): the position found after the last
    ``prompt.delimiter`` (searched from the end, so a number in the reasoning is not
    read), every spelling of a label merged ("4", " 4", "▁4"), labels missing from the
    ``top_logprobs`` list given -inf and the mass they may hold measured. The one parser of
    the endpoint judge and of the readers of answers written elsewhere (Inspect logs, batch
    answers). ``top_logprobs`` / ``max_tokens``: what was asked (for the messages);
    ``model``: its name (for the messages). Anything malformed is a :class:`JudgeError`
    saying what, never another exception.
    """
    try:
        return _parse_chat_answer(resp, prompt, top_logprobs, max_tokens, model)
    except JudgeError:
        raise
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
        raise JudgeError(f"malformed answer ({type(e).__name__}: {e}): "
                         f"{str(resp)[:160]}") from None


def _parse_chat_answer(resp, prompt, top_logprobs, max_tokens, model) -> JudgeResult:
    labels = prompt.labels
    choices = resp.get("choices") if isinstance(resp, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise JudgeError(f"malformed response (no choices): {str(resp)[:200]}")
    choice = choices[0]
    finish = choice.get("finish_reason")
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    answer = message.get("content")
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not content:
        _no_tokens(model, finish, answer, message.get("refusal"),
                   has_logprobs=isinstance(content, list), max_tokens=max_tokens)
    if not isinstance(content, list) or not all(isinstance(c, dict) for c in content):
        raise JudgeError(f"malformed logprobs.content (expected a list of token objects, "
                         f"got {type(content).__name__}): {str(content)[:120]}")
    texts = [str(c.get("token", "")) for c in content]
    kind = getattr(prompt, "label_kind", "score")  # a score or a verdict
    cut = (f" (finish_reason 'length': the answer was cut at `max_tokens` "
           f"{max_tokens}; raise it)") if finish == "length" else ""
    pos = find_score_position(texts, prompt.delimiter)
    where = "generated"
    if pos is None:
        first = next((i for i, t in enumerate(texts) if canonical_token(t)), None)
        if (first is None or canonical_token(texts[first]) not in labels
                or not prompt.first_token_fallback):
            raise JudgeError(f"no {prompt.delimiter!r} in the answer and it does not "
                             f"start with a {kind}{cut}: {''.join(texts)[-120:]!r}")
        pos, where = first, "first-token"
    if pos >= len(content):
        raise JudgeError(f"the answer ends at the {kind} delimiter, with no {kind} after "
                         "it" + (cut or f" (finish_reason {finish!r})"))
    nxt = texts[pos + 1] if pos + 1 < len(texts) else ""
    if nxt[:1].isdigit() and canonical_token(texts[pos])[-1:].isdigit():
        raise JudgeError(f"the score was spelled with several tokens ({texts[pos]!r} + "
                         f"{nxt!r}); one next-token distribution cannot hold it. Use a "
                         "scale whose labels are single tokens (e.g. 1-9)")
    top = content[pos].get("top_logprobs")
    if not isinstance(top, list) or not top or not all(isinstance(t, dict) for t in top):
        # the chosen token's own log-prob alone would read as a certain judge
        raise JudgeError(f"the endpoint returned no top_logprobs list at the {kind} "
                         f"position (asked for {top_logprobs}); one token's "
                         "log-prob is not a distribution over the labels")
    entries = [(t.get("token"), t.get("logprob")) for t in top]
    try:
        lp, missing = fold_top_logprobs(entries, labels)
        share, _ = unseen_label_share(entries, labels, top_logprobs)
    except (ValueError, TypeError, AttributeError) as e:
        raise JudgeError(f"bad top_logprobs at the {kind} position: {e}") from None
    return JudgeResult(lp, missing, where, "".join(texts[:pos]),
                       extra={"finish_reason": finish, "model": resp.get("model")},
                       unseen_share=share)


def _no_tokens(model: str, finish, answer, refusal, *, has_logprobs: bool,
               max_tokens: int) -> None:
    """Raise the reason an answer has no token log-probs, in its own words: a refusal, an
    empty answer (the model stopped at once), or an endpoint without log-probs."""
    if isinstance(refusal, str) and refusal.strip():
        raise JudgeError(f"the model refused to answer: {refusal.strip()[:200]!r}")
    if not (isinstance(answer, str) and answer.strip()):
        why = {"length": f"cut at `max_tokens` {max_tokens}",
               "content_filter": "stopped by the endpoint's content filter"}.get(
            finish, "the model ended its answer at once")
        raise JudgeError(
            f"the model's answer is empty: no token (finish_reason {finish!r}: {why}), so "
            "there is no score to read. A model that stops at once was often given a "
            "prompt its chat template does not show it (e.g. a text-only template dropping "
            "a message with an image) or is too weak for the task; check the prompt "
            "(`template`) and the model" + ("" if has_logprobs else
                                            "; the endpoint also returned no log-probs"))
    raise JudgeError(f"the model {model!r} returned no log-probs; it (or the endpoint) does "
                     "not support `logprobs`. Choose a model that does: a score without its "
                     "distribution cannot be calibrated")
