"""The pairwise endpoint judge refuses a verdict read from a top-k list too short to show
the other verdicts (a top-1 list would give p(A) = 1), like the score judge; no server."""

from __future__ import annotations

import math
import warnings

import pandas as pd
import pytest

from scoreband.pairwise.extract import PairPrompt, judge_pairs, make_pair_judge


def _answer(top):
    content = [{"token": "Verdict:", "logprob": -0.01, "top_logprobs": []},
               {"token": top[0][0], "logprob": top[0][1],
                "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top]}]
    return {"model": "m", "choices": [{"finish_reason": "stop",
                                       "message": {"content": "Verdict:" + top[0][0]},
                                       "logprobs": {"content": content}}],
            "usage": {"prompt_tokens": 900}}


def _run(tmp_path, monkeypatch, k, top):
    from PIL import Image

    from scoreband.judges.endpoint import OpenAIJudge

    Image.new("RGB", (8, 8)).save(tmp_path / "x.png")
    df = pd.DataFrame({"image": ["x.png"], "response_a": ["good"], "response_b": ["bad"]})

    def post(self, path, body):
        if "image_url" not in str(body):
            return {"usage": {"prompt_tokens": 100}, "choices": []}
        return _answer(top[:k])

    monkeypatch.setattr(OpenAIJudge, "_post", post)
    monkeypatch.setattr(OpenAIJudge, "_list_models", lambda self, most=10: None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # the up-front warning on a short list
        runner = make_pair_judge("openai:m", prompt=PairPrompt(), image_col="image",
                                 response_a="response_a", response_b="response_b",
                                 root=tmp_path, base_url="http://127.0.0.1:9/v1",
                                 top_logprobs=k)
    return judge_pairs(df, runner, response_a="response_a", response_b="response_b")


TOP = [(" A", math.log(0.41)), ("A", math.log(0.15)), (" B", math.log(0.07)),
       ("B", math.log(0.03)), (" tie", math.log(0.02)), (" la", math.log(0.001))]


def test_a_top_1_list_is_refused_not_read_as_p_a_1(tmp_path, monkeypatch):
    out, errors = _run(tmp_path, monkeypatch, 1, TOP)
    assert math.isnan(out.loc[0, "pair_ab_p_a"]) and math.isnan(out.loc[0, "pair_p_a"])
    assert "only the labels ['A'] are in the judge's top-1 list" in out.loc[0, "pair_error"]
    assert [e.row for e in errors] == ["0"]


def test_a_list_with_every_verdict_is_read(tmp_path, monkeypatch):
    out, errors = _run(tmp_path, monkeypatch, 6, TOP)
    assert errors == [] and out.loc[0, "pair_error"] == ""
    assert out.loc[0, "pair_ab_p_a"] == pytest.approx(0.56 / 0.68, abs=1e-9)

