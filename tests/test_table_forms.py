"""Real tables come rounded, with uneven rater counts, and summaries must not overstate:
targets snapped onto the grid they were rounded from, no silent change of representation,
intervals that count an item once, verdicts that never name a method below its target."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import scoreband as sb
from scoreband.conformal.bins import target_classes
from scoreband.datatypes import Scale
from scoreband.errors import InputError
from scoreband.studies.judge import best_judge_method

LIKERT = Scale(1, 5, integer=True)


@pytest.fixture(scope="module")
def table():
    df = sb.read_table(sb.example_table())
    r = df["ratings"].str.split(";").apply(lambda x: np.mean([float(v) for v in x]))
    df["exact"], df["r2"], df["r4"] = r, r.round(2), r.round(4)
    return df


def _eval(df, target, method="crc", **cfg):
    cols = dict(target=target, scale="1,5", median="median", lo="q05", hi="q95",
                pred_scale="0,1")
    return sb.evaluate(df, **cols, method=method, adjust_boundary=True, **cfg, seeds=3,
                       n_ratings=3)


@pytest.mark.parametrize("target", ["r2", "r4"])
def test_rounded_targets_give_the_bands_of_exact_targets(table, target):
    exact, rounded = _eval(table, "exact"), _eval(table, target)
    for k in ("coverage", "sharpness", "pearson"):
        assert rounded["after"][k] == exact["after"][k]
    assert not exact["notes"]
    assert rounded["notes"] and "stored rounded" in rounded["notes"][0]


def test_a_target_on_no_grid_point_is_an_error_naming_the_row(table):
    df = table.copy()
    df.loc[7, "r2"] = 3.5  # no mean of 3 ratings rounds to 3.5
    with pytest.raises(InputError, match=r"row 8 .*, column 'r2': target 3.5 .* 3.333 and 3.667"):
        _eval(df, "r2")


def test_an_ambiguous_rounded_target_is_an_error():
    from scoreband.conformal.boundary import snap_to_grid

    # 1-decimal storage with 11 raters: 1.05 is as close to 1.0 as to 1.0909
    _, _, bad = snap_to_grid([1.05], LIKERT, 11, decimals=[1])
    assert bad and "lies as close to" in bad[0]


def test_chr_classes_are_the_union_grid_for_uneven_rater_counts():
    r = np.array([3, 4, 5, 3, 4])
    y = LIKERT.to01(np.array([4 / 3, 2.25, 3.4, 5.0, 1.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fall-back, so no warning
        tc = target_classes(LIKERT, y, r)
    assert tc.kind == "grid"
    assert np.isclose(tc.centers, LIKERT.to01(4 / 3)).any()
    assert np.isclose(tc.centers, LIKERT.to01(2.25)).any()


def _uneven_1_to_7(rng, n):
    """A judge table with 3 to 11 ratings per item on 1-7 and 7 score-token log-probs."""
    from scoreband.datatypes import Predictions

    seven = Scale(1, 7, integer=True)
    q = rng.beta(3, 2, n) * 6 + 1
    count = rng.integers(3, 12, n)
    y = np.array([np.clip(np.rint(q[i] + rng.normal(0, 1.0, count[i])), 1, 7).mean()
                  for i in range(n)])
    noisy = q + rng.normal(0, 0.8, n)
    k = np.arange(1, 8)
    lp = -0.5 * (k[None] - noisy[:, None]) ** 2
    lp -= np.log(np.exp(lp).sum(1, keepdims=True))
    pred = Predictions(seven.to01(np.exp(lp) @ k), features=lp, n_ratings=count.astype(float))
    return seven, pred, seven.to01(y)


def test_chr_on_a_small_uneven_table_is_no_wider_than_split():
    """300 calibration items, 3-11 ratings on 1-7 (hundreds of achievable means): the
    classifier on coarse cells keeps CHR within 1.1x of split conformal's width (it was
    1.8x with one class per achievable mean), at its coverage."""
    from scoreband.conformal import make_calibrator
    from scoreband.metrics import covered

    res = {"split": [], "chr": [], "chr-fine": []}
    for seed in range(4):
        seven, pred, y = _uneven_1_to_7(np.random.default_rng(seed), 1300)
        cal, test = pred.take(slice(0, 300)), pred.take(slice(300, None))
        for name in res:
            c = (make_calibrator("split", 0.1, scale=seven) if name == "split" else
                 sb.conformal.CHR(0.1, scale=seven, coarse="never" if name == "chr-fine"
                                  else "auto"))
            if name == "chr":
                with pytest.warns(UserWarning, match="coarse cells"):
                    c.fit(cal, y[:300])
            else:
                c.fit(cal, y[:300])
            b = c.predict(test)
            res[name].append((covered(b.lo01, b.hi01, y[300:]).mean(), np.mean(b.hi01 - b.lo01)))
    cov = {k: np.mean([c for c, _ in v]) for k, v in res.items()}
    width = {k: np.mean([w for _, w in v]) for k, v in res.items()}
    assert width["chr"] <= 1.1 * width["split"], width
    assert width["chr-fine"] > 1.4 * width["split"], width  # what the coarse cells fix
    assert 0.87 <= cov["chr"] <= 0.93, cov


def test_chr_on_targets_that_take_a_few_values_of_a_continuous_scale():
    """THumB-shaped: human scores on half points of 1-5, read as a continuous scale. One
    class per value the targets take (not 50 equal bins, whose empty runs between the
    values made CHR 3.6 wide on THumB): CHR within 1.1x split conformal on a fitted score,
    and valid although 5 % of the targets lie between the common values."""
    from scoreband.conformal import make_calibrator
    from scoreband.datatypes import Predictions
    from scoreband.metrics import covered

    cont = Scale(1, 5)
    rng = np.random.default_rng(3)
    q = rng.uniform(2, 5, 2400)
    y = cont.to01(np.clip(np.round((q + rng.normal(0, 0.4, 2400)) * 2) / 2, 1, 5))
    off = rng.uniform(size=2400) < 0.05  # 5 % between the common values (4.2, 3.7 ...)
    y[off] = np.clip(y[off] + rng.uniform(-0.06, 0.06, off.sum()), 0, 1)
    X = np.c_[q + rng.normal(0, 0.5, 2400), rng.normal(size=2400)]
    pred = Predictions(np.full(2400, np.nan), features=X)
    widths, covs = {}, {}
    for m in ("chr", "fitted"):
        c = make_calibrator(m, 0.1, scale=cont)
        c.fit(pred.take(slice(0, 1000)), y[:1000])
        b = c.predict(pred.take(slice(1000, None)))
        widths[m], covs[m] = np.mean(b.hi01 - b.lo01), covered(b.lo01, b.hi01, y[1000:]).mean()
    assert widths["chr"] <= 1.1 * widths["fitted"], widths
    # one calibration draw (1,000 rows): its coverage spreads about 0.01 around 1 - alpha;
    # since every split is seeded by its rows (issue 43) this draw gives 0.939
    assert 0.88 <= covs["chr"] <= 0.95, covs


def test_a_fall_back_to_bins_is_never_silent():
    y = LIKERT.to01(np.array([1.37, 2.0, 3.0]))
    with pytest.warns(UserWarning, match="equal bins .* instead of the achievable targets"):
        tc = target_classes(LIKERT, y, np.full(3, 3.0))
    assert tc.kind == "bins"


def test_metrics_say_whose_median_they_are(table):
    cols = dict(target="exact", scale="1,5", median="median", features=["emb_0", "emb_1"],
                pred_scale="0,1")
    res = sb.evaluate(table, **cols, method="cqr", seeds=2)
    assert "learned" in res["after"]["median_source"]
    res = sb.evaluate(table, **{**cols, "features": []}, method="split", seeds=2)
    assert res["after"]["median_source"] == "the given median"


def test_group_intervals_count_each_item_once(table):
    cols = dict(ratings="ratings", scale="1,5", median="median", pred_scale="0,1",
                groups="task")
    res = sb.evaluate(table, **cols, method="split", seeds=6)
    for g, v in res["groups"].items():
        size = int((table["task"] == g).sum())
        assert v["n_items"] <= size  # never n per split x splits
        assert v["n_items"] > v["n"]  # but more than one split's test side


def _doc(coverages, n=186):
    return {"alpha": 0.1, "n": n, "methods": {"j": {
        m: {"plain": {"coverage": {"mean": c}, "width": {"mean": w}}}
        for m, (c, w) in coverages.items()}}}


def test_the_verdict_never_names_a_method_below_its_target():
    # 0.80 on 186 items: the interval's upper end is below 0.90, however narrow the band
    best = best_judge_method(_doc({"narrow": (0.80, 1.0), "wide": (0.905, 2.0)}))
    assert best["method"] == "wide" and best["ci"][0] <= 0.905 <= best["ci"][1]
    # 0.888 on 186 items reaches 0.90 within its interval: named, with the interval
    best = best_judge_method(_doc({"split": (0.888, 1.5), "chr": (0.93, 1.9)}))
    assert best["method"] == "split" and best["ci"][1] >= 0.9
    assert best_judge_method(_doc({"a": (0.5, 1.0)})) is None


def test_recalibrate_keeps_the_model_and_redoes_the_conformal_step(tmp_path):
    """auto keeps its choice, CRC its omega; only the conformal parameters move; the
    guarantee for the number of labels is saved; too few labels is an error naming the
    number needed."""
    df = sb.read_table(sb.example_table())
    cols = dict(ratings="ratings", scale="1,5", median="median", lo="q05", hi="q95",
                pred_scale="0,1")
    for method in ("crc", "auto", "split"):
        fit = sb.calibrate(df.iloc[:1000], **cols, method=method)
        fit.save(tmp_path / f"{method}.json")
        new = df.iloc[1000:1060].copy()
        new["median"] = np.clip(new["median"] + 0.1, 0, 1)  # a biased new domain
        re = sb.recalibrate(tmp_path / f"{method}.json", new)
        assert re.inputs["recalibration"]["n_labeled"] == 60
        g = re.inputs["recalibration"]["guarantee"]
        assert g["expected_low"] == 0.9 and g["expected_high"] == pytest.approx(0.9 + 1 / 61)
        if method == "crc":
            assert re.calibrator.params_["omega"] == fit.calibrator.params_["omega"]
            assert re.calibrator.params_["beta"] != fit.calibrator.params_["beta"]
        if method == "auto":
            assert re.calibrator.choice == fit.calibrator.choice
        re.save(tmp_path / f"{method}_new.json")
        banded = sb.apply(df.iloc[1060:], tmp_path / f"{method}_new.json").table
        assert banded["band_lo"].notna().all()
    with pytest.raises(InputError, match="needs at least 9"):
        sb.recalibrate(tmp_path / "crc.json", df.iloc[:5])
    with pytest.raises(InputError, match="'q05'.*does not have"):
        sb.recalibrate(tmp_path / "crc.json", df.iloc[:50].drop(columns=["q05"]))
