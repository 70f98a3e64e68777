"""Boundary adjustment of intervals onto the achievable target grid."""

from __future__ import annotations

import numpy as np

from scoreband.datatypes import Band, Scale
from scoreband.errors import InputError

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


def stored_decimals(values) -> np.ndarray:
    """The decimals each value was stored with (its shortest repr: 1.33 -> 2, 4/3 computed in
    float64 -> 16, 3.0 -> 0); 16 for exponents and non-finite values.

    >>> stored_decimals([1.33, 1.3333, 3.0, 4 / 3]).tolist()
    [2, 4, 0, 16]
    """
    out = []
    for v in np.asarray(values, dtype=float).tolist():
        s = repr(v)
        if not np.isfinite(v) or "e" in s or "." not in s:
            out.append(0 if np.isfinite(v) and float(v).is_integer() and "e" not in s else 16)
            continue
        frac = s.split(".", 1)[1]
        out.append(0 if frac == "0" else len(frac))
    return np.asarray(out, dtype=int)


def snap_to_grid(y, scale: Scale, n_ratings, decimals=None):
    """Targets stored rounded (1.33, 1.3333 for 4/3) onto the achievable means of
    ``n_ratings`` integer ratings (per item): a target within half its rounding unit
    (``0.5 * 10**-decimals``; at least 1e-6 of the scale, for float32 round-off) of exactly
    one achievable mean is that mean.

    Returns ``(snapped, moved, bad)``: the targets (native scale), which ones moved, and
    ``{position: reason}`` for targets that fit no grid point or two (ambiguous), with the
    nearest grid values in the reason.

    >>> s, moved, bad = snap_to_grid([1.33, 4.67, 3.0, 3.5], Scale(1, 5, True), 3)
    >>> np.round(s[:3], 6).tolist(), moved.tolist(), sorted(bad)
    ([1.333333, 4.666667, 3.0], [True, True, False, False], [3])
    """
    y = np.asarray(y, dtype=float)
    r = np.broadcast_to(np.asarray(n_ratings, dtype=float), y.shape)
    dec = stored_decimals(y) if decimals is None else np.broadcast_to(decimals, y.shape)
    tol = np.maximum(0.5 * 10.0 ** (-dec.astype(float)), 1e-6 * scale.width)
    k = (y - scale.lo) * r
    near = np.round(k)
    out = scale.lo + near / r
    dist = np.abs(out - y)
    second = np.abs(scale.lo + (near + np.where(k >= near, 1, -1)) / r - y)
    ok = np.isfinite(y) & (dist <= tol + 1e-12)
    exact = dist <= 1e-9 * scale.width  # on the grid already: never ambiguous
    ambiguous = ok & ~exact & (second <= tol + 1e-12)
    bad = {}
    for i in np.flatnonzero(np.isfinite(y) & (~ok | ambiguous)):
        lo_v = scale.lo + np.floor(k[i]) / r[i]
        hi_v = scale.lo + np.ceil(k[i]) / r[i]
        why = ("lies as close to" if ambiguous[i] else "is not within its rounding unit "
               f"({tol[i]:.2g}) of")
        bad[int(i)] = (f"target {y[i]:g} {why} the achievable grid of means of {int(r[i])} "
                       f"rating(s): {lo_v:.4g} and {hi_v:.4g}; store the target with more "
                       "decimals, check `n_ratings`, or give `ratings` (each item's ratings)")
    snapped = np.where(ok & ~ambiguous, out, y)
    moved = ok & ~ambiguous & ~exact
    return snapped, moved, bad
