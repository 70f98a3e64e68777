"""The trust-or-escalate guarantee on simulated data with known truth: over many resplits,
the risk among accepted items (the true one, on a large fresh sample) is <= alpha in at
least 1 - delta of them (tolerance 2.5 standard errors of that share)."""

import numpy as np
import pytest

from scoreband.decisions.ltt import accepted_counts, binomial_pvalues, fixed_sequence
from scoreband.decisions.triage import fit_triage_arrays, losses
from scoreband.decisions.uncertainty import Signals

ALPHA, DELTA = 0.1, 0.1


def _bound(resplits: int) -> float:
    return DELTA + 2.5 * np.sqrt(DELTA * (1 - DELTA) / resplits)


@pytest.mark.statistical
def test_ltt_step_controls_the_risk_and_the_naive_threshold_does_not():
    """The LTT step alone, 4,000 calibration draws at once: u ~ U(0, 1), a miss with
    probability 0.3 u, so the true risk among u <= lambda is 0.15 lambda (<= 0.1 up to
    lambda = 2/3)."""
    rng = np.random.default_rng(0)
    B, n = 4000, 500
    u = rng.uniform(size=(B, n))
    loss = (rng.uniform(size=(B, n)) < 0.3 * u).astype(float)
    grid = np.linspace(0.02, 1.0, 50)
    N, K = accepted_counts(u, loss, grid)
    j = fixed_sequence(binomial_pvalues(K, N, ALPHA), DELTA, start=10)
    lam = np.where(j >= 0, grid[np.maximum(j, 0)], 0.0)
    fail = np.mean(0.15 * lam > ALPHA)
    assert fail <= DELTA + 2.5 * np.sqrt(DELTA * (1 - DELTA) / B)
    assert np.mean(lam) > 0.35  # it does accept: not valid by accepting nothing
    # the plug-in threshold (largest lambda with empirical risk <= alpha) fails often: the
    # test above can tell a method without the guarantee
    emp = np.where(N > 0, K / np.maximum(N, 1), 1.0) <= ALPHA
    naive = grid[np.where(emp.any(axis=1), emp.shape[1] - 1 - np.argmax(emp[:, ::-1], 1), 0)]
    assert np.mean(0.15 * naive > ALPHA) > 0.3


def _world(rng, n, informative=True):
    """Targets: means of 3 ratings on 1-5 (ties); the judge's score is the target plus
    noise whose size is the item's uncertainty ``sd`` (or unrelated to it)."""
    truth = rng.uniform(1, 5, n)
    y = np.clip(np.round((truth + rng.normal(0, 0.1, n)) * 3) / 3, 1, 5)
    sd = rng.uniform(0.02, 0.8, n)
    score = 0.8 * y + 0.5 + rng.normal(0, sd)  # not on the target's scale: the map moves it
    u = sd if informative else rng.uniform(size=n)
    groups = np.where(rng.uniform(size=n) < 0.5, "easy", "hard")
    score = np.where(groups == "hard", score + rng.normal(0, 0.2, n), score)
    return score, y, u, groups


def _true_risk(rule, fresh, groups=False, as_feature=False):
    score, y, u, g = fresh
    sig = Signals(score, features=u[:, None]) if as_feature else Signals(score, column=u)
    m, _, ok = rule.decide(score, sig, g if groups else None)
    L = losses(m, y, rule.tolerance)
    if not groups:
        return ({"(all)": L[ok].mean() if ok.any() else 0.0}, {"(all)": ok.mean()})
    return ({k: L[ok & (g == k)].mean() if (ok & (g == k)).any() else 0.0 for k in
             ("easy", "hard")}, {k: ok[g == k].mean() for k in ("easy", "hard")})


def _resplits(n_labeled, resplits, informative=True, groups=False, by="column", seed=0,
              alpha=ALPHA, grid_size=50, as_feature=False):
    rng = np.random.default_rng(seed)
    fresh = _world(rng, 20_000, informative)
    fails, shares = {}, {}
    for s in range(resplits):
        score, y, u, g = _world(rng, n_labeled, informative)
        sig = Signals(score, features=u[:, None]) if as_feature else Signals(score, column=u)
        rule = fit_triage_arrays(score, y, scale=(1, 5), tolerance=0.5, alpha=alpha,
                                 delta=DELTA, signals=sig, groups=g if groups else None,
                                 by=by, seed=s, grid_size=grid_size)
        risk, share = _true_risk(rule, fresh, groups, as_feature)
        for k in risk:
            fails.setdefault(k, []).append(risk[k] > alpha)
            shares.setdefault(k, []).append(share[k])
    return ({k: float(np.mean(v)) for k, v in fails.items()},
            {k: float(np.mean(v)) for k, v in shares.items()})


@pytest.mark.statistical
@pytest.mark.slow
def test_guarantee_end_to_end_informative():
    fail, share = _resplits(400, 500)
    assert fail["(all)"] <= _bound(500), fail
    assert share["(all)"] > 0.1, share  # an informative uncertainty accepts a fair share


@pytest.mark.statistical
@pytest.mark.slow
def test_guarantee_with_an_uninformative_uncertainty_accepts_little():
    fail, share = _resplits(400, 500, informative=False, seed=1)
    assert fail["(all)"] <= _bound(500), fail
    assert share["(all)"] < 0.05, share  # the risk is the base risk everywhere (> alpha)


@pytest.mark.statistical
@pytest.mark.slow
def test_guarantee_with_a_small_labeled_set():
    # ~60 calibration rows: at alpha 0.1 they can trust almost nothing here; at 0.3 some
    fail, share = _resplits(120, 600, seed=2, alpha=0.3)
    assert fail["(all)"] <= _bound(600), fail
    assert share["(all)"] > 0.05, share


@pytest.mark.statistical
@pytest.mark.slow
def test_guarantee_per_group():
    fail, share = _resplits(600, 500, groups=True, seed=3)
    for k in ("easy", "hard"):
        assert fail[k] <= _bound(500), fail
    assert share["easy"] > share["hard"]


@pytest.mark.statistical
@pytest.mark.slow
def test_guarantee_with_a_learned_uncertainty_and_the_default_grid():
    """The path the benchmarks take: the uncertainty learned on the training share (a k-NN
    miss rate on the score and a feature), the grid one threshold per 20 calibration rows,
    the start where the training share predicts a rejection."""
    fail, share = _resplits(400, 500, by="knn-miss-features", seed=4, alpha=0.2,
                            grid_size=None, as_feature=True)
    assert fail["(all)"] <= _bound(500), fail
    assert share["(all)"] > 0.1, share
