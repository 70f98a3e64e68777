"""``chr``: conformal histogram regression (Sesia and Romano 2021), contiguous bands from
a classifier's histogram over the target's classes."""

from __future__ import annotations

import math
import warnings

import numpy as np

from scoreband.conformal.base import register
from scoreband.conformal.bins import (
    MIN_ITEMS_PER_CLASS,
    TargetClasses,
    coarse_edges,
    nested_bands,
    nested_mass,
    nested_scores,
    spread_histogram,
    target_classes,
)
from scoreband.conformal.core import row_matmul, whole_scale
from scoreband.conformal.learned import LearnedCalibrator, features_of
from scoreband.conformal.pointfit import fit_standardiser, standardise
from scoreband.conformal.randomness import draw_seed, item_uniforms, keys_of, row_uniforms
from scoreband.conformal.split import quantile_params
from scoreband.datatypes import Band, Predictions
from scoreband.errors import InputError

__all__ = ["CHR", "fit_softmax", "softmax_probs"]


def fit_softmax(Z: np.ndarray, cls: np.ndarray, n_classes: int, C: float = 1.0) -> dict:
    """Multinomial logistic regression (scikit-learn) of the class on standardised features,
    as plain JSON numbers: one coefficient row and intercept per class; classes never seen in
    training get intercept ``None`` (probability 0 before smoothing)."""
    from sklearn.linear_model import LogisticRegression

    seen = np.unique(cls)
    coef = np.zeros((n_classes, Z.shape[1]))
    intercept: list[float | None] = [None] * n_classes
    if len(seen) == 1:
        intercept[int(seen[0])] = 0.0
    else:
        m = LogisticRegression(C=C, max_iter=2000).fit(Z, cls)
        if len(seen) == 2:  # binary: scikit-learn keeps one row for the second class
            coef[seen[1]] = m.coef_[0]
            intercept[int(seen[0])], intercept[int(seen[1])] = 0.0, float(m.intercept_[0])
        else:
            for j, c in enumerate(m.classes_):
                coef[c] = m.coef_[j]
                intercept[int(c)] = float(m.intercept_[j])
    return {"coef": coef.tolist(), "intercept": intercept}


def softmax_probs(model: dict, Z: np.ndarray, smoothing: float = 1e-3) -> np.ndarray:
    """Class probabilities of :func:`fit_softmax`'s model, mixed with ``smoothing`` of the
    uniform distribution so that every class can join a nested interval."""
    from scipy.special import softmax

    coef = np.asarray(model["coef"], dtype=float)
    b = np.array([-np.inf if v is None else v for v in model["intercept"]], dtype=float)
    logits = row_matmul(Z, coef.T) + b
    P = softmax(logits, axis=1)
    return (1 - smoothing) * P + smoothing / P.shape[1]


@register
class CHR(LearnedCalibrator):
    """Conformal histogram regression (Sesia and Romano 2021): contiguous bands.

    A classifier (multinomial logistic regression on the standardised features) predicts a
    histogram over the target's classes: the achievable targets themselves when every target
    is the mean of the same number of integer ratings (13 classes for 3 ratings on 1-5), else
    ``bins`` equal bins of [0, 1]. From each item's histogram a nested sequence of contiguous
    intervals grows from the most probable class; the conformal step picks how much mass the
    interval must hold (see :mod:`scoreband.conformal.bins`).

    Parameters
    ----------
    bins : number of equal bins for continuous targets
    grid : ``"auto"`` (achievable targets when they exist), ``"never"`` or ``"always"``
    randomize : randomised tie-breaking (smoothed conformal p-values): the class that crosses
        the threshold is kept with the probability that makes coverage ``1 - alpha`` in
        expectation. Discrete targets otherwise over-cover, because whole classes are added
        at a time. Draws come from ``seed``, so a given table always gets the same bands.
    C : inverse regularisation strength of the logistic regression
    coarse : ``"auto"``: when the training share holds fewer than
        :data:`~scoreband.conformal.bins.MIN_ITEMS_PER_CLASS` items per class (uneven rater
        counts give hundreds of achievable means), the classifier is
        fitted on coarse cells (one per integer rating) and its histogram spread over the
        classes by its piecewise-linear distribution function (said in a warning);
        ``"never"`` / ``"always"``. On a 1-7 table with 3-11 ratings per item and 150
        training items this takes CHR from 1.8x to about split conformal's width.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(1, 6, 600) / 4 - 0.25                      # single ratings 1-5 on [0, 1]
    >>> X = (y + rng.normal(0, 0.3, 600))[:, None]
    >>> from scoreband.datatypes import Scale
    >>> cal = CHR(0.1, scale=Scale(1, 5, integer=True)).fit(Predictions(np.full(600, np.nan), features=X,
    ...                                                   n_ratings=np.ones(600)), y)
    >>> band = cal.predict(Predictions(np.full(3, np.nan), features=[[0.0], [0.5], [1.0]]))
    >>> band.lo.tolist(), band.hi.tolist()                      # bands on achievable targets
    ([1.0, 2.0, 4.0], [2.0, 4.0, 5.0])
    """

    method = "chr"
    names = {"chr": ("contiguous highest-density intervals of a classifier on `features`", {})}
    needs = (("features",),)
    auto_rank = 4

    def __init__(self, alpha: float = 0.1, *, bins: int = 50, grid: str = "auto",
                 randomize: bool = True, C: float = 1.0, coarse: str = "auto", **kw):
        super().__init__(alpha, randomize=randomize, **kw)
        if grid not in ("auto", "never", "always"):
            raise InputError(f"grid must be 'auto', 'never' or 'always', got {grid!r}")
        if coarse not in ("auto", "never", "always"):
            raise InputError(f"coarse must be 'auto', 'never' or 'always', got {coarse!r}")
        self.bins, self.grid, self.C, self.coarse = int(bins), grid, C, coarse

    def get_config(self) -> dict:
        return {**super().get_config(), "bins": self.bins, "grid": self.grid, "C": self.C,
                "coarse": self.coarse}

    def _classes(self) -> TargetClasses:
        return TargetClasses.from_dict(self.model_["classes"])

    def fit_model(self, pred, y):
        X = features_of(pred, self.method)
        classes = target_classes(self.scale, y, pred.n_ratings, self.bins, self.grid,
                                 support=True)
        st = fit_standardiser(X)
        Z = standardise(X, st)
        edges = coarse_edges(self.scale, len(y))
        use = len(edges) - 1 < len(classes) and (
            self.coarse == "always"
            or (self.coarse == "auto" and len(y) < MIN_ITEMS_PER_CLASS * len(classes)))
        if use:
            warnings.warn(f"CHR: {len(y)} training items for {len(classes)} classes, so the "
                          f"histogram is fitted on {len(edges) - 1} coarse cells and spread "
                          "over the classes (`coarse` never to fit every class)", stacklevel=2)
            cells = np.clip(np.searchsorted(edges, y, side="right") - 1, 0, len(edges) - 2)
            model = fit_softmax(Z, cells, len(edges) - 1, self.C)
        else:
            model = fit_softmax(Z, classes.classify(y), len(classes), self.C)
        self.model_ = {"n_features": X.shape[1], **st,
                       "classes": classes.to_dict(), **model,
                       "coarse_edges": edges.tolist() if use else None}

    def probs(self, pred: Predictions) -> np.ndarray:
        """Predicted histogram over the classes, ``(n, K)``."""
        m = self.model_
        P = softmax_probs(m, standardise(features_of(pred, self.method), m))
        if m.get("coarse_edges") is not None:
            c = self._classes()
            P = spread_histogram(P, m["coarse_edges"], c.lo_edges, c.hi_edges)
        return P

    def _uniforms(self, pred: Predictions, stream: int, seed=None) -> np.ndarray | None:
        """A test row's tie-breaking draw: a function of its identity and the calibration's
        draw seed (``params["draw_seed"]``), so a row gets the same band alone or in a table
        while every calibration draws afresh; copies of a row share it."""
        if not self.randomize:
            return None
        return item_uniforms(keys_of(pred), self.seed if seed is None else seed, stream)

    def fit_conformal(self, pred, y):
        """The conformal step on calibration items, each with a draw of its own: copies of
        an item are numbered (:func:`~scoreband.conformal.randomness.row_uniforms`) and the
        draws are seeded by this calibration (:func:`~scoreband.conformal.randomness.
        draw_seed`). Copies sharing one draw, the same on every calibration, kept the ties of
        a discrete table tied: coverage 0.86 at a promised 0.90 (issue 43)."""
        if not self.randomize:
            return super().fit_conformal(pred, y)
        seed = draw_seed(self.seed, pred, y)
        scores = self.conformity(pred, y, row_uniforms(keys_of(pred), seed, 0))
        return {**quantile_params(scores, self.alpha, self.randomize, delta=self.delta),
                "draw_seed": seed}

    def conformity(self, pred, y, u=None):
        """Mass of the nested interval when the item's class joins it (randomised: the mass
        before it plus a uniform share ``u`` of its own; default: the items' draws from the
        method's seed)."""
        classes, P = self._classes(), self.probs(pred)
        u = self._uniforms(pred, 0) if u is None else u
        if classes.kind == "bins":
            return nested_scores(P, classes.classify(y), u)
        # a band on a grid or on the values the targets take runs from value to value: a
        # target between two values (another rater count, a value the training share never
        # had) is inside only once both have joined, so it scores as the later one
        c = classes.centers
        below = np.clip(np.searchsorted(c, y + 1e-12, side="right") - 1, 0, len(c) - 1)
        above = np.where(np.abs(y - c[below]) <= 1e-12, below,
                         np.minimum(below + 1, len(c) - 1))
        nest = nested_mass(P)  # once for both classes
        return np.maximum(nested_scores(P, below, u, nest), nested_scores(P, above, u, nest))

    def apply_params(self, pred, params):
        return self._apply(self.probs(pred), params, pred)

    def _apply(self, P, params, pred):
        q = params["q"]
        n = len(P)
        if math.isinf(q):
            return whole_scale(n)
        lo_c, hi_c, _ = nested_bands(P, q, self._uniforms(pred, 1, params.get("draw_seed")))
        lo, hi = self._classes().band(lo_c, hi_c)
        return lo.astype(float), hi.astype(float), np.zeros(n, dtype=bool)

    def band_median(self, pred) -> np.ndarray:
        """The histogram's mean: the band's centre (and Mondrian by predicted level's score)."""
        return row_matmul(self.probs(pred), self._classes().centers)

    def predict(self, pred: Predictions, groups=None) -> Band:
        self._require_fitted()
        self.check_pred(pred)
        P = self.probs(pred)  # once for the band and the median
        lo, hi, full = self._apply(P, self.params_, pred)
        med = row_matmul(P, self._classes().centers)  # the histogram's mean
        return self._band(Predictions(med), lo, hi, full)

    def difficulty(self, pred):
        """Spread (std) of the predicted histogram."""
        p, c = self.probs(pred), self._classes().centers
        return np.sqrt(np.maximum(row_matmul(p, c**2) - row_matmul(p, c) ** 2, 0))
