"""The issue's exact command lines: `judge --pairwise`, `triage --pairwise`, `systems
--pairwise` (one code each; the alias commands are gone), and a
pairwise rule recognised by `triage --rule`."""

import json

import numpy as np
import pandas as pd

from scoreband.cli import app
from scoreband.world.pairwise import world_pairs
from tests.conftest import runner


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_judge_triage_systems_pairwise_switches(tmp_path):
    df = world_pairs(300, seed=4).rename(columns={"response_a": "cap_a",
                                                  "response_b": "cap_b"})
    df.to_csv(tmp_path / "w.csv", index=False)
    j = tmp_path / "j.csv"
    r = _run("judge", "--pairwise", tmp_path / "w.csv", "--judge", "sim-pair-biased",
             "--a-col", "cap_a", "--b-col", "cap_b", "--out", j)
    assert r.exit_code == 0, r.output
    assert "SIMULATED" in r.output and "position bias" in r.output
    # the alias writes the same table
    r = _run("judge", "--pairwise", tmp_path / "w.csv", "--judge", "sim-pair-biased", "--a-col",
             "cap_a", "--b-col", "cap_b", "--out", tmp_path / "j2.csv")
    assert r.exit_code == 0, r.output
    pd.testing.assert_frame_equal(pd.read_csv(j), pd.read_csv(tmp_path / "j2.csv"))
    t = pd.read_csv(j, keep_default_na=False)
    assert abs(pd.to_numeric(t.pair_position_bias).mean() - 0.12) < 0.02

    rule, out = tmp_path / "rule.json", tmp_path / "v.csv"
    r = _run("triage", "--pairwise", j, "--label-col", "human", "--probs",
             "pair_p_a,pair_p_b,pair_p_tie", "--risk", "0.2", "--delta", "0.1", "--out",
             rule, "--apply", j, "--apply-out", out)
    assert r.exit_code == 0, r.output
    assert json.loads(rule.read_text())["format"] == "scoreband-pairwise-rule"
    v = pd.read_csv(out, keep_default_na=False)
    assert {"verdict", "p_a", "decided", "pair_set"} <= set(v.columns)
    assert set(v.verdict) <= {"A", "B", "tie", ""} and 0 < v.decided.mean() < 1
    # a pairwise rule is recognised by triage --rule without the switch
    r = _run("triage", "--rule", rule, "--apply", j, "--apply-out", tmp_path / "v2.csv")
    assert r.exit_code == 0, r.output
    pd.testing.assert_frame_equal(v, pd.read_csv(tmp_path / "v2.csv", keep_default_na=False))
    # and by apply --calibrator (a rule file instead of a calibrator)
    r = _run("apply", j, "--calibrator", rule, "--out", tmp_path / "v3.csv")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "v3.csv").read_bytes() == (tmp_path / "v2.csv").read_bytes()

    lab = t.copy()
    lab.loc[lab.index % 5 != 0, "human"] = ""
    lab.to_csv(tmp_path / "j3.csv", index=False)
    r = _run("systems", "--pairwise", tmp_path / "j3.csv", "--label-col", "human", "--out",
             tmp_path / "rank.json")
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "rank.json").read_text())
    assert doc["ranking"][0]["system"] == "sys-d"
    r = _run("systems", "--pairwise", tmp_path / "j3.csv", "--label-col", "human", "--alpha",
             "0.05", "--out", tmp_path / "rank2.json")
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "rank2.json").read_text())["ranking"] == doc["ranking"]


def test_one_feature_triage_uses_every_labeled_pair(tmp_path):
    rng = np.random.default_rng(3)
    d = rng.normal(0, 1, 500)
    human = np.where(d + rng.logistic(0, 0.3, 500) > 0, "A", "B")
    pd.DataFrame({"clip_diff": d, "human": human}).to_csv(tmp_path / "p.csv", index=False)
    r = _run("triage", "--pairwise", tmp_path / "p.csv", "--label-col", "human",
             "--feature", "clip_diff", "--risk", "0.1", "--delta", "0.1", "--out",
             tmp_path / "rule.json")
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "rule.json").read_text())["report"]
    assert rep["n_threshold_calibration"] == 500 and rep["order"] == "abs-feature"


def test_switch_options_refused_in_the_other_mode(tmp_path):
    pd.DataFrame({"d": [0.1, -0.2], "human": ["A", "B"]}).to_csv(tmp_path / "p.csv",
                                                                 index=False)
    r = _run("triage", "--pairwise", tmp_path / "p.csv", "--label-col", "human",
             "--feature", "d", "--target", "human", "--out", tmp_path / "r.json")
    assert r.exit_code == 2 and "--target" in r.output and "without --pairwise" in r.output
    r = _run("triage", tmp_path / "p.csv", "--label-col", "human", "--out",
             tmp_path / "r.json")
    assert r.exit_code == 2 and "--label-col" in r.output and "with --pairwise" in r.output
    r = _run("systems", tmp_path / "p.csv", "--out", tmp_path / "s.json")
    assert r.exit_code == 2 and "--system-col" in r.output
    r = _run("triage", "--pairwise", tmp_path / "p.csv", "--feature", "d", "--out",
             tmp_path / "r.json")
    assert r.exit_code == 2 and "--label-col or --votes" in r.output


def test_pairwise_systems_html_and_position_bias(tmp_path):
    """The ranking records the judge's position bias by task and --html writes the section
    (win matrix, forest plot, position bias); --html on --out's path is refused."""
    df = world_pairs(200, seed=5)
    df.to_csv(tmp_path / "w.csv", index=False)
    j = tmp_path / "j.csv"
    assert _run("judge", "--pairwise", tmp_path / "w.csv", "--judge", "sim-pair-biased",
                "--out", j).exit_code == 0
    t = pd.read_csv(j, keep_default_na=False)
    t.loc[t.index % 4 != 0, "human"] = ""
    t.to_csv(tmp_path / "j3.csv", index=False)
    out, html = tmp_path / "rank.json", tmp_path / "rank.html"
    r = _run("systems", "--pairwise", tmp_path / "j3.csv", "--label-col", "human", "--out",
             out, "--html", html)
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    tasks = doc["position_bias"]["tasks"]  # sim-pair-biased: true bias +0.12 everywhere
    assert len(tasks) >= 2 and all(abs(v["mean"] - 0.12) < 0.05 for v in tasks.values())
    page = html.read_text()
    assert page.count("<svg") >= 3 and "position bias" in page.lower()
    r = _run("systems", "--pairwise", tmp_path / "j3.csv", "--label-col", "human", "--out",
             tmp_path / "same.json", "--html", tmp_path / "same.json")
    assert r.exit_code != 0 and "same path" in r.output
