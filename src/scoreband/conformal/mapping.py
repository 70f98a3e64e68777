"""A monotone map from a raw metric (CLIPScore, BLEU, a judge's 0-100 score ...) onto the
target's scale, fitted on its own share of the calibration items, in front of any method.

Without it a point metric on another scale has no meaningful residual: CLIPScore in
[0.1, 0.4] against 1-5 ratings read on [0, 1] gives a band over most of the scale.
"""

from __future__ import annotations

import warnings

import numpy as np

from scoreband.conformal.base import (
    Calibrator,
    _jsonable,
    _short,
    _unjson,
    calibrator_from_state,
    register,
)
from scoreband.conformal.randomness import key_split, keys_of
from scoreband.datatypes import Band, Predictions, Scale
from scoreband.errors import InputError

__all__ = ["Mapped", "MonotoneMap", "MAP_KINDS", "MIN_MAP_ITEMS"]

MAP_KINDS = ("isotonic", "linear")
#: Items the map's share must hold, at least.
MIN_MAP_ITEMS = 10


class MonotoneMap:
    """``isotonic`` (scikit-learn's IsotonicRegression, direction chosen from the data,
    constant beyond the fitted range) or ``linear`` (least squares) from raw values to [0, 1].

    >>> mp = MonotoneMap("linear").fit([0.1, 0.2, 0.3, 0.4], [0.0, 0.25, 0.5, 0.75])
    >>> mp.transform([0.25]).round(6).tolist()
    [0.375]
    """

    def __init__(self, kind: str = "isotonic", increasing: bool | str = "auto"):
        if kind not in MAP_KINDS:
            raise InputError(f"map must be one of {', '.join(MAP_KINDS)} or none, got {kind!r}")
        self.kind = kind
        self.increasing = increasing  # isotonic: "auto" (from the data), True or False
        self.params: dict | None = None

    def fit(self, x, y01) -> MonotoneMap:
        x, y = np.asarray(x, dtype=float), np.asarray(y01, dtype=float)
        if len(np.unique(x)) < 2:
            raise InputError("the monotone map needs at least two distinct prediction values")
        if self.kind == "linear":
            slope, intercept = np.polyfit(x, y, 1)
            self.params = {"slope": float(slope), "intercept": float(intercept)}
        else:
            from sklearn.isotonic import IsotonicRegression

            with warnings.catch_warnings():  # "auto" direction on a weak metric: not news
                warnings.filterwarnings("ignore", message="Confidence interval of the Spearman")
                iso = IsotonicRegression(increasing=self.increasing, out_of_bounds="clip",
                                         y_min=0.0, y_max=1.0).fit(x, y)
            self.params = {"x": iso.X_thresholds_.tolist(), "y": iso.y_thresholds_.tolist()}
        return self

    def transform(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        p = self.params
        if self.kind == "linear":
            return p["slope"] * x + p["intercept"]
        return np.interp(x, p["x"], p["y"])

    @property
    def decreasing(self) -> bool:
        p = self.params
        if self.kind == "linear":
            return p["slope"] < 0
        return len(p["y"]) > 1 and p["y"][-1] < p["y"][0]

    def to_dict(self) -> dict:
        return {"kind": self.kind, **self.params}

    @classmethod
    def from_dict(cls, d: dict) -> MonotoneMap:
        d = dict(d)
        m = cls(d.pop("kind"))
        m.params = d
        return m


@register
class Mapped(Calibrator):
    """Any calibrator behind a monotone map of the point prediction (and lo/hi).

    The map is fitted on a random ``map_frac`` share of the calibration items; the base method
    (its model and its conformal step) uses only the rest, so its guarantee is unchanged.

    Examples
    --------
    >>> from scoreband.conformal.split import SplitConformal
    >>> rng = np.random.default_rng(0)
    >>> y = rng.uniform(size=500); clip_score = 0.1 + 0.3 * y**2 + rng.normal(0, 0.01, 500)
    >>> cal = Mapped(SplitConformal(0.1), kind="isotonic").fit(Predictions(clip_score), y)
    >>> band = cal.predict(Predictions([0.1, 0.4]))
    >>> bool(band.hi01[0] < 0.4 and band.lo01[1] > 0.6)
    True
    """

    method = "mapped"
    learned = True
    takes_raw_predictions = True  # the map reads the raw metric

    def __init__(self, base: Calibrator, *, kind: str = "isotonic", map_frac: float = 0.3,
                 seed: int = 0):
        super().__init__(base.alpha, scale=base.scale, clip=base.clip)
        if not 0 < map_frac < 1:
            raise InputError(f"map_frac must be in (0, 1), got {map_frac}")
        self.base = base
        self.map = MonotoneMap(kind)
        self.kind, self.map_frac, self.seed = kind, float(map_frac), seed

    def get_config(self) -> dict:
        return {"kind": self.kind, "map_frac": self.map_frac, "seed": self.seed}

    def mapped(self, pred: Predictions) -> Predictions:
        """``pred`` with the median (and lo/hi) on [0, 1] through the fitted map."""
        if self.map.params is None:
            raise InputError("the monotone map is not fitted: call fit first")
        m = self.map.transform(pred.median)
        lo = hi = None
        if pred.lo is not None:
            a, b = self.map.transform(pred.lo), self.map.transform(pred.hi)
            lo, hi = (b, a) if self.map.decreasing else (a, b)
        return Predictions(m, lo=lo, hi=hi, quantiles=None, levels=pred.levels,
                           features=pred.features, embedding=pred.embedding,
                           n_ratings=pred.n_ratings, keys=keys_of(pred))

    def fit_model_part(self, pred: Predictions, y: np.ndarray, within=None) -> np.ndarray:
        if not np.isfinite(pred.median).all():
            raise InputError("a monotone map needs a point prediction (median) on every item")
        n = len(y)
        cut = int(round(self.map_frac * n))
        if cut < MIN_MAP_ITEMS:
            raise InputError(
                f"the monotone map needs at least {MIN_MAP_ITEMS} items in its share "
                f"(map_frac={self.map_frac:g} of the calibration items), got {cut} of {n}: "
                f"use at least {int(np.ceil(MIN_MAP_ITEMS / self.map_frac))} calibration "
                "items, or no map")
        mp, rest = key_split(pred, y, self.seed, 11, cut, within=within)  # by identity
        self.map.fit(pred.median[mp], y[mp])
        idx = self.base.fit_model_part(self.mapped(pred.take(rest)), y[rest],
                                       within=None if within is None else
                                       np.asarray(within)[rest])
        return rest[idx]

    def check_pred(self, pred):
        self.base.check_pred(pred)

    def fit_conformal(self, pred, y01):
        return self.base.fit_conformal(self.mapped(pred), y01)

    def refit_conformal(self, pred, y01, chosen):
        return self.base.refit_conformal(self.mapped(pred), y01, chosen)

    def apply_params(self, pred, params):
        return self.base.apply_params(self.mapped(pred), params)

    def apply_sets(self, pred, params):
        return self.base.apply_sets(self.mapped(pred), params)

    def difficulty(self, pred):
        return self.base.difficulty(self.mapped(pred))

    def predict(self, pred: Predictions, groups=None) -> Band:
        self._require_fitted()
        self.base.params_ = self.params_
        band = self.base.predict(self.mapped(pred), groups=groups)
        band.method = f"{self.kind}-map+{band.method}"
        return band

    def get_state(self) -> dict:
        self._require_fitted()
        return {"method": self.method, "alpha": self.alpha, "config": self.get_config(),
                "map": self.map.to_dict(), "params": _jsonable(self.params_),
                "base": {"method": self.base.method, "alpha": self.base.alpha,
                         "config": self.base.get_config(), "model": self.base._model_state()}}

    @classmethod
    def _from_state(cls, state: dict, scale: Scale) -> Mapped:
        base = calibrator_from_state({**state["base"], "params": {}}, scale)
        obj = cls(base, **state["config"])
        obj.map = MonotoneMap.from_dict(state["map"])
        obj.params_ = _unjson(state["params"])
        return obj

    def __repr__(self) -> str:
        # the fitted parameters live here, not on the base (which stays unfitted)
        fitted = "unfitted" if self.params_ is None else _short(self.params_)
        return f"Mapped({self.kind}, {type(self.base).__name__}(alpha={self.base.alpha}), {fitted})"
