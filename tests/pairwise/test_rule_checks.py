"""Pairwise rule files are checked as triage rules are; a verdict no labeled pair had is
kept; an unseen group and a labels-mostly-ties failure are said (issue 43)."""

import json

import numpy as np
import pandas as pd
import pytest

from scoreband.decisions.rule import load_rule
from scoreband.errors import InputError
from scoreband.pairwise.selective import fit_pairwise_arrays


def _probs_rule(tmp_path, n=300, seed=0, groups=None):
    rng = np.random.default_rng(seed)
    pa = rng.uniform(0.5, 1.0, n)
    J = np.column_stack([pa, 1 - pa])
    y = np.where(rng.uniform(size=n) < pa, "A", "B").astype(object)
    y[:] = "A"  # every labeled pair A: B is a verdict no labeled pair had
    rule = fit_pairwise_arrays(J, y, columns=["pa", "pb"], kind="probs", alpha=0.2,
                               delta=0.1, groups=groups)
    path = tmp_path / "rule.json"
    rule.save(path)
    return rule, path


def test_rule_of_another_version_or_an_unknown_model_is_refused_naming_the_key(tmp_path):
    _, path = _probs_rule(tmp_path)
    doc = json.loads(path.read_text())
    for edit, words in ((lambda d: d.update(format_version=99), "format_version 99"),
                        (lambda d: d.pop("format_version"), "no `format_version`"),
                        (lambda d: d["model"].update(kind="forest"), "model.kind"),
                        (lambda d: d["model"].update(columns="pa"), "model.columns"),
                        (lambda d: d.update(classes=["A", "C"]), "classes"),
                        (lambda d: d.update(threshold="low"), "threshold"),
                        (lambda d: d.update(risk=1.5), "risk")):
        bad = json.loads(json.dumps(doc))
        edit(bad)
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(bad))
        with pytest.raises(InputError, match=words.replace("`", ".")):
            load_rule(p)
    assert load_rule(path).threshold == float(doc["threshold"])


def test_a_verdict_no_labeled_pair_had_is_kept_as_the_judge_gave_it(tmp_path):
    """Every labeled pair is A; a pair the judge gives B at 0.95 is decided B (or left
    undecided), never A with p_b 0."""
    rule, path = _probs_rule(tmp_path)
    X = np.array([[0.05, 0.95], [0.97, 0.03]])
    for r in (rule, load_rule(path)):
        res = r.decide(X)
        assert res["P"][0, 1] == pytest.approx(0.95)
        assert res["verdict_all"][0] == "B" and res["verdict"][0] in ("B", "")
        assert "B" in r.classes


def test_unseen_group_is_said_not_silent(tmp_path):
    rng = np.random.default_rng(1)
    n = 400
    pa = rng.uniform(0.5, 1.0, n)
    J = np.column_stack([pa, 1 - pa])
    y = np.where(rng.uniform(size=n) < pa, "A", "B").astype(object)
    g = np.where(np.arange(n) % 2, "t1", "t2")
    rule = fit_pairwise_arrays(J, y, columns=["pa", "pb"], kind="probs", alpha=0.2,
                               delta=0.1, groups=g)
    rule.groups_col = "task"
    said = []
    df = pd.DataFrame({"pa": [0.9, 0.8], "pb": [0.1, 0.2], "task": ["t1", "t9"]})
    out = rule.apply(df, on_warning=said.append)
    assert len(said) == 1 and "'t9'" in said[0] and "every verdict" in said[0]
    assert rule.last_warnings == said
    assert out["pair_set"].iloc[1] == "A|B"


def test_nothing_decided_says_the_labels_are_mostly_ties():
    rng = np.random.default_rng(2)
    n = 300
    pa = rng.uniform(0.5, 1.0, n)
    J = np.column_stack([pa, 1 - pa])
    y = np.where(rng.uniform(size=n) < 0.41, "tie", "A").astype(object)
    rule = fit_pairwise_arrays(J, y, columns=["pa", "pb"], kind="probs", alpha=0.15,
                               delta=0.1)
    assert rule.threshold == -np.inf
    note = " ".join(rule.warnings)
    assert "% of the labeled pairs are ties" in note and "p(tie)" in note
