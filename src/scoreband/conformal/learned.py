"""Conformal methods with a learned part on features (e.g. judge score-token log-probs):
split conformal on a fitted point score, CQR, R2CCP and CHR, and the no-model marginal band.

Each fits its model on a ``train_frac`` share of the calibration items and runs the conformal
step on the rest, so the guarantee holds. Models persist as plain JSON numbers (no pickle).
torch and scikit-learn are imported only when a model is fitted or evaluated, so applying a
split or CRC calibrator never loads them.
"""

from __future__ import annotations

import math

import numpy as np

from scoreband.conformal._core import open_tied_edges, row_matmul, unbounded, whole_scale
from scoreband.conformal.base import Calibrator, register
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
from scoreband.conformal.pointfit import (
    fit_point_model,
    fit_standardiser,
    predict_point_model,
    standardise,
)
from scoreband.conformal.randomness import keys_of, row_uniforms
from scoreband.conformal.split import quantile_params
from scoreband.errors import InputError
from scoreband.records import Band, Predictions

__all__ = ["Fitted", "CQR", "R2CCP", "CHR", "Marginal", "density_sets", "fit_softmax",
           "softmax_probs", "looks_like_logprobs"]


def _features(pred: Predictions, method: str) -> np.ndarray:
    if pred.features is None:
        raise InputError(f"{method} needs feature columns (e.g. judge log-probs): pass "
                         "`features` COL1,COL2,... or a glob such as 'logp_*'")
    X = np.asarray(pred.features, dtype=float)
    if not np.isfinite(X).all():
        raise InputError(f"{method}: features contain NaN/inf; fix or drop those rows")
    return X


class _Learned(Calibrator):
    learned = True

    def __init__(self, alpha: float = 0.1, *, train_frac: float = 0.5, seed: int = 0,
                 randomize: bool = False, **kw):
        super().__init__(alpha, **kw)
        if not 0 < train_frac < 1:
            raise InputError(f"train_frac must be in (0, 1), got {train_frac}")
        self.train_frac = train_frac
        self.seed = seed
        self.randomize = bool(randomize)
        self.model_: dict | None = None

    def get_config(self) -> dict:
        return {**super().get_config(), "train_frac": self.train_frac, "seed": self.seed,
                "randomize": self.randomize}

    def _open_ties(self, lo, hi, params, pred):
        """Randomised tie-breaking at the band's edges (see ``tie_keep_probability``), one
        uniform per item from its identity."""
        if not self.randomize:
            return lo, hi
        return open_tied_edges(lo, hi, params.get("tie_keep", 1.0),
                               row_uniforms(keys_of(pred), self.seed, 2))

    def _model_state(self):
        return self.model_

    def _load_model_state(self, state):
        self.model_ = state

    def conformity(self, pred, y) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def fit_conformal(self, pred, y):
        """The conformal step: quantile of the method's conformity scores."""
        return quantile_params(self.conformity(pred, y), self.alpha, self.randomize)

    def check_pred(self, pred):
        _features(pred, self.method)
        if self.model_ is not None and pred.features.shape[1] != self.model_["n_features"]:
            raise InputError(f"{self.method} was fitted on {self.model_['n_features']} feature "
                             f"columns, got {pred.features.shape[1]}")


def looks_like_logprobs(X: np.ndarray, scale) -> bool:
    """Whether feature columns are the log-probs of a judge's score tokens: one column per
    integer point of ``scale`` (5 for 1-5), every value <= 0."""
    return (scale is not None and scale.integer and X.ndim == 2
            and X.shape[1] == int(round(scale.hi - scale.lo)) + 1 and X.shape[1] >= 2
            and bool((X <= 1e-9).all()))


@register
class Fitted(_Learned):
    """Split conformal around a point score fitted to the targets from the given columns.

    What a careful user would try before anything fancier: ridge regression (regularisation
    chosen by leave-one-out, scikit-learn's ``RidgeCV``) on the standardised columns - the
    point prediction when there is one, the features, and, when the features are a judge's
    score-token log-probs (:func:`looks_like_logprobs`), their expected score - then an
    isotonic map of its output onto [0, 1] (a judge's expected score is often on the wrong
    part of the scale: 4.6 where the experts say 3). Both are fitted on the ``train_frac``
    share; the residual ``|y - fit|`` is conformalized on the rest, as split conformal.

    >>> rng = np.random.default_rng(0)
    >>> y = rng.uniform(size=600)
    >>> X = np.c_[3 * y ** 2 + rng.normal(0, 0.05, 600), rng.normal(size=600)]
    >>> cal = Fitted(0.1).fit(Predictions(np.full(600, np.nan), features=X), y)
    >>> band = cal.predict(Predictions(np.full(2, np.nan), features=[[0.75, 0.0], [3.0, 0.0]]))
    >>> (band.hi01 - band.lo01 < 0.2).all(), band.median01.round(1).tolist()
    (np.True_, [0.5, 1.0])
    """

    method = "fitted"
    names = {"fitted": ("absolute residual around a point score fitted to the targets (ridge "
                        "on the median and `features`, then an isotonic map)", {})}
    needs = (("median",), ("features",))
    auto_rank = 1

    def _columns(self, pred: Predictions, fitting: bool) -> np.ndarray:
        cols = []
        med = pred.median
        has_median = bool(len(med)) and bool(np.isfinite(med).all())
        if fitting:
            logp = pred.features is not None and looks_like_logprobs(
                np.asarray(pred.features, dtype=float), self.scale)
            self.model_ = {"median": has_median, "features": pred.features is not None,
                           "logprobs": logp}
        m = self.model_
        if m["median"]:
            if not has_median:
                raise InputError("fitted was fitted with a point prediction (median); these "
                                 "predictions have none")
            cols.append(np.asarray(med, dtype=float)[:, None])
        if m["features"]:
            X = _features(pred, self.method)
            cols.append(X)
            if m["logprobs"]:
                from scoreband.logprobs import expected_score  # lazy: loads scipy

                cols.append(expected_score(X)[:, None])
        if not cols:
            raise InputError("fitted needs a point prediction (median) or feature columns")
        return np.hstack(cols)

    def fit_model(self, pred, y):
        X = self._columns(pred, fitting=True)
        self.model_.update(fit_point_model(X, y))

    def point(self, pred: Predictions) -> np.ndarray:
        """The fitted point score on [0, 1]."""
        return predict_point_model(self.model_, self._columns(pred, fitting=False))

    def check_pred(self, pred):
        if self.model_ is None:
            if pred.features is None and not (len(pred) and np.isfinite(pred.median).all()):
                raise InputError("fitted needs a point prediction (median) or feature columns")
            return
        if self.model_["features"]:
            _features(pred, self.method)
            want = self.model_["n_columns"] - self.model_["median"] - self.model_["logprobs"]
            if pred.features.shape[1] != want:
                raise InputError(f"fitted was fitted on {want} feature columns, got "
                                 f"{pred.features.shape[1]}")

    def conformity(self, pred, y):
        return np.abs(y - self.point(pred))

    def apply_params(self, pred, params):
        full, q = unbounded(params["q"], len(pred), at=1.0)
        m = self.point(pred)
        lo, hi = self._open_ties(m - q, m + q, params, pred)
        return lo, hi, full

    def predict(self, pred: Predictions, groups=None) -> Band:
        self._require_fitted()
        self.check_pred(pred)
        lo, hi, full = self.apply_params(pred, self.params_)
        return self._band(Predictions(self.point(pred)), lo, hi, full)

    def difficulty(self, pred):
        """The spread of the judge's score distribution (log-prob features), else the base
        interval's width."""
        if self.model_ is not None and self.model_["logprobs"]:
            from scoreband.logprobs import distribution_std_from_logprobs  # lazy: loads scipy

            return distribution_std_from_logprobs(pred.features)
        return super().difficulty(pred)


@register
class CQR(_Learned):
    """Conformalized quantile regression: linear quantile regressors for alpha/2 and
    1 - alpha/2 on the features (scikit-learn), conformity ``max(q_lo - y, y - q_hi)``.

    Linear models keep the calibrator a small JSON file; on a handful of log-prob features
    they are what the LLM-as-a-judge uncertainty study uses.
    """

    method = "cqr"
    names = {"cqr": ("conformalized linear quantile regression on `features`", {})}
    needs = (("features",),)
    auto_rank = 3

    def fit_model(self, pred, y):
        X = _features(pred, self.method)
        from sklearn.linear_model import QuantileRegressor

        st = fit_standardiser(X)
        Z = standardise(X, st)
        coefs = {}
        for name, q in (("lo", self.alpha / 2), ("hi", 1 - self.alpha / 2), ("mid", 0.5)):
            r = QuantileRegressor(quantile=q, alpha=0.0, solver="highs").fit(Z, y)
            if r.coef_ is None or not np.isfinite(r.coef_).all():
                raise InputError(f"cqr: the {q:g}-quantile regression did not converge on "
                                 "these features; try `method` r2ccp or split")
            coefs[name] = {"coef": r.coef_.tolist(), "intercept": float(r.intercept_)}
        self.model_ = {"n_features": X.shape[1], **st, **coefs}

    def _q(self, pred, name):
        c = self.model_[name]
        Z = standardise(_features(pred, self.method), self.model_)
        return row_matmul(Z, np.asarray(c["coef"])) + c["intercept"]

    def conformity(self, pred, y):
        """``max(q_lo - y, y - q_hi)`` per item."""
        return np.maximum(self._q(pred, "lo") - y, y - self._q(pred, "hi"))

    def apply_params(self, pred, params):
        full, q = unbounded(params["q"], len(pred))
        lo, hi = self._q(pred, "lo") - q, self._q(pred, "hi") + q
        # crossed regressors with a negative q can invert the band: keep it ordered
        lo, hi = self._open_ties(np.minimum(lo, hi), np.maximum(lo, hi), params, pred)
        return lo, hi, full

    def predict(self, pred: Predictions, groups=None) -> Band:
        self._require_fitted()
        self.check_pred(pred)
        lo, hi, full = self.apply_params(pred, self.params_)
        med = np.clip(self._q(pred, "mid"), 0, 1)
        band = self._band(Predictions(med), lo, hi, full)
        return band

    def difficulty(self, pred):
        return self._q(pred, "hi") - self._q(pred, "lo")


def _mlp(d: int, bins: int, hidden: int = 64):
    """The bin classifier of R2CCP: two hidden ReLU layers (torch, imported here)."""
    from torch import nn

    return nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                         nn.ReLU(), nn.Linear(hidden, bins))


def _interp_density(probs: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Piecewise-linear density on [0, 1] from bin probabilities, evaluated at y (per row)."""
    k = probs.shape[1]
    dens = probs * k  # per-bin density (bin width 1/k)
    pos = np.clip(y * k - 0.5, 0, k - 1)
    i0 = np.floor(pos).astype(int)
    i1 = np.minimum(i0 + 1, k - 1)
    w = pos - i0
    rows = np.arange(len(y))
    return (1 - w) * dens[rows, i0] + w * dens[rows, i1]


def density_sets(probs: np.ndarray, threshold: float):
    """Per row: the union of intervals ``{t : density(t) >= threshold}`` over [0, 1], exactly,
    as a list of ``(lo, hi)`` pairs, and its hull. An empty set becomes the density's mode.

    The density is :func:`_interp_density`'s: linear between the bin centres, constant beyond
    the first and last. Each of its ``K + 1`` pieces keeps an interval (a linear function is
    above a level on one side of its crossing), and touching pieces are merged. Computed
    exactly rather than on a grid: a grid drops a target that lies between two grid points at
    the edge of a narrow piece (set coverage fell to 0.84 on real judge tables at alpha 0.1).

    >>> sets, lo, hi = density_sets(np.array([[0.5, 0.0, 0.5]]), 0.75)
    >>> [(round(a, 4), round(b, 4)) for a, b in sets[0]], float(lo[0]), float(hi[0])
    ([(0.0, 0.3333), (0.6667, 1.0)], 0.0, 1.0)
    """
    probs = np.asarray(probs, dtype=float)
    n, k = probs.shape
    dens = probs * k
    knots = (np.arange(k) + 0.5) / k
    xa, xb = np.r_[0.0, knots], np.r_[knots, 1.0]          # the K + 1 pieces
    da = np.concatenate([dens[:, :1], dens], axis=1)        # density at each piece's start
    db = np.concatenate([dens, dens[:, -1:]], axis=1)       # ... and end
    ge_a, ge_b = da >= threshold, db >= threshold
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = xa + (threshold - da) / (db - da) * (xb - xa)
    lo_p = np.where(ge_a, xa, cross)
    hi_p = np.where(ge_b, xb, cross)
    keep = ge_a | ge_b
    sets, lo, hi = [], np.empty(n), np.empty(n)
    for i in range(n):
        idx = np.flatnonzero(keep[i])
        if len(idx) == 0:
            t = float(knots[int(np.argmax(dens[i]))])
            sets.append([(t, t)])
            lo[i] = hi[i] = t
            continue
        a, b = lo_p[i, idx], hi_p[i, idx]
        brk = np.flatnonzero(a[1:] > b[:-1] + 1e-12)       # gaps between kept pieces
        starts, ends = np.r_[a[0], a[brk + 1]], np.r_[b[brk], b[-1]]
        sets.append([(float(u), float(v)) for u, v in zip(starts, ends, strict=True)])
        lo[i], hi[i] = starts[0], ends[-1]
    return sets, lo, hi


@register
class R2CCP(_Learned):
    """Regression-as-classification conformal prediction (R2CCP).

    A small MLP classifies the target into ``bins`` bins of [0, 1] (cross-entropy plus an
    entropy penalty that keeps the distribution from collapsing); the conformity score is
    minus the interpolated predicted density at y; the prediction set is
    ``{t : density(t) >= -q}``, possibly several intervals (``Band.sets01``), whose hull is
    the band. Written by hand because the `r2ccp` package pulls in torchvision, which breaks
    a CPU torch install (the project keeps torchvision out).
    """

    method = "r2ccp"
    names = {"r2ccp": ("regression-as-classification density sets on `features` (band = "
                       "their hull)", {})}
    needs = (("features",),)
    auto_rank = 5
    auto_config = {"randomize": False}  # continuous density scores: no ties to break

    def __init__(self, alpha: float = 0.1, *, bins: int = 50, epochs: int = 100,
                 entropy_weight: float = 0.1, lr: float = 1e-2, batch_size="auto", **kw):
        super().__init__(alpha, **kw)
        self.bins, self.epochs = bins, epochs
        self.entropy_weight, self.lr = entropy_weight, lr
        self.batch_size = batch_size

    def get_config(self) -> dict:
        return {**super().get_config(), "bins": self.bins, "epochs": self.epochs,
                "entropy_weight": self.entropy_weight, "lr": self.lr,
                "batch_size": self.batch_size}

    def fit_model(self, pred, y):
        import torch
        from torch import nn

        X = _features(pred, self.method)
        mu, sd = X.mean(0), X.std(0) + 1e-8
        g = torch.Generator().manual_seed(self.seed)
        torch_state = torch.random.get_rng_state()
        torch.manual_seed(self.seed)
        try:
            net = _mlp(X.shape[1], self.bins)
        finally:
            torch.random.set_rng_state(torch_state)
        xt = torch.tensor((X - mu) / sd, dtype=torch.float32)
        target = torch.tensor(np.minimum((y * self.bins).astype(int), self.bins - 1))
        opt = torch.optim.Adam(net.parameters(), lr=self.lr)
        # a quarter of the items per step (at least 256): the same number of steps at any n,
        # which keeps the fit near 1 s on 2 cores (per-step overhead dominates this tiny net)
        bs = max(256, -(-len(xt) // 4)) if self.batch_size == "auto" else int(self.batch_size)
        for _ in range(self.epochs):
            perm = torch.randperm(len(xt), generator=g)
            for s in range(0, len(xt), bs):
                b = perm[s:s + bs]
                logits = net(xt[b])
                logp = torch.log_softmax(logits, 1)
                ent = -(logp.exp() * logp).sum(1).mean()
                loss = nn.functional.nll_loss(logp, target[b]) - self.entropy_weight * ent
                opt.zero_grad()
                loss.backward()
                opt.step()
        self.model_ = {"n_features": X.shape[1], "mu": mu.tolist(), "sd": sd.tolist(),
                       "weights": {k: v.tolist() for k, v in net.state_dict().items()}}

    def probs(self, pred: Predictions) -> np.ndarray:
        """The classifier's bin probabilities, ``(n, bins)``: the trained MLP run in numpy
        (:func:`~scoreband.conformal._core.row_matmul`), so a row's probabilities do not
        depend on the other rows of the call (torch's kernels change with the batch)."""
        from scipy.special import softmax

        m = self.model_
        w = {k.removeprefix("net."): np.asarray(v, dtype=np.float32).astype(float)
             for k, v in m["weights"].items()}
        h = (_features(pred, self.method) - np.asarray(m["mu"])) / np.asarray(m["sd"])
        h = h.astype(np.float32).astype(float)  # the inputs the net was trained on
        for i in (0, 2, 4):
            h = row_matmul(h, w[f"{i}.weight"].T) + w[f"{i}.bias"]
            if i < 4:
                np.maximum(h, 0.0, out=h)
        return softmax(h, axis=1)

    def conformity(self, pred, y):
        """Minus the interpolated predicted density at y, per item."""
        return -_interp_density(self.probs(pred), y)

    def apply_params(self, pred, params):
        q = params["q"]
        n = len(pred)
        if math.isinf(q):
            return whole_scale(n)
        _, lo, hi = density_sets(self.probs(pred), -q)
        return lo, hi, np.zeros(n, dtype=bool)

    def apply_sets(self, pred, params):
        q = params["q"]
        if math.isinf(q):
            return [[(0.0, 1.0)] for _ in range(len(pred))]
        return density_sets(self.probs(pred), -q)[0]

    def predict(self, pred: Predictions, groups=None) -> Band:
        self._require_fitted()
        self.check_pred(pred)
        p = self.probs(pred)
        q = self.params_["q"]
        med = row_matmul(p, (np.arange(self.bins) + 0.5) / self.bins)  # expected value
        if math.isinf(q):
            return self._band(Predictions(med), *whole_scale(len(p)))
        sets, lo, hi = density_sets(p, -q)
        band = self._band(Predictions(med), lo, hi, np.zeros(len(p), dtype=bool))
        band.sets01 = sets
        return band

    def difficulty(self, pred):
        """Spread (std) of the predicted distribution: the model's own uncertainty."""
        p = self.probs(pred)
        c = (np.arange(self.bins) + 0.5) / self.bins
        return np.sqrt(np.maximum(row_matmul(p, c**2) - row_matmul(p, c) ** 2, 0))


# --------------------------------------------------------------------------- CHR
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
class CHR(_Learned):
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
    >>> from scoreband.records import Scale
    >>> cal = CHR(0.1, scale=Scale(1, 5, integer=True)).fit(Predictions(np.full(600, np.nan), features=X,
    ...                                                   n_ratings=np.ones(600)), y)
    >>> band = cal.predict(Predictions(np.full(3, np.nan), features=[[0.0], [0.5], [1.0]]))
    >>> band.lo.tolist(), band.hi.tolist()                      # bands on achievable targets
    ([1.0, 2.0, 4.0], [2.0, 5.0, 5.0])
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
        X = _features(pred, self.method)
        classes = target_classes(self.scale, y, pred.n_ratings, self.bins, self.grid,
                                 support=True)
        st = fit_standardiser(X)
        Z = standardise(X, st)
        edges = coarse_edges(self.scale, len(y))
        use = len(edges) - 1 < len(classes) and (
            self.coarse == "always"
            or (self.coarse == "auto" and len(y) < MIN_ITEMS_PER_CLASS * len(classes)))
        if use:
            import warnings

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
        P = softmax_probs(m, standardise(_features(pred, self.method), m))
        if m.get("coarse_edges") is not None:
            c = self._classes()
            P = spread_histogram(P, m["coarse_edges"], c.lo_edges, c.hi_edges)
        return P

    def _uniforms(self, pred: Predictions, stream: int) -> np.ndarray | None:
        if not self.randomize:
            return None
        return row_uniforms(keys_of(pred), self.seed, stream)

    def conformity(self, pred, y):
        """Mass of the nested interval when the item's class joins it (randomised: the mass
        before it plus a uniform share of its own)."""
        classes, P, u = self._classes(), self.probs(pred), self._uniforms(pred, 0)
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
        lo_c, hi_c, _ = nested_bands(P, q, self._uniforms(pred, 1))
        lo, hi = self._classes().band(lo_c, hi_c)
        return lo.astype(float), hi.astype(float), np.zeros(n, dtype=bool)

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


# --------------------------------------------------------------------------- marginal
@register
class Marginal(_Learned):
    """The no-model band: the same interval for every item, from the targets alone.

    The ``alpha/2`` and ``1 - alpha/2`` quantiles of the training share's targets,
    conformalized on the rest (score ``max(lo - y, y - hi)``). Any method that is wider than
    this has learned nothing useful; :class:`~scoreband.conformal.auto.Auto` falls back to it.
    Needs no prediction columns.
    """

    method = "marginal"
    names = {"marginal": ("one band from the targets alone (a baseline any method should "
                          "beat)", {})}
    auto_rank = 99  # always the last candidate: the no-model band auto falls back to

    def check_pred(self, pred):
        pass

    def fit_model(self, pred, y):
        lo, hi, mid = np.quantile(y, [self.alpha / 2, 1 - self.alpha / 2, 0.5])
        self.model_ = {"lo": float(lo), "hi": float(hi), "median": float(mid)}

    def conformity(self, pred, y):
        return np.maximum(self.model_["lo"] - y, y - self.model_["hi"])

    def apply_params(self, pred, params):
        n = len(pred)
        full, q = unbounded(params["q"], n)
        lo = np.full(n, self.model_["lo"] - q)
        hi = np.full(n, self.model_["hi"] + q)
        lo, hi = self._open_ties(np.minimum(lo, hi), np.maximum(lo, hi), params, pred)
        return lo, hi, full

    def predict(self, pred: Predictions, groups=None) -> Band:
        self._require_fitted()
        lo, hi, full = self.apply_params(pred, self.params_)
        return self._band(Predictions(np.full(len(pred), self.model_["median"])), lo, hi, full)

    def difficulty(self, pred):
        return np.zeros(len(pred))
