"""Simulated judges refuse parameters that make no judge, up front (issue 43: temperature 0
gave NaN probabilities counted as judged; noise -1 an internal error per row)."""

import math

import numpy as np
import pytest

from scoreband.cli import app
from scoreband.errors import InputError
from scoreband.world.judges import SimulatedJudge, judge_logprobs
from scoreband.world.pairwise import (
    SimulatedPairJudge,
    pair_logprobs,
    simulated_pair_judge,
    world_pairs,
)
from tests.conftest import runner

BAD = [("temperature=0", "temperature"), ("temperature=-1", "temperature"),
       ("temperature=nan", "temperature"), ("noise=-1", "noise"), ("noise=inf", "noise"),
       ("bias=0.5", "position bias"), ("tie=-0.1", "tie")]


@pytest.mark.parametrize("opt,word", BAD)
def test_pair_judge_spec_refused(opt, word):
    with pytest.raises(InputError, match=word):
        simulated_pair_judge(f"sim-pair-fair:{opt}")


@pytest.mark.parametrize("ext", [".csv", ".jsonl"])
@pytest.mark.parametrize("opt,word", BAD[:1] + BAD[3:4])
def test_judge_command_refuses_before_any_row(tmp_path, ext, opt, word):
    df = world_pairs(5, seed=1)
    p = tmp_path / f"w{ext}"
    df.to_csv(p, index=False) if ext == ".csv" else df.to_json(p, orient="records",
                                                                 lines=True)
    out = tmp_path / f"j{ext}"
    r = runner.invoke(app, ["judge", "--pairwise", str(p), "--judge",
                            f"sim-pair-fair:{opt}", "--out", str(out)])
    text = " ".join(r.output.split())
    assert r.exit_code != 0 and word in text, text
    assert "Traceback" not in r.output and "unexpected" not in text
    assert not out.exists() and not list(tmp_path.glob("*.partial*"))


def test_dataclasses_refuse_and_small_temperature_is_finite():
    with pytest.raises(InputError, match="temperature"):
        SimulatedPairJudge("x", temperature=0.0)
    with pytest.raises(InputError, match="noise"):
        SimulatedJudge("x", {"colour": -0.1}, 0.5)
    with pytest.raises(InputError, match="temperature"):
        SimulatedJudge("x", {"colour": 0.1}, 0.0)
    with pytest.raises(InputError, match="lenient"):
        SimulatedJudge("x", {"colour": 0.1}, 0.5, lenient={"colour": 1.5})
    lp = pair_logprobs(SimulatedPairJudge("x", temperature=1e-6), [0.7, 0.5], [0.2, 0.5])
    p = np.exp(lp)
    assert np.isfinite(p).all() and np.allclose(p.sum(axis=1), 1)
    j = SimulatedJudge("x", {"colour": 0.1}, 0.01)
    lp = judge_logprobs(j, [0.3, 0.9], ["colour", "colour"])
    assert np.allclose(np.exp(lp).sum(axis=1), 1) and not np.isnan(lp).any()
    assert math.isclose(np.exp(lp).max(), 1.0)
