"""``r2ccp``: regression-as-classification conformal prediction (density sets of a small
MLP classifier over bins of [0, 1]; torch, imported only to fit)."""

from __future__ import annotations

import math

import numpy as np

from scoreband.conformal.base import register
from scoreband.conformal.core import row_matmul, whole_scale
from scoreband.conformal.learned import LearnedCalibrator, features_of
from scoreband.datatypes import Band, Predictions

__all__ = ["R2CCP", "density_sets"]


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
class R2CCP(LearnedCalibrator):
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

        X = features_of(pred, self.method)
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
        (:func:`~scoreband.conformal.core.row_matmul`), so a row's probabilities do not
        depend on the other rows of the call (torch's kernels change with the batch)."""
        from scipy.special import softmax

        m = self.model_
        w = {k.removeprefix("net."): np.asarray(v, dtype=np.float32).astype(float)
             for k, v in m["weights"].items()}
        h = (features_of(pred, self.method) - np.asarray(m["mu"])) / np.asarray(m["sd"])
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

    def band_median(self, pred) -> np.ndarray:
        """The class distribution's expected value: the band's centre (and Mondrian by
        predicted level's score)."""
        return row_matmul(self.probs(pred), (np.arange(self.bins) + 0.5) / self.bins)

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
