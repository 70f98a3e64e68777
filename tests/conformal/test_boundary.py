import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scoreband.conformal import SplitConformal, adjust_band, boundary_adjust
from scoreband.conformal.boundary import check_on_grid
from scoreband.datatypes import Predictions, Scale
from scoreband.errors import InputError

unit = st.floats(0, 1, allow_nan=False)


@given(unit, unit, st.integers(1, 5), st.sampled_from([(1, 5), (0, 10), (1, 4)]))
@example(1.0, 1.8047032812330304e-10, 1, (1, 5))  # found by hypothesis: lo 7e-10 steps above 0
@settings(max_examples=400, deadline=None)
def test_adjust_never_widens_and_keeps_discrete_coverage(a, b, r, ends):
    lo, hi = min(a, b), max(a, b)
    scale = Scale(*ends, integer=True)
    R = scale.steps(r)
    nlo, nhi = boundary_adjust(np.array([lo]), np.array([hi]), R)
    # a grid point within 1e-9 grid steps of an end counts as on it (float round-off), the
    # tolerance boundary_adjust documents
    tol = 1e-9 / R
    assert nhi[0] - nlo[0] <= hi - lo + 2 * tol
    grid = np.arange(int(round(R)) + 1) / R
    before = (grid >= lo - tol) & (grid <= hi + tol)
    after = (grid >= nlo[0] - 1e-12) & (grid <= nhi[0] + 1e-12)
    if before.any():
        assert (before == after).all()
    else:  # empty: one achievable point, the nearest to the midpoint
        assert nlo[0] == nhi[0]
        assert abs(nlo[0] - (lo + hi) / 2) <= 0.5 / R + 1e-12


def test_continuous_scale_untouched():
    lo, hi = boundary_adjust([0.13], [0.77], 0)
    assert lo[0] == 0.13 and hi[0] == 0.77


def test_adjust_band_coverage_unchanged_and_narrower(rng):
    scale = Scale(1, 5, integer=True)
    n = 4000
    ratings = rng.integers(1, 6, size=(n, 3))
    y01 = scale.to01(ratings.mean(1))
    m = np.clip(y01 + rng.normal(0, 0.1, n), 0, 1)
    cal = SplitConformal(0.1, scale=scale).fit(Predictions(m[:2000]), y01[:2000])
    b = cal.predict(Predictions(m[2000:]))
    a = adjust_band(b, 3)
    y = y01[2000:]
    cov_b = ((b.lo01 <= y + 1e-12) & (y <= b.hi01 + 1e-12)).mean()
    cov_a = ((a.lo01 <= y + 1e-12) & (y <= a.hi01 + 1e-12)).mean()
    assert cov_a == cov_b
    assert a.width01.mean() < b.width01.mean()
    assert a.method == "split+boundary"


def test_wrong_grid_refused():
    scale = Scale(1, 5, integer=True)
    y01 = scale.to01(np.array([2.0, 2.0 + 1 / 3]))
    check_on_grid(y01, scale, 3)
    try:
        check_on_grid(y01, scale, 1)
    except InputError as e:
        assert "`ratings`" in str(e)
    else:
        raise AssertionError("expected InputError")
