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
