"""Boundary adjustment of intervals onto the achievable target grid."""

from __future__ import annotations

import numpy as np

from scoreband.datatypes import Band, Scale
from scoreband.errors import InputError
from scoreband.grid import snap_to_grid, stored_decimals  # noqa: F401  (part of this module's API)

__all__ = ["boundary_adjust", "adjust_band", "check_on_grid", "snap_to_grid", "stored_decimals"]

_EPS = 1e-9


def boundary_adjust(lo01, hi01, steps) -> tuple[np.ndarray, np.ndarray]:
    """Snap ``[lo, hi]`` to ``[smallest achievable >= lo, largest achievable <= hi]``.

    Parameters
    ----------
    lo01, hi01 : (n,) arrays on [0, 1]
    steps : (n,) array or scalar
        Grid steps per unit of [0, 1] per item (``r * (b - a)`` for ``r`` integer ratings
        on ``[a, b]``; see :meth:`Scale.steps`). 0 means continuous: left unchanged.

    A grid point within 1e-9 grid steps of an end counts as lying on it (float round-off of
    values that are on the grid already).

    Returns
    -------
    lo, hi : (n,) arrays. Never wider than the input (up to that tolerance); an achievable
    target inside the input interval stays inside. Where no achievable target lies inside, the achievable
    target nearest the midpoint is returned as a one-point set.

    >>> lo, hi = boundary_adjust([0.1, 0.30], [0.6, 0.40], 4)   # 1-5 scale, one rating
    >>> lo.tolist(), hi.tolist()
    ([0.25, 0.25], [0.5, 0.25])
    """
    lo = np.asarray(lo01, dtype=float)
    hi = np.asarray(hi01, dtype=float)
    R = np.broadcast_to(np.asarray(steps, dtype=float), lo.shape)
    grid = R > 0
    Rg = np.where(grid, R, 1.0)
    # The tolerance absorbs float error of values that sit on a grid point already.
    new_lo = np.ceil(lo * Rg - _EPS) / Rg
    new_hi = np.floor(hi * Rg + _EPS) / Rg
    empty = new_lo > new_hi
    mid = np.clip(np.round((lo + hi) / 2 * Rg) / Rg, 0.0, 1.0)
    new_lo = np.where(empty, mid, new_lo)
    new_hi = np.where(empty, mid, new_hi)
    return np.where(grid, new_lo, lo), np.where(grid, new_hi, hi)


def adjust_band(band: Band, n_ratings=1) -> Band:
    """A copy of ``band`` snapped onto the achievable grid of its scale.

    ``n_ratings`` is the number of annotators behind each target (scalar or per item).
    Continuous scales are returned unchanged.
    """
    if not band.scale.integer:
        return band
    steps = band.scale.steps(np.broadcast_to(np.asarray(n_ratings, dtype=float), band.lo01.shape))
    lo, hi = boundary_adjust(band.lo01, band.hi01, steps)
    return Band(lo01=lo, median01=band.median01, hi01=hi, alpha=band.alpha,
                method=band.method + "+boundary", scale=band.scale, group=band.group,
                full_range=band.full_range, fallback=band.fallback, sets01=band.sets01,
                note=band.note)


def check_on_grid(y01, scale: Scale, n_ratings) -> None:
    """Raise when a target is not achievable by the mean of ``n_ratings`` integer ratings.

    Boundary adjustment onto the wrong grid silently destroys coverage (e.g. means of three
    ratings snapped to single-rating integers), so this is checked before adjusting.
    """
    if not scale.integer:
        return
    y = np.asarray(y01, dtype=float)
    r = np.broadcast_to(np.asarray(n_ratings, dtype=float), y.shape)
    steps = scale.steps(r)
    off = np.abs(y * steps - np.round(y * steps)) > 1e-6
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise InputError(
            f"target {float(scale.from01(y[i])):.4g} (item {i}) is not the mean of "
            f"{int(r[i])} integer rating(s) on [{scale.lo:g}, {scale.hi:g}], so boundary "
            "adjustment would snap it to the wrong grid; pass `ratings` (a column of each item's "
            "ratings, ';'-separated) or `n_ratings`"
        )


