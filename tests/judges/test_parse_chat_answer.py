"""The public parser of one chat-completions answer (issue 34): the endpoint judge and the
readers of written answers share it."""

import math

import pytest

from scoreband.judges.base import JudgeError, JudgePrompt
from scoreband.judges.endpoint import parse_chat_answer

from .fake_openai import answer, top_list


def test_spellings_merged_and_missing_labels_floored():
    resp = answer(["Good", ".", " Score", ":", " 4"],
                  top_list({" 4": 0.5, "4": 0.2, " 3": 0.2, " The": 0.1}, 10))
    res = parse_chat_answer(resp, JudgePrompt(1, 5), top_logprobs=10)
    p = {lab: math.exp(v) for lab, v in zip(JudgePrompt(1, 5).labels, res.logp,
                                           strict=True) if math.isfinite(v)}
    assert p["4"] == pytest.approx(0.7) and p["3"] == pytest.approx(0.2)
    assert math.isinf(res.logp[0]) and res.position == "generated"


def test_malformed_answer_is_a_judge_error_naming_what():
    with pytest.raises(JudgeError, match="no choices"):
        parse_chat_answer({"nope": 1}, JudgePrompt(1, 5))
    resp = answer(["Fine", "."], None, logprobs=False)
    with pytest.raises(JudgeError, match="log-probs"):
        parse_chat_answer(resp, JudgePrompt(1, 5), model="m")
