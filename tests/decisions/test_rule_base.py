"""The one Rule base (issue 42): rule files dispatch on their format, one stage applies
any rule, uncertainties are registered, the rarely used knobs come from --config, and the
command line's summaries read at 80 columns (issue 43)."""

import json

import numpy as np
import pandas as pd
import pytest

from scoreband.cli import app
from scoreband.decisions import uncertainty as unc
from scoreband.decisions.rule import RULES, RuleStage, load_rule, rule_format
from scoreband.decisions.triage import TriageRule, fit_triage, fit_triage_arrays
from scoreband.errors import InputError
from scoreband.pairwise.selective import PairRule, fit_pairwise_arrays
from tests.conftest import runner


def _labeled(n=1200, seed=0):
    rng = np.random.default_rng(seed)
    hard = rng.uniform(size=n)
    y = np.clip(rng.normal(3, 1, n), 1, 5)
    return pd.DataFrame({"human": y, "judge": y + rng.normal(0, 0.1 + hard, n),
                         "hard": hard})


def test_load_rule_dispatches_on_the_format_and_refuses_others(tmp_path):
    res = fit_triage(_labeled(), target="human", score="judge", scale=(1, 5),
                     tolerance=0.5, uncertainty="hard")
    t = res.save(tmp_path / "t.json")
    rng = np.random.default_rng(1)
    x = rng.normal(size=600)
    p = fit_pairwise_arrays(x, np.where(x + rng.logistic(0, 0.3, 600) > 0, "A", "B"),
                            columns=["d"]).save(tmp_path / "p.json")
    assert isinstance(load_rule(t), TriageRule) and isinstance(load_rule(p), PairRule)
    assert rule_format(t) == TriageRule.format and rule_format(p) == PairRule.format
    assert set(RULES) >= {TriageRule.format, PairRule.format}
    doc = json.loads(t.read_text())
    assert isinstance(load_rule(doc, "doc"), TriageRule)  # a parsed document too
    doc["format"] = "scoreband-magic-rule"
    with pytest.raises(InputError, match="magic") as e:
        load_rule(doc, "r.json")
    assert "r.json" in str(e.value) and TriageRule.format in str(e.value)
    assert rule_format(tmp_path) is None  # a folder is no rule


def test_one_stage_applies_any_rule_with_its_own_error_column(tmp_path):
    rule = fit_triage(_labeled(), target="human", score="judge", scale=(1, 5),
                      tolerance=0.5, uncertainty="hard").rule
    stage = RuleStage(rule)
    assert stage.error_column == "triage_error" and "trusted" in stage.outputs
    out = rule.apply(_labeled(50, seed=3))
    assert list(out.columns[-4:]) == ["triage_score", "triage_uncertainty", "trusted",
                                      "triage_error"]
    assert rule.predict(_labeled(50, seed=3)).dtype == bool


def test_a_registered_uncertainty_is_offered_by_name(monkeypatch):
    """A new uncertainty is one register call: --by takes it, auto tries it."""
    class Constant:
        name = "constant"

        def fit(self, sig, loss, absres, keys=None):
            return self

        def predict(self, sig):
            return np.zeros(len(sig.score))

        def to_dict(self):
            return {"name": self.name}

    from scoreband.registry import Registry

    reg = Registry("uncertainty")
    monkeypatch.setattr(unc, "UNCERTAINTY", reg)
    import scoreband.decisions.triage_fit as tf
    monkeypatch.setattr(tf, "UNCERTAINTY", reg)
    unc.register("constant", help="0 for every item", factory=lambda n, k: Constant(),
                 applies=lambda sig: True)
    df = _labeled()
    rule = fit_triage_arrays(df.judge, df.human, scale=(1, 5), tolerance=0.5, by="constant")
    assert rule.uncertainty.name == "constant"
    assert tf.candidates("auto", unc.Signals(df.judge.to_numpy())) == ["constant"]


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_config_file_sets_the_rare_knobs_and_refuses_unknown_ones(tmp_path):
    df = _labeled()
    df.to_csv(tmp_path / "lab.csv", index=False)
    fit = ["triage", tmp_path / "lab.csv", "--target", "human", "--scale", "1,5", "--score",
           "judge", "--tolerance", "0.5", "--uncertainty", "hard"]
    (tmp_path / "k.toml").write_text("train_frac = 0.7\nstart = \"first\"\n")
    r = run(*fit, "--config", tmp_path / "k.toml", "--out", tmp_path / "r.json")
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "r.json").read_text())["report"]
    assert rep["train_frac"] == 0.7 and rep["start_rule"] == "first"
    (tmp_path / "bad.json").write_text(json.dumps({"train_fraction": 0.7}))
    r = run(*fit, "--config", tmp_path / "bad.json", "--out", tmp_path / "r2.json")
    assert r.exit_code != 0 and "train_fraction" in r.output and "train_frac" in r.output
    (tmp_path / "bad2.json").write_text(json.dumps({"sets": "big"}))
    r = run(*fit, "--config", tmp_path / "bad2.json", "--out", tmp_path / "r3.json")
    assert r.exit_code != 0 and "lac | aps" in r.output


def test_the_triage_summary_headers_are_whole_at_80_columns(tmp_path):
    _labeled().to_csv(tmp_path / "lab.csv", index=False)
    r = runner.invoke(app, ["triage", str(tmp_path / "lab.csv"), "--target", "human",
                            "--scale", "1,5", "--score", "judge", "--tolerance", "0.5",
                            "--uncertainty", "hard", "--out", str(tmp_path / "r.json")],
                      env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert "…" not in r.output, r.output
    head = next(ln for ln in r.output.splitlines() if "group" in ln and "threshold" in ln)
    for word in ("cal. rows", "threshold", "kept", "risk kept", "risk all"):
        assert word in head, head


def test_pairs_counts_skipped_pairs_as_pairs(tmp_path):
    rows = [{"system": s, "item": i, "score": float(k), "resp": "same" if i == 0 else f"{s}{i}"}
            for i in range(4) for k, s in enumerate(["a", "b", "c"])]
    pd.DataFrame(rows).to_csv(tmp_path / "s.csv", index=False)
    r = run("pairs", tmp_path / "s.csv", "--system-col", "system", "--item-col", "item",
            "--score", "score", "--response-col", "resp", "--out", tmp_path / "p.csv")
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "3 of 12 pairs skipped" in text and "rows skipped" not in text, text


def test_every_rule_kind_names_its_row_job_with_its_error_column():
    """`apply --calibrator RULE` runs rule.job: each built-in kind (triage, pairwise,
    cascade) names a registered job writing the kind's own error column."""
    from scoreband.decisions.rule import registered
    from scoreband.jobs import get_job

    kinds = {e.info["cls"].kind: e.info["cls"] for e in registered().entries()}
    assert set(kinds) >= {"triage", "pairwise", "cascade"}
    for cls in kinds.values():
        assert get_job(cls.job).error_column == cls.error_column, cls
