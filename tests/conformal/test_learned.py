"""CQR and R2CCP: the learned part is fitted once on its own split, then the conformal step
is resplit >= 1000 times (the guarantee is about that step). An item is covered iff its
conformity score is <= q, which is exactly the set each method returns."""

import numpy as np
import pytest

from scoreband.conformal import CQR, R2CCP, Mondrian, conformal_quantile, coverage_bounds
from scoreband.datatypes import Predictions
from scoreband.errors import InputError
from scoreband.logprobs import expected_score
from scoreband.studies import judge
from scoreband.world import make_dataset
from scoreband.world.judges import SIMULATED_JUDGES, judge_logprobs


@pytest.fixture(scope="module")
def judged():
    d = make_dataset(2400, 5, n_annotators=3)
    lp = judge_logprobs(SIMULATED_JUDGES[2], d.true01, d.tasks)  # the over-confident one
    # continuous jitter on the targets breaks ties between identical mean ratings (and is
    # not clipped: clipping piles items onto exactly 0 or 1 and ties their scores), so the
    # continuous-score upper bound 1 - alpha + 1/(n+1) applies
    y = d.y01 + np.random.default_rng(0).uniform(-0.01, 0.01, len(d))
    return Predictions((expected_score(lp) - 1) / 4, features=lp), y, d.tasks


@pytest.mark.statistical
@pytest.mark.parametrize("cls", [CQR, R2CCP])
def test_conformal_step_coverage_over_1000_splits(judged, cls):
    pred, y, _ = judged
    cal = cls(0.1, epochs=60) if cls is R2CCP else cls(0.1)
    cal.fit_model(pred.take(slice(0, 800)), y[:800])
    s = cal.conformity(pred.take(slice(800, None)), y[800:])
    rng = np.random.default_rng(1)
    n_cal, covs = 300, []
    for _ in range(1000):
        p = rng.permutation(len(s))
        q = conformal_quantile(s[p[:n_cal]], 0.1)
        covs.append(np.mean(s[p[n_cal:]] <= q))
    covs = np.array(covs)
    lo, hi = coverage_bounds(n_cal, 0.1)
    se = covs.std(ddof=1) / np.sqrt(len(covs))
    assert lo - 4 * se <= covs.mean() <= hi + 4 * se, (covs.mean(), se)


@pytest.mark.statistical
def test_mondrian_r2ccp_per_task_coverage(judged):
    pred, y, tasks = judged
    base = R2CCP(0.1, epochs=60)
    base.fit_model(pred.take(slice(0, 800)), y[:800])
    s = base.conformity(pred.take(slice(800, None)), y[800:])
    g = tasks[800:]
    rng = np.random.default_rng(2)
    per = {t: [] for t in np.unique(g)}
    for _ in range(1000):
        p = rng.permutation(len(s))
        cal, test = p[:800], p[800:]
        for t in per:
            qc = conformal_quantile(s[cal][g[cal] == t], 0.1)
            per[t].append(np.mean(s[test][g[test] == t] <= qc))
    for t, v in per.items():
        v = np.array(v)
        se = v.std(ddof=1) / np.sqrt(len(v))
        assert 0.9 - 4 * se <= v.mean() <= 0.9 + 1 / 120 + 4 * se, (t, v.mean())


def test_fit_predict_and_persist(tmp_path, judged):
    from scoreband.conformal import load_calibrator, save_calibrator

    pred, y, tasks = judged
    y = np.clip(y, 0, 1)
    for cal in (CQR(0.1), R2CCP(0.1, epochs=30), Mondrian(R2CCP(0.1, epochs=30))):
        cal.fit(pred.take(slice(0, 1200)), y[:1200], groups=tasks[:1200])
        b = cal.predict(pred.take(slice(1200, None)), groups=tasks[1200:])
        assert (b.lo01 <= b.hi01).all()
        cov = np.mean((b.lo01 <= y[1200:]) & (y[1200:] <= b.hi01))
        assert 0.85 <= cov <= 1.0
        path = save_calibrator(tmp_path / f"{cal.method}.json", cal)
        back, _ = load_calibrator(path)
        b2 = back.predict(pred.take(slice(1200, None)), groups=tasks[1200:])
        np.testing.assert_allclose(b.lo01, b2.lo01, atol=1e-6)
    r = R2CCP(0.1, epochs=30).fit(pred.take(slice(0, 600)), np.clip(y[:600], 0, 1))
    sets = r.predict(pred.take(slice(600, 700))).sets01
    assert len(sets) == 100 and all(a <= b for s in sets for a, b in s)


def test_learned_methods_need_features():
    with pytest.raises(InputError, match="`features`"):
        CQR().fit(Predictions(np.full(50, 0.5)), np.full(50, 0.5))
    cal = CQR(0.1).fit(Predictions(np.zeros(60), features=np.random.default_rng(0).normal(
        size=(60, 3))), np.random.default_rng(1).uniform(size=60))
    with pytest.raises(InputError, match="fitted on 3 feature columns, got 2"):
        cal.predict(Predictions(np.zeros(5), features=np.zeros((5, 2))))


def test_judge_study_small(tmp_path):
    from PIL import Image

    from scoreband.studies.judge import run
    from scoreband.world.dataset import LIKERT

    d = make_dataset(400, 9, n_annotators=3)
    judges = {j.name: judge_logprobs(j, d.true01, d.tasks) for j in SIMULATED_JUDGES}
    result = run(judges, d.y01, d.tasks, d.n_ratings, scale=LIKERT, seeds=2, r2ccp_epochs=10,
                 simulated=True)
    result.write(tmp_path)
    doc = result.doc
    assert set(doc["methods"]) == {*judges, "fusion"}
    row = doc["methods"]["sim-strong"]["r2ccp+mondrian"]
    # boundary adjustment never widens and keeps the coverage of discrete targets
    assert row["boundary"]["width"]["mean"] <= row["plain"]["width"]["mean"] + 1e-9
    assert row["boundary"]["coverage"]["mean"] == pytest.approx(row["plain"]["coverage"]["mean"])
    rmap = doc["reliability_map"]["sim-overconfident"]
    widths = [v["mean_width"] for v in rmap.values()]
    assert widths == sorted(widths)
    assert all(v["recommendation"] in (judge.COMPARE, judge.USABLE) for v in rmap.values())
    assert doc["simulated"] and "SIMULATED" in (tmp_path / "results.md").read_text()
    with Image.open(tmp_path / "reliability_map.png") as im:
        im.load()
        assert im.size[0] > 500


def test_mondrian_r2ccp_keeps_the_sets(judged):
    """Mondrian around R2CCP returns R2CCP's own sets (unions of intervals), with each
    group's threshold; every item's set lies inside its band (the hull)."""
    from scoreband import metrics as M

    pred, y, tasks = judged
    y = np.clip(y, 0, 1)
    m = Mondrian(R2CCP(0.1, epochs=60, seed=1))
    m.fit(pred.take(slice(0, 1600)), y[:1600], groups=tasks[:1600])
    band = m.predict(pred.take(slice(1600, None)), groups=tasks[1600:])
    assert band.sets01 is not None and len(band.sets01) == 800
    for s, lo, hi in zip(band.sets01, band.lo01, band.hi01, strict=True):
        assert lo - 1e-9 <= s[0][0] and s[-1][1] <= hi + 1e-9
    assert 0.85 <= M.set_coverage(band.sets01, y[1600:]) <= 0.97
    assert M.set_length(band.sets01) < M.sharpness(band.lo01, band.hi01)


def test_r2ccp_sets_hold_every_target_whose_score_passes():
    # exact sets: covered by the set <=> conformity <= q, also for targets between the
    # points of any grid (means of 3 ratings at the edge of a narrow piece)
    rng = np.random.default_rng(3)
    probs = rng.dirichlet(np.full(50, 0.3), size=400)
    y = rng.integers(0, 13, 400) / 12
    from scoreband.conformal.r2ccp import _interp_density, density_sets
    from scoreband.metrics import covered

    thr = float(np.quantile(_interp_density(probs, y), 0.3))
    sets, lo, hi = density_sets(probs, thr)
    by_score = _interp_density(probs, y) >= thr
    by_set = np.array([any(a - 1e-9 <= v <= b + 1e-9 for a, b in s)
                       for s, v in zip(sets, y, strict=True)])
    np.testing.assert_array_equal(by_set, by_score)
    assert covered(lo, hi, y)[by_score].all()
