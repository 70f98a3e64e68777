"""The k-NN E|residual| on the score and the features: offered by name, saved and read back,
and left out of `auto`'s candidates (NOT_IN_AUTO)."""

import numpy as np

from scoreband.decisions.rule import load_rule
from scoreband.decisions.triage import fit_triage_arrays
from scoreband.decisions.uncertainty import NOT_IN_AUTO, Signals


def _data(n=1200, seed=0):
    rng = np.random.default_rng(seed)
    y = np.clip(np.round(rng.uniform(1, 5, n) * 3) / 3, 1, 5)
    hard = rng.uniform(size=n)
    score = np.round(y + rng.normal(0, 0.05 + hard, n))  # tied integer scores
    return score, y, hard


def test_knn_abs_features_by_name_round_trips():
    score, y, hard = _data()
    sig = Signals(score, features=hard[:, None])
    rule = fit_triage_arrays(score, y, scale=(1, 5), tolerance=0.5, alpha=0.2, delta=0.1,
                             signals=sig, by="knn-abs-features", seed=0)
    assert rule.uncertainty.name == "knn-abs-features"
    again = load_rule(rule.to_dict())
    s2, y2, h2 = _data(300, seed=1)
    a = rule.decide(s2, Signals(s2, features=h2[:, None]))
    b = again.decide(s2, Signals(s2, features=h2[:, None]))
    assert np.allclose(a[1], b[1]) and (a[2] == b[2]).all()
    # the features break the tied scores: the hard items get the larger uncertainty
    assert np.corrcoef(a[1], h2)[0, 1] > 0.5
    assert a[2].any()


def test_auto_does_not_consider_it():
    score, y, hard = _data()
    rule = fit_triage_arrays(score, y, scale=(1, 5), tolerance=0.5, alpha=0.2, delta=0.1,
                             signals=Signals(score, features=hard[:, None]), seed=0)
    considered = rule.report["uncertainty_choice"]["training_share_accepted"]
    assert "knn-miss-features" in considered
    assert not set(NOT_IN_AUTO) & set(considered)
