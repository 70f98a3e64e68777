"""A cascade of judges with one guarantee (issue 44, item 2): the error among every item any
stage decides is at most ``alpha`` with probability at least ``1 - delta`` over the draw of
the labeled items, for items drawn like them.

Stages are ordered cheapest first (a cheap local judge, an API judge, a strong judge); each
gives every item a verdict and the error it states (``u``). At a threshold ``lambda`` an
item is decided by the first stage whose stated error is at most ``lambda`` and escalated
(to a human) when none is. Two views of a stage's verdict and error (:func:`stage_views`):

* ``own``: the judge's own answer and ``1 - confidence`` (its probability of that answer,
  or its score token's);
* ``joint``: the judges run so far combined - each votes for its answer with the weight of
  its confidence (naive Bayes over ``K`` answers), so two judges agreeing state a smaller
  error than either alone and a disagreement a larger one. Agreement is a strong signal
  (issue 44: two VLM judges are right 0.58 where they agree, 0.38 where not), and here it
  is only an *ordering*: the guarantee comes from the test, never from the combination;
* ``joint-strict``: the joint view with every stage but the last stating twice its error.

**The guarantee, and why this test.** Each configuration (a view, the stages it uses, one
scalar threshold) is a hypothesis ``H: R > alpha`` tested with the exact binomial p-value
on the labeled items it decides. The configurations form a few fixed sequences (each view's
stages at one scalar threshold, ascending; the strongest stage alone), their grids and
starts read from the stated errors alone, never from a label
(:func:`scoreband.decisions.ltt.threshold_grid`, :func:`~scoreband.decisions.ltt.label_free_start`).
The sequences share ``delta`` in one chain (:func:`scoreband.decisions.ltt.chained_sequences`:
Bonferroni weights with the graphical hand-on of Bretz et al. 2009, a closed test), so the
family-wise error over *every* configuration of *every* stage is at most ``delta`` and any
rejected configuration may be kept - including the one deciding the most, or the cheapest.
We chose this over a Learn-then-Test grid of full threshold vectors (``lambda_1, ..., lambda_S``):
a Bonferroni correction over a grid of J^S vectors tests each at ``delta / J^S`` and rejects
nothing on a few hundred labels, while a fixed sequence along a path through that space
spends ``delta`` once. We chose it over spending ``delta`` per stage, as the published
cascade does (Jung et al. 2025, Trust or Escalate): S stages each at ``delta`` fail jointly
with probability up to ``S * delta``; splitting ``delta / S`` per stage is valid but weak
(0.22 of items where the paper's decides 0.6 on issue 44's data). Pure functions on arrays.

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
    STATED_RISK_PESSIMISM,
    TOP_BLOCK_RESOLUTION,
    binomial_pvalues,
    chained_sequences,
    choose_start,
    label_free_start,
    min_rejectable,
    predicted_rejection,
    threshold_grid,
)
from scoreband.errors import InputError

__all__ = ["cascade_decisions", "cascade_counts", "cascade_threshold", "apply_cascade",
           "stage_views", "joint_view", "fit_cascade", "cascade_cost", "VIEWS",
           "EARLY_STAGE_STRICTNESS",
           "CASCADE_START_SHARE", "CONFIDENCE_CLIP"]

#: the first start of each sequence: the first threshold deciding at least this share of
#: the items (and enough for a test to reject), as the single judge's label-free rule does
CASCADE_START_SHARE = 0.2
#: a stated confidence of exactly 0 or 1 weighs as this far from it in the joint view
CONFIDENCE_CLIP = 1e-6
#: without labels to choose on, the share of delta the sequence the stated errors predict
#: to decide the most gets (the others share the rest). Chosen on the simulated worlds
#: (benchmarks/cascade.py) and pairs from real judge outputs (benchmarks/real_pairs.py):
#: 0 (one chain, equal shares) decided 0.655 / 0.596 / 0.276 and 0.146 / 0.277; 0.5
#: 0.638 / 0.596 and 0.177 / 0.307; 0.75 0.641 / 0.609 / 0.347 and 0.194 / 0.317; 1 (the
#: choice alone) 0.648 / 0.620 and 0.218 / 0.334, but with one view (own) 0.18 / 0.006 where
#: the over-confident statements pick a poor sequence (0.25 / 0.06 at 0.75)
STATED_CHOICE_SHARE = 0.75
#: the views of a stage's verdict (:func:`stage_views`)
VIEWS = ("own", "joint", "joint-strict")
#: ``joint-strict``: every stage but the last states this many times its joint error (a
#: cheaper stage must be that much surer); one more sequence, fixed before any label: on
#: the simulated worlds of benchmarks/cascade.py it decides 0.67 where the others 0.63
EARLY_STAGE_STRICTNESS = 2.0


def _check(U, L) -> tuple[np.ndarray, np.ndarray]:
    U, L = np.asarray(U, float), np.asarray(L, float)
    if U.ndim != 2 or U.shape != L.shape:
        raise InputError(f"stated errors {U.shape} and losses {L.shape} must both be "
                         "(items, stages)")
    return U, L


# ------------------------------------------------------------------ verdicts and views
def joint_view(conf, codes, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Stage ``k``'s verdict and stated error from the judges ``0..k`` combined (naive Bayes
    over ``n_classes`` answers: judge ``i`` right with probability ``conf[:, i]``, wrong
    answers equally likely). ``conf`` (n, S) in [0, 1], NaN where a judge gave no verdict;
    ``codes`` (n, S) integer answers, -1 where none. Returns ``(U, V)``: (n, S) stated errors
    (NaN where judge ``k`` gave none) and verdict codes (-1 there); ties go to the later
    (stronger) judge.

    >>> c = np.array([[0.8, 0.7], [0.8, 0.7]]); a = np.array([[1, 1], [1, 0]])
    >>> U, V = joint_view(c, a, 2)
    >>> np.round(U, 3).tolist(), V.tolist()
    ([[0.2, 0.097], [0.2, 0.368]], [[1, 1], [1, 1]])
    """
    conf, codes = np.asarray(conf, float), np.asarray(codes, int)
    K = max(int(n_classes), 2)
    ok = np.isfinite(conf) & (codes >= 0)
    c = np.clip(np.where(ok, conf, 0.5), CONFIDENCE_CLIP, 1 - CONFIDENCE_CLIP)
    w = np.where(ok, np.log(c * (K - 1) / (1 - c)), 0.0)  # (n, S) log-likelihood ratios
    n, S = conf.shape
    U, V = np.full((n, S), np.nan), np.full((n, S), -1)
    for k in range(S):
        same = (codes[:, :k + 1, None] == codes[:, None, :k + 1]) & ok[:, None, :k + 1] \
            & ok[:, :k + 1, None]  # (n, j, i): judge i votes for judge j's answer
        s = np.where(ok[:, :k + 1], (same * w[:, None, :k + 1]).sum(axis=2), -np.inf)
        earlier = np.tril(np.ones((k + 1, k + 1), bool), -1)[None]  # i < j
        rep = ok[:, :k + 1] & ~(same & earlier).any(axis=2)  # first voter of its answer
        m = np.max(np.where(ok[:, :k + 1], s, -np.inf), axis=1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        denom = (np.where(rep, np.exp(s - m), 0.0).sum(axis=1)
                 + (K - rep.sum(axis=1)).clip(0) * np.exp(-m[:, 0]))
        best = k - np.argmax(s[:, ::-1], axis=1)  # the latest judge of the top score
        top = np.exp(s[np.arange(n), best] - m[:, 0]) / np.where(denom > 0, denom, 1.0)
        here = ok[:, k]
        U[:, k] = np.where(here, 1 - top, np.nan)
        V[:, k] = np.where(here, codes[np.arange(n), best], -1)
    return U, V


def stage_views(conf, codes, n_classes: int, views=VIEWS) -> dict:
    """``{view: (U, V)}`` for each of ``views`` (:data:`VIEWS`): ``own`` is ``1 - conf``
    and each judge's own answer; ``joint`` is :func:`joint_view`; ``joint-strict`` the
    same with every stage but the last stating :data:`EARLY_STAGE_STRICTNESS` times its
    error."""
    conf, codes = np.asarray(conf, float), np.asarray(codes, int)
    ok = np.isfinite(conf) & (codes >= 0)
    out = {}
    for v in views:
        if v == "own":
            out[v] = (np.where(ok, 1 - conf, np.nan), np.where(ok, codes, -1))
        elif v in ("joint", "joint-strict"):
            U, V = joint_view(conf, codes, n_classes)
            if v == "joint-strict":
                U = np.column_stack([U[:, :-1] * EARLY_STAGE_STRICTNESS, U[:, -1:]])
            out[v] = (U, V)
        else:
            raise InputError(f"view {v!r}: choose one of {', '.join(VIEWS)}")
    return out


# ------------------------------------------------------------------ one configuration
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
    """``(n_j, k_j)``: the items decided at ``grid[j]`` and the wrong ones among them. Stage
    ``k`` decides item ``i`` for ``lambda`` in ``[U[i, k], min(U[i, :k]))`` (an earlier
    stage takes over once eligible), so both counts are sums of sorted cumulative losses:
    O(S n log n), never an (n, J, S) array.

    >>> cascade_counts([[0.2, 0.01], [0.5, 0.6]], [[1, 0], [0, 1]], [0.1, 0.3, 1.0])
    (array([1., 1., 2.]), array([0., 1., 1.]))
    """
    U, L = _check(U, L)
    grid = np.asarray(grid, float)
    U = np.where(np.isfinite(U), U, np.inf)
    prev = np.minimum.accumulate(np.column_stack([np.full(len(U), np.inf), U[:, :-1]]),
                                 axis=1)
    m = U.min(axis=1) if U.size else np.zeros(0)
    n = np.searchsorted(np.sort(m[np.isfinite(m)]), grid, side="right").astype(float)
    k = np.zeros(len(grid))
    for s in range(U.shape[1]):
        rec = U[:, s] < prev[:, s]  # stage s decides on [U, prev)
        w = np.nan_to_num(L[rec, s])
        for edge, sign in ((U[rec, s], 1.0), (prev[rec, s], -1.0)):
            fin = np.isfinite(edge)  # an infinite edge is never reached
            edge, o = edge[fin], np.argsort(edge[fin], kind="stable")
            cum = np.concatenate([[0.0], np.cumsum(w[fin][o])])
            k += sign * cum[np.searchsorted(edge[o], grid, side="right")]
    return n, np.round(k, 9)


def cascade_cost(stage, n_stages: int, costs, cols=None, human: float = 0.0) -> float:
    """Expected cost per item: an item costs every stage run until one decides it; an
    escalated one every stage and ``human`` (``cols``: the columns of ``costs`` the stages
    are)."""
    c = np.cumsum(np.asarray(costs, float)[list(cols) if cols is not None
                                           else list(range(n_stages))])
    stage = np.asarray(stage)
    if not len(stage):
        return 0.0
    return float(c[np.where(stage >= 0, stage, n_stages - 1)].mean() + human * (stage < 0).mean())


# ------------------------------------------------------------------ the sequences
def _path(U, L, cols, grid_size, start_share, alpha, delta, train=None):
    """One sequence: the stages ``cols`` of ``U`` at one scalar threshold. Its grid (of each
    item's smallest stated error; the most confident block whole, as the published rule's
    first test), its starts (read from the stated errors alone; with ``train``, the
    ``(U, L)`` of a training share the test never sees, the start its curve predicts most
    likely to reject, as score triage's) and its counts."""
    V = U[:, cols]
    m = np.where(np.isfinite(V), V, np.inf).min(axis=1)
    fin = m[np.isfinite(m)]
    # a learned stated error (``train``) takes score triage's coarser grid (one threshold per
    # 20 items): its steps are estimates, and a fine grid stops at the first unlucky one
    size = grid_size or (int(np.clip(len(U) // 20, 5, 200)) if train is not None
                         else int(np.clip(len(U) // 5, 5, 400)))
    grid = threshold_grid(fin, size, top_block=TOP_BLOCK_RESOLUTION)
    # the grid's +inf (accept all) is the largest stated error here: an item a stage gave no
    # verdict (an infinite stated error) is never decided by it
    if len(fin):
        grid = np.unique(np.where(np.isfinite(grid), grid, fin.max()))
    n, k = cascade_counts(V, L[:, cols], grid)
    need = max(min_rejectable(alpha, delta), int(math.ceil(start_share * len(U))))
    ok = np.flatnonzero(n >= need)
    starts = [int(ok[0]) if len(ok) else len(grid) - 1]
    if train is not None:
        nT, kT = cascade_counts(train[0][:, cols], train[1][:, cols], grid)
        return grid, n, k, [choose_start(nT / max(len(train[0]), 1), nT, kT, len(U), alpha,
                                         delta, rule="likely")]
    if len(fin) and len(grid) > 1:
        deep = label_free_start(fin, grid, alpha, delta, min_share=start_share)
        if deep > starts[0]:
            starts.append(int(deep))
    return grid, n, k, starts


def _paths(views: dict, strongest_alone: bool, each_alone: bool = False,
           prefixes: bool = True):
    """The sequences: each view's stages at one scalar threshold; (``prefixes``) the first
    view's stages but the last (so a judge added at the end, even a poor one, never takes
    away all the judges before it decide: one sequence, not one per prefix, as each costs
    the others a share of delta); and
    (``strongest_alone``) the last stage of the first view alone, or (``each_alone``)
    every stage alone."""
    out = [(name, list(range(v[0].shape[1]))) for name, v in views.items()]
    name = "own" if "own" in views else next(iter(views))
    S = views[name][0].shape[1]
    if S > 1 and prefixes and not (each_alone and S == 2):
        out.append((name, list(range(S - 1))))
    if S > 1 and (strongest_alone or each_alone):
        out += [(name, [s]) for s in (range(S) if each_alone else [S - 1])]
    return out


def _choose_path(paths, parts, train, n_cal, costs, human_cost, slack, alpha, delta) -> int:
    """The one sequence a training share picks (so the test spends all of ``delta`` on it):
    the largest predicted decided share (share x the predicted chance its test rejects, as
    score triage picks its uncertainty); with ``costs``, among those within ``slack`` of
    the best, the least expected cost at each one's best threshold on the training share."""
    merit, cost = [], []
    for (view, cols), (grid, _, _, _) in zip(paths, parts, strict=True):
        U, L = (np.asarray(a) for a in train[view])
        nT, kT = cascade_counts(U[:, cols], L[:, cols], grid)
        share = nT / max(len(U), 1)
        m = share * predicted_rejection(share, nT, kT, n_cal, alpha,
                                        delta)
        j = int(np.argmax(m))
        merit.append(float(m[j]))
        stage, _ = cascade_decisions(U[:, cols], L[:, cols], float(grid[j]))
        cost.append(0.0 if costs is None else
                    cascade_cost(stage, len(cols), costs, cols, human_cost))
    best = int(np.argmax(merit))
    if costs is None or merit[best] <= 0:
        return best
    near = [i for i, m in enumerate(merit) if m >= (1 - slack) * merit[best]]
    return min(near, key=lambda i: (cost[i], -merit[i]))


def _delta_shares(paths, parts, views, train, stated_choice, costs, human_cost, slack,
                  alpha, delta):
    """``(paths, parts, share of delta per sequence)``: the one sequence a training share
    picks (all of delta), or (``stated_choice``) the sequence the stated errors alone
    predict to decide the most (each item erring as its deciding stage states, plus
    STATED_RISK_PESSIMISM * alpha; no label read) with STATED_CHOICE_SHARE of delta and the
    others the rest (over-confident statements can pick a poor one: the others stay
    testable), else equal shares."""
    n_items = len(next(iter(views.values()))[0])
    share = [1 / len(parts)] * len(parts)
    if len(parts) > 1 and train is not None:
        i = _choose_path(paths, parts, train, n_items, costs, human_cost, slack, alpha, delta)
        return [paths[i]], [parts[i]], [1.0]
    if len(parts) > 1 and stated_choice:
        pick = {v: (U, np.clip(np.nan_to_num(U) + STATED_RISK_PESSIMISM * alpha, 0, 1))
                for v, (U, _) in views.items()}
        i = _choose_path(paths, parts, pick, n_items, costs, human_cost, slack, alpha, delta)
        rest = (1 - STATED_CHOICE_SHARE) / (len(parts) - 1)
        share = [STATED_CHOICE_SHARE if j == i else rest for j in range(len(parts))]
    return paths, parts, share


def fit_cascade(views: dict, alpha: float, delta: float, *, costs=None, slack: float = 0.1,
                human_cost: float = 0.0, grid_size: int | None = None, start_share: float = CASCADE_START_SHARE,
                strongest_alone: bool = True, each_alone: bool = False,
                train: dict | None = None, stated_choice: bool = True) -> dict:
    """The cascade's configuration on labeled items. ``views``: ``{name: (U, L)}``, each (n, S)
    stated errors and losses of the stages' verdicts in that view (:func:`stage_views`).
    The sequences (:func:`_paths`: each view's stages at one scalar threshold, and the
    strongest stage alone) share ``delta`` in one chain, equal weights per sequence, so the
    family-wise error over every configuration is at most ``delta`` and the rejected one
    deciding the most labeled items is kept. ``costs`` (one per stage): among the rejected
    configurations deciding at least ``1 - slack`` of the most, the one of least expected
    cost per item (:func:`cascade_cost`); with ``human_cost`` > 0 (the cost of a human
    answer), the rejected configuration of least expected cost, a human's included.
    ``train``: ``{name: (U, L)}`` of a training share the test never sees (verdicts and
    stated errors fitted on labels: a score judge's map and learned uncertainty): the
    training share picks one sequence (:func:`_choose_path`), which then spends all of
    ``delta``, started where its curve there predicts a test most likely to reject.

    Returns a dict: ``view``, ``stages`` (the stages the threshold applies to, cheapest
    first; [] when nothing is rejected), ``threshold`` (-inf then), ``decided`` (share of
    these items), ``by_stage`` (share each stage decides), ``risk`` (error among decided
    labeled items), ``cost`` (None without ``costs``), ``n_hypotheses``, ``n_rejected``.
    """
    views = {k: _check(*v) for k, v in views.items()}
    for k in list(views)[1:]:  # a view stating what an earlier one states (one judge's
        # joint view is its own confidence, up to CONFIDENCE_CLIP) would only take a share
        # of delta
        if any(np.allclose(views[k][0], views[j][0], rtol=0, atol=1e-5, equal_nan=True)
               for j in list(views)[:list(views).index(k)]):
            del views[k]
    S = next(iter(views.values()))[0].shape[1]
    if costs is not None and len(costs) != S:
        raise InputError(f"{len(costs)} costs for {S} stages: give one per stage")
    paths = _paths(views, strongest_alone, each_alone)
    parts = [_path(*views[v], cols, grid_size, start_share, alpha, delta,
                   None if train is None else tuple(map(np.asarray, train[v])))
             for v, cols in paths]
    paths, parts, share = _delta_shares(paths, parts, views, train, stated_choice, costs,
                                        human_cost, slack, alpha, delta)
    n = np.concatenate([x[1] for x in parts])
    k = np.concatenate([x[2] for x in parts])
    offs = np.cumsum([0] + [len(x[0]) for x in parts])
    starts = [int(o + s) for o, x in zip(offs, parts, strict=False) for s in x[3]]
    weights = [w / len(x[3]) for w, x in zip(share, parts, strict=True) for _ in x[3]]
    rejected = np.flatnonzero(chained_sequences(binomial_pvalues(k, n, alpha), delta,
                                                starts, weights, mask=True))

    def config(j):
        i = int(np.searchsorted(offs, j, side="right") - 1)
        view, cols = paths[i]
        thr = float(parts[i][0][j - offs[i]])
        stage, loss = cascade_decisions(views[view][0][:, cols], views[view][1][:, cols], thr)
        return view, cols, thr, stage, loss

    def cost(j):
        _, cols, _, stage, _ = config(j)
        return cascade_cost(stage, len(cols), costs, cols, human_cost)

    base = {"n_hypotheses": int(len(n)), "n_rejected": int(len(rejected)),
            "n_items": int(len(n) and next(iter(views.values()))[0].shape[0])}
    if not len(rejected):
        return {**base, "view": paths[0][0], "stages": [], "threshold": -math.inf,
                "decided": 0.0, "by_stage": [0.0] * S, "risk": None, "cost": None}
    j = int(rejected[np.argmax(n[rejected])])
    if costs is not None:
        near = rejected if human_cost > 0 else rejected[n[rejected] >= (1 - slack) * n[j]]
        j = int(near[np.argmin([cost(x) for x in near])])
    view, cols, thr, stage, loss = config(j)
    by = [0.0] * S
    for i, c in enumerate(cols):
        by[c] = float((stage == i).mean())
    d = stage >= 0
    return {**base, "view": view, "stages": list(cols), "threshold": thr,
            "decided": float(d.mean()), "by_stage": by,
            "risk": float(loss[d].mean()) if d.any() else None,
            "cost": None if costs is None else cost(j)}


def cascade_threshold(U, L, alpha: float, delta: float, grid_size: int | None = None,
                      start_share: float = CASCADE_START_SHARE, costs=None,
                      slack: float = 0.1) -> dict:
    """:func:`fit_cascade` on the ``own`` view alone: ``U`` (n, S) the stated errors of each
    stage's own verdict, ``L`` its losses."""
    return fit_cascade({"own": (U, L)}, alpha, delta, costs=costs, slack=slack,
                       grid_size=grid_size, start_share=start_share)


def apply_cascade(U, rule: dict) -> np.ndarray:
    """Which stage of ``U`` (n, S, the rule's view) decides each new item under ``rule``
    (:func:`fit_cascade`'s dict); -1 where it goes to a human."""
    U = np.asarray(U, float)
    if not rule["stages"]:
        return np.full(len(U), -1)
    cols = list(rule["stages"])
    stage, _ = cascade_decisions(U[:, cols], np.zeros((len(U), len(cols))), rule["threshold"])
    return np.where(stage >= 0, np.asarray(cols)[np.maximum(stage, 0)], -1)
