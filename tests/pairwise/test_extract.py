import math

import numpy as np
import pandas as pd
import pytest

from scoreband.cli import app
from scoreband.pairwise.extract import PairPrompt, judge_pairs, make_pair_judge
from scoreband.world.pairwise import world_pairs
from tests.conftest import runner


@pytest.mark.parametrize("spec,bias", [("sim-pair-biased", 0.12),
                                       ("sim-pair-fair:bias=0.05", 0.05)])
def test_position_bias_measured_within_0_02(spec, bias):
    df = world_pairs(400, seed=1)  # 2400 pairs
    out, errors = judge_pairs(df, make_pair_judge(spec), response_a="response_a",
                              response_b="response_b")
    assert not errors
    assert abs(out["pair_position_bias"].mean() - bias) < 0.02
    P = out[["pair_p_a", "pair_p_b", "pair_p_tie"]].to_numpy()
    assert np.allclose(P.sum(axis=1), 1)


def test_order_averaged_preference_agrees_with_humans():
    df = world_pairs(300, seed=2)
    out, _ = judge_pairs(df, make_pair_judge("sim-pair-strong"))
    lab = out[out.human != "tie"]
    acc = ((lab.pair_pref > 0) == (lab.human == "A")).mean()
    assert acc > 0.75


def test_identical_responses_skipped_with_reason():
    df = world_pairs(20, seed=0)
    df.loc[4, "response_b"] = df.loc[4, "response_a"]
    out, errors = judge_pairs(df, make_pair_judge("sim-pair-fair"), response_a="response_a",
                              response_b="response_b")
    assert [(e.row, e.column) for e in errors] == [("4", "response_b")]
    assert math.isnan(out.loc[4, "pair_p_a"]) and "identical" in out.loc[4, "pair_error"]


def _answer(top):
    toks = ["I", " think", " Verdict", ":", top[0][0]]
    content = [{"token": t, "logprob": -0.1, "top_logprobs": []} for t in toks[:-1]]
    content.append({"token": toks[-1], "logprob": top[0][1],
                    "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top]})
    return {"model": "m", "choices": [{"finish_reason": "stop",
                                       "message": {"content": "".join(toks)},
                                       "logprobs": {"content": content}}],
            "usage": {"prompt_tokens": 900}}


def test_endpoint_both_orders_spellings_merged_and_no_verdict_reported(tmp_path, monkeypatch):
    from PIL import Image

    from scoreband.judges.endpoint import OpenAIJudge

    Image.new("RGB", (8, 8)).save(tmp_path / "x.png")
    df = pd.DataFrame({"image": ["x.png"] * 2, "response_a": ["good", "p"],
                       "response_b": ["bad", "q"]})

    def post(self, path, body):
        text = body["messages"][0]["content"][0]["text"]
        if "image_url" not in str(body):
            return {"usage": {"prompt_tokens": 100}, "choices": []}
        if "Response A: p" in text or "Response A: q" in text:
            return _answer([(" X", math.log(0.9)), (" Y", math.log(0.05))])
        first_good = "Response A: good" in text
        pa = 0.7 if first_good else 0.2  # p(first shown is better), both spellings
        return _answer([(" A", math.log(pa * 0.8)), ("A", math.log(pa * 0.2)),
                        (" B", math.log(0.9 - pa)), (" tie", math.log(0.1))])

    monkeypatch.setattr(OpenAIJudge, "_post", post)
    monkeypatch.setattr(OpenAIJudge, "_list_models", lambda self, most=10: None)
    runner = make_pair_judge("openai:m", prompt=PairPrompt(), image_col="image",
                             response_a="response_a", response_b="response_b", root=tmp_path,
                             base_url="http://127.0.0.1:9/v1")
    out, errors = judge_pairs(df, runner, response_a="response_a", response_b="response_b")
    assert out.loc[0, "pair_ab_p_a"] == pytest.approx(0.7)
    # B/A order: "good" shown second; the judge gave the first shown (bad) 0.2
    assert out.loc[0, "pair_ba_p_a"] == pytest.approx(0.9 - 0.2)
    assert out.loc[0, "pair_position_bias"] == pytest.approx((0.7 - 0.7) / 2)
    assert [e.row for e in errors] == ["1"]
    assert "none of the verdict labels" in out.loc[1, "pair_error"]


def test_cli_judge_pairs_simulated(tmp_path):
    world_pairs(200, seed=3).to_csv(tmp_path / "w.csv", index=False)
    r = runner.invoke(app, ["judge", "--pairwise", str(tmp_path / "w.csv"), "--judge",
                                 "sim-pair-biased:bias=0.1", "--out",
                                 str(tmp_path / "j.csv")])
    assert r.exit_code == 0, r.output
    assert "SIMULATED" in r.output and "position bias +0.1" in r.output
