"""An anytime-valid test that a stream of losses keeps a promised mean (SPEC section 16): the
pure maths of ``scoreband monitor``, on arrays.

The stream: losses ``z_1, z_2, ...`` in [0, 1] in arrival order (a band's miss, 1 where the
target lies outside the band; a triage rule's error on a row it trusts). The null: the
promise holds at every step, ``E[z_t | z_1..z_{t-1}] <= p0``.

**The e-process.** A betting wealth started at row ``s``,
``K_s(t) = prod_{s <= u <= t} (1 + lambda_u (z_u - p0))``, with each bet ``lambda_u`` in
``[0, cap / p0]`` (``cap < 1``) chosen from the rows before ``u`` only, is a nonnegative
supermartingale under the null (Waudby-Smith & Ramdas 2023, "Estimating means of bounded
random variables by betting"). The bet is the plug-in Kelly bet of a 0/1 loss,
``lambda = (m - p0) / (p0 (1 - p0))`` with ``m`` the mean of the losses since ``s`` shrunk
towards ``p0`` (``prior`` pseudo-rows), cut to ``[0, cap / p0]``.

One wealth started at the first row would have to climb back from wherever a long run of
good rows left it, and its bet would learn the new miss rate from a mean over every row
since the start: slow after a change at row 300. So a new wealth starts every ``every``
rows (starts ``s_k = k * every``, k = 0, 1, ...) and the monitor holds the mixture

    ``M_t = sum_k w_k K_{s_k}(t)``,  ``w_k = 1 / ((k + 1)(k + 2))``,  ``sum_k w_k = 1``

(a wealth not yet started counts 1). Each term is a nonnegative supermartingale started at
1, so ``M`` is one started at ``M_0 = 1``, and Ville's inequality gives: under the null,
**the chance that ``M_t`` ever reaches ``1 / false_alarm``, over the whole stream however
long, is at most ``false_alarm``**. This is the guarantee delivered: the probability of ever
alarming, not only an average run length (a CUSUM or Shiryaev-Roberts e-detector, Shin et
al. 2022, bounds only the latter, and alarms with probability 1 on an endless stream). The
restarts buy most of a detector's speed: after a change, the wealth started at the last
start before it grows at about the new rate's Kelly rate, and pays ``log(1 / w_k)`` (about
2 log k) for its place in the mixture.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> z = np.r_[rng.random(300) < 0.08, rng.random(300) < 0.35].astype(float)
>>> log_e = log_eprocess(z, 0.1)
>>> alarm = first_alarm(log_e, 0.05)
>>> 300 <= alarm < 450, bool(log_e[:300].max() < np.log(20))
(True, True)
>>> change_point(z, 0.1, alarm) >= 250
True
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["start_weight", "bets", "log_wealth", "log_eprocess", "first_alarm",
           "change_point", "EVERY", "CAP", "PRIOR"]

#: rows between two starts of a new wealth
EVERY = 50
#: the largest bet as a share of ``1 / p0`` (a row without a loss then keeps half the wealth)
CAP = 0.5
#: pseudo-rows at the promised rate in each wealth's estimate of the loss rate
PRIOR = 10.0


def start_weight(k) -> np.ndarray:
    """The mixture weight of the wealth started ``k``-th (from 0): ``1 / ((k+1)(k+2))``,
    summing to 1 over k = 0, 1, ...; the weights after the ``k``-th sum to ``1 / (k + 2)``.

    >>> float(start_weight(0)), float(start_weight(np.arange(10**6)).sum().round(5))
    (0.5, 1.0)
    """
    k = np.asarray(k, dtype=float)
    return 1.0 / ((k + 1.0) * (k + 2.0))


def _check(z: np.ndarray, p0: float) -> None:
    if not 0.0 < p0 < 1.0:
        raise ValueError(f"the promised loss rate p0 must lie in (0, 1), got {p0!r}")
    if z.size and (np.nanmin(z) < 0.0 or np.nanmax(z) > 1.0):
        raise ValueError("the losses must lie in [0, 1]")


def bets(z, p0: float, *, cap: float = CAP, prior: float = PRIOR) -> np.ndarray:
    """The bet ``lambda_t`` at each row of ``z`` (..., T) of a wealth started at its first
    row: predictable (from the rows before t only), in ``[0, cap / p0]``."""
    z = np.asarray(z, dtype=float)
    _check(z, p0)
    past = np.cumsum(z, axis=-1) - z  # the losses before each row
    m = (prior * p0 + past) / (prior + np.arange(z.shape[-1]))
    return np.clip((m - p0) / (p0 * (1.0 - p0)), 0.0, cap / p0)


def log_wealth(z, p0: float, *, cap: float = CAP, prior: float = PRIOR) -> np.ndarray:
    """``log K(t)`` after each row of ``z`` (..., T) of a wealth started at its first row."""
    z = np.asarray(z, dtype=float)
    lam = bets(z, p0, cap=cap, prior=prior)
    return np.cumsum(np.log1p(lam * (z - p0)), axis=-1)


def log_eprocess(z, p0: float, *, every: int = EVERY, cap: float = CAP,
                 prior: float = PRIOR) -> np.ndarray:
    """``log M_t`` after each row of ``z`` (..., T): the mixture of the wealths started every
    ``every`` rows (module docstring). Under the null, ``P(max_t M_t >= 1 / gamma) <=
    gamma`` for every gamma, however long the stream."""
    z = np.asarray(z, dtype=float)
    _check(z, p0)
    if not 0.0 < cap < 1.0 or every < 1 or prior <= 0:
        raise ValueError("need 0 < cap < 1, every >= 1 and prior > 0")
    T = z.shape[-1]
    # the wealths not yet started, each at 1: weight 1 / (k + 2) after the last started k
    out = np.broadcast_to(-np.log(np.arange(T) // every + 2.0), z.shape).copy()
    for k in range(-(-T // every)):
        s = k * every
        lw = np.log(start_weight(k)) + log_wealth(z[..., s:], p0, cap=cap, prior=prior)
        out[..., s:] = np.logaddexp(out[..., s:], lw)
    return out


def first_alarm(log_e, false_alarm: float) -> int:
    """The 0-based index of the first row whose ``log_e`` reaches ``log(1 / false_alarm)``;
    -1 where none does (along the last axis; an array of them for a batch)."""
    if not 0.0 < false_alarm < 1.0:
        raise ValueError(f"false_alarm must lie in (0, 1), got {false_alarm!r}")
    hit = np.asarray(log_e) >= math.log(1.0 / false_alarm) - 1e-12
    out = np.where(hit.any(axis=-1), hit.argmax(axis=-1), -1)
    return int(out) if np.ndim(out) == 0 else out


def change_point(z, p0: float, until: int | None = None) -> int:
    """The 0-based row where the loss rate most likely rose above ``p0``: the start ``s <=
    until`` maximising the binomial log-likelihood ratio of the rows ``s..end`` at their own
    rate against ``p0`` (the generalised likelihood ratio change point; 0 when no stretch
    runs above ``p0``)."""
    z = np.asarray(z, dtype=float)
    T = len(z)
    if T == 0:
        return 0
    until = T - 1 if until is None or until < 0 else min(until, T - 1)
    tail = np.cumsum(z[::-1])[::-1][:until + 1]  # losses from each start to the end
    n = T - np.arange(until + 1)
    m = np.clip(tail / n, 1e-12, 1 - 1e-12)
    kl = m * np.log(m / p0) + (1 - m) * np.log((1 - m) / (1 - p0))
    glr = np.where(m > p0, n * kl, 0.0)
    return int(glr.argmax()) if glr.max() > 0 else 0
