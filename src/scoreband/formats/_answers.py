"""Score-token features from OpenAI-style chat answers that are already written down (an
Inspect log's outputs, a batch of answers): the same parser, checks and columns as
``scoreband judge`` against an endpoint, so a ``logp_<label>`` column means one thing
whichever way it was made.

Reused, not rewritten: the answer is parsed by
:func:`scoreband.judges.answers.parse_chat_answer` (the score position found by the
delimiter from the end, ``"4"`` and ``" 4"`` merged, labels missing from ``top_logprobs``
given -inf and the mass they may hold measured), checked by
:func:`scoreband.judges.answers.judge_row` (no label listed, or the unseen labels may hold
more than :data:`~scoreband.judges.base.MAX_UNSEEN_SHARE`: the row gets no score and the
reason) and turned into columns by :func:`scoreband.judges.answers.feature_columns`
(log-softmax over the labels, a missing label floored at -1e4, ``judge_expected`` ...).
"""

from __future__ import annotations

import numpy as np

from scoreband.errors import InputError

__all__ = ["answer_features", "parse_scale", "DEFAULT_SCALE"]

#: the labels read when the address names no scale: every single digit (a 1-5 or 0-9
#: judge's labels are among them); ``NAME@LO-HI:PATH`` reads exactly a judge's scale
DEFAULT_SCALE = (0, 9)

#: log-probs listed per position are all there is: the answer's own list is its top-k
_LISTED = 100


def parse_scale(options: str) -> tuple[int, int]:
    """``LO-HI`` (``1-5``) or ``LO,HI`` as the integer label scale of the score token."""
    text = options.strip()
    for sep in ("-", ","):
        lo, s, hi = text.partition(sep)
        if s and lo.strip().lstrip("+").isdigit() and hi.strip().lstrip("+").isdigit():
            a, b = int(lo), int(hi)
            if a < b:
                return a, b
    raise InputError(f"score-token scale {options!r}: write the judge's integer label scale "
                     "as LO-HI, e.g. openai-batch@1-5:answers.jsonl")


class _Answered:
    """A judge whose answer is already written: ``judge()`` parses it with the endpoint
    judge's own parser (what :func:`~scoreband.judges.answers.judge_row` calls)."""

    def __init__(self, prompt, answer):
        self.prompt, self.answer = prompt, answer
        self.top_logprobs = _listed(answer)  # for the message: the k the answer has

    def judge(self, image_path, text):
        from scoreband.judges.answers import parse_chat_answer

        return parse_chat_answer(self.answer, self.prompt, top_logprobs=_LISTED,
                                 model="answers")


def _listed(answer) -> int | None:
    try:
        content = answer["choices"][0]["logprobs"]["content"]
        return max(len(c.get("top_logprobs") or []) for c in content)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        return None




def has_logprobs(answer) -> bool:
    """Whether an OpenAI-style answer carries token log-probs (``choices[0].logprobs``)."""
    try:
        lp = answer["choices"][0].get("logprobs")
    except (KeyError, IndexError, TypeError, AttributeError):
        return False
    return isinstance(lp, dict) and lp.get("content") is not None


def answer_features(answers: list, scale: tuple[int, int] = DEFAULT_SCALE) -> dict:
    """The score-token columns of ``scoreband judge`` for each answer (a chat-completions
    object, or None for a row without one): ``logp_<label>``, ``judge_expected``,
    ``judge_argmax``, ``judge_entropy``, ``judge_max_prob``, ``judge_missing_mass``,
    ``judge_unseen_mass``, ``judge_position``, ``judge_error`` (why a row has no score)."""
    from scoreband.judges.answers import feature_columns, judge_row
    from scoreband.judges.base import JudgePrompt

    prompt = JudgePrompt(*scale)
    labels = prompt.labels
    records = []
    for a in answers:
        if a is None:
            records.append({"logp": None, "judge_missing_mass": None, "judge_unseen_mass": None,
                            "judge_position": "", "error": "no answer with log-probs"})
            continue
        records.append(judge_row(_Answered(prompt, a), "-", "", "", None, ("", "", "")))
    raw = np.full((len(records), len(labels)), np.nan)
    for i, rec in enumerate(records):
        if rec.get("logp") is not None:
            raw[i] = [-np.inf if x is None else x for x in rec["logp"]]
    ok = np.array([r["error"] == "" for r in records], dtype=bool)
    out = feature_columns(raw, ok, labels)

    def num(key):
        return np.array([np.nan if r.get(key) is None else float(r[key]) for r in records])

    out["judge_missing_mass"] = num("judge_missing_mass")
    out["judge_unseen_mass"] = num("judge_unseen_mass")
    out["judge_position"] = np.array([r.get("judge_position") or "" for r in records],
                                     dtype=object)
    out["judge_error"] = np.array([r["error"] for r in records], dtype=object)
    return out
