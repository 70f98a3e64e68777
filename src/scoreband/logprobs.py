"""From score-token log-probs to a K-point score distribution.

Pure functions on ``(n, K)`` arrays of log-probabilities of the score tokens "1".."K".
"""

from __future__ import annotations

import numpy as np
from scipy.special import entr, logsumexp

from scoreband.errors import InputError

__all__ = [
    "normalize_logprobs",
    "expected_score",
    "argmax_score",
    "entropy",
    "max_prob",
    "distribution_std_from_logprobs",
]


def _check(logp) -> np.ndarray:
    lp = np.asarray(logp, dtype=float)
    if lp.ndim != 2 or lp.shape[1] < 2:
        raise InputError(f"expected log-probs of shape (n, K >= 2), got {lp.shape}")
    if np.isnan(lp).any() or np.isposinf(lp).any():
        rows = np.flatnonzero(np.isnan(lp).any(1) | np.isposinf(lp).any(1))[:10].tolist()
        raise InputError(f"log-probs contain NaN or +inf in rows {rows}")
    allmiss = np.isneginf(lp).all(1)
    if allmiss.any():
        raise InputError(f"every score token is missing (-inf) in rows "
                         f"{np.flatnonzero(allmiss)[:10].tolist()}")
    return lp


def normalize_logprobs(logp) -> np.ndarray:
    """Log-softmax over the K score tokens: ``(n, K)`` normalised log-probabilities."""
    lp = _check(logp)
    return lp - logsumexp(lp, axis=1, keepdims=True)


def _probs(logp) -> np.ndarray:
    return np.exp(normalize_logprobs(logp))


def expected_score(logp, labels=None) -> np.ndarray:
    """``sum_k k p_k`` on the label values (default 1..K)."""
    p = _probs(logp)
    k = np.arange(1, p.shape[1] + 1) if labels is None else np.asarray(labels, dtype=float)
    return p @ k


def argmax_score(logp, labels=None) -> np.ndarray:
    p = _probs(logp)
    k = np.arange(1, p.shape[1] + 1) if labels is None else np.asarray(labels, dtype=float)
    return k[np.argmax(p, axis=1)]


def entropy(logp) -> np.ndarray:
    """Shannon entropy (nats) of the normalised score distribution."""
    return entr(np.exp(normalize_logprobs(logp))).sum(axis=1)


def max_prob(logp) -> np.ndarray:
    return _probs(logp).max(axis=1)


def distribution_std_from_logprobs(logp) -> np.ndarray:
    """Standard deviation of the score distribution, on label units (1..K)."""
    p = _probs(logp)
    k = np.arange(1, p.shape[1] + 1)
    mu = p @ k
    return np.sqrt(np.maximum(p @ (k**2) - mu**2, 0.0))
