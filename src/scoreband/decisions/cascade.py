"""A cascade of judges with one guarantee (issue 44, item 2): fixed sequences over
stage-by-threshold configurations joined in one chain, so the error among every item any stage decides is at
most ``alpha`` with probability at least ``1 - delta`` over the calibration draw.

Stages are ordered cheapest first; each gives every item a verdict and the error it states
(``u``, e.g. ``1 - max p``). At a threshold ``lambda`` an item is decided by the first stage
whose stated error is at most ``lambda``, and escalated (to a human) when none is. One
scalar ``lambda`` indexes every configuration, so the configurations form one sequence
fixed before any label is read (the grid and the start come from the stated errors
alone, as in :func:`scoreband.pairwise.selective.label_free_threshold`); the exact binomial
test of ``H: R(lambda) > alpha`` on the items decided at ``lambda`` is the one the single
judge's rule uses, and fixed-sequence testing controls the family-wise error at ``delta``
whatever the order (Angelopoulos et al. 2021, Learn then Test). No stage spends its own
delta: the paper's cascade (Jung et al. 2025) tests each stage at ``delta``, which is not a
joint guarantee. Pure functions on arrays; no CLI.

>>> U = np.array([[0.01, 0.5], [0.4, 0.02], [0.3, 0.3]])
>>> L = np.array([[0, 1], [1, 0], [0, 0]], dtype=float)
>>> stage, loss = cascade_decisions(U, L, 0.05)
>>> stage.tolist(), loss.tolist()
([0, 1, -1], [0.0, 0.0, 0.0])
"""

from __future__ import annotations

import math

import numpy as np

from scoreband.decisions.ltt import (
    binomial_pvalues,
    chained_sequences,
    min_rejectable,
    threshold_grid,
)
from scoreband.errors import InputError

__all__ = ["cascade_decisions", "cascade_counts", "cascade_threshold", "apply_cascade",
           "CASCADE_START_SHARE"]

#: the sequence starts at the first threshold deciding at least this share of the items
#: (and enough for a test to reject), as the single judge's label-free rule does
CASCADE_START_SHARE = 0.2


def _check(U, L) -> tuple[np.ndarray, np.ndarray]:
    U, L = np.asarray(U, float), np.asarray(L, float)
    if U.ndim != 2 or U.shape != L.shape:
        raise InputError(f"stated errors {U.shape} and losses {L.shape} must both be "
                         "(items, stages)")
    return U, L


def cascade_decisions(U, L, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Which stage decides each item at threshold ``lam`` (-1: escalated) and the loss of
    that stage's verdict (0 where escalated). ``U``, ``L``: (n, S) stated errors (NaN: the
    stage gave no verdict) and losses (1 when the stage's verdict is wrong)."""
    U, L = _check(U, L)
    ok = np.isfinite(U) & (U <= lam)
    first = np.where(ok.any(axis=1), np.argmax(ok, axis=1), -1)
    loss = np.where(first >= 0, L[np.arange(len(U)), np.maximum(first, 0)], 0.0)
    return first, loss


def cascade_counts(U, L, grid) -> tuple[np.ndarray, np.ndarray]:
    """``(n_j, k_j)``: the items decided at ``grid[j]`` and the wrong ones among them."""
    U, L = _check(U, L)
    n, k = np.zeros(len(grid)), np.zeros(len(grid))
    for j, lam in enumerate(grid):
        stage, loss = cascade_decisions(U, L, lam)
        n[j], k[j] = (stage >= 0).sum(), loss.sum()
    return n, k


def _path(U, L, cols, grid_size, start_share, alpha, delta):
    """One sequence: the stages ``cols`` of ``U`` at one scalar threshold; its grid (of
    each item's smallest stated error), start, and counts."""
    V = U[:, cols]
    m = np.where(np.isfinite(V), V, np.inf).min(axis=1)
    size = grid_size or int(np.clip(len(U) // 5, 5, 400))
    grid = threshold_grid(m[np.isfinite(m)], size)
    grid = grid[np.isfinite(grid)] if np.isfinite(grid).any() else grid
    n, k = cascade_counts(V, L[:, cols], grid)
    need = max(min_rejectable(alpha, delta), int(math.ceil(start_share * len(U))))
    ok = np.flatnonzero(n >= need)
    return grid, n, k, int(ok[0]) if len(ok) else len(grid) - 1


def cascade_threshold(U, L, alpha: float, delta: float, grid_size: int | None = None,
                      start_share: float = CASCADE_START_SHARE, costs=None,
                      slack: float = 0.1) -> dict:
    """The cascade's configuration on labeled items. Two sequences of configurations, each
    read from ``U`` alone (grid: quantiles of the smallest stated error, one per 5 items;
    start: the first deciding at least ``start_share`` of the items): the last (strongest)
    stage alone, and every stage at one scalar threshold (the first stage under it
    decides). They share ``delta`` in one chain
    (:func:`scoreband.decisions.ltt.chained_sequences`: family-wise error <= delta), and
    the rejected configuration deciding the most labeled items is kept - any rejected one
    keeps the guarantee. ``costs`` (one per stage): among the rejected configurations
    deciding at least ``1 - slack`` of the most, the one of least expected cost per item
    (an item costs every stage run until one decides it; an escalated one every stage of
    the configuration).

    Returns a dict: ``threshold`` (-inf when nothing is rejected), ``stages`` (the stages
    the threshold applies to, cheapest first), ``decided`` (the share of these items
    decided), ``by_stage`` (the share each stage of ``U`` decides) and ``cost`` (the
    expected cost per item, None without ``costs``).
    """
    U, L = _check(U, L)
    S = U.shape[1]
    paths = [[S - 1]] + ([list(range(S))] if S > 1 else [])
    parts = [_path(U, L, c, grid_size, start_share, alpha, delta) for c in paths]
    n = np.concatenate([x[1] for x in parts])
    k = np.concatenate([x[2] for x in parts])
    offs = np.cumsum([0] + [len(x[0]) for x in parts])
    p = binomial_pvalues(k, n, alpha)
    starts = [int(o + x[3]) for o, x in zip(offs, parts, strict=False)]
    rejected = np.flatnonzero(chained_sequences(p, delta, starts,
                                                [1 / len(starts)] * len(starts), mask=True))
    if not len(rejected):
        return {"threshold": -math.inf, "stages": [], "decided": 0.0, "by_stage": [0.0] * S,
                "cost": None}
    def config(j):
        which = int(np.searchsorted(offs, j, side="right") - 1)
        return paths[which], float(parts[which][0][j - offs[which]])

    def cost(j):
        cols, thr = config(j)
        stage, _ = cascade_decisions(U[:, cols], L[:, cols], thr)
        run = np.where(stage >= 0, stage, len(cols) - 1)
        c = np.cumsum(np.asarray(costs, float)[cols])
        return float(c[run].mean())

    j = int(rejected[np.argmax(n[rejected])])
    if costs is not None:
        if len(costs) != S:
            raise InputError(f"{len(costs)} costs for {S} stages: give one per stage")
        near = rejected[n[rejected] >= (1 - slack) * n[j]]
        j = int(near[np.argmin([cost(x) for x in near])])
    cols, thr = config(j)
    stage, _ = cascade_decisions(U[:, cols], L[:, cols], thr)
    by = [0.0] * S
    for i, c in enumerate(cols):
        by[c] = float((stage == i).mean())
    return {"threshold": thr, "stages": cols, "decided": float((stage >= 0).mean()),
            "by_stage": by, "cost": None if costs is None else cost(j)}


def apply_cascade(U, rule: dict) -> np.ndarray:
    """Which stage of ``U`` (n, S) decides each new item under ``rule``
    (:func:`cascade_threshold`'s dict); -1 where it goes to a human."""
    U = np.asarray(U, float)
    if not rule["stages"]:
        return np.full(len(U), -1)
    cols = rule["stages"]
    stage, _ = cascade_decisions(U[:, cols], np.zeros((len(U), len(cols))), rule["threshold"])
    return np.where(stage >= 0, np.asarray(cols)[np.maximum(stage, 0)], -1)
