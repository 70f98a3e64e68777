"""What a pairwise rule's fit says about bad input: a clear InputError (exit 2) naming the
column and the fix where no labeled pair can be used, the limit that binds where too few
are labeled, warnings without numpy reprs, rows named from 1."""

import re

import numpy as np
import pandas as pd
import pytest

from scoreband.cli import app
from scoreband.errors import InputError
from scoreband.pairwise.selective import fit_pairwise_arrays, fit_pairwise_triage
from tests.conftest import runner

from .sim import label_free_draws, sample


def _said(result) -> str:
    return " ".join(result.output.split())


def _pairs(n=300, seed=0, **cols):
    rng = np.random.default_rng(seed)
    x, y, _, J = sample(n, rng)
    df = pd.DataFrame({"diff": x, "human": y, "pa": J[:, 0], "pb": J[:, 1], "pt": J[:, 2],
                       "task": np.where(np.arange(n) % 2, "hard", "easy")})
    return df.assign(**cols)


# the review's three crashes ("unexpected ValueError: cannot reshape array of size 0"), and
# a text column given as a feature
BAD = [
    ("every row sums to 2", lambda d: d.assign(pa=2 * d.pa, pb=2 * d.pb, pt=2 * d.pt),
     {"probs": ["pa", "pb", "pt"]}, r"probabilities pa, pb, pt sum to 2 .*not 1.* every "
                                    r"labeled row: give p\(A\), p\(B\)"),
    ("a feature entirely nan", lambda d: d.assign(diff=np.nan), {"features": ["diff"]},
     r"feature column 'diff' is empty \(or nan\) in every one of the 300 labeled rows.*"
     r"score difference"),
    ("an empty tie column", lambda d: d.assign(pt=""), {"probs": ["pa", "pb", "pt"]},
     r"tie column 'pt' is empty in every labeled row.*p\(A\) and p\(B\) alone "
     r"\(`probs` pa,pb\)"),
    ("a text column as feature", lambda d: d, {"features": ["human"]},
     r"feature column 'human' is not numeric \(300 of its 300 filled labeled cells are not "
     r"numbers, e.g. '(A|B|tie)'"),
]


@pytest.mark.parametrize(("name", "edit", "kw", "message"), BAD, ids=[b[0] for b in BAD])
def test_no_usable_labeled_pair_is_a_clear_error(tmp_path, name, edit, kw, message):
    df = edit(_pairs())
    with pytest.raises(InputError, match=message):
        fit_pairwise_triage(df, label_col="human", **kw)
    df.to_csv(tmp_path / "p.csv", index=False)
    opt = ["--probs", ",".join(kw["probs"])] if "probs" in kw else \
        ["--feature", kw["features"][0]]
    r = runner.invoke(app, ["triage", "--pairwise", str(tmp_path / "p.csv"), "--label-col",
                            "human", *opt, "--out", str(tmp_path / "r.json")])
    assert r.exit_code == 2, r.output
    assert "unexpected" not in r.output and "Traceback" not in r.output
    assert re.search(message.replace("`probs`", "--probs"), _said(r)), r.output
    assert not (tmp_path / "r.json").exists()


@pytest.mark.filterwarnings("ignore:human.*read as")
def test_a_mostly_text_feature_column_is_not_numeric():
    """A few cells that parse as numbers (1 / 2 for A / B) do not make a text column a
    feature (the review: "2 labeled pair(s)", no word that the column is not numeric)."""
    df = _pairs()
    df["human"] = df["human"].astype(object)
    df.loc[:1, "human"] = ["1", "2"]
    with pytest.raises(InputError, match="'human' is not numeric"):
        fit_pairwise_triage(df, label_col="human", features=["human"])


def test_too_few_labels_names_the_limit_that_binds():
    rng = np.random.default_rng(2)
    x, y, _, _ = sample(15, rng)
    # label-free (one feature): only the threshold's count binds - no word of training
    with pytest.raises(InputError) as e:
        fit_pairwise_arrays(x, y, columns=["d"])
    msg = str(e.value)
    assert "needs at least 22" in msg and "label at least 7 more pairs" in msg
    assert "training" not in msg
    # several features: a training share fits the model; the message names the shares
    x, y, _, _ = sample(60, rng)
    two = np.column_stack([x, x + rng.normal(0, 1, 60)])
    with pytest.raises(InputError) as e:
        fit_pairwise_arrays(two, y, columns=["d", "e"], train_frac=0.7)
    msg = str(e.value)
    assert re.search(r"the calibration share holds \d+ \(deciding any pair at alpha = 0.1, "
                     r"delta = 0.1 needs at least 22", msg), msg
    assert "training share" in msg and "about 74 in all" in msg
    x, y, _, _ = sample(60, rng)
    two = np.column_stack([x, x + rng.normal(0, 1, 60)])
    with pytest.raises(InputError, match=r"the training share that fits the verdict model "
                                         r"holds \d+ \(at least 20 needed\).*raise `train_frac`"):
        fit_pairwise_arrays(two, y, columns=["d", "e"], train_frac=0.2, alpha=0.2)


def test_thirty_labels_decide_on_the_label_free_path():
    """30 labeled pairs and one feature: the verdicts need no model, so the rule is fitted
    (the review: refused in 287 of 300 draws, for the sets' training share); the sets,
    with too few pairs for their model, hold every verdict, and say so."""
    rng = np.random.default_rng(7)
    for b in range(25):
        x, y, _, _ = sample(30, rng, tie=0.2)
        rule = fit_pairwise_arrays(x, y, columns=["d"], alpha=0.15, delta=0.2, seed=b)
        assert rule.report["n_threshold_calibration"] == 30
        if rule.report["n_training"] >= 20:  # a share large enough for the sets' model
            assert np.isfinite(rule.set_q["(all)"])
            continue
        assert rule.set_q == {"(all)": np.inf} and rule.report["sets_fitted"] is False
        assert any("every set holds every verdict" in w for w in rule.warnings)
        r = rule.decide(x[:, None])
        assert r["sets"][:, :2].all()  # A and B in every set (tie where a pair had one)
    x, y, _, _ = sample(30, rng, tie=0.2)
    df = pd.DataFrame({"d": x, "human": y, "g": np.where(x > 0, "p", "q")})
    rule = fit_pairwise_triage(df, label_col="human", features=["d"], groups="g",
                               alpha=0.15, delta=0.2)
    assert rule.set_q == {"p": np.inf, "q": np.inf}


@pytest.mark.statistical
def test_thirty_labels_keep_the_guarantee_over_draws():
    """The label-free threshold at n = 30 labeled pairs (what fit_pairwise_arrays runs:
    checked equal on the first draws): over 2500 draws, the exact error among decided
    pairs (from the true preference probabilities of 20000 test pairs) is <= alpha in
    >= 1 - delta - 2.5 SE of the draws (SE 0.008)."""
    alpha, delta, R = 0.15, 0.2, 2500
    fail_rate, decided = label_free_draws(np.random.default_rng(31), 30, alpha, delta, R)
    se = np.sqrt(delta * (1 - delta) / R)
    assert fail_rate <= delta + 2.5 * se, fail_rate
    assert decided > 0.3, decided  # pairs are decided: the test can fail


def test_group_warning_names_groups_as_text():
    """A group with too few calibration pairs for its sets is named as written, never as
    numpy's repr ([np.str_('hard')])."""
    df = _pairs(400)
    df.loc[:5, "task"] = "rare"
    rule = fit_pairwise_triage(df, label_col="human", features=["diff"], groups="task")
    said = [w for w in rule.warnings if "rare" in w]
    assert said and "np.str_" not in said[0] and "group 'rare' has too few" in said[0]


def test_report_rows_grammar(tmp_path):
    """One row of a reason: "1 row (row 4)", not "(rows 4)"; rows named from 1."""
    df = _pairs(300)
    df["diff"] = df["diff"].astype(object)
    df.loc[3, "diff"] = "oops"
    df["human"] = df["human"].astype(object)
    df.loc[[10, 11], "human"] = "maybe"
    df.to_csv(tmp_path / "p.csv", index=False)
    r = runner.invoke(app, ["triage", "--pairwise", str(tmp_path / "p.csv"), "--label-col",
                            "human", "--feature", "diff", "--out", str(tmp_path / "r.json")])
    assert r.exit_code == 0, r.output
    said = _said(r)
    assert "1 row (row 4), column 'diff'" in said, said
    assert "(rows 4)" not in said
