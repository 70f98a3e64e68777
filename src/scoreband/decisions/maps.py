"""Maps from a judge's or a metric's score onto the human scale, for trust-or-escalate.

A map is kept as monotone knots ``(x_k, c_k)`` read by linear interpolation (flat beyond the
ends), so it saves as plain JSON. Three kinds:

* ``"tolerance"`` (default): near each score, the value ``c`` that maximises
  ``P(|y - c| <= tol)`` among the nearest training items, then made monotone (isotonic, in
  the direction of the score's rank correlation with the target). A mean map puts a
  bimodal neighbourhood's score between its modes, where it is off for both; this one
  puts it where most targets lie within the tolerance, so more items can be trusted.
* ``"isotonic"``: the monotone mean map (least squares).
* ``"none"``: the score is already on the target's scale (clipped to it).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> s = rng.uniform(0, 1, 2000); y = np.where(rng.uniform(size=2000) < 0.7, 4 * s + 1, 1.0)
>>> m = fit_map(s, y, tol=0.5, scale=(1, 5), kind="tolerance")
>>> iso = fit_map(s, y, tol=0.5, scale=(1, 5), kind="isotonic")
>>> hit = lambda mp: float(np.mean(np.abs(mp.predict(s) - y) <= 0.5))
>>> hit(m) > hit(iso)
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scoreband.errors import InputError

__all__ = ["ScoreMap", "fit_map", "MAP_KINDS", "best_centre"]

MAP_KINDS = ("tolerance", "isotonic", "none")


@dataclass
class ScoreMap:
    """A monotone map ``score -> target scale`` as knots; ``kind`` says how it was fitted."""

    kind: str
    x: np.ndarray
    c: np.ndarray
    lo: float
    hi: float

    def predict(self, s) -> np.ndarray:
        s = np.asarray(s, dtype=float)
        if self.kind == "none" or len(self.x) == 0:
            return np.clip(s, self.lo, self.hi)
        if len(self.x) == 1:
            return np.full(s.shape, float(self.c[0]))
        return np.clip(np.interp(s, self.x, self.c), self.lo, self.hi)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "x": [float(v) for v in self.x],
                "c": [float(v) for v in self.c], "lo": self.lo, "hi": self.hi}

    @classmethod
    def from_dict(cls, d: dict) -> ScoreMap:
        if not isinstance(d, dict):
            raise InputError(f"the rule's key 'map' holds {type(d).__name__}, not an object; "
                             "fit the rule again")
        key = "kind"
        try:
            kind = str(d[key])
            for key in ("lo", "hi"):
                if isinstance(d[key], bool) or not isinstance(d[key], (int, float)):
                    raise TypeError(f"{d[key]!r} is not a number")
            lo, hi = float(d["lo"]), float(d["hi"])
            key = "x"
            x = np.asarray(d[key], float)
            key = "c"
            c = np.asarray(d[key], float)
            if x.ndim != 1 or c.ndim != 1:
                raise ValueError("not a list of numbers")
        except (KeyError, TypeError, ValueError) as e:
            what = "is missing" if isinstance(e, KeyError) else f"is unreadable ({e})"
            raise InputError(f"the rule's key 'map.{key}' {what}; fit the rule again") \
                from None
        if kind not in MAP_KINDS:
            raise InputError(f"the rule's key 'map.kind' is {kind!r}, not one of "
                             f"{', '.join(MAP_KINDS)}; fit the rule again")
        if len(x) != len(c) or (len(x) > 1 and np.any(np.diff(x) < 0)):
            raise InputError("the rule's `map` knots are not ascending pairs; fit the rule again")
        return cls(kind, x, c, lo, hi)


def best_centre(y_sorted: np.ndarray, tol: float) -> float:
    """The centre ``c`` of the window ``[c - tol, c + tol]`` holding the most of the sorted
    values ``y_sorted`` (the middle of the values it holds; the window nearest the median
    among equals).

    >>> best_centre(np.array([1.0, 1.0, 1.2, 3.0, 3.1]), 0.25)
    1.1
    """
    y = y_sorted
    ends = np.searchsorted(y, y + 2 * tol + 1e-9, side="right")
    count = ends - np.arange(len(y))
    best = np.flatnonzero(count == count.max())
    med = np.median(y)
    mids = (y[best] + y[ends[best] - 1]) / 2
    return float(mids[np.argmin(np.abs(mids - med))])


def _direction(s, y) -> bool:
    from scipy.stats import spearmanr

    if len(np.unique(s)) < 2 or len(np.unique(y)) < 2:  # no direction to read (and no
        return True                                      # scipy ConstantInputWarning)
    r = spearmanr(s, y).statistic
    return not (np.isfinite(r) and r < 0)


def fit_map(s, y, *, tol: float, scale, kind: str = "tolerance", neighbours: int | None = None,
            knots: int = 60) -> ScoreMap:
    """Fit a map of scores ``s`` onto targets ``y`` (both (n,), the target on its native
    ``scale`` ``(lo, hi)``); see the module docstring for ``kind``. ``neighbours``: items
    per neighbourhood of the tolerance map (default ``max(30, n // 10)``), at ``knots``
    score quantiles."""
    lo, hi = (float(scale[0]), float(scale[1])) if not hasattr(scale, "lo") else \
        (float(scale.lo), float(scale.hi))
    if kind not in MAP_KINDS:
        raise InputError(f"`map` {kind!r}: choose one of {', '.join(MAP_KINDS)}")
    s, y = np.asarray(s, float), np.asarray(y, float)
    if kind == "none":
        return ScoreMap("none", np.array([]), np.array([]), lo, hi)
    from sklearn.isotonic import IsotonicRegression

    up = _direction(s, y)
    if kind == "isotonic":
        iso = IsotonicRegression(increasing=up, out_of_bounds="clip").fit(s, y)
        return ScoreMap("isotonic", np.asarray(iso.X_thresholds_, float),
                        np.asarray(iso.y_thresholds_, float), lo, hi)
    n = len(s)
    k = min(n, neighbours or max(30, n // 10))
    xs = np.unique(np.quantile(s, np.linspace(0, 1, knots)))
    order = np.argsort(s, kind="stable")
    ss, ys = s[order], y[order]
    centres, weights = [], []
    for x in xs:
        # the k items nearest x in score (ties at the edge: all of them)
        d = np.abs(ss - x)
        cut = np.partition(d, k - 1)[k - 1]
        near = np.sort(ys[d <= cut])
        centres.append(best_centre(near, tol))
        weights.append(len(near))
    iso = IsotonicRegression(increasing=up).fit(xs, centres, sample_weight=weights)
    return ScoreMap("tolerance", xs, np.clip(iso.predict(xs), lo, hi), lo, hi)
