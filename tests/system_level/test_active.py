"""Active labeling (Zrnic and Candes 2024) and stratified PPI++ (Fisch et al. 2024): coverage
of means and differences when labels are drawn with unequal, known probabilities, on
simulated tables with a known truth (each system's mean over all of its rows); the design;
`systems --propose-labels` and `--inclusion-prob` through the command.

Tolerance (HELPERS.md): coverage >= 0.95 - 0.02 - 2.5 SE over R resamplings, SE <= 0.006
(R = 1,500 intervals per case at least). Vectorised: every resampling at once."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from scoreband.cli import app
from scoreband.system_level.active import (
    active_arrays,
    inclusion_probabilities,
    predicted_variance_ratio,
    stratified_arrays,
    systematic_draw,
)
from scoreband.system_level.ppi import ppi_arrays, t_crit
from tests.conftest import runner

ALPHA = 0.05
R = 1500
N = 600
STRATA = np.arange(N) % 4
SIGMA = np.array([0.03, 0.06, 0.12, 0.24])[STRATA]  # error spread varies by stratum


def _bound(n_intervals):
    se = np.sqrt(ALPHA * (1 - ALPHA) / n_intervals)
    assert se <= 0.006
    return 1 - ALPHA - 0.02 - 2.5 * se


def _population(rng, shift=0.0):
    """Targets on [0, 1] for R resamplings of N items: a mean the metric tracks plus noise
    whose spread depends on the stratum; the metric is biased (+0.1)."""
    q = rng.uniform(0, 1, (R, N))
    y = np.clip(0.3 + shift + 0.4 * q + rng.normal(0, 1, (R, N)) * SIGMA, 0, 1)
    return y, 0.4 + shift + 0.4 * q


def _draw(rng, pi):
    P = np.broadcast_to(pi, (R, N))
    return P, systematic_draw(P, rng.random((R, N)), rng.random(R))


def _check(est, se, df, truth):
    return np.abs(est - truth) <= t_crit(ALPHA, df) * se


def test_design_sums_to_the_budget_floors_and_caps():
    rng = np.random.default_rng(0)
    u = rng.gamma(0.5, 1, 500)
    pi = inclusion_probabilities(u, 40, mix=0.5)
    assert abs(pi.sum() - 40) < 1e-9
    assert pi.min() >= 0.5 * 40 / 500 - 1e-12  # the floor: mix x uniform
    pi = inclusion_probabilities(np.r_[1000.0, np.ones(99)], 50, mix=0.0)
    assert pi.max() == 1.0 and abs(pi.sum() - 50) < 1e-9  # capped, excess spread
    assert np.allclose(inclusion_probabilities(np.zeros(10), 3), 0.3)  # no information
    d = systematic_draw(np.broadcast_to(pi, (4000, 100)), rng.random((4000, 100)),
                        rng.random(4000))
    assert set(d.sum(1)) == {50}  # a fixed number of labels
    assert np.abs(d.mean(0) - pi).max() < 4 * np.sqrt(0.25 / 4000)  # exact probabilities


@pytest.mark.statistical
@pytest.mark.parametrize("n", [30, 100])
def test_active_and_stratified_cover_means_and_differences(n):
    """Informative uncertainty (the true error spread): active PPI++ and stratified active
    PPI++ cover each system's mean and the paired difference, and the active interval is
    narrower than the uniform PPI++ one at equal labels (at 100 labels <= 0.93x)."""
    rng = np.random.default_rng([35, n])
    ya, fa = _population(rng)
    yb = np.clip(ya + 0.05 + rng.normal(0, 1, (R, N)) * SIGMA, 0, 1)
    fb = fa + 0.05
    pi = inclusion_probabilities(np.sqrt(2) * SIGMA, n)  # item-level: both systems at once
    P, lab = _draw(rng, pi)
    cov, widths = [], {}
    for y, f in ((ya, fa), (yb, fb), (ya - yb, fa - fb)):
        truth = y.mean(-1)
        est, se, _, df, _ = active_arrays(y, f, P, lab)
        cov.append(_check(est, se, df, truth))
        widths.setdefault("active", []).append(np.mean(t_crit(ALPHA, df) * se))
        # strata of >= 8 labels (the command pools smaller ones): 2 strata at 30 labels
        e2, s2, d2 = stratified_arrays(y, f, P, lab, STRATA if n >= 100 else STRATA >= 2)
        cov.append(_check(e2, s2, d2, truth))
        e3, s3, _, d3 = ppi_arrays(y[:, :n], f[:, :n], f[:, n:])  # uniform, items exchangeable
        widths.setdefault("uniform", []).append(np.mean(t_crit(ALPHA, d3) * s3))
    c = np.mean(cov, axis=1)
    assert c.min() >= _bound(R), c
    ratio = np.array(widths["active"]) / np.array(widths["uniform"])
    assert ratio.max() <= (0.97 if n == 30 else 0.93), ratio


@pytest.mark.statistical
def test_an_uninformative_uncertainty_costs_little_and_still_covers():
    """An uncertainty unrelated to the error spread (random per item): no gain, coverage
    kept, width within 4 % of uniform PPI++ (the mixture's price: ~1 + (1 - mix)^2 cv^2)."""
    rng = np.random.default_rng(36)
    y, f = _population(rng)
    pi = inclusion_probabilities(rng.uniform(0.03, 0.24, N), 60)
    P, lab = _draw(rng, pi)
    est, se, _, df, _ = active_arrays(y, f, P, lab)
    assert np.mean(_check(est, se, df, y.mean(-1))) >= _bound(R)
    e3, s3, _, d3 = ppi_arrays(y[:, :60], f[:, :60], f[:, 60:])
    ratio = np.mean(t_crit(ALPHA, df) * se) / np.mean(t_crit(ALPHA, d3) * s3)
    assert ratio <= 1.04, ratio


@pytest.mark.statistical
def test_a_small_budget_covers():
    """10 expected labels per system (the command accepts 5): the active interval covers."""
    rng = np.random.default_rng(37)
    y, f = _population(rng)
    pi = inclusion_probabilities(SIGMA, 10)
    P, lab = _draw(rng, pi)
    est, se, _, df, _ = active_arrays(y, f, P, lab)
    assert np.mean(_check(est, se, df, y.mean(-1))) >= _bound(R)


def test_the_plain_inverse_probability_form_is_wider_than_hajek():
    """Unequal weights: the plain form's residuals are not centred, so its variance carries
    the residuals' level (with the labels alone, the level of the targets)."""
    rng = np.random.default_rng(38)
    y, f = _population(rng, shift=0.2)
    P, lab = _draw(rng, inclusion_probabilities(SIGMA, 30))
    for lam, factor in ((None, 1.0), (0.0, 1.5)):
        _, se_h, _, _, _ = active_arrays(y, f, P, lab, lam)
        _, se_p, _, _, _ = active_arrays(y, f, P, lab, lam, hajek=False)
        assert np.mean(se_p) > factor * np.mean(se_h), (lam, np.mean(se_p), np.mean(se_h))


def test_predicted_ratio_matches_the_realised_one():
    """The plan's prediction (squared residuals and the design) against the realised
    variance ratio of the two estimators over the resamplings: within 10 %."""
    rng = np.random.default_rng(39)
    y, f = _population(rng)
    pi = inclusion_probabilities(SIGMA, 100)
    P, lab = _draw(rng, pi)
    est, _, _, _, _ = active_arrays(y, f, P, lab)
    PU, labu = _draw(rng, np.full(N, 100 / N))
    est_u, _, _, _, _ = active_arrays(y, f, PU, labu)
    realised = np.var(est - y.mean(-1)) / np.var(est_u - y.mean(-1))
    pred = predicted_variance_ratio(SIGMA ** 2, pi)
    assert abs(pred / realised - 1) < 0.1, (pred, realised)


# ------------------------------------------------------------------ the command


def _table(tmp_path, n_items=120, labels=12):
    rng = np.random.default_rng(5)
    q = rng.uniform(1.5, 4.5, n_items)
    task = np.arange(n_items) % 3
    frames = []
    for k, s in enumerate((0.0, 0.4, 0.8)):
        h = np.clip(q + s + rng.normal(0, 1, n_items) * (0.2 + 0.4 * task), 1, 5)
        frames.append(pd.DataFrame({
            "system": f"s{k}", "item": np.arange(n_items), "task": task,
            "metric": h + rng.normal(0, 0.3, n_items), "truth": h, "note": "x",
            "human": np.where(np.arange(n_items) < labels, h, np.nan)}))
    p = tmp_path / "t.csv"
    pd.concat(frames, ignore_index=True).to_csv(p, index=False)
    return p


BASE = ["--system-col", "system", "--score", "metric", "--scale", "1,5"]


def test_propose_labels_keeps_every_row_and_clips_probabilities(tmp_path):
    src = _table(tmp_path)
    out = tmp_path / "proposal.csv"
    r = runner.invoke(app, ["systems", str(src), *BASE, "--target", "human", "--item-col",
                            "item", "--strata", "task", "--propose-labels", "20",
                            "--plan", "0.5", "--out", str(out)])
    assert r.exit_code == 0, r.output
    t, before = pd.read_csv(out), pd.read_csv(src)
    assert len(t) == len(before) and list(t.columns) == [*before.columns, "inclusion_prob",
                                                         "propose_label"]
    pd.testing.assert_frame_equal(t[before.columns], before)
    unl = t.human.isna()
    assert (t.inclusion_prob[~unl] == 1).all() and not t.propose_label[~unl].any()
    assert t.inclusion_prob[unl].min() >= 0.5 * 20 / 108 - 1e-9  # floor: mix x uniform
    assert t.inclusion_prob.max() <= 1
    per = t[unl].groupby("system").inclusion_prob.sum()
    assert np.allclose(per, 20)  # the expected number of new labels per system
    # by item: an item is proposed for every system or none
    assert (t[unl].groupby("item").propose_label.nunique() == 1).all()
    assert "uniform" in r.output and "active" in r.output
    # the same seed, the table shuffled: the same rows proposed
    shuffled = tmp_path / "s.csv"
    before.sample(frac=1, random_state=1).to_csv(shuffled, index=False)
    out2 = tmp_path / "p2.csv"
    r = runner.invoke(app, ["systems", str(shuffled), *BASE, "--target", "human",
                            "--item-col", "item", "--strata", "task", "--propose-labels",
                            "20", "--out", str(out2)])
    assert r.exit_code == 0, r.output
    t2 = pd.read_csv(out2).sort_values(["system", "item"]).reset_index(drop=True)
    t1 = t.sort_values(["system", "item"]).reset_index(drop=True)
    assert (t1.propose_label == t2.propose_label).all()


def test_inclusion_prob_round_trip(tmp_path):
    src = _table(tmp_path, labels=0)
    prop = tmp_path / "proposal.parquet"
    r = runner.invoke(app, ["systems", str(src), *BASE, "--item-col", "item",
                            "--propose-labels", "45", "--out", str(prop)])
    assert r.exit_code == 0, r.output
    assert "no labels yet" in r.output or "uniform" in r.output
    t = pd.read_parquet(prop)
    t["human"] = np.where(t.propose_label, t.truth, np.nan)
    lab = tmp_path / "labeled.csv"
    t.to_csv(lab, index=False)
    out = tmp_path / "res.json"
    r = runner.invoke(app, ["systems", str(lab), *BASE, "--target", "human", "--item-col",
                            "item", "--inclusion-prob", "inclusion_prob", "--strata", "task",
                            "--plan", "0.5", "--out", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["inclusion_prob"] == "inclusion_prob" and doc["strata"] == "task"
    assert set(doc["systems"]) == {"s0", "s1", "s2"}
    assert all(p["pairing"] == "paired" for p in doc["pairs"])
    truth = t.groupby("system").truth.mean()
    for s, v in doc["systems"].items():
        assert v["n_labeled"] == 45 and set(v["strata"]) == {"0", "1", "2"}
        assert v["ci"][0] < v["ci"][1]
        assert abs(v["estimate"] - truth[s]) < 0.5
    assert "predicted_width_ratio" in doc["systems"]["s0"]["plan"]


def test_bad_inclusion_probabilities_are_reported(tmp_path):
    src = _table(tmp_path)
    t = pd.read_csv(src)
    t["p"] = 0.1
    t.loc[0, "p"] = 0.0  # a labeled row that could not have been labeled
    bad = tmp_path / "bad.csv"
    t.to_csv(bad, index=False)
    r = runner.invoke(app, ["systems", str(bad), *BASE, "--target", "human",
                            "--inclusion-prob", "p", "--out", str(tmp_path / "o.json")])
    assert r.exit_code == 0, r.output
    assert "(0, 1]" in r.output
    r = runner.invoke(app, ["systems", str(bad), *BASE, "--target", "human",
                            "--propose-labels", "5", "--out", str(bad)])
    assert r.exit_code == 2 and "same file" in r.output
    t = t.rename(columns={"p": "inclusion_prob"})
    t.to_csv(bad, index=False)
    r = runner.invoke(app, ["systems", str(bad), *BASE, "--target", "human",
                            "--propose-labels", "5", "--out", str(tmp_path / "x.csv")])
    assert r.exit_code == 2 and "already has column" in r.output
