"""`scoreband systems`: prediction-powered inference on system means and differences.

Statistical checks on simulated tables with a known truth (each system's mean over all of
its rows), agreement with ppi_py (the method's authors' package), the command and its bad
input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from scoreband.cli import app
from scoreband.system_level.ppi import (
    classical_mean,
    holm,
    ppi_mean,
    rank_sets,
    unlabeled_variance,
)
from scoreband.system_level.study import systems_study
from tests.conftest import runner


def outputs(rng, n_items=300, n_labels=30, shift=(0.0, 0.3, 0.6), bias=(0.0, 0.5, 1.0),
            noise=0.5, signal=True):
    """One row per (system, item): human score on 1-5 and a metric that tracks it (or not),
    biased differently for each system; the first ``n_labels`` items are labeled (items
    are exchangeable, so that is a random sample)."""
    q = rng.uniform(1.5, 4.5, n_items)
    frames = []
    for k, (s, b) in enumerate(zip(shift, bias, strict=True)):
        h = np.clip(q + s + rng.normal(0, 0.5, n_items), 1, 5)
        m = (h if signal else rng.uniform(1, 5, n_items)) + rng.normal(0, noise, n_items) + b
        frames.append(pd.DataFrame({"system": f"s{k}", "item": np.arange(n_items),
                                    "metric": m, "truth": h,
                                    "human": np.where(np.arange(n_items) < n_labels, h,
                                                      np.nan)}))
    return pd.concat(frames, ignore_index=True)


def _run(df, **kw):
    return systems_study(df, system_col="system", scores=["metric"], target="human",
                         scale="1,5", **kw)


def _bound(nominal, n_intervals):
    """nominal - 0.02 - 2.5 SE (HELPERS.md), SE of a coverage over ``n_intervals``."""
    return nominal - 0.02 - 2.5 * np.sqrt(nominal * (1 - nominal) / n_intervals)


@pytest.mark.statistical
@pytest.mark.slow
def test_coverage_of_means_and_differences_over_400_resamplings():
    """End to end (cross-fitted map, PPI++, pairs): 95 % intervals cover each system's true
    mean and every true difference in >= 0.95 - 0.02 - 2.5 SE of 400 resamplings, although
    the metric is biased differently for each system (+0, +0.5, +1.0); PPI++ is at most
    0.9x the classical width (within-system correlation ~0.7); no significant pair has the
    wrong sign in more than 3 % of resamplings. (Two folds for speed.)"""
    rng = np.random.default_rng(0)
    cov_m, cov_d, ratio, wrong = [], [], [], 0
    for _ in range(400):
        df = outputs(rng)
        res = _run(df, item_col="item", folds=2).doc
        truth = df.groupby("system")["truth"].mean()
        for s, v in res["systems"].items():
            cov_m.append(v["ci"][0] <= truth[s] <= v["ci"][1])
            ratio.append((v["ci"][1] - v["ci"][0])
                         / (v["classical"]["ci"][1] - v["classical"]["ci"][0]))
        for p in res["pairs"]:
            assert p["pairing"] == "paired" and p["n_labeled_both"] == 30
            d = truth[p["a"]] - truth[p["b"]]
            cov_d.append(p["ci"][0] <= d <= p["ci"][1])
            wrong += p["significant"] and np.sign(p["estimate"]) != np.sign(d)
    assert np.mean(cov_m) >= _bound(0.95, len(cov_m)), np.mean(cov_m)
    assert np.mean(cov_d) >= _bound(0.95, 400), np.mean(cov_d)
    assert np.mean(ratio) <= 0.9, np.mean(ratio)
    assert wrong / (400 * 3) <= 0.03


@pytest.mark.statistical
def test_a_score_with_no_signal_costs_little_width():
    """Over 500 resamplings of a metric independent of the humans, PPI++ stays within 3 % of
    the classical width on average (the power-tuned weight goes to ~0) and still covers."""
    rng = np.random.default_rng(1)
    ratio, cov = [], []
    for _ in range(500):
        truth = rng.normal(3, 0.8, 2000)
        f = rng.normal(3, 0.8, 2000)  # no signal
        e, c = ppi_mean(truth[:40], f[:40], f[40:]), classical_mean(truth[:40])
        ratio.append(e.se / c.se)
        cov.append(e.ci[0] <= truth.mean() <= e.ci[1])
    assert np.mean(ratio) <= 1.03, np.mean(ratio)
    assert np.mean(cov) >= 0.93


def test_paired_intervals_are_narrower_than_unpaired_on_paired_data():
    rng = np.random.default_rng(2)
    paired, unpaired = [], []
    for _ in range(30):
        df = outputs(rng, noise=0.8)
        a, b = _run(df, item_col="item").doc, _run(df).doc
        for p, u in zip(a["pairs"], b["pairs"], strict=True):
            assert p["paired"] and not u["paired"]
            paired.append(p["ci"][1] - p["ci"][0])
            unpaired.append(u["ci"][1] - u["ci"][0])
    assert np.mean(paired) < 0.8 * np.mean(unpaired), (np.mean(paired), np.mean(unpaired))


def test_agrees_with_ppi_py_where_the_formulas_match():
    """ppi_py (the method's authors' package) uses a normal quantile and ddof = 0 variances;
    scoreband uses Student's t and ddof = 1 (ddof = 2 for the residuals when the weight is
    fitted), which under ppi_py's own coverage at few labels (tests/system_level/
    test_coverage.py). So: at a fixed weight the point estimates agree exactly and ppi_py's
    standard error is ours with ddof = 0; with many labels the intervals, tuned or not,
    agree to 2 % of their width, and the tuned weights to 0.01. Both pool the labeled and
    unlabeled predictions' variance for the weight; scoreband also uses the pooled variance
    for the unlabeled mean's share of the standard error (ppi_py the unlabeled ones' alone,
    which is 0 when a few unlabeled verdicts agree: tests/system_level/test_coverage.py)."""
    import ppi_py

    rng = np.random.default_rng(3)
    y = rng.normal(size=60)
    f = y + rng.normal(0, 0.6, 60)
    fu = rng.normal(size=4000) + rng.normal(0, 0.6, 4000)
    n, N = 60, 4000
    for lam in (1.0, 0.4, 0.0):
        ours = ppi_mean(y, f, fu, 0.05, lam)
        lo, hi = np.ravel(ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05, lam=lam))
        assert ours.estimate == pytest.approx((lo + hi) / 2, abs=1e-12)
        ref_se = (hi - lo) / 2 / 1.959963984540054
        r = y - lam * f
        assert ref_se ** 2 == pytest.approx(lam ** 2 * fu.var(ddof=0) / N
                                            + r.var(ddof=0) / n, rel=1e-12)
        assert ours.se ** 2 == pytest.approx(lam ** 2 * unlabeled_variance(f, fu) / N
                                             + r.var(ddof=1) / n, rel=1e-12)
        assert ours.se == pytest.approx(ref_se, rel=0.02)
        assert ours.df == n - 1
    # many labels: t -> z, ddof irrelevant, the weights converge
    y = rng.normal(size=20_000)
    f = y + rng.normal(0, 0.6, 20_000)
    fu = rng.normal(size=200_000) + rng.normal(0, 0.6, 200_000)
    for lam in (None, 1.0):
        ours = ppi_mean(y, f, fu, 0.05, lam)
        ref = np.ravel(ppi_py.ppi_mean_ci(y, f, fu, alpha=0.05, lam=lam))
        np.testing.assert_allclose(ours.ci, ref, rtol=0, atol=0.02 * (ref[1] - ref[0]))
    assert ppi_mean(y, f, fu).lam == pytest.approx(_ppi_py_lambda(y, f, fu), abs=0.01)
    np.testing.assert_allclose(classical_mean(y, 0.1).ci,
                               np.ravel(ppi_py.classical_mean_ci(y, alpha=0.1)),
                               rtol=0, atol=0.001 * np.ptp(classical_mean(y, 0.1).ci))


def _ppi_py_lambda(y, f, fu):
    from ppi_py.ppi import _calc_lam_glm

    theta = fu.mean() + (y - f).mean()
    return float(_calc_lam_glm((y - theta)[:, None], (f - theta)[:, None],
                               (fu - theta)[:, None], np.eye(1), clip=True))


def test_holm_and_rank_sets():
    np.testing.assert_allclose(holm([0.01, 0.02, 0.5]), [0.03, 0.04, 0.5])
    pairs = [{"a": "x", "b": "y", "estimate": 1.0, "p_adjusted": 0.001},
             {"a": "x", "b": "z", "estimate": 1.0, "p_adjusted": 0.2},
             {"a": "y", "b": "z", "estimate": -0.1, "p_adjusted": 0.9}]
    assert rank_sets(["x", "y", "z"], pairs, 0.05) == {"x": (1, 2), "y": (2, 3), "z": (1, 3)}


def test_the_label_plan_is_the_first_count_that_reaches_the_width():
    """labels_for_width's search (conformal.core.first_passing, shared with
    conditional_rank) gives the smallest count whose interval is no wider than asked: a
    linear scan agrees."""
    from scoreband.system_level.ppi import labels_for_width, t_crit

    for width, var_y in ((0.2, 1.0), (0.5, 0.3), (0.05, 0.04), (1.0, 0.01)):
        got = labels_for_width(width, 0.05, var_y, 0.25, 0.9, 1.0, 10_000)["classical"]
        scan = next(n for n in range(5, 10 ** 6)
                    if var_y / n <= (width / 2 / t_crit(0.05, n - 1)) ** 2)
        assert got == scan, (width, var_y, got, scan)


def test_several_score_columns_combine_in_one_map():
    rng = np.random.default_rng(4)
    df = outputs(rng, n_items=2000, n_labels=100, noise=1.0)
    df["other"] = df["truth"] + rng.normal(0, 1.0, len(df))  # a second, independent view
    one = _run(df, item_col="item").doc
    two = systems_study(df, system_col="system", scores=["metric", "other"], target="human",
                        scale="1,5", item_col="item").doc
    w1 = np.mean([v["ci"][1] - v["ci"][0] for v in one["systems"].values()])
    w2 = np.mean([v["ci"][1] - v["ci"][0] for v in two["systems"].values()])
    assert w2 < 0.95 * w1, (w1, w2)


def test_plan_says_how_many_labels_reach_a_width():
    rng = np.random.default_rng(5)
    df = outputs(rng, n_items=3000, n_labels=100)
    res = _run(df, item_col="item", plan=0.2).doc
    for s, v in res["plan"]["systems"].items():
        assert v["ppi++"] < v["classical"]
        # the plan is consistent with the interval measured at n = 100
        width = res["systems"][s]["ci"][1] - res["systems"][s]["ci"][0]
        assert (v["ppi++"] > 100) == (width > 0.2)


# ------------------------------------------------------------------ the command
def _table(tmp_path, df=None):
    df = outputs(np.random.default_rng(6)) if df is None else df
    p = tmp_path / "outputs.csv"
    df.drop(columns="truth").to_csv(p, index=False)
    return p


ARGS = ["--system-col", "system", "--score", "metric", "--target", "human", "--scale", "1,5"]


def test_the_command_writes_every_documented_key(tmp_path):
    p = _table(tmp_path)
    r = runner.invoke(app, ["systems", str(p), *ARGS, "--item-col", "item", "--plan", "0.3",
                            "--out", str(tmp_path / "s.json"), "--html",
                            str(tmp_path / "s.html")])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "s.json").read_text())
    assert {"alpha", "method", "systems", "pairs", "ranking", "plan"} <= set(doc)
    for v in doc["systems"].values():
        assert {"n_labeled", "n_unlabeled", "estimate", "ci", "classical",
                "effective_labels"} <= set(v)
        assert {"estimate", "ci"} <= set(v["classical"])
    for p_ in doc["pairs"]:
        assert {"a", "b", "estimate", "ci", "p_value", "p_adjusted", "paired"} <= set(p_)
    assert doc["alpha"] == 0.05 and doc["method"] == "ppi++"
    assert [r["system"] for r in doc["ranking"]] == ["s2", "s1", "s0"]
    html = (tmp_path / "s.html").read_text()
    assert "<svg" in html and "Pairwise differences" in html and "effective labels" in html
    assert "s2 >" in r.output


def test_python_api_mirrors_the_command(tmp_path):
    import scoreband

    p = _table(tmp_path)
    res = scoreband.systems(p, system_col="system", score="metric", target="human",
                            scale=(1, 5), item_col="item")
    r = runner.invoke(app, ["systems", str(p), *ARGS, "--item-col", "item", "--out",
                            str(tmp_path / "s.json")])
    doc = json.loads((tmp_path / "s.json").read_text())
    assert res.doc["systems"]["s1"]["ci"] == pytest.approx(doc["systems"]["s1"]["ci"])
    assert r.exit_code == 0
    assert list(res.table()["system"]) == ["s0", "s1", "s2"]


def test_bad_rows_are_reported_and_skipped(tmp_path):
    df = outputs(np.random.default_rng(7))
    df["metric"] = df["metric"].astype(object)
    df.loc[3, "metric"] = "high"         # non-numeric score
    df.loc[4, "metric"] = None           # missing score
    df.loc[5, "human"] = 7.0             # outside the scale
    dup = df.iloc[[10]].copy()           # item 10 of s0 again
    df = pd.concat([df, dup], ignore_index=True)
    p = _table(tmp_path, df)
    r = runner.invoke(app, ["systems", str(p), *ARGS, "--item-col", "item", "--out",
                            str(tmp_path / "s.json")])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "4 of 901 rows skipped" in text
    assert "'high'" in text and "missing value" in text and "outside the scale" in text
    assert "appears again for system 's0'" in text
    doc = json.loads((tmp_path / "s.json").read_text())
    assert len(doc["skipped_rows"]) == 4
    assert doc["systems"]["s0"]["n_labeled"] + doc["systems"]["s0"]["n_unlabeled"] == 297


def test_a_system_with_too_few_labels(tmp_path):
    df = outputs(np.random.default_rng(8))
    df.loc[(df.system == "s1") & (df.item > 0), "human"] = np.nan  # one label left
    p = _table(tmp_path, df)
    r = runner.invoke(app, ["systems", str(p), *ARGS, "--out", str(tmp_path / "s.json")])
    assert r.exit_code == 0, r.output
    assert "'s1' (1 labeled)" in " ".join(r.output.split())
    assert set(json.loads((tmp_path / "s.json").read_text())["systems"]) == {"s0", "s2"}
    r = runner.invoke(app, ["systems", str(p), *ARGS, "--strict", "--out",
                            str(tmp_path / "t.json")])
    assert r.exit_code == 2 and "'s1' (1 labeled)" in " ".join(r.output.split())
    assert not (tmp_path / "t.json").exists()


def test_a_constant_score_is_said(tmp_path):
    df = outputs(np.random.default_rng(9))
    df["metric"] = 3.0
    p = _table(tmp_path, df)
    r = runner.invoke(app, ["systems", str(p), *ARGS, "--out", str(tmp_path / "s.json")])
    assert r.exit_code == 0, r.output
    assert "is constant" in r.output
    doc = json.loads((tmp_path / "s.json").read_text())
    for v in doc["systems"].values():  # no information: the labels alone
        assert v["ci"] == pytest.approx(v["classical"]["ci"], abs=1e-9)


@pytest.mark.parametrize("change,msg", [
    (lambda df: df.assign(human=np.nan), "no system has 5 or more labeled rows"),
    (lambda df: df.assign(metric="x"), "no usable rows"),
    (lambda df: df.rename(columns={"metric": "m"}), "--score column 'metric' is not in the table"),
])
def test_nothing_computable_is_exit_2(tmp_path, change, msg):
    p = _table(tmp_path, change(outputs(np.random.default_rng(10))))
    r = runner.invoke(app, ["systems", str(p), *ARGS, "--out", str(tmp_path / "s.json")])
    assert r.exit_code == 2, r.output
    assert msg in " ".join(r.output.split()) and "Traceback" not in r.output
    assert not (tmp_path / "s.json").exists()


def test_out_may_not_be_the_input(tmp_path):
    p = _table(tmp_path)
    before = p.read_bytes()
    r = runner.invoke(app, ["systems", str(p), *ARGS, "--out", str(p)])
    assert r.exit_code == 2
    assert p.read_bytes() == before


def test_pairwise_system_columns_are_one_option(tmp_path):
    """`systems --pairwise` takes the pair's two system columns as --system-col 'A,B' (the
    command keeps <= 25 options); the default is system_a,system_b; a value that is not two
    columns is refused naming the option."""
    rng = np.random.default_rng(7)
    names = ["s1", "s2", "s3"]
    rows = [(f"i{i}", a, b) for i in range(60) for a, b in
            [("s1", "s2"), ("s1", "s3"), ("s2", "s3")]]
    df = pd.DataFrame(rows, columns=["item", "system_a", "system_b"])
    strength = df.system_a.map(dict(zip(names, (0.8, 0.0, -0.8), strict=True))) - \
        df.system_b.map(dict(zip(names, (0.8, 0.0, -0.8), strict=True)))
    p_a = 1 / (1 + np.exp(-strength.to_numpy() - rng.normal(0, 0.5, len(df))))
    df["human"] = np.where(rng.random(len(df)) < 0.4,
                           np.where(rng.random(len(df)) < p_a, "A", "B"), "")
    df["pair_p_a"], df["pair_p_b"] = 0.9 * p_a, 0.9 * (1 - p_a)
    df["pair_p_tie"] = 0.1
    df.to_csv(tmp_path / "default.csv", index=False)
    df.rename(columns={"system_a": "left", "system_b": "right"}).to_csv(
        tmp_path / "named.csv", index=False)
    docs = []
    for name, extra in (("default", []), ("named", ["--system-col", "left,right"])):
        r = runner.invoke(app, ["systems", "--pairwise", str(tmp_path / f"{name}.csv"),
                                "--label-col", "human", *extra, "--out",
                                str(tmp_path / f"{name}.json")])
        assert r.exit_code == 0, r.output
        docs.append(json.loads((tmp_path / f"{name}.json").read_text()))
    assert docs[0]["systems"] == docs[1]["systems"] and docs[0]["pairs"] == docs[1]["pairs"]
    r = runner.invoke(app, ["systems", "--pairwise", str(tmp_path / "named.csv"),
                            "--label-col", "human", "--system-col", "left", "--out",
                            str(tmp_path / "x.json")])
    assert r.exit_code == 2 and "--system-col" in r.output and "A_COL,B_COL" in r.output
