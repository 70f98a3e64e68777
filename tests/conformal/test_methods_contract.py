"""One contract over every calibration method the registry holds, read from what each
method's class declares (names, needs, auto candidacy, whole-table application): a method
added in a module of its own is tested here without a line of this file changing."""

import numpy as np
import pytest

from scoreband.conformal import (
    METHODS,
    Auto,
    load_calibrator,
    make_calibrator,
    save_calibrator,
)
from scoreband.conformal.auto import usable_candidates
from scoreband.conformal.base import (
    INPUTS,
    SAVED,
    auto_candidates,
    calibrator_class,
    has_inputs,
    needs_whole_table,
)
from scoreband.errors import InputError
from scoreband.records import Predictions, Scale

SCALE = Scale(1, 5)


def _data(n, seed, drop=()):
    rng = np.random.default_rng(seed)
    y = rng.uniform(0, 1, n)
    med = np.clip(y + rng.normal(0, 0.08, n), 0, 1)
    parts = {"median": med, "lo": np.clip(med - 0.1, 0, 1), "hi": np.clip(med + 0.1, 0, 1),
             "features": np.c_[med, rng.normal(0, 1, n), y + rng.normal(0, 0.2, n)],
             "embedding": rng.normal(0, 1, (n, 4))}
    if "median" in drop:
        parts["median"] = np.full(n, np.nan)
    if "interval" in drop:
        parts["lo"] = parts["hi"] = None
    for k in ("features", "embedding"):
        if k in drop:
            parts[k] = None
    return Predictions(**parts), y


@pytest.mark.parametrize("name", METHODS.names())
def test_every_method_fits_predicts_and_round_trips(name, tmp_path):
    cls = calibrator_class(name)
    assert cls.method in SAVED and all(set(alt) <= set(INPUTS) for alt in cls.needs)
    cal = make_calibrator(name, 0.1, scale=SCALE, seed=1)
    pred, y = _data(600, 0)
    test, _ = _data(200, 1)
    assert any(has_inputs(pred, alt) for alt in cls.needs)
    band = cal.fit(pred, y).predict(test)
    assert len(band.lo01) == 200 and (band.lo01 <= band.hi01 + 1e-12).all()
    assert (band.lo01 >= 0).all() and (band.hi01 <= 1).all()
    assert np.allclose(band.lo, SCALE.from01(band.lo01))
    assert needs_whole_table(cal) == cls.whole_table
    f = save_calibrator(tmp_path / "c.json", cal)
    again, _ = load_calibrator(f)
    b2 = again.predict(test)
    np.testing.assert_allclose(b2.lo01, band.lo01, atol=1e-9)
    np.testing.assert_allclose(b2.hi01, band.hi01, atol=1e-9)


@pytest.mark.parametrize("name", [n for n in METHODS.names()
                                  if calibrator_class(n).needs != ((),) and n != "auto"])
def test_a_method_refuses_predictions_without_what_it_declares(name):
    """Predictions that meet none of a method's declared ``needs`` are refused by fit."""
    cls = calibrator_class(name)
    drop = {i for alt in cls.needs for i in alt}
    pred, y = _data(300, 2, drop=drop)
    assert not any(has_inputs(pred, alt) for alt in cls.needs)
    with pytest.raises(InputError):
        make_calibrator(name, 0.1, scale=SCALE).fit(pred, y)


def test_auto_chooses_among_the_declared_candidates_that_the_inputs_allow():
    cands = auto_candidates()
    assert cands[0] == "split" and cands[-1] == "marginal"
    assert all(calibrator_class(c).auto_rank is not None for c in cands)
    pred, _ = _data(50, 3)
    assert usable_candidates(pred) == list(cands)
    only_median, _ = _data(50, 3, drop={"interval", "features", "embedding"})
    known = {"split", "fitted", "crc", "cqr", "chr", "r2ccp", "marginal"}
    assert [c for c in usable_candidates(only_median) if c in known] == ["split", "fitted",
                                                                         "marginal"]
    with pytest.raises(InputError, match="crc needs a point prediction .* and an uncalibrated"):
        Auto(0.1, candidates=["split", "crc"]).fit(*_data(400, 4, drop={"interval"}))


def test_the_registry_lists_the_methods_in_their_documented_order():
    """Modules of their own register in the order --help and the docs list them."""
    assert METHODS.names()[:10] == ["split", "crc", "crc-exact", "crc-same", "fitted", "cqr",
                                    "r2ccp", "chr", "marginal", "auto"]


@pytest.mark.parametrize("name,module", [("Fitted", "fitted"), ("CQR", "cqr"),
                                         ("R2CCP", "r2ccp"), ("CHR", "chr"),
                                         ("Marginal", "marginal"),
                                         ("density_sets", "r2ccp"), ("fit_softmax", "chr")])
def test_the_former_learned_module_paths_still_import_with_a_deprecation_warning(name, module):
    import importlib

    import scoreband.conformal.learned as learned

    with pytest.warns(DeprecationWarning, match=f"moved to scoreband.conformal.{module}"):
        old = getattr(learned, name)
    assert old is getattr(importlib.import_module(f"scoreband.conformal.{module}"), name)
    with pytest.raises(AttributeError):
        learned.NoSuchName  # noqa: B018
