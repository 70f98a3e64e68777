"""``method="auto"``: choose the narrowest method on one share of the calibration items,
conformalize it on another, so the coverage guarantee still holds.

The calibration items are split three ways (by ``seed``): a training share fits every
candidate's model (CQR's regressions, CHR's and R2CCP's classifiers, the marginal band's
quantiles); a selection share runs every candidate's conformal step and measures its mean
band width there; the winner's conformal step is then run again on the conformal share, which
played no part in the choice. The choice is a function of the training and selection shares
only, so the final step is ordinary split conformal on exchangeable fresh items: coverage
``>= 1 - alpha`` holds exactly (tested over >= 1000 resplits).

The no-model marginal band (:class:`~scoreband.conformal.marginal.Marginal`) is always a
candidate: when no method beats it, it is returned and flagged, so ``auto`` never gives a band
wider than what the targets alone justify (on the selection share).
"""

from __future__ import annotations

import math

import numpy as np

# the candidates' modules, so that their classes are registered before auto looks them up,
# in the order that the registry (and so --help and the docs) lists them
# isort: off
import scoreband.conformal.crc  # noqa: F401
import scoreband.conformal.fitted  # noqa: F401
import scoreband.conformal.cqr  # noqa: F401
import scoreband.conformal.r2ccp  # noqa: F401
import scoreband.conformal.chr  # noqa: F401
import scoreband.conformal.marginal  # noqa: F401
import scoreband.conformal.split  # noqa: F401
# isort: on
from scoreband.conformal.base import (
    INPUTS,
    Calibrator,
    _jsonable,
    _unjson,
    auto_candidates,
    calibrator_class,
    calibrator_from_state,
    has_inputs,
    register,
)
from scoreband.conformal.boundary import adjust_band
from scoreband.conformal.core import min_calibration_size
from scoreband.conformal.randomness import key_split
from scoreband.datatypes import Band, Predictions, Scale
from scoreband.errors import InputError

__all__ = ["Auto", "narrowest", "usable_candidates"]


def usable_candidates(pred: Predictions) -> list[str]:
    """The candidates (:func:`~scoreband.conformal.base.auto_candidates`) whose declared
    ``needs`` these predictions meet: ``split`` a point prediction, ``fitted`` a point
    prediction or features, ``crc`` an uncalibrated interval, ``cqr``/``chr``/``r2ccp``
    features; ``marginal`` needs nothing."""
    return [c for c in auto_candidates()
            if any(has_inputs(pred, alt) for alt in calibrator_class(c).needs)]


#: widths (on the [0, 1] scale) closer than this to the narrowest are a tie: arithmetic on
#: another CPU or library release moves a width by far less, so the choice is the same on
#: every machine unless a width lies within rounding of this edge
WIDTH_TIE = 1e-9


def narrowest(widths: dict[str, float], order: list[str], tie: float = WIDTH_TIE) -> str:
    """The candidate ``auto`` keeps: the first in ``order`` (the fixed candidate order)
    whose width is within ``tie`` of the narrowest, so that two candidates equal up to
    rounding are chosen alike on every machine (a last-bit difference must never decide).
    Any fixed rule keeps the guarantee: the choice reads only the selection share.

    >>> narrowest({"split": 0.4 + 1e-12, "chr": 0.4, "crc": 0.5}, ["split", "chr", "crc"])
    'split'
    >>> narrowest({"split": 0.41, "chr": 0.4}, ["split", "chr"])
    'chr'
    """
    low = min(widths[c] for c in order)
    return next(c for c in order if widths[c] <= low + tie)


def _needs_text(name: str) -> str:
    alts = calibrator_class(name).needs
    return f"{name} needs " + " or ".join(
        " and ".join(INPUTS[i] for i in alt) if alt else "nothing" for alt in alts)


def _candidate(name: str, alpha: float, scale: Scale, seed: int, randomize: bool,
               delta: float | None = None) -> Calibrator:
    """A candidate as ``auto`` builds it: its declared ``auto_config`` over the options.
    ``delta`` reaches every candidate's conformal step (set after building, so crc's
    ``auto_config`` selection "same", which refuses delta on its own, takes it: auto's
    final step refits only beta, on the conformal share, an exact rank)."""
    cls = calibrator_class(name)
    cal = cls.build(alpha, scale=scale, preset=cls.auto_config, seed=seed,
                    randomize=randomize)
    cal.delta = delta
    return cal


@register
class Auto(Calibrator):
    """Pick the narrowest valid method for these predictions (see the module docstring).

    Parameters
    ----------
    candidates : names from :data:`CANDIDATES` (default: every one the predictions allow)
    train_frac, select_frac : shares of the calibration items for the candidates' models and
        for the choice; the rest is conformalized
    adjust_boundary : compare widths after snapping to the achievable targets (the grid of
        ``pred.n_ratings`` ratings on an integer scale), as the bands will be reported
    randomize : randomised tie-breaking for the candidates that have it (split, CQR, CHR,
        marginal; see :func:`~scoreband.conformal.core.tie_keep_probability`)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.uniform(size=900); m = y + rng.normal(0, 0.05, 900)
    >>> pred = Predictions(m, features=np.c_[m, rng.normal(size=900)])
    >>> auto = Auto(0.1, candidates=["split", "cqr"]).fit(pred, y)
    >>> auto.choice in ("split", "cqr"), sorted(auto.choice_["widths"])
    (True, ['cqr', 'marginal', 'split'])
    """

    method = "auto"
    names = {"auto": ("the narrowest candidate on one share of the items, conformalized on "
                      "another", {})}
    learned = True
    #: its final step refits the winner's conformal step alone on the conformal share, an
    #: exact rank, whatever rule the winner chose by (crc's "same" included)
    final_refit = True

    def __init__(self, alpha: float = 0.1, *, candidates=None, train_frac: float = 0.4,
                 select_frac: float = 0.3, adjust_boundary: bool = False,
                 randomize: bool = True, seed: int = 0, **kw):
        super().__init__(alpha, **kw)
        if candidates is not None:
            unknown = [c for c in candidates if c not in auto_candidates()]
            if unknown:
                raise InputError(f"unknown auto candidate(s) {', '.join(map(repr, unknown))}; "
                                 f"choose from {', '.join(auto_candidates())}")
            candidates = list(candidates)
        if not (0 < train_frac and 0 < select_frac and train_frac + select_frac < 1):
            raise InputError("train_frac and select_frac must be > 0 and sum to less than 1, "
                             f"got {train_frac} and {select_frac}")
        self.candidates = candidates
        self.train_frac, self.select_frac = float(train_frac), float(select_frac)
        self.adjust_boundary, self.randomize, self.seed = adjust_boundary, randomize, seed
        self.winner_: Calibrator | None = None
        self.choice_: dict | None = None

    # --- configuration and persistence ----------------------------------------------------
    def get_config(self) -> dict:
        return {**super().get_config(), "candidates": self.candidates,
                "train_frac": self.train_frac, "select_frac": self.select_frac,
                "adjust_boundary": self.adjust_boundary, "randomize": self.randomize,
                "seed": self.seed}

    def _model_state(self):
        w = self.winner_
        return {**_jsonable(self.choice_),
                "winner": {"method": w.method, "alpha": w.alpha, "config": w.get_config(),
                           "model": w._model_state()}}

    def _load_model_state(self, state):
        state = _unjson(state)
        self.winner_ = calibrator_from_state({**state.pop("winner"), "params": {}}, self.scale)
        self.choice_ = state

    # --- fitting ----------------------------------------------------------------------------
    def _names(self, pred: Predictions) -> list[str]:
        usable = usable_candidates(pred)
        if self.candidates is None:
            names = usable
        else:
            missing = [c for c in self.candidates if c not in usable]
            if missing:
                raise InputError(f"auto candidate(s) {', '.join(missing)} cannot run on these "
                                 "predictions: " + "; ".join(_needs_text(c) for c in missing))
            names = list(dict.fromkeys([*self.candidates, "marginal"]))
        real = [c for c in names if c != "marginal"]
        if len(real) < 2:
            only = real[0] if real else "marginal"
            raise InputError(
                f"auto needs at least two methods to choose from, but these predictions allow "
                f"only {only!r} (besides the no-model band): give features (for cqr, chr, "
                f"r2ccp) or an uncalibrated interval lo/hi (for crc), or use method {only!r}")
        return names

    def _shares(self, pred, y, within=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = len(pred)
        need = min_calibration_size(self.alpha, self.delta)
        rest = 1 - self.train_frac - self.select_frac
        n_min = max(math.ceil(need / rest), math.ceil(need / self.select_frac),
                    math.ceil(10 / self.train_frac))
        if n < n_min:
            raise InputError(f"auto needs at least {n_min} calibration items for alpha="
                             f"{self.alpha}{'' if self.delta is None else f', delta={self.delta}'} "
                             "(a training, a selection and a conformal share); "
                             f"got {n}: use more rows or a fixed method")
        a = int(round(self.train_frac * n))
        b = a + int(round(self.select_frac * n))
        return tuple(key_split(pred, y, self.seed, 7, a, b, within=within))  # by identity

    def _width(self, cal: Calibrator, pred: Predictions) -> float:
        band = cal.predict(pred)
        if self.adjust_boundary and pred.n_ratings is not None:
            band = adjust_band(band, pred.n_ratings)
        return float(np.mean(band.hi01 - band.lo01))

    def fit_model_part(self, pred: Predictions, y: np.ndarray, within=None) -> np.ndarray:
        """Fit every candidate's model, choose the narrowest on the selection share; returns
        the conformal share's indices (``within``: :meth:`Calibrator.fit_model_part`)."""
        names = self._names(pred)
        tr, sel, conf = self._shares(pred, y, within)
        # SPEC section 9: each candidate is conformalized on one half of the selection share
        # and measured on the other, so a candidate is not measured on the items its
        # threshold was set on
        half = len(sel) // 2
        sel_a, sel_b = (sel[i] for i in key_split(
            pred.take(sel), y[sel], self.seed, 8, half,
            within=None if within is None else np.asarray(within)[sel]))
        p_tr, p_a, p_b = pred.take(tr), pred.take(sel_a), pred.take(sel_b)
        widths, chosen, fitted = {}, {}, {}
        for name in names:
            cal = _candidate(name, self.alpha, self.scale, self.seed, self.randomize,
                             self.delta)
            if cal.learned:
                cal.fit_model(p_tr, y[tr])
            cal.params_ = cal.fit_conformal(p_a, y[sel_a])
            widths[name] = self._width(cal, p_b)
            chosen[name], fitted[name] = cal.params_, cal
        best = narrowest(widths, names)
        self.winner_ = fitted[best]
        self.choice_ = {"choice": best, "widths": widths, "chosen_params": chosen[best],
                        "n_train": len(tr), "n_select": len(sel)}
        return conf

    def fit_conformal(self, pred: Predictions, y01: np.ndarray) -> dict:
        if self.winner_ is None:
            raise InputError("auto: fit the candidates first (call fit)")
        return self.winner_.refit_conformal(pred, y01, self.choice_["chosen_params"])

    # --- applying -----------------------------------------------------------------------------
    def _require_fitted(self) -> None:
        super()._require_fitted()
        if self.winner_ is None:
            raise InputError("auto: this calibrator has no chosen method")

    def check_pred(self, pred):
        if self.winner_ is not None:
            self.winner_.check_pred(pred)

    def apply_params(self, pred, params):
        return self.winner_.apply_params(pred, params)

    def apply_sets(self, pred, params):
        return self.winner_.apply_sets(pred, params)

    def difficulty(self, pred):
        return self.winner_.difficulty(pred)

    @property
    def choice(self) -> str | None:
        return None if self.choice_ is None else self.choice_["choice"]

    def predict(self, pred: Predictions, groups=None) -> Band:
        self._require_fitted()
        self.check_pred(pred)
        self.winner_.params_ = self.params_
        band = self.winner_.predict(pred)
        band.method = f"auto({self.choice})"
        if self.choice == "marginal":
            band.note = "marginal_fallback"
        return band

    def __repr__(self) -> str:
        if self.params_ is None:
            return f"Auto(alpha={self.alpha}, unfitted)"
        w = ", ".join(f"{k}={v:.3f}" for k, v in self.choice_["widths"].items())
        return f"Auto(alpha={self.alpha}, choice={self.choice}, widths01: {w})"
