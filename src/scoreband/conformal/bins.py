"""Classes of the target for the bin-classifier methods (CHR, R2CCP), and the nested
intervals of conformal histogram regression (CHR, Sesia and Romano 2021).

Pure numpy. Two kinds of classes:

* ``grid``: the achievable targets themselves (the means of ``R`` integer ratings on an
  integer scale: 13 values for 3 ratings on 1-5). A band is ``[lowest, highest]`` class kept,
  so it always starts and ends on an achievable target.
* ``bins``: ``K`` equal bins of [0, 1] for continuous targets; a band runs from the left edge
  of its lowest bin to the right edge of its highest.

Nested intervals: starting from the most probable class, each step adds the more probable of
the two neighbours of the current run of classes, so every interval is contiguous and each
contains the previous one. An item's conformity score is the probability mass accumulated when
its class joins (with randomised tie-breaking: the mass before it plus ``u`` times its own
mass, ``u ~ U(0, 1)``); the band for a threshold ``q`` is the shortest prefix reaching ``q``.
Written here because neither MAPIE nor crepes implements CHR, and the reference code (chr,
on GitHub) needs rpy2 and R.
"""

from __future__ import annotations

import warnings

import numpy as np

from scoreband.datatypes import Scale
from scoreband.errors import InputError

__all__ = ["TargetClasses", "target_classes", "support_bins", "coarse_edges", "spread_histogram", "nested_order",
           "nested_scores", "nested_bands", "MIN_ITEMS_PER_CLASS"]

#: below this many training items per class on average, CHR fits its histogram on coarse
#: cells and spreads it over the classes (:func:`coarse_edges`, :func:`spread_histogram`).
#: Low on purpose: on the 13 means of 3 ratings even 60 training items do better class by
#: class (SummEval consistency, 120 calibration items: 0.55 wide, 1.01 on coarse cells,
#: which spread the peak at 5.0 over its cell); coarse cells pay off where the classes
#: outnumber the items (uneven rater counts: hundreds of achievable means)
MIN_ITEMS_PER_CLASS = 2


class TargetClasses:
    """The classes a bin classifier predicts: centres and edges on [0, 1].

    >>> tc = target_classes(Scale(1, 5, integer=True), np.array([0.0, 0.5, 1.0]), np.full(3, 1.0))
    >>> tc.kind, tc.centers.tolist()
    ('grid', [0.0, 0.25, 0.5, 0.75, 1.0])
    >>> tc.classify(np.array([0.26, 1.0])).tolist()
    [1, 4]
    """

    def __init__(self, kind: str, centers, lo_edges, hi_edges):
        self.kind = kind
        self.centers = np.asarray(centers, dtype=float)
        self.lo_edges = np.asarray(lo_edges, dtype=float)
        self.hi_edges = np.asarray(hi_edges, dtype=float)

    def __len__(self) -> int:
        return len(self.centers)

    def classify(self, y01) -> np.ndarray:
        """The class of each target (nearest grid point, or the bin that holds it)."""
        y = np.asarray(y01, dtype=float)
        if self.kind in ("grid", "support"):
            mids = (self.centers[1:] + self.centers[:-1]) / 2
            return np.searchsorted(mids, y, side="right")
        # bins [lo_edge, hi_edge) (the last one closed), equal or not
        return np.searchsorted(self.hi_edges[:-1], y, side="right")

    def band(self, lo_cls, hi_cls) -> tuple[np.ndarray, np.ndarray]:
        """The band ``[lo, hi]`` on [0, 1] of a run of classes: from value to value on a
        grid and on the values a table's targets take (``support``; CHR scores a target
        between two values as the later of the two to join its band, so the guarantee is
        that of the band as reported), from edge to edge for bins."""
        if self.kind in ("grid", "support"):
            return self.centers[lo_cls], self.centers[hi_cls]
        return self.lo_edges[lo_cls], self.hi_edges[hi_cls]

    def to_dict(self) -> dict:
        return {"kind": self.kind, "centers": self.centers.tolist(),
                "lo_edges": self.lo_edges.tolist(), "hi_edges": self.hi_edges.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> TargetClasses:
        return cls(d["kind"], d["centers"], d["lo_edges"], d["hi_edges"])


def uniform_bins(k: int) -> TargetClasses:
    """``k`` equal bins of [0, 1]."""
    if k < 2:
        raise InputError(f"bins must be >= 2, got {k}")
    e = np.linspace(0.0, 1.0, k + 1)
    return TargetClasses("bins", (e[:-1] + e[1:]) / 2, e[:-1], e[1:])


def support_bins(values) -> TargetClasses:
    """One bin per distinct value the targets take, its edges halfway to the neighbouring
    values (a table whose targets lie on a few values, such as THumB's half points on a
    scale read as continuous: equal bins there leave runs of empty bins between the values,
    and the nested intervals wander over them).

    A band runs from the lowest kept value to the highest, as on a grid. The scale's ends
    0 and 1 are always classes: a value-to-value band could otherwise never reach a target
    below the lowest value or above the highest of the training share, yet such a target
    would score as the end value and count as covered (CHR covered 0.78 at alpha 0.2 on a
    table whose ends hold 14 % of the targets, 0.71 after recalibration on a shifted domain).

    >>> support_bins([0.5, 0.25, 0.5]).centers.tolist()
    [0.0, 0.25, 0.5, 1.0]
    >>> support_bins([0.5, 0.0, 1.0, 0.5]).hi_edges.tolist()
    [0.25, 0.75, 1.0]
    """
    v = np.unique(np.concatenate([[0.0, 1.0], np.asarray(values, dtype=float)]))
    mids = (v[1:] + v[:-1]) / 2
    return TargetClasses("support", v, np.concatenate([[0.0], mids]),
                         np.concatenate([mids, [1.0]]))


def target_classes(scale: Scale, y01, n_ratings=None, bins: int = 50,
                   grid: str = "auto", support: bool = False) -> TargetClasses:
    """Grid classes when every target is the mean of the same number of integer ratings on an
    integer scale (``grid="auto"``), else ``bins`` equal bins - or, with ``support``, one
    bin per value the targets take when they take at most ``bins`` values
    (:func:`support_bins`).

    ``grid="never"`` forces bins; ``grid="always"`` raises when the targets are not on one grid.
    """
    if grid not in ("auto", "never", "always"):
        raise InputError(f"grid must be 'auto', 'never' or 'always', got {grid!r}")
    y = np.asarray(y01, dtype=float)
    why = "the scale is continuous"
    if grid != "never" and scale.integer and n_ratings is not None:
        r = np.unique(np.asarray(n_ratings, dtype=float))
        if (r >= 1).all() and all(float(v).is_integer() for v in r):
            # the achievable means of every rater count present (uneven counts: the union)
            pts = np.unique(np.round(np.concatenate(
                [scale.to01(scale.achievable(int(v))) for v in r]), 12))
            steps = scale.steps(np.asarray(n_ratings, dtype=float))
            on_grid = np.abs(y * steps - np.round(y * steps)) <= 1e-6
            if on_grid.all() and len(pts) <= 1001:
                mids = (pts[1:] + pts[:-1]) / 2
                return TargetClasses("grid", pts, np.concatenate([[0.0], mids]),
                                     np.concatenate([mids, [1.0]]))
            why = (f"{int((~on_grid).sum())} target(s) are not means of their items' integer "
                   "ratings (give `ratings`, or `n_ratings` for targets stored rounded)"
                   if not on_grid.all() else f"the achievable grid has {len(pts)} points")
        else:
            why = "the rater counts are not positive integers"
    elif grid != "never" and scale.integer:
        why = "the number of ratings per target is unknown"
    if grid == "always":
        raise InputError(f"the targets have no achievable grid: {why}")
    distinct = np.unique(np.round(y, 12))
    use_support = support and 2 <= len(distinct) <= bins
    if grid == "auto" and scale.integer:
        # a change of representation is never silent (the band's ends are then bin edges)
        what = (f"{len(distinct)} bins around the values the targets take" if use_support
                else f"{bins} equal bins of the scale")
        warnings.warn(f"CHR / R2CCP classes: {why}, so {what} are used instead of the "
                      "achievable targets", stacklevel=2)
    return support_bins(distinct) if use_support else uniform_bins(bins)


def coarse_edges(scale: Scale, n_train: int) -> np.ndarray:
    """Edges on [0, 1] of the coarse cells a small table's histogram is fitted on: one cell
    per integer rating of an integer scale (centred on it: 7 cells for 1-7), else
    ``n_train // 10`` equal cells (at least 2).

    >>> coarse_edges(Scale(1, 5, integer=True), 150).tolist()
    [0.0, 0.125, 0.375, 0.625, 0.875, 1.0]
    """
    if scale.integer and scale.width >= 1:
        k = int(round(scale.width))
        mids = (np.arange(k) + 0.5) / k
        return np.concatenate([[0.0], mids, [1.0]])
    return np.linspace(0.0, 1.0, max(2, n_train // 10) + 1)


def spread_histogram(P, edges, lo_edges, hi_edges) -> np.ndarray:
    """A histogram over coarse cells (``(n, C)``, cells between consecutive ``edges``) spread
    over finer classes (``[lo_edges, hi_edges]`` each): the coarse distribution function,
    linear within each cell, evaluated at the fine classes' edges. Each row still sums to 1;
    mass is shared between neighbouring achievable values in proportion to the span each
    one stands for. This is the regularisation of a histogram over hundreds of achievable
    means (uneven rater counts) fitted on a few hundred items.

    >>> spread_histogram(np.array([[0.5, 0.5]]), [0, 0.5, 1], [0, 0.25, 0.75], [0.25, 0.75, 1]
    ...                  ).tolist()
    [[0.25, 0.5, 0.25]]
    """
    P = np.asarray(P, dtype=float)
    cdf = np.concatenate([np.zeros((len(P), 1)), np.cumsum(P, axis=1)], axis=1)
    e = np.asarray(edges, dtype=float)
    # piecewise-linear CDF at each fine edge: locate its cell, interpolate within
    def at(x):
        x = np.clip(np.asarray(x, dtype=float), e[0], e[-1])
        j = np.clip(np.searchsorted(e, x, side="right") - 1, 0, len(e) - 2)
        t = (x - e[j]) / np.maximum(e[j + 1] - e[j], 1e-300)
        return cdf[:, j] * (1 - t) + cdf[:, j + 1] * t
    Q = np.maximum(at(hi_edges) - at(lo_edges), 0.0)
    return Q / np.maximum(Q.sum(axis=1, keepdims=True), 1e-300)


def nested_order(P) -> np.ndarray:
    """``(n, K)``: the class that joins each item's nested interval at each step.

    Step 0 is the most probable class; each later step adds the more probable neighbour of
    the current run (the lower one on ties).

    >>> nested_order(np.array([[0.1, 0.5, 0.3, 0.1]])).tolist()
    [[1, 2, 0, 3]]
    """
    P = np.asarray(P, dtype=float)
    order = np.empty(P.shape, dtype=np.intp)
    # rows a chunk at a time, so that the K - 1 steps find their rows in cache: 4x faster
    # at 10^6 items than whole-array steps (benchmarks/calibration_speed.py)
    for s in range(0, len(P), _NEST_CHUNK):
        order[s:s + _NEST_CHUNK] = _nested_order(P[s:s + _NEST_CHUNK])
    return order


_NEST_CHUNK = 16384


def _nested_order(P: np.ndarray) -> np.ndarray:
    n, k = P.shape
    pad = np.full((n, k + 2), -1.0)  # a -1 either side: no neighbour there
    pad[:, 1:-1] = P
    flat = pad.ravel()
    base = np.arange(n) * (k + 2)
    order = np.empty((n, k), dtype=np.intp)
    lo = P.argmax(axis=1)
    hi = lo.copy()
    order[:, 0] = lo
    for s in range(1, k):
        # the left neighbour of the run sits at lo - 1 (pad column lo), the right at hi + 1
        left = flat.take(base + lo) >= flat.take(base + hi + 2)
        lo -= left
        hi += ~left
        order[:, s] = np.where(left, lo, hi)
    return order


def nested_mass(P) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, mass, cum)``: :func:`nested_order`, each step's class probability and the
    running mass; what :func:`nested_scores` and :func:`nested_bands` start from (computed
    once when an item set is scored twice or scored and banded)."""
    P = np.asarray(P, dtype=float)
    order = nested_order(P)
    mass = np.take_along_axis(P, order, axis=1)
    return order, mass, np.cumsum(mass, axis=1)


def nested_scores(P, cls, u=None, nest=None) -> np.ndarray:
    """Conformity score of each item's class: the mass of the nested interval when the class
    joins it; with ``u`` (uniforms in [0, 1)) the mass before it plus ``u`` times its own.
    ``nest``: :func:`nested_mass` of ``P`` when already computed.

    The most probable class scores 0: :func:`nested_bands` never leaves a band empty, so
    that class is in every band, whatever the threshold. Scoring it by its mass instead
    makes the randomised rule over-cover wherever one class holds most items: on SummEval
    *consistency* (82 % of the targets are 5.0) CHR covered 0.932 instead of 0.90, because
    the 2.6 % of bands the rule would have emptied kept their mode and covered it.

    >>> P = np.array([[0.1, 0.5, 0.3, 0.1]])
    >>> nested_scores(P, [2]).round(6).tolist(), nested_scores(P, [2], [0.5]).round(6).tolist()
    ([0.8], [0.65])
    >>> nested_scores(P, [1], [0.5]).tolist()                 # the mode: in every band
    [0.0]
    """
    P = np.asarray(P, dtype=float)
    cls = np.asarray(cls, dtype=int)
    rows = np.arange(len(P))
    order, mass, cum = nested_mass(P) if nest is None else nest
    pos = np.argmax(order == cls[:, None], axis=1)
    before = cum - mass
    own = mass[rows, pos]
    w = np.ones(len(P)) if u is None else np.asarray(u, dtype=float)
    return np.where(pos == 0, 0.0, before[rows, pos] + w * own)


def nested_bands(P, q: float, v=None, nest=None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The shortest nested interval of each item whose conformity score can be ``<= q``.

    Returns ``(lo_cls, hi_cls, emptied)``: the run of classes kept per item, and where the
    randomised rule (``v``, uniforms) would have left no class at all, in which case the most
    probable class is kept (conservative). Without ``v`` the class that crosses ``q`` is
    always kept.

    >>> P = np.array([[0.1, 0.5, 0.3, 0.1]])
    >>> [a.tolist() for a in nested_bands(P, 0.8)]
    [[1], [2], [False]]
    """
    P = np.asarray(P, dtype=float)
    n, k = P.shape
    rows = np.arange(n)
    order, mass, cum = nested_mass(P) if nest is None else nest
    before = cum - mass
    # the step at which the accumulated mass first reaches q (all steps when it never does)
    step = np.minimum((cum < q - 1e-12).sum(axis=1), k - 1)
    if v is None:
        last = step
    else:
        own = np.maximum(mass[rows, step], 1e-300)
        keep = np.asarray(v, dtype=float) <= (q - before[rows, step]) / own
        last = np.where(keep, step, step - 1)
    emptied = last < 0
    last = np.maximum(last, 0)
    lo_cls = np.minimum.accumulate(order, axis=1)[rows, last]
    hi_cls = np.maximum.accumulate(order, axis=1)[rows, last]
    return lo_cls, hi_cls, emptied
