"""Mondrian by predicted level (``by="predicted"``, ``--mondrian-by predicted``): bins of the
point score fitted on a share the conformal step never sees, each bin calibrated on its own.

The simulated table has noise that grows with the point score, so a marginal band
over-covers the low predicted levels and under-covers the high ones (0.80 in the fourth
bin at alpha 0.1); calibrated per bin, every bin is covered at 1 - alpha.
"""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import scoreband.api as sb
from scoreband.cli import app
from scoreband.conformal import calibrator_from_state, make_calibrator
from scoreband.conformal.mondrian import Mondrian, predicted_labels, predicted_thresholds
from scoreband.datatypes import Predictions, Scale
from scoreband.errors import InputError
from tests.conftest import runner

ALPHA = 0.1


def _table(n: int, rng: np.random.Generator):
    """Point scores on [0, 1]; the target's noise sd grows from 0.02 to 0.17 with them."""
    m = rng.uniform(0, 1, n)
    y = np.clip(m + (0.02 + 0.15 * m) * rng.normal(size=n), 0, 1)
    return Predictions(m), y


def _coverage_by_bin(n_cal=600, n_test=600, resplits=200, seed=0):
    """Per resplit: marginal coverage of Mondrian-by-predicted bands, and each bin's
    coverage for it and for plain split conformal (the same bins)."""
    rng = np.random.default_rng(seed)
    marg, per_bin = [], {"mondrian": [], "split": []}
    for r in range(resplits):
        p, y = _table(n_cal, rng)
        pt, yt = _table(n_test, rng)
        mon = make_calibrator("split", ALPHA, mondrian="predicted", seed=r).fit(p, y)
        plain = make_calibrator("split", ALPHA).fit(p, y)
        # score 1 (and 0) is a bin edge nowhere: 5 bins in every resplit
        lab = mon.group_labels(pt)
        for name, cal in (("mondrian", mon), ("split", plain)):
            b = cal.predict(pt)
            cov = (b.lo01 <= yt) & (yt <= b.hi01)
            if name == "mondrian":
                marg.append(cov.mean())
            per_bin[name].append([cov[lab == f"pred{k}"].mean() for k in range(1, 6)])
    return np.array(marg), {k: np.array(v) for k, v in per_bin.items()}


@pytest.mark.statistical
def test_coverage_is_valid_overall_and_evened_out_across_predicted_levels():
    marg, per_bin = _coverage_by_bin()
    se = marg.std(ddof=1) / np.sqrt(len(marg))
    assert se <= 0.006
    # marginal validity: E[coverage] >= 1 - alpha
    assert marg.mean() >= 1 - ALPHA - 2.5 * se
    # each bin: Mondrian's guarantee per group (the bins were cut on held-out items), so
    # every bin's mean coverage over the resplits >= 1 - alpha - 2.5 SE of that bin
    mon = per_bin["mondrian"]
    se_bin = mon.std(axis=0, ddof=1) / np.sqrt(len(mon))
    assert (se_bin <= 0.006).all()
    assert (mon.mean(axis=0) >= 1 - ALPHA - 2.5 * se_bin).all(), mon.mean(axis=0)
    # the marginal band leaves the high levels well below 1 - alpha (0.80 in bin 4 by the
    # noise model: q from the pooled residuals is ~1.3 sd of that bin), and Mondrian lifts
    # the worst bin by more than 0.08
    plain = per_bin["split"].mean(axis=0)
    assert plain.min() < 1 - ALPHA - 0.08
    assert mon.mean(axis=0).min() > plain.min() + 0.08
    # and the spread between levels shrinks from about 0.2 to under 0.05
    assert np.ptp(plain) > 0.15 and np.ptp(mon.mean(axis=0)) < 0.05


def test_bins_are_cut_on_the_held_out_share_and_recorded():
    rng = np.random.default_rng(1)
    p, y = _table(500, rng)
    cal = Mondrian(make_calibrator("split", ALPHA), by="predicted", seed=3).fit(p, y)
    share = cal.params_["group_share"]
    assert share == {"from": "held-out", "n": 100, "frac": 0.2, "seed": 3}
    assert cal.params_["marginal"]["n"] == 400  # the share is never conformalised
    assert len(cal.params_["thresholds"]) == 4
    assert cal.get_config()["n_bins"] == 5
    band = cal.predict(Predictions([0.01, 0.5, 0.99]))
    assert band.method == "mondrian(split,predicted)"
    assert band.group.tolist() == ["pred1", "pred3", "pred5"]


def test_a_discrete_point_score_makes_fewer_bins_none_empty():
    score = np.repeat([0.0, 0.25, 0.5, 0.75, 1.0], [50, 300, 100, 40, 10])
    t = predicted_thresholds(score, 5)
    assert t == sorted(set(t)) and min(t) > 0.0
    lab = predicted_labels(score, t)
    assert all((lab == g).any() for g in np.unique(lab))


def test_the_other_groupings_save_as_before():
    base = make_calibrator("split", ALPHA)
    assert "n_bins" not in Mondrian(base, by="difficulty").get_config()
    with pytest.raises(InputError, match="'predicted'"):
        Mondrian(base, by="level")
    with pytest.raises(InputError, match="n_bins"):
        Mondrian(base, by="predicted", n_bins=1)


def test_a_missing_point_score_is_an_input_error():
    p = Predictions(np.r_[np.full(99, 0.5), np.nan])
    with pytest.raises(InputError, match="point prediction"):
        Mondrian(make_calibrator("split", ALPHA), by="predicted").fit(p, np.full(100, 0.5))


def test_a_learned_base_bins_its_own_point_score():
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 1, (800, 3))
    y = np.clip(x.mean(axis=1) + 0.05 * rng.normal(size=800), 0, 1)
    pred = Predictions(np.full(800, np.nan), features=x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = make_calibrator("cqr", ALPHA, mondrian="predicted").fit(pred, y)
    assert cal.params_["group_share"]["from"] == "training"
    assert len(set(cal.group_labels(pred).tolist())) == 5


def test_saved_and_loaded_it_gives_the_same_bands(tmp_path):
    df = sb.read_table(sb.example_table())
    cols = dict(ratings="ratings", scale=(1, 5), median="median", pred_scale=(0, 1))
    fit = sb.calibrate(df.iloc[:1200], **cols, method="split", mondrian_by="predicted")
    assert fit.calibrator.by == "predicted"
    path = fit.save(tmp_path / "cal.json")
    state = json.loads(path.read_text())["calibrator"]
    again = calibrator_from_state(state, Scale(1, 5, integer=True))
    assert again.params_["thresholds"] == fit.calibrator.params_["thresholds"]
    new = df.iloc[1200:].reset_index(drop=True)
    a, b = fit.predict(new).table, sb.apply(new, path).table
    pd.testing.assert_series_equal(a["band_lo"], b["band_lo"])
    assert set(a["band_group"]) <= {f"pred{k}" for k in range(1, 6)} | {
        f"pooled:pred{k}" for k in range(1, 6)}


def test_the_cli_offers_it_on_evaluate_and_calibrate(tmp_path):
    t = str(sb.example_table())
    args = ["--ratings", "ratings", "--scale", "1,5", "--median", "median", "--pred-scale",
            "0,1", "--mondrian-by", "predicted"]
    r = runner.invoke(app, ["evaluate", t, *args, "--seeds", "2", "--out",
                            str(tmp_path / "m.json")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "m.json").read_text())["method"] == \
        "mondrian(split,predicted)"
    r = runner.invoke(app, ["calibrate", t, *args, "--out", str(tmp_path / "c.json")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["evaluate", t, *args[:-1], "given", "--seeds", "2"])
    assert r.exit_code == 2 and "groups" in r.output
