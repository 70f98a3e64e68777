"""The achievable target grid: a target that is the mean of n integer ratings on a scale
lies on the grid of multiples of 1/n; targets stored rounded (1.33 for 4/3) are put back on
it. A leaf module: the column reader (snapping targets as it reads them) and the boundary
adjustment of bands (conformal.boundary) both use it."""

from __future__ import annotations

import numpy as np

from scoreband.datatypes import Scale

__all__ = ["snap_to_grid", "stored_decimals"]


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
