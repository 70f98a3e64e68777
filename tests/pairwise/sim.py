"""Simulated preferences with known truth for the pairwise tests."""

import numpy as np


def true_probs(d, tie=0.8, s=0.5):
    """p(A), p(B), p(tie) of a human for a pair with latent difference d."""
    la, lb, lt = d / s, -d / s, np.log(tie) - np.abs(d) / s
    L = np.column_stack([la, lb, lt])
    L -= L.max(axis=1, keepdims=True)
    P = np.exp(L)
    return P / P.sum(axis=1, keepdims=True)


def sample(n, rng, tie=0.8):
    """(judge feature, human label, true probabilities) for n pairs: the judge sees the
    latent difference with noise and is over-confident."""
    d = rng.normal(0, 1, n)
    P = true_probs(d, tie)
    u = rng.uniform(size=n)[:, None]
    y = np.array(["A", "B", "tie"], dtype=object)[(u > np.cumsum(P, axis=1)).sum(axis=1)]
    x = d + rng.normal(0, 0.3, n)
    # an over-confident judge's probabilities
    J = true_probs(3 * x, tie * 0.3)
    return x, y, P, J
