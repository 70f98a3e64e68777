"""A calibrator knows the domain it was fitted on (scoreband.domain): rows outside it are
flagged, a table mostly outside it is refused, group labels match as written; scales that
cannot be computed on are refused naming the option."""

import warnings

import numpy as np
import pandas as pd
import pytest

from scoreband import api
from scoreband.datatypes import Scale
from scoreband.errors import InputError


def _table(n=300, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(1, 6, n).astype(float)
    m = np.clip(y + rng.normal(0, 0.7, n), 1, 5)
    return pd.DataFrame({"y": y, "m": m, "f": m * 2 + rng.normal(0, 0.1, n),
                         "g": rng.choice([1.0, 2.0], n)})


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_a_table_on_another_scale_is_refused_naming_the_column():
    df = _table()
    fit = api.calibrate(df, dict(target="y", scale=(1, 5), median="m"), {"method": "split"})
    other = df.assign(m=np.r_[np.ones(5), np.random.default_rng(1).uniform(0, 0.99, 295)])
    with pytest.raises(InputError, match=r"295 of 300 rows.*column 'm'"):
        api.apply(other, fit)


@pytest.mark.parametrize("method", ["cqr", "fitted", "chr"])
def test_features_of_another_extractor_are_refused(method):
    df = _table()
    fit = api.calibrate(df, dict(target="y", scale=(1, 5), features="f"), {"method": method})
    with pytest.raises(InputError, match=r"column 'f'.*range seen at calibration"):
        api.apply(df.assign(f=df["f"] * 20), fit)


def test_a_few_rows_outside_are_flagged_and_said():
    df = _table()
    fit = api.calibrate(df, dict(target="y", scale=(1, 5), features="f"), {"method": "cqr"})
    odd = df.copy()
    odd.loc[:3, "f"] = 1e308
    said = []
    out = api.apply(odd, fit, on_warning=said.append).table
    assert out["band_flag"].iloc[:4].tolist() == ["out_of_domain"] * 4
    assert (out["band_flag"].iloc[4:] == "").all()
    assert any("4 of 300 rows lie outside" in s and "'f'" in s for s in said)


def test_isotonic_map_on_a_metric_times_100_is_refused():
    df = _table()
    fit = api.calibrate(df, dict(target="y", scale=(1, 5), median="f"),
                        {"method": "split", "map": "isotonic"})
    with pytest.raises(InputError, match="outside the domain"):
        api.apply(df.assign(f=df["f"] * 100), fit)


def test_recalibrate_on_a_table_on_another_scale_is_refused():
    df = _table()
    fit = api.calibrate(df, dict(target="y", scale=(1, 5), features="f"), {"method": "cqr"})
    with pytest.raises(InputError, match="recalibrate"):
        api.recalibrate(fit, df.assign(f=df["f"] / 10))


def test_group_labels_match_as_written():
    """Groups read as 1.0 / 2.0 at calibration and 1 / 2 at apply are the same groups."""
    df = _table()
    cols = dict(target="y", scale=(1, 5), median="m", groups="g")
    fit = api.calibrate(df, cols, {"method": "split", "mondrian": True})
    out = api.apply(df.assign(g=df["g"].astype(int)), fit).table
    assert not out["band_flag"].str.contains("fallback").any()
    assert set(out["band_group"]) == {"1.0", "2.0"}


@pytest.mark.parametrize("text,name,match", [
    ("5,1", "pred_scale", "`pred_scale` expects A < B"),
    ("-1e308,1e308", "scale", "too wide or too narrow"),
    ("1,1", "scale", "A < B"),
])
def test_scales_that_cannot_be_computed_on_are_refused(text, name, match):
    with pytest.raises(InputError, match=match):
        Scale.parse(text, name=name)
