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


def label_free_draws(rng, n, alpha, delta, draws, tie=0.2):
    """The label-free threshold (one feature, pairs ordered by |x|, every labeled pair
    calibrating) over ``draws`` draws of ``n`` labeled pairs: ``(share of draws whose exact
    error among decided pairs is > alpha, mean decided share)``, the error computed from
    the true preference probabilities of 20000 test pairs. The first three draws check that
    :func:`fit_pairwise_arrays` runs the same threshold."""
    from scoreband.decisions.risk import label_free_threshold
    from scoreband.pairwise.selective import confidence_order, fit_pairwise_arrays

    xt, _, Pt, _ = sample(20000, rng, tie=tie)
    ut, vt = confidence_order(None, xt[:, None], "abs-feature")
    et = 1 - Pt[np.arange(len(Pt)), np.where(vt == "A", 0, 1)]
    order = np.argsort(ut)
    ut, et = ut[order], et[order]
    cum = np.concatenate([[0.0], np.cumsum(et)])
    fails, decided = 0, []
    for b in range(draws):
        x, y, _, _ = sample(n, rng, tie=tie)
        u, v = confidence_order(None, x[:, None], "abs-feature")
        res = label_free_threshold(u, (v != y).astype(float), alpha, delta)
        if b < 3:
            rule = fit_pairwise_arrays(x, y, columns=["d"], alpha=alpha, delta=delta, seed=b)
            assert rule.order == "abs-feature" and rule.threshold == res["threshold"]
        k = int(np.searchsorted(ut, res["threshold"], side="right"))
        fails += (cum[k] / k if k else 0.0) > alpha
        decided.append(k / len(ut))
    return fails / draws, float(np.mean(decided))
