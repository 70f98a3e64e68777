"""Conformal methods with a learned part on features (e.g. judge score-token log-probs):
CQR and R2CCP (SPEC section 4).

Both fit their model on a ``train_frac`` share of the calibration items and run the conformal
step on the rest, so the guarantee holds. Models persist as plain JSON numbers (no pickle).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.linear_model import QuantileRegressor
from torch import nn

from scoreband.conformal._core import conformal_quantile
from scoreband.conformal.base import Calibrator, register
from scoreband.conformal.split import warn_too_small
from scoreband.errors import InputError
from scoreband.records import Band, Predictions

__all__ = ["CQR", "R2CCP", "density_sets"]


def _features(pred: Predictions, method: str) -> np.ndarray:
    if pred.features is None:
        raise InputError(f"{method} needs feature columns (e.g. judge log-probs): pass "
                         "--features COL1,COL2,... or a glob such as 'logp_*'")
    X = np.asarray(pred.features, dtype=float)
    if not np.isfinite(X).all():
        raise InputError(f"{method}: features contain NaN/inf; fix or drop those rows")
    return X


class _Learned(Calibrator):
    learned = True

    def __init__(self, alpha: float = 0.1, *, train_frac: float = 0.5, seed: int = 0, **kw):
        super().__init__(alpha, **kw)
        if not 0 < train_frac < 1:
            raise InputError(f"train_frac must be in (0, 1), got {train_frac}")
        self.train_frac = train_frac
        self.seed = seed
        self.model_: dict | None = None

    def get_config(self) -> dict:
        return {**super().get_config(), "train_frac": self.train_frac, "seed": self.seed}

    def _model_state(self):
        return self.model_

    def _load_model_state(self, state):
        self.model_ = state

    def conformity(self, pred, y) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _fit_params(self, pred, y):
        """The conformal step: quantile of the method's conformity scores."""
        q = conformal_quantile(self.conformity(pred, y), self.alpha)
        if math.isinf(q):
            warn_too_small(len(y), self.alpha)
        return {"q": q, "n": len(y)}

    def _check_pred(self, pred):
        _features(pred, self.method)
        if self.model_ is not None and pred.features.shape[1] != self.model_["n_features"]:
            raise InputError(f"{self.method} was fitted on {self.model_['n_features']} feature "
                             f"columns, got {pred.features.shape[1]}")


@register
class CQR(_Learned):
    """Conformalized quantile regression: linear quantile regressors for alpha/2 and
    1 - alpha/2 on the features (scikit-learn), conformity ``max(q_lo - y, y - q_hi)``.

    Linear models keep the calibrator a small JSON file; on a handful of log-prob features
    they are what source 002 describes.
    """

    method = "cqr"

    def _fit_model(self, pred, y):
        X = _features(pred, self.method)
        # standardised and clipped: log-probs of an over-confident judge reach -1000s, which
        # the linear-programming solver cannot handle
        mu, sd = X.mean(0), X.std(0) + 1e-8
        Z = np.clip((X - mu) / sd, -10, 10)
        coefs = {}
        for name, q in (("lo", self.alpha / 2), ("hi", 1 - self.alpha / 2), ("mid", 0.5)):
            r = QuantileRegressor(quantile=q, alpha=0.0, solver="highs").fit(Z, y)
            if r.coef_ is None or not np.isfinite(r.coef_).all():
                raise InputError(f"cqr: the {q:g}-quantile regression did not converge on "
                                 "these features; try --method r2ccp or split")
            coefs[name] = {"coef": r.coef_.tolist(), "intercept": float(r.intercept_)}
        self.model_ = {"n_features": X.shape[1], "mu": mu.tolist(), "sd": sd.tolist(), **coefs}

    def _q(self, pred, name):
        c, m = self.model_[name], self.model_
        Z = np.clip((_features(pred, self.method) - np.asarray(m["mu"])) / np.asarray(m["sd"]),
                    -10, 10)
        return Z @ np.asarray(c["coef"]) + c["intercept"]

    def conformity(self, pred, y):
        """``max(q_lo - y, y - q_hi)`` per item."""
        return np.maximum(self._q(pred, "lo") - y, y - self._q(pred, "hi"))

    def _apply(self, pred, params):
        q = params["q"]
        full = np.full(len(pred), math.isinf(q))
        q = 0.0 if math.isinf(q) else q
        lo, hi = self._q(pred, "lo") - q, self._q(pred, "hi") + q
        # crossed regressors with a negative q can invert the band: keep it ordered
        return np.minimum(lo, hi), np.maximum(lo, hi), full

    def predict(self, pred: Predictions, groups=None) -> Band:
        self._require_fitted()
        self._check_pred(pred)
        lo, hi, full = self._apply(pred, self.params_)
        med = np.clip(self._q(pred, "mid"), 0, 1)
        band = self._band(Predictions(med), lo, hi, full)
        return band

    def difficulty(self, pred):
        return self._q(pred, "hi") - self._q(pred, "lo")


class _MLP(nn.Module):
    def __init__(self, d: int, bins: int, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                 nn.ReLU(), nn.Linear(hidden, bins))

    def forward(self, x):
        return self.net(x)


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


def density_sets(probs: np.ndarray, threshold: float, grid: int = 501):
    """Per row: the union of intervals {t : density(t) >= threshold} on a grid over [0, 1],
    as a list of (lo, hi) pairs, and its hull. An empty set becomes the density's mode."""
    t = np.linspace(0, 1, grid)
    n = len(probs)
    dens = np.stack([_interp_density(probs, np.full(n, v)) for v in t], axis=1)
    keep = dens >= threshold
    sets, lo, hi = [], np.empty(n), np.empty(n)
    for i in range(n):
        idx = np.flatnonzero(keep[i])
        if len(idx) == 0:
            j = int(np.argmax(dens[i]))
            sets.append([(float(t[j]), float(t[j]))])
            lo[i] = hi[i] = t[j]
            continue
        breaks = np.flatnonzero(np.diff(idx) > 1)
        starts = np.r_[idx[0], idx[breaks + 1]]
        ends = np.r_[idx[breaks], idx[-1]]
        sets.append([(float(t[a]), float(t[b])) for a, b in zip(starts, ends, strict=True)])
        lo[i], hi[i] = t[idx[0]], t[idx[-1]]
    return sets, lo, hi


@register
class R2CCP(_Learned):
    """Regression-as-classification conformal prediction (R2CCP).

    A small MLP classifies the target into ``bins`` bins of [0, 1] (cross-entropy plus an
    entropy penalty that keeps the distribution from collapsing); the conformity score is
    minus the interpolated predicted density at y; the prediction set is
    ``{t : density(t) >= -q}``, possibly several intervals (``Band.sets01``), whose hull is
    the band. Written by hand because the `r2ccp` package pulls in torchvision (see DESIGN).
    """

    method = "r2ccp"

    def __init__(self, alpha: float = 0.1, *, bins: int = 50, epochs: int = 200,
                 entropy_weight: float = 0.1, lr: float = 1e-2, **kw):
        super().__init__(alpha, **kw)
        self.bins, self.epochs = bins, epochs
        self.entropy_weight, self.lr = entropy_weight, lr

    def get_config(self) -> dict:
        return {**super().get_config(), "bins": self.bins, "epochs": self.epochs,
                "entropy_weight": self.entropy_weight, "lr": self.lr}

    def _net(self) -> tuple[_MLP, np.ndarray, np.ndarray]:
        m = self.model_
        net = _MLP(m["n_features"], self.bins)
        net.load_state_dict({k: torch.tensor(v, dtype=torch.float32)
                             for k, v in m["weights"].items()})
        return net.eval(), np.asarray(m["mu"]), np.asarray(m["sd"])

    def _fit_model(self, pred, y):
        X = _features(pred, self.method)
        mu, sd = X.mean(0), X.std(0) + 1e-8
        g = torch.Generator().manual_seed(self.seed)
        torch_state = torch.random.get_rng_state()
        torch.manual_seed(self.seed)
        try:
            net = _MLP(X.shape[1], self.bins)
        finally:
            torch.random.set_rng_state(torch_state)
        xt = torch.tensor((X - mu) / sd, dtype=torch.float32)
        target = torch.tensor(np.minimum((y * self.bins).astype(int), self.bins - 1))
        opt = torch.optim.Adam(net.parameters(), lr=self.lr)
        bs = 256
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
        net, mu, sd = self._net()
        X = (_features(pred, self.method) - mu) / sd
        with torch.no_grad():
            return torch.softmax(net(torch.tensor(X, dtype=torch.float32)), 1).double().numpy()

    def conformity(self, pred, y):
        """Minus the interpolated predicted density at y, per item."""
        return -_interp_density(self.probs(pred), y)

    def _apply(self, pred, params):
        q = params["q"]
        n = len(pred)
        if math.isinf(q):
            return np.zeros(n), np.ones(n), np.ones(n, dtype=bool)
        _, lo, hi = density_sets(self.probs(pred), -q)
        return lo, hi, np.zeros(n, dtype=bool)

    def _apply_sets(self, pred, params):
        q = params["q"]
        if math.isinf(q):
            return [[(0.0, 1.0)] for _ in range(len(pred))]
        return density_sets(self.probs(pred), -q)[0]

    def predict(self, pred: Predictions, groups=None) -> Band:
        self._require_fitted()
        self._check_pred(pred)
        p = self.probs(pred)
        q = self.params_["q"]
        med = (p @ ((np.arange(self.bins) + 0.5) / self.bins))  # expected value
        if math.isinf(q):
            return self._band(Predictions(med), np.zeros(len(p)), np.ones(len(p)),
                              np.ones(len(p), dtype=bool))
        sets, lo, hi = density_sets(p, -q)
        band = self._band(Predictions(med), lo, hi, np.zeros(len(p), dtype=bool))
        band.sets01 = sets
        return band

    def difficulty(self, pred):
        """Spread (std) of the predicted distribution: the model's own uncertainty."""
        p = self.probs(pred)
        c = (np.arange(self.bins) + 0.5) / self.bins
        return np.sqrt(np.maximum(p @ c**2 - (p @ c) ** 2, 0))
