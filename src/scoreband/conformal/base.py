"""The calibrator interface every conformal method implements.

A calibrator is split in two, following crepes and MAPIE:

* ``_fit_params(pred, y01) -> dict``: the conformal step on a set of calibration items
  (e.g. the quantile ``q`` of the residuals, or CRC's ``(omega, beta)``). JSON-serialisable.
* ``_apply(pred, params) -> (lo01, hi01, full_range)``: turn predictions into bands.

Wrappers (:class:`~scoreband.conformal.mondrian.Mondrian`,
:class:`~scoreband.conformal.mondrian.ClusterConservative`,
:class:`~scoreband.conformal.mapping.Mapped`) reuse these steps on groups or mapped
predictions, so any method gets group-conditional calibration for free. Learned methods
(``fitted``, CQR, CHR, R2CCP, the marginal band; ``auto`` over them) add ``_fit_model`` for
the part fitted on its own share before the conformal step; :meth:`Calibrator.conformalize`
redoes the conformal step alone on fresh items (``scoreband recalibrate``).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from scoreband.conformal._core import check_alpha, split_at
from scoreband.errors import InputError, NotFittedError
from scoreband.files import to_jsonable as _jsonable
from scoreband.records import Band, Predictions, Scale
from scoreband.registry import Registry

__all__ = ["Calibrator", "register", "calibrator_from_state", "list_methods", "check_targets"]

log = logging.getLogger(__name__)

#: calibrator classes by the ``method`` name their saved state carries (loading saved files);
#: the names a user builds from are :data:`scoreband.conformal.METHODS`
SAVED = Registry("saved calibration method")


def register(cls):
    """Class decorator: make a calibrator loadable from its saved state by ``method`` name."""
    SAVED.register(cls.method, help=(cls.__doc__ or cls.method).strip().split("\n")[0],
                   factory=cls._from_state)
    return cls


def list_methods() -> list[str]:
    """Names of the calibration classes a saved calibrator can name."""
    return sorted(SAVED.names())


def check_targets(y01, n: int) -> np.ndarray:
    """Validate normalised targets: n finite numbers in [0, 1]."""
    y = np.asarray(y01, dtype=float)
    if y.ndim != 1 or len(y) != n:
        raise InputError(f"expected {n} targets (one per prediction), got shape {y.shape}")
    if n == 0:
        return y
    # Two reductions instead of boolean masks: this runs on every fit (10^6 items in the
    # benchmarks); the masks are only built to name the bad position.
    lo, hi = float(y.min()), float(y.max())
    if not (np.isfinite(lo) and np.isfinite(hi)):
        bad = ~np.isfinite(y)
        raise InputError(f"targets contain NaN/inf at positions {np.flatnonzero(bad)[:10].tolist()}")
    if lo < -1e-9 or hi > 1 + 1e-9:
        i = int(np.flatnonzero((y < -1e-9) | (y > 1 + 1e-9))[0])
        raise InputError(
            f"target at position {i} is {y[i]:.4g} on the normalised scale, outside [0, 1]; "
            "check `scale`"
        )
    return np.clip(y, 0.0, 1.0) if (lo < 0 or hi > 1) else y


class Calibrator(ABC):
    """Base class: ``fit(pred, y01, groups=None) -> self``, ``predict(pred) -> Band``.

    Targets ``y01`` and predictions are on the normalised scale [0, 1]; ``scale`` only
    converts the returned :class:`Band` back to the native scale.
    """

    method: ClassVar[str] = "base"
    #: True when the method fits a model before the conformal step (CQR, R2CCP).
    learned: ClassVar[bool] = False

    def __init__(self, alpha: float = 0.1, *, scale: Scale | None = None, clip: bool = True):
        self.alpha = check_alpha(alpha)
        self.scale = scale or Scale(0.0, 1.0)
        self.clip = clip
        self.params_: dict | None = None

    # --- the two steps a method implements -------------------------------------------
    def _fit_model(self, pred: Predictions, y01: np.ndarray) -> None:  # noqa: B027
        """Fit the learned part (none by default)."""

    @abstractmethod
    def _fit_params(self, pred: Predictions, y01: np.ndarray) -> dict: ...

    @abstractmethod
    def _apply(self, pred: Predictions, params: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ...

    def _conformal_params(self, pred: Predictions, y01: np.ndarray, chosen: dict) -> dict:
        """The conformal step alone on fresh items, keeping what was ``chosen`` on others
        (e.g. CRC's omega). Methods with nothing to choose just refit their params."""
        return self._fit_params(pred, y01)

    def _apply_sets(self, pred: Predictions, params: dict) -> list | None:
        """Union-of-intervals prediction sets on [0, 1] per item, for methods whose sets are
        not intervals (R2CCP); None for interval methods."""
        return None

    def _check_pred(self, pred: Predictions) -> None:  # noqa: B027
        """Raise InputError when ``pred`` lacks what the method needs."""

    def difficulty(self, pred: Predictions) -> np.ndarray:
        """Per-item width of the uncalibrated base interval (for Easy/Medium/Hard groups)."""
        if pred.lo is not None:
            return pred.hi - pred.lo
        raise InputError(
            f"{self.method}: difficulty groups need an uncalibrated interval (`lo`/`hi`) "
            "or judge features; pass a task column as `groups` instead"
        )

    # --- public API --------------------------------------------------------------------
    def fit(self, pred: Predictions, y01, groups=None) -> Calibrator:
        """Fit on calibration predictions and their normalised targets. Returns self."""
        self._check_pred(pred)
        y = check_targets(y01, len(pred))
        if len(pred) == 0:
            raise InputError("cannot calibrate on an empty set of predictions")
        idx = self.fit_model_part(pred, y)
        if len(idx) == len(y):  # every item (no learned part): no copy of 10^6 rows
            self.params_ = self._fit_params(pred, y)
        else:
            self.params_ = self._fit_params(pred.take(idx), y[idx])
        return self

    def conformalize(self, pred: Predictions, y01) -> Calibrator:
        """Redo only the conformal step on fresh items (a new domain's few labels), keeping
        the fitted model and what was chosen at calibration (CRC's omega, ``auto``'s
        method, a monotone map). Returns self. Valid for the fresh items' distribution
        with at least ``ceil(1/alpha) - 1`` of them (:mod:`scoreband.conformal.recalibrate`).
        """
        self._require_fitted()
        self._check_pred(pred)
        y = check_targets(y01, len(pred))
        if len(pred) == 0:
            raise InputError("cannot recalibrate on an empty set of predictions")
        self.params_ = self._conformal_params(pred, y, self.params_)
        return self

    def fit_model_part(self, pred: Predictions, y: np.ndarray) -> np.ndarray:
        """Fit the learned part (if any) on a ``train_frac`` share of the items; returns the
        indices left for the conformal step (all items for methods without a model).

        The conformal guarantee needs the calibration items to be unseen by the model, so a
        learned method never calibrates on the items it was trained on.
        """
        if not self.learned:
            return np.arange(len(y))
        perm = np.random.default_rng(self.seed).permutation(len(y))
        cut = int(round(self.train_frac * len(y)))
        if cut < 2 or len(y) - cut < 1:
            raise InputError(f"{self.method} needs items both to train on and to calibrate on; "
                             f"got {len(y)}")
        tr, cal = split_at(perm, cut)
        self._fit_model(pred.take(tr), y[tr])
        return cal

    def _require_fitted(self) -> None:
        if self.params_ is None:
            raise NotFittedError(f"{type(self).__name__} is not fitted: call fit(pred, y01) first")

    def predict(self, pred: Predictions, groups=None) -> Band:
        """Calibrated bands for ``pred``."""
        self._require_fitted()
        self._check_pred(pred)
        lo, hi, full = self._apply(pred, self.params_)
        return self._band(pred, lo, hi, full)

    def _band(self, pred, lo, hi, full, group=None, fallback=None) -> Band:
        """Assemble a Band; ``lo`` and ``hi`` are fresh arrays owned by the caller and are
        clipped in place (no copies: this is the hot path of applying a calibrator)."""
        m = pred.median
        if self.clip and len(m) and (m.min() < 0 or m.max() > 1):
            m = np.clip(m, 0.0, 1.0)
        full = np.asarray(full, dtype=bool)
        if full.any():
            lo = np.where(full, 0.0, lo)
            hi = np.where(full, 1.0, hi)
        if self.clip:
            for a in (lo, hi):  # reductions are cheaper than writes: clip only when needed
                if len(a) and a.min() < 0:
                    np.maximum(a, 0.0, out=a)
                if len(a) and a.max() > 1:
                    np.minimum(a, 1.0, out=a)
        band = Band(lo01=lo, median01=m, hi01=hi, alpha=self.alpha, method=self.method,
                    scale=self.scale, group=group, full_range=full,
                    fallback=fallback)
        return band

    # --- persistence -------------------------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        """Constructor arguments (JSON-serialisable), without alpha and scale."""
        return {"clip": self.clip}

    def get_state(self) -> dict[str, Any]:
        """Everything needed to rebuild the fitted calibrator, as plain JSON types."""
        self._require_fitted()
        return {
            "method": self.method,
            "alpha": self.alpha,
            "config": self.get_config(),
            "params": _jsonable(self.params_),
            "model": self._model_state(),
        }

    def _model_state(self) -> dict | None:
        return None

    def _load_model_state(self, state: dict | None) -> None:  # noqa: B027
        pass

    @classmethod
    def _from_state(cls, state: dict, scale: Scale) -> Calibrator:
        obj = cls(state["alpha"], scale=scale, **state.get("config", {}))
        obj.params_ = _unjson(state["params"])
        obj._load_model_state(state.get("model"))
        return obj

    def __repr__(self) -> str:
        fitted = "unfitted" if self.params_ is None else _short(self.params_)
        return f"{type(self).__name__}(alpha={self.alpha}, {fitted})"


def calibrator_from_state(state: dict, scale: Scale | None = None) -> Calibrator:
    """Rebuild a fitted calibrator from :meth:`Calibrator.get_state` output."""
    method = state.get("method")
    if not isinstance(method, str) or method not in SAVED:
        raise InputError(f"unknown calibration method {method!r}; known: "
                         f"{', '.join(list_methods())}")
    return SAVED.create(method, state, scale or Scale(0.0, 1.0))


def _unjson(x):
    if isinstance(x, dict):
        return {k: _unjson(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_unjson(v) for v in x]
    if x == "inf":
        return float("inf")
    if x == "-inf":
        return float("-inf")
    return x


def _short(params: dict) -> str:
    parts = []
    for k, v in params.items():
        if isinstance(v, float):
            parts.append(f"{k}={v:.4g}")
        elif isinstance(v, (int, str, bool)):
            parts.append(f"{k}={v}")
    return ", ".join(parts[:6])
