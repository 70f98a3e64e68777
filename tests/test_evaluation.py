"""The evaluation protocol's coverage by level, width against error and its warnings."""

import numpy as np
import pytest

from scoreband.conformal import make_calibrator
from scoreband.datatypes import Predictions, Scale
from scoreband.evaluation import LEVEL_SHORTFALL, evaluate_splits, level_labels

LIKERT = Scale(1, 5, integer=True)


def test_levels_are_whole_points_of_a_likert_scale_or_fifths_of_another():
    assert level_labels([0.0, 0.29, 0.3, 1.0, np.nan], LIKERT).tolist() == [
        "1", "2", "2", "5", ""]
    assert level_labels([0.0, 0.5, 1.0], Scale(0, 1)).tolist() == ["0-0.2", "0.4-0.6",
                                                                   "0.8-1"]


def _table(n=3000, seed=0):
    """A scorer that is right on low levels and far off on level 5: a marginal 90 % band
    covers on average and fails the best items."""
    rng = np.random.default_rng(seed)
    y = rng.integers(1, 6, n).astype(float)
    m = y + rng.normal(0, 0.3, n)
    m[y == 5] -= 1.6  # the best items are scored far too low
    return Predictions(LIKERT.to01(np.clip(m, 1, 5))), LIKERT.to01(y)


@pytest.mark.statistical
def test_a_level_far_below_the_nominal_coverage_is_reported_and_warned_about():
    pred, y01 = _table()
    res = evaluate_splits(pred, y01, lambda seed=0: make_calibrator("split", 0.1,
                                                                    scale=LIKERT),
                          seeds=5)
    by = res["coverage_by_level"]
    top = by["target"]["5"]
    # the level-5 items are missed by ~1.6 points, beyond the band's half width: the
    # interval on ~600 distinct items (half-width < 0.05) lies far below 0.9 - 0.1
    assert top["ci"][1] < 0.9 - LEVEL_SHORTFALL and top["n_items"] > 400
    assert all(by["target"][g]["coverage"]["mean"] > 0.9 for g in "123")
    assert any("human score is at level 5" in w and "cannot trust" in w
               for w in res["warnings"])
    # the items predicted at level 3 hold both the true 3s and the mis-scored 5s (5 - 1.6)
    assert any("score puts at level 3" in w and "--mondrian --groups" in w
               for w in res["warnings"])
    assert res["n_items_tested"] > 0.9 * len(y01)  # 5 halves: ~97 % of the items
    # one width for every band (split on a given median): said so, UPS an artefact
    assert res["after"]["constant_width"] is True
    we = res["width_vs_error"]
    assert sum(b["n"] for b in we["bins"]) == 5 * 1500 and len(we["error"]) <= 1500


def test_a_band_that_adapts_is_not_called_constant():
    rng = np.random.default_rng(1)
    n = 800
    y = rng.uniform(0, 1, n)
    m = np.clip(y + rng.normal(0, 0.05, n), 0, 1)
    s = rng.uniform(0.02, 0.2, n)
    pred = Predictions(m, lo=np.clip(m - s, 0, 1), hi=np.clip(m + s, 0, 1))
    res = evaluate_splits(pred, y, lambda seed=0: make_calibrator("crc", 0.1,
                                                                  scale=Scale(0, 1)),
                          seeds=2)
    assert res["after"]["constant_width"] is False
    assert set(res["coverage_by_level"]["target"]) <= {"0-0.2", "0.2-0.4", "0.4-0.6",
                                                       "0.6-0.8", "0.8-1"}


def test_evaluate_result_is_the_json_in_its_order_and_reads_back():
    """:class:`EvaluateResult`: ``to_dict`` gives the evaluate JSON's keys in their order
    (absent keys left out, ``delta`` None kept), ``from_dict`` reads it back; an older
    file's missing keys stay ABSENT and unknown keys are dropped."""
    import json

    from scoreband.evaluation import ABSENT, EvaluateResult, evaluate_result

    rng = np.random.default_rng(2)
    y = rng.uniform(0, 1, 300)
    m = np.clip(y + rng.normal(0, 0.05, 300), 0, 1)
    pred = Predictions(m, lo=np.clip(m - 0.1, 0, 1), hi=np.clip(m + 0.1, 0, 1))
    res = evaluate_result(pred, y, lambda seed=0: make_calibrator("crc", 0.1,
                                                                  scale=Scale(0, 1)), seeds=2)
    doc = res.to_dict()
    assert list(doc)[:13] == ["method", "alpha", "n", "seeds", "cal_frac", "adjust_boundary",
                              "theoretical_coverage", "guarantee", "delta",
                              "coverage_below_target", "n_cal", "n_items_tested", "after"]
    assert doc["delta"] is None and "groups" not in doc and res.groups is ABSENT
    text = json.dumps(doc)
    assert json.dumps(EvaluateResult.from_dict(json.loads(text)).to_dict()) == text
    old = EvaluateResult.from_dict({"method": "split", "alpha": 0.1, "unknown": 1})
    assert old.to_dict() == {"method": "split", "alpha": 0.1}
    assert old.get("delta") is None and old.get("groups", {}) == {}
    assert evaluate_splits(pred, y, lambda seed=0: make_calibrator(
        "crc", 0.1, scale=Scale(0, 1)), seeds=2) == doc


def test_a_tiny_delta_is_written_exactly():
    """``--delta 1e-12`` is never printed as 0 % (or its confidence as 100 %)."""
    from scoreband.report.evaluate import guarantee_text
    from scoreband.textsafe import share_text

    assert share_text(1e-12) == "1e-12" and share_text(0.025) == "2.5 %"
    doc = {"delta": 1e-12, "guarantee": "g", "coverage_below_target": {
        "splits_below": 0, "splits": 10, "share": 0.0, "ci": [0.0, 0.31], "target": 0.9}}
    assert "allows at most 1e-12 (within it)" in guarantee_text(doc)


def test_coverage_by_predicted_level_counts_each_item_once():
    """Issue 43: an item whose predicted level moves from split to split (a learned median)
    is shared among its levels, so the levels' ``n_items`` add up to the distinct items
    tested (were items x splits: 6,342 "items" of 5,664 rows)."""
    from scoreband.evaluation import level_item_counts

    rng = np.random.default_rng(4)
    n = 600
    y = rng.integers(1, 6, n).astype(float)
    x = y + rng.normal(0, 0.8, n)
    pred = Predictions(LIKERT.to01(np.clip(x, 1, 5)), features=np.column_stack([x, x ** 2]))
    res = evaluate_splits(pred, LIKERT.to01(y), lambda seed=0: make_calibrator(
        "cqr", 0.1, scale=LIKERT, seed=seed), seeds=4)
    for kind in ("target", "predicted"):
        total = sum(v["n_items"] for v in res["coverage_by_level"][kind].values())
        assert abs(total - res["n_items_tested"]) <= len(res["coverage_by_level"][kind])
    assert level_item_counts({}) == {}
