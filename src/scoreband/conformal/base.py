"""The calibrator interface every conformal method implements, and what each method
declares about itself.

The public steps, as in MAPIE (``fit`` / ``conformalize`` / ``predict_interval``):

* :meth:`Calibrator.fit` = :meth:`~Calibrator.fit_model_part` (a learned method fits its
  model, :meth:`~Calibrator.fit_model`, on a ``train_frac`` share) then
  :meth:`~Calibrator.fit_conformal` (the conformal step on the rest: e.g. the quantile ``q``
  of the residuals, or CRC's ``(omega, beta)``; a JSON-serialisable dict);
* :meth:`Calibrator.conformalize`: the conformal step alone on fresh items
  (:meth:`~Calibrator.refit_conformal`; ``scoreband recalibrate``);
* :meth:`Calibrator.predict`: :meth:`~Calibrator.apply_params` turns predictions into bands.

Wrappers (:class:`~scoreband.conformal.mondrian.Mondrian`,
:class:`~scoreband.conformal.cluster.ClusterConservative`,
:class:`~scoreband.conformal.mapping.Mapped`, ``auto``) reuse these steps on groups, mapped
predictions or a chosen candidate, so any method gets group-conditional calibration for free.

What a method needs is declared once, on its class, and read by everything else: ``names``
(the ``--method`` names it is built by, with their help and the arguments each fixes: the
:data:`METHODS` registry), ``needs`` (the inputs its predictions must hold: ``auto``'s usable
candidates, the contract test), ``learned``, ``auto_rank`` / ``auto_config`` (``auto``'s
candidates), ``param_ranges`` (what a saved file's conformal parameters must be: the loader's
checks), ``whole_table`` (applied to every row at once: ``apply``) and ``grouped`` (builds its
own groups: no Mondrian wrapper). The options of :func:`~scoreband.conformal.make_calibrator`
that a class's constructor takes reach it; the others are left out. So a new method is one
module: a class with ``@register`` and its declarations.
"""

from __future__ import annotations

import inspect
import logging
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from scoreband.conformal.core import check_alpha, check_delta
from scoreband.conformal.randomness import key_split
from scoreband.datatypes import Band, Predictions, Scale
from scoreband.errors import CalibratorMismatch, InputError, NotFittedError
from scoreband.json_io import to_jsonable as _jsonable
from scoreband.registry import Registry
from scoreband.textsafe import complement_text

__all__ = ["Calibrator", "register", "calibrator_from_state", "list_methods", "check_targets",
           "METHODS", "INPUTS", "has_inputs", "calibrator_class", "auto_candidates",
           "needs_whole_table", "uses_row_draws", "guarantee_of", "wrapper_chain",
           "delta_of", "delta_refusal", "conditional_guarantee"]

log = logging.getLogger(__name__)

#: calibrator classes by the ``method`` name their saved state carries (loading saved files);
#: the names a user builds from are :data:`METHODS`
SAVED = Registry("saved calibration method")
#: Calibration methods by the name :func:`~scoreband.conformal.make_calibrator` and the
#: CLI's ``--method`` take, from each class's ``names``
METHODS = Registry("calibration method")
#: what a method's ``needs`` can name, and how a user gives it
INPUTS = {"median": "a point prediction (`median`)",
          "interval": "an uncalibrated interval (`lo`, `hi`)",
          "features": "`features`", "embedding": "an `embedding`"}


def has_inputs(pred: Predictions, inputs) -> bool:
    """Whether ``pred`` holds every one of ``inputs`` (names of :data:`INPUTS`)."""
    have = {"median": bool(len(pred)) and bool(np.isfinite(pred.median).all()),
            "interval": pred.lo is not None and pred.hi is not None,
            "features": pred.features is not None, "embedding": pred.embedding is not None}
    return all(have[i] for i in inputs)


def register(cls):
    """Class decorator: make a calibrator loadable from its saved state by ``method`` name,
    and buildable by each of its ``names``."""
    SAVED.register(cls.method, help=(cls.__doc__ or cls.method).strip().split("\n")[0],
                   factory=cls._from_state, cls=cls)
    for name, (help_, preset) in cls.names.items():
        METHODS.register(name, help=help_, cls=cls, preset=preset,
                         factory=_builder(cls, preset))
    return cls


def _builder(cls, preset: dict):
    def make(alpha, *, scale=None, wrap=lambda c: c, **options):
        return cls.build(alpha, scale=scale, preset=preset, wrap=wrap, **options)
    make.__name__ = f"make_{cls.method}"
    return make


def calibrator_class(method: str) -> type:
    """The class a saved ``method`` name (or a ``--method`` name) stands for."""
    for reg in (SAVED, METHODS):
        if method in reg:
            return reg.resolve(method)[0].info["cls"]
    raise InputError(f"unknown calibration method {method!r}; known: "
                     f"{', '.join(METHODS.names())}")


def auto_candidates() -> tuple[str, ...]:
    """The methods ``auto`` can choose, in its order of preference on equal widths."""
    ranked = [(e.info["cls"].auto_rank, e.name) for e in SAVED.entries()
              if e.info["cls"].auto_rank is not None]
    return tuple(name for _, name in sorted(ranked))


def wrapper_chain(cal):
    """The calibrator, then each calibrator it wraps (a monotone map's or Mondrian's
    ``base``, ``auto``'s ``winner_``), outermost first: the one walk every question about a
    wrapped calibrator takes."""
    while isinstance(cal, Calibrator):
        yield cal
        cal = getattr(cal, "base", None) or getattr(cal, "winner_", None)


def needs_whole_table(cal) -> bool:
    """Whether a fitted calibrator (through its wrappers: a monotone map, Mondrian groups,
    ``auto``'s winner) must be applied to every row at once (its class's ``whole_table``)."""
    return any(type(c).whole_table for c in wrapper_chain(cal))


def delta_of(cal) -> float | None:
    """The ``delta`` of a (possibly wrapped) calibrator's training-conditional guarantee
    (held by the method a wrapper wraps), or None: the marginal guarantee."""
    return next((c.delta for c in wrapper_chain(cal) if getattr(c, "delta", None) is not None),
                None)


def delta_refusal(cal) -> str | None:
    """Why a (possibly wrapped) calibrator cannot take ``delta`` (its class's or instance's
    ``no_delta``), or None when every conformal step in it is an exact split-conformal rank."""
    for c in wrapper_chain(cal):
        if c.no_delta:
            return c.no_delta
        if c.final_refit:  # what it wraps is refitted by an exact step of its own
            return None
    return None


def conditional_guarantee(alpha: float, delta: float, per_group: bool = False) -> str:
    """The training-conditional guarantee in words.

    >>> conditional_guarantee(0.1, 0.05)[:91]
    'training-conditional: covers at least 90 % of new rows, with probability at least 95 % over'
    """
    return (f"training-conditional{' per group' if per_group else ''}: covers at least "
            f"{complement_text(alpha)} of new rows{' of each group' if per_group else ''}, "
            f"with probability at least {complement_text(delta)} over the calibration draw (rows "
            "exchangeable; " + ("each group on its own rows" if per_group else
                                "not per group or per item") + ")")


def guarantee_of(cal) -> str:
    """What a (possibly wrapped) calibrator guarantees: its own ``guarantee``, else that of
    the method it wraps; with ``delta``, the training-conditional guarantee
    (:func:`conditional_guarantee`), per group for Mondrian groups."""
    chain = list(wrapper_chain(cal))
    d = delta_of(cal)
    if d is not None:
        per_group = any(getattr(c, "_applies_groups", False) for c in chain)
        return conditional_guarantee(cal.alpha, d, per_group)
    for c in chain:
        if any("guarantee" in k.__dict__ for k in type(c).__mro__ if k is not Calibrator):
            return c.guarantee
    return chain[-1].guarantee


def uses_row_draws(cal) -> bool:
    """Whether a calibrator (through its wrappers) draws per-item uniforms (randomised
    tie-breaking), so its predictions need the items' identities
    (:mod:`scoreband.conformal.randomness`)."""
    return any(getattr(c, "randomize", False) for c in wrapper_chain(cal))


def _init_options(cls) -> set[str]:
    """The keyword arguments a class's constructor takes, through ``**kw`` to its bases."""
    out: set[str] = set()
    for c in cls.__mro__:
        if "__init__" not in c.__dict__:
            continue
        params = inspect.signature(c.__init__).parameters
        out |= {k for k, p in params.items()
                if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and k != "self"}
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            break
    return out


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


def check_unit_predictions(cal, pred) -> None:
    """Refuse point predictions that are not on [0, 1] (the array API's scale) unless ``cal``
    takes a raw metric (a monotone map in front): predictions on a native scale read as
    [0, 1] would give bands that cover nothing, without a word. A regression's small
    overshoot passes (the band is clipped to the scale); refused are a prediction more than
    0.5 outside [0, 1], or half of them outside it. NaN (no point prediction) passes."""
    if getattr(cal, "takes_raw_predictions", False) or pred.median is None:
        return
    m = np.asarray(pred.median, dtype=float)
    m = m[np.isfinite(m)]
    out = (m < 0) | (m > 1)
    far = (m < -0.5) | (m > 1.5)
    if far.any() or (len(m) and out.mean() > 0.5):
        i = int(np.flatnonzero(far if far.any() else out)[0])
        raise InputError(f"point prediction {i} is {m[i]:g}; {int(out.sum())} of {len(m)} "
                         f"lie outside [0, 1]: {cal.method} reads predictions on [0, 1]; "
                         "convert them with Scale.to01 (or SplitConformal(scale=..., "
                         "native=True)), map a raw metric with Mapped / `map`, or use the "
                         "table API with `pred_scale`")


class Calibrator(ABC):
    """Base class: ``fit(pred, y01, groups=None) -> self``, ``predict(pred) -> Band``.

    Targets ``y01`` and predictions are on the normalised scale [0, 1]; ``scale`` only
    converts the returned :class:`Band` back to the native scale.
    """

    method: ClassVar[str] = "base"
    #: the ``--method`` names this class is built by: name -> (help line, the constructor
    #: arguments that name fixes); empty for wrappers and internal classes
    names: ClassVar[dict[str, tuple[str, dict]]] = {}
    #: the inputs its predictions must hold: any one of these sets of :data:`INPUTS`
    needs: ClassVar[tuple[tuple[str, ...], ...]] = ((),)
    #: True when the method fits a model before the conformal step (CQR, R2CCP).
    learned: ClassVar[bool] = False
    #: whether ``fit`` / ``predict`` take a raw metric as the point prediction (a monotone map
    #: in front); every other calibrator reads point predictions on [0, 1]
    takes_raw_predictions: ClassVar[bool] = False
    #: rank among ``auto``'s candidates (lower first on equal widths); None: not one
    auto_rank: ClassVar[int | None] = None
    #: constructor arguments ``auto`` gives it as a candidate
    auto_config: ClassVar[dict] = {}
    #: what a saved file's conformal parameters must be: name -> (lowest value or None,
    #: finite only)
    param_ranges: ClassVar[dict[str, tuple[float | None, bool]]] = {"q": (None, False)}
    #: applied to every row at once (weighted conformal fits on all the rows it is given)
    whole_table: ClassVar[bool] = False
    #: builds its own groups (the cluster rules): never wrapped in Mondrian
    grouped: ClassVar[bool] = False
    #: what the method guarantees, in words (``evaluate`` prints it beside the theoretical
    #: band; a method without a guarantee says so)
    guarantee: ClassVar[str] = ("marginal: E[coverage] >= 1 - alpha over calibration and "
                                "test rows drawn exchangeably; not per group or per item")
    #: why the method refuses ``delta`` (a training-conditional guarantee needs an exact
    #: split-conformal rank on fresh rows), or None when it takes it: every conformal step
    #: that is the k-th smallest of exchangeable fresh scores does
    no_delta: ClassVar[str | None] = None
    #: its last conformal step is an exact refit of what it wraps on fresh rows (``auto``):
    #: what the wrapped method would refuse does not matter
    final_refit: ClassVar[bool] = False

    @classmethod
    def build(cls, alpha: float, *, scale=None, preset: dict | None = None,
              wrap=lambda c: c, **options) -> Calibrator:
        """The calibrator a ``--method`` name builds: ``preset`` (the name's fixed
        arguments) and the ``options`` its constructor takes (None: its default), wrapped
        by ``wrap`` (the optional monotone map)."""
        take = _init_options(cls)
        kw = {k: v for k, v in options.items() if k in take and v is not None}
        return wrap(cls(alpha, scale=scale, **{**kw, **(preset or {})}))

    @classmethod
    def check_params(cls, params: dict, where: str, number) -> None:
        """Types and ranges of a saved conformal step's parameters (``param_ranges``);
        ``number(value, name, lo=, inf_ok=)`` raises on a bad one."""
        for key, (lo, finite) in cls.param_ranges.items():
            if key not in params:
                raise CalibratorMismatch(f"{where} has no {key!r}")
            number(params[key], f"{where}.{key}", lo=lo, inf_ok=not finite)

    def __init__(self, alpha: float = 0.1, *, scale: Scale | None = None, clip: bool = True,
                 delta: float | None = None):
        self.alpha = check_alpha(alpha)
        self.scale = scale or Scale(0.0, 1.0)
        self.clip = clip
        #: None: the marginal guarantee; else coverage >= 1 - alpha with probability
        #: >= 1 - delta over the calibration draw (the conformal rank of
        #: :func:`~scoreband.conformal.core.conditional_rank`)
        self.delta = check_delta(delta)
        self.params_: dict | None = None

    def check_delta_allowed(self) -> None:
        """Refuse ``delta`` (InputError naming why) where the method has no exact
        finite-sample rank to raise (:func:`delta_refusal`)."""
        why = delta_refusal(self) if delta_of(self) is not None else None
        if why:
            raise InputError(f"`delta` (a training-conditional guarantee) is not available "
                             f"for method {self.method}: {why}; drop `delta`, or choose a "
                             "method with an exact split-conformal step (split, cqr, chr, "
                             "r2ccp, crc)")

    # --- the two steps a method implements -------------------------------------------
    def fit_model(self, pred: Predictions, y01: np.ndarray) -> None:  # noqa: B027
        """Fit the learned part (none by default)."""

    @abstractmethod
    def fit_conformal(self, pred: Predictions, y01: np.ndarray) -> dict: ...

    @abstractmethod
    def apply_params(self, pred: Predictions, params: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ...

    def refit_conformal(self, pred: Predictions, y01: np.ndarray, chosen: dict) -> dict:
        """The conformal step alone on fresh items, keeping what was ``chosen`` on others
        (e.g. CRC's omega). Methods with nothing to choose just refit their params."""
        return self.fit_conformal(pred, y01)

    def apply_sets(self, pred: Predictions, params: dict) -> list | None:
        """Union-of-intervals prediction sets on [0, 1] per item, for methods whose sets are
        not intervals (R2CCP); None for interval methods."""
        return None

    def check_pred(self, pred: Predictions) -> None:  # noqa: B027
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
        check_unit_predictions(self, pred)
        self.check_pred(pred)
        self.check_delta_allowed()
        y = check_targets(y01, len(pred))
        if len(pred) == 0:
            raise InputError("cannot calibrate on an empty set of predictions")
        if not self.learned:  # every item: no index and no copy of 10^6 rows
            self.params_ = self.fit_conformal(pred, y)
        else:
            idx = self.fit_model_part(pred, y)
            self.params_ = self.fit_conformal(pred.take(idx), y[idx])
        return self

    def conformalize(self, pred: Predictions, y01) -> Calibrator:
        """Redo only the conformal step on fresh items (a new domain's few labels), keeping
        the fitted model and what was chosen at calibration (CRC's omega, ``auto``'s
        method, a monotone map). Returns self. Valid for the fresh items' distribution
        with at least ``ceil(1/alpha) - 1`` of them (:mod:`scoreband.conformal.recalibrate`).
        """
        self._require_fitted()
        self.check_pred(pred)
        y = check_targets(y01, len(pred))
        if len(pred) == 0:
            raise InputError("cannot recalibrate on an empty set of predictions")
        self.params_ = self.refit_conformal(pred, y, self.params_)
        return self

    def fit_model_part(self, pred: Predictions, y: np.ndarray, within=None) -> np.ndarray:
        """Fit the learned part (if any) on a ``train_frac`` share of the items; returns the
        indices left for the conformal step (all items for methods without a model).
        ``within``: what the calibration reads beyond ``pred`` and ``y`` (Mondrian's
        groups), so repeated items are split alike in any row order
        (:func:`scoreband.conformal.randomness.split_keys`).

        The conformal guarantee needs the calibration items to be unseen by the model, so a
        learned method never calibrates on the items it was trained on.
        """
        if not self.learned:
            return np.arange(len(y))
        cut = int(round(self.train_frac * len(y)))
        if cut < 2 or len(y) - cut < 1:
            raise InputError(f"{self.method} needs items both to train on and to calibrate on; "
                             f"got {len(y)}")
        # the training share by the items' identity (one randomness source): the same items,
        # in one canonical order, however the rows are ordered; copies of an item split
        # independently (randomness.row_uniforms)
        tr, cal = key_split(pred, y, self.seed, 31, cut, within=within)
        self.fit_model(pred.take(tr), y[tr])
        return cal

    def _require_fitted(self) -> None:
        if self.params_ is None:
            raise NotFittedError(f"{type(self).__name__} is not fitted: call fit(pred, y01) first")

    def predict(self, pred: Predictions, groups=None) -> Band:
        """Calibrated bands for ``pred``."""
        self._require_fitted()
        check_unit_predictions(self, pred)
        self.check_pred(pred)
        lo, hi, full = self.apply_params(pred, self.params_)
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
        """Constructor arguments (JSON-serialisable), without alpha and scale; ``delta`` only
        when given (the saved states of the marginal guarantee stay as they were, and a
        file without it loads as delta None)."""
        return {"clip": self.clip, **({} if self.delta is None else {"delta": self.delta})}

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
        d = "" if self.delta is None else f", delta={self.delta}"
        return f"{type(self).__name__}(alpha={self.alpha}{d}, {fitted})"


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
