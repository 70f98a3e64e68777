"""Every registered method (the contract's cases) fitted on a calibration table sorted by
its target, or reversed, gives the same bands as on the table as it came: every random
share (a learned model's training share, CRC's omega selection, Mondrian's held-out share,
a map's share, auto's selection) is drawn from the items' identity, never their position."""

from __future__ import annotations

import numpy as np
import pytest

from scoreband.evaluation import split_indices
from tests.conformal.contract import CASES, library_band
from tests.golden.cases import judge_table


@pytest.fixture(scope="module")
def halves():
    df = judge_table(300, seed=5)
    cal, test = split_indices(len(df), 0.5, np.random.default_rng(1))
    return df.iloc[cal].reset_index(drop=True), df.iloc[test].reset_index(drop=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bands_do_not_depend_on_row_order(halves, name):
    cal, test = halves
    _, ref, _ = library_band(name, cal, test)
    for other in (cal.sort_values("human", kind="stable"), cal.iloc[::-1]):
        _, band, _ = library_band(name, other.reset_index(drop=True), test)
        np.testing.assert_allclose(band.lo01, ref.lo01, rtol=0, atol=1e-9, err_msg=name)
        np.testing.assert_allclose(band.hi01, ref.hi01, rtol=0, atol=1e-9, err_msg=name)
