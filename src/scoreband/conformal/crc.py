"""Conformal risk control of a quantile interval with (omega, beta).

For the 90 % interval ``(l, u)`` and median ``m`` of each item::

    l_hat = max(0, m + omega (l - m) - beta)
    u_hat = min(1, m + omega (u - m) + beta)

Item i is covered iff ``beta >= r_i(omega) = max(m + omega (l - m) - y, y - m - omega (u - m))``.
For each omega on a grid, ``beta(omega)`` is the ``ceil((n + 1)(1 - alpha))``-th smallest
``r_i(omega)``; the omega with the smallest mean calibrated width wins.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from scoreband.conformal.base import Calibrator, register
from scoreband.conformal.core import conformal_rank
from scoreband.conformal.randomness import key_split
from scoreband.conformal.scores import crc_interval, crc_residuals
from scoreband.conformal.split import warn_too_small
from scoreband.datatypes import Predictions
from scoreband.errors import CalibratorMismatch, InputError

__all__ = [
    "DEFAULT_OMEGAS",
    "crc_residuals",
    "crc_interval",
    "crc_select",
    "quantiles_crossed",
    "CRC",
    "CrossedQuantilesWarning",
]

#: The default omega grid: 0 to 3, step 0.02.
DEFAULT_OMEGAS = np.round(np.arange(0, 151) * 0.02, 10)
#: Omega-selection rules of :class:`CRC`.
SELECTIONS = ("auto", "split", "fixed", "same")
#: Below this many calibration items, ``selection="auto"`` fixes omega = 1.
SMALL_N = 100

_CHUNK = 1 << 16


class CrossedQuantilesWarning(UserWarning):
    """Quantiles cross: omega is ill-defined, CRC falls back to a symmetric band."""


def quantiles_crossed(median, lo, hi, quantiles=None, tol: float = 1e-9) -> np.ndarray:
    """Per item: True where the predicted quantiles cross (``l > m``, ``m > u`` or a
    non-monotone row of ``quantiles``)."""
    m, lo, hi = (np.asarray(v, dtype=float) for v in (median, lo, hi))
    crossed = (lo > m + tol) | (m > hi + tol)
    if quantiles is not None:
        q = np.asarray(quantiles, dtype=float)
        crossed |= (np.diff(q, axis=1) < -tol).any(axis=1)
    return crossed


class _Workspace:
    """Cache-sized buffers for the omega loop.

    Hand-written because no library fuses these few element-wise passes: processing the
    arrays in L2-sized chunks with preallocated buffers keeps each pass in cache, which
    makes the 151-omega fit on 10^6 items about 2x faster than whole-array numpy.
    """

    def __init__(self, m, d, e, y):
        self.m, self.d, self.e = m, d, e
        self.a = m - y  # r = max(a - w d, b - w e) with b = -a
        self.n = len(m)
        self.r = np.empty(self.n)
        self.t1 = np.empty(_CHUNK)
        self.t2 = np.empty(_CHUNK)

    def residuals(self, w: float) -> np.ndarray:
        t1, t2, r = self.t1, self.t2, self.r
        for s in range(0, self.n, _CHUNK):
            k = min(_CHUNK, self.n - s)
            a, u1, u2 = self.a[s:s + k], t1[:k], t2[:k]
            np.multiply(self.d[s:s + k], w, out=u1)
            np.subtract(a, u1, out=u1)            # a - w d
            np.multiply(self.e[s:s + k], w, out=u2)
            np.add(u2, a, out=u2)
            np.negative(u2, out=u2)               # -a - w e = b - w e
            np.maximum(u1, u2, out=r[s:s + k])
        return r

    def mean_width(self, w: float, beta: float) -> float:
        t1, t2 = self.t1, self.t2
        total = 0.0
        for s in range(0, self.n, _CHUNK):
            k = min(_CHUNK, self.n - s)
            m, u1, u2 = self.m[s:s + k], t1[:k], t2[:k]
            np.multiply(self.e[s:s + k], w, out=u1)
            np.add(u1, m, out=u1)
            u1 += beta                            # m + w e + beta
            np.multiply(self.d[s:s + k], w, out=u2)
            np.subtract(m, u2, out=u2)
            u2 -= beta                            # m - w d - beta
            if beta < 0:  # keep l_hat <= m <= u_hat
                np.maximum(u1, m, out=u1)
                np.minimum(u2, m, out=u2)
            np.minimum(u1, 1.0, out=u1)
            np.maximum(u2, 0.0, out=u2)
            total += float(u1.sum()) - float(u2.sum())
        return total / self.n


def crc_select(median, lo, hi, y, alpha: float, omegas=DEFAULT_OMEGAS,
               select_idx=None, beta_idx=None, delta: float | None = None) -> dict:
    """Fit (omega, beta) by conformal risk control.

    Parameters
    ----------
    median, lo, hi, y : (n,) arrays on [0, 1]
    alpha : target miscoverage
    omegas : grid of candidate omegas
    select_idx, beta_idx : optional index arrays for the exact variant: omega is chosen on
        ``select_idx`` (with betas computed there), then beta is recomputed on ``beta_idx``.
    delta : None, or the training-conditional level: every beta is the rank of
        :func:`~scoreband.conformal.core.conditional_rank` (exact when beta is fitted on
        items omega was not chosen on)

    Returns
    -------
    dict with ``omega``, ``beta`` (``inf`` when the rank exceeds n), ``n``, ``widths`` and
    ``betas`` per omega of the selection set.
    """
    m, lo, hi, y = (np.asarray(v, dtype=float) for v in (median, lo, hi, y))
    omegas = np.asarray(omegas, dtype=float)
    if omegas.ndim != 1 or len(omegas) == 0 or (omegas < 0).any():
        raise InputError("the omega grid must be a non-empty list of numbers >= 0")
    if select_idx is None:
        ms, ys, ls, hs = m, y, lo, hi
    else:
        sel = np.asarray(select_idx)
        ms, ys, ls, hs = m[sel], y[sel], lo[sel], hi[sel]
    n = len(ms)
    k = conformal_rank(n, alpha, delta)
    betas = np.full(len(omegas), math.inf)
    widths = np.full(len(omegas), 1.0)
    if k <= n:
        # d, e >= 0 for uncrossed quantiles (crossed ones are only fitted at omega = 0)
        ws = _Workspace(ms, ms - ls, hs - ms, ys)
        for j, w in enumerate(omegas):
            r = ws.residuals(float(w))
            r.partition(k - 1)  # the k-th smallest r_i(omega), in place
            betas[j] = float(r[k - 1])
            widths[j] = ws.mean_width(float(w), betas[j])
    j = int(np.argmin(widths))  # first (smallest) omega among ties
    omega, beta = float(omegas[j]), float(betas[j])
    if beta_idx is not None and k <= n:
        bi = np.asarray(beta_idx)
        n = len(bi)
        k2 = conformal_rank(n, alpha, delta)
        r2 = crc_residuals(m[bi], lo[bi], hi[bi], y[bi], omega)
        beta = math.inf if k2 > n else float(np.partition(r2, k2 - 1)[k2 - 1])
    return {"omega": omega, "beta": beta, "n": n, "widths": widths, "betas": betas}


@register
class CRC(Calibrator):
    """Conformal risk control of the uncalibrated 90 % interval with (omega, beta).

    Parameters
    ----------
    alpha : target miscoverage (default 0.1)
    omegas : grid of omega values (default 0 to 3 step 0.02); a grid of one value leaves
        nothing to select, so beta is then one conformal step on every item (``"fixed"``
        with that omega)
    selection : how omega is chosen, so that the guarantee holds at every n:

        * ``"auto"`` (default): ``"fixed"`` below :data:`SMALL_N` calibration items, else
          ``"split"``;
        * ``"split"``: omega on a random ``select_frac`` of the items, beta on the rest
          (exactly valid);
        * ``"fixed"``: omega = 1 (the uncalibrated interval widened by beta), a single
          conformal step on all items (exactly valid; the only choice at n = 9);
        * ``"same"``: omega and beta on the same items, as in the source paper: slightly
          optimistic (coverage 0.862 at n = 9, 0.875 at 50, 0.883 at 100 for alpha = 0.1).
    seed : seed of the split variant's split

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> m = rng.uniform(0.2, 0.8, 500); y = np.clip(m + rng.normal(0, 0.05, 500), 0, 1)
    >>> pred = Predictions(m, lo=m - 0.05, hi=m + 0.05)
    >>> crc = CRC(alpha=0.1).fit(pred, y)
    >>> band = crc.predict(pred)
    >>> 0.88 < float(np.mean((band.lo01 <= y) & (y <= band.hi01))) < 0.93
    True
    """

    method = "crc"
    names = {
        "crc": ("conformal risk control of the scorer's 90 % interval (omega, beta); omega "
                "chosen on its own share when n >= 100", {"selection": "auto"}),
        "crc-exact": ("CRC, omega always chosen on its own share", {"selection": "split"}),
        "crc-same": ("CRC, omega chosen on the same items (the paper's rule; no "
                     "finite-sample guarantee)", {"selection": "same"}),
    }
    needs = (("median", "interval"),)
    auto_rank = 2

    @property
    def guarantee(self) -> str:  # the "same" rule has none at small n
        if self.selection == "same":
            return ("none at small n: omega and beta are chosen on the same items (the "
                    "source's rule), slightly optimistic")
        return Calibrator.guarantee

    @property
    def no_delta(self) -> str | None:
        # "same" picks beta on the items omega was chosen on: its beta is not the k-th of
        # fresh exchangeable scores, so no rank, however late, gives a finite-sample
        # guarantee (marginal or conditional); "fixed" / "split" / "auto" are exact
        if self.selection == "same":
            return ("crc-same chooses omega and beta on the same items, so its coverage has "
                    "no finite-sample guarantee to make training-conditional (use crc or "
                    "crc-exact, which choose omega on a share of their own)")
        return None
    auto_config = {"selection": "same"}  # omega on auto's selection share, beta on its own
    param_ranges = {"omega": (0.0, True), "beta": (None, False)}

    def __init__(self, alpha: float = 0.1, *, omegas=None, selection: str = "auto",
                 select_frac: float = 0.5, seed: int = 0, **kw):
        super().__init__(alpha, **kw)
        self.omegas = DEFAULT_OMEGAS if omegas is None else np.asarray(omegas, dtype=float)
        if selection not in SELECTIONS:
            raise InputError(f"selection must be one of {', '.join(SELECTIONS)}, "
                             f"got {selection!r}")
        self.selection = selection
        self.select_frac = select_frac
        self.seed = seed

    @classmethod
    def _from_state(cls, state: dict, scale):
        """A saved CRC; the bundled embedded calibrator (and files written before
        ``selection``) hold ``exact: false``, which is ``selection="auto"``, the default.
        ``exact: true`` is refused, naming the fix (the option no longer exists)."""
        config = dict(state.get("config", {}))
        if config.pop("exact", False):
            raise CalibratorMismatch("this CRC calibrator was saved with exact: true, an "
                                     "option this scoreband no longer has: calibrate again "
                                     "with method crc-exact (omega always on its own share)")
        return super()._from_state({**state, "config": config}, scale)

    def get_config(self) -> dict:
        return {**super().get_config(), "omegas": self.omegas.tolist(),
                "selection": self.selection, "select_frac": self.select_frac,
                "seed": self.seed}

    def selection_for(self, n: int) -> str:
        """The rule used for ``n`` calibration items (resolves ``"auto"``)."""
        if self.selection != "auto":
            return self.selection
        return "fixed" if n < SMALL_N else "split"

    def check_pred(self, pred: Predictions) -> None:
        if pred.lo is None:
            raise InputError(
                "CRC needs the uncalibrated 90 % interval of each item: pass `lo` and `hi` columns "
                "(or use `method` split for a point scorer)"
            )

    def fit_conformal(self, pred: Predictions, y01: np.ndarray) -> dict:
        crossed = quantiles_crossed(pred.median, pred.lo, pred.hi, pred.quantiles)
        omegas = self.omegas
        fallback = None
        if crossed.any():
            warnings.warn(
                f"{int(crossed.sum())} of {len(crossed)} calibration items have crossed "
                "quantiles: omega is ill-defined, falling back to omega = 0 (band m +/- beta)",
                CrossedQuantilesWarning, stacklevel=3,
            )
            omegas = np.array([0.0])
            fallback = "crossed_quantiles"
        select_idx = beta_idx = None
        selection = self.selection_for(len(y01))
        if selection == "fixed" and fallback is None:
            omegas = np.array([1.0])
        if len(omegas) == 1 and fallback is None:
            # a grid of one omega leaves nothing to choose: one conformal step on every
            # item, exactly valid (a split would only spend half of them on nothing)
            selection = "fixed"
        if selection == "split" and fallback is None:
            cut = int(round(self.select_frac * len(y01)))
            select_idx, beta_idx = key_split(pred, y01, self.seed, 32, cut)  # by identity
        fit = crc_select(pred.median, pred.lo, pred.hi, y01, self.alpha, omegas,
                         select_idx, beta_idx, delta=self.delta)
        if math.isinf(fit["beta"]):
            warn_too_small(fit["n"], self.alpha, delta=self.delta)
        return {"omega": fit["omega"], "beta": fit["beta"], "n": fit["n"],
                "selection": selection if fallback is None else "fixed",
                "crossed_fallback": fallback, "n_crossed": int(crossed.sum())}

    def refit_conformal(self, pred: Predictions, y01: np.ndarray, chosen: dict) -> dict:
        """Recompute only beta on fresh items, with the omega ``chosen`` elsewhere (used by
        :class:`~scoreband.conformal.auto.Auto`): one conformal step, exactly valid."""
        fit = crc_select(pred.median, pred.lo, pred.hi, y01, self.alpha, [chosen["omega"]],
                         delta=self.delta)
        if math.isinf(fit["beta"]):
            warn_too_small(fit["n"], self.alpha, delta=self.delta)
        return {**chosen, "beta": fit["beta"], "n": fit["n"], "selection": "given"}

    def apply_params(self, pred: Predictions, params: dict):
        beta = params["beta"]
        full = np.full(len(pred), math.isinf(beta))
        b = 0.0 if math.isinf(beta) else beta
        lo, hi = crc_interval(pred.median, pred.lo, pred.hi, params["omega"], b, clip=self.clip)
        return lo, hi, full
