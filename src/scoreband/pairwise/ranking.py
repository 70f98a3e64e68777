"""Rankings from pairwise verdicts: many judge verdicts rectified by a few human
preferences (prediction-powered ranking, Chatzi et al. 2024; SPEC sections 10 and 13).

Each pair (row) compares ``system_a`` with ``system_b``; ``f`` is the judge's preference for
A on [0, 1] (``p(A) + p(tie) / 2``, or a verdict 1 / 0 / 0.5), ``y`` the human one where the
pair is labeled (the majority label as 1 / 0 / 0.5, or the share of votes). Assumed: the
labeled pairs are a random sample of all pairs (labeling does not look at the preference or
at which systems a pair compares).

* **A system with no human-labeled pair is skipped** (reported, listed under
  ``skipped_systems`` with the reason): none of its pairs being labeled shows the labels
  are not a random sample of the pairs, and its pairs, which no label rectifies, would
  carry the judge's bias on that system into every other system's win rate, head-to-head
  and strength (with one such system favoured by the judge, the others' 90 % strength
  intervals covered 0.37-0.68). Its pairs leave every estimate, the win rates are over the
  ranked systems' pairs, and it is never the Bradley-Terry reference. Label a random
  sample of its pairs and rank again.
* **A system with 1 to MIN_LABELS - 1 labeled pairs is kept** (see :func:`rank_arrays`):
  under the assumption its few labels are what chance gives a system with few pairs, and
  its pairs are then as representative as anyone's, so the other systems' estimates stay
  valid with them; its own win rate (and strength) is the judge's alone, without an
  interval (``judge_only``), it is placed by no decision and it is not the Bradley-Terry
  reference. Where its labeled share is far below the table's (a binomial tail < 1 %), a
  warning says the labels look not random for it.

* **Head-to-head**: for systems a, b, ``theta_ab = E[y] - 1/2`` over their pairs, by PPI++
  (:func:`scoreband.system_level.ppi.ppi_mean`: labeled pairs rectify the judge on all pairs);
  its Student-t p-value of ``theta_ab = 0``; Holm over all system pairs; simultaneous rank
  sets (:func:`scoreband.system_level.ppi.rank_sets`).
* **Win rate** of a system: its mean preference over every pair it is in, PPI++ likewise.
* **Bradley-Terry strengths** ``beta`` (``P(a beats b) = sigmoid(beta_a - beta_b)``, the
  reference system 0: the last by name of those with at least MIN_LABELS labeled pairs): the prediction-powered M-estimator ``mean_U x (f - s(x b)) + mean_L
  x (y - f) = 0`` with its sandwich covariance.

The JSON has the keys of ``scoreband systems`` (``systems``, ``pairs``, ``ranking``), and
``skipped_systems``. Rows are named as every command names them
(:class:`scoreband.columns.RowIds`: 1-based, the ``id`` column beside the number).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pandas as pd

from scoreband.errors import InputError, RowError
from scoreband.pairwise.pairs import pair_labels, parse_labels
from scoreband.system_level import MIN_LABELS
from scoreband.system_level.ppi import holm, p_value, rank_sets
from scoreband.system_level.study import guarded_estimate

__all__ = ["rank_systems", "rank_arrays", "bradley_terry_ppi", "judge_preference"]

_VALUE = {"A": 1.0, "B": 0.0, "tie": 0.5}


def _cell(v) -> str:
    """A cell as written: a JSON number's literal, text as it is."""
    return getattr(v, "text", None) or str(v)


def judge_preference(df: pd.DataFrame, *, probs=None, verdict: str | None = None,
                     ids=None) -> tuple[np.ndarray, list[RowError]]:
    """The judge's preference for A per row: ``p(A) + p(tie) / 2`` from probability columns
    (``probs``: p(A), p(B)[, p(tie)]), or 1 / 0 / 0.5 from a verdict column.

    Probabilities follow the pairwise rule of :mod:`scoreband.pairwise.selective`: a row
    with a cell that is not a number, a probability outside [0, 1], or probabilities not
    summing to 1 within :data:`~scoreband.pairwise.selective.PROB_SUM_TOL` is a row error
    and counts as unjudged (NaN) - never renormalised into a verdict. Sums within the
    tolerance (rounding in a written table) are renormalised. ``ids``: the rows' names
    (default :func:`scoreband.columns.row_ids`)."""
    from scoreband.columns import row_ids
    from scoreband.pairwise.selective import PROB_SUM_TOL

    ids = row_ids(df, None) if ids is None else ids
    if verdict is not None:
        if verdict not in df.columns:
            raise InputError(f"verdict column {verdict!r} not in the table")
        lab, errors = parse_labels(df[verdict], verdict, ids=ids)
        return np.array([_VALUE.get(v, np.nan) for v in lab]), errors
    if not probs:
        raise InputError("give the judge's verdicts: probability columns or a verdict column")
    missing = [c for c in probs if c not in df.columns]
    if missing:
        raise InputError(f"column(s) {missing} not in the table")
    P = np.column_stack([pd.to_numeric(df[c], errors="coerce").to_numpy(float)
                         for c in probs])
    fin = np.isfinite(P).all(axis=1)
    off = fin & ((P < -1e-9) | (P > 1 + 1e-9)).any(axis=1)
    tot = np.where(fin, P.sum(axis=1), 1.0)
    unsummed = fin & ~off & (np.abs(tot - 1) > PROB_SUM_TOL)
    errors = []
    for i in np.flatnonzero(~fin | off | unsummed)[:100000]:
        if not fin[i]:
            j = int(np.flatnonzero(~np.isfinite(P[i]))[0])
            cell = df[probs[j]].iloc[i]
            text = "" if cell is None or (isinstance(cell, float) and np.isnan(cell)) \
                else _cell(cell)
            why = "an empty cell" if not text.strip() else f"{text[:40]!r} is not a number"
        elif off[i]:
            j = int(np.flatnonzero((P[i] < -1e-9) | (P[i] > 1 + 1e-9))[0])
            why = f"{_cell(df[probs[j]].iloc[i])[:40]!r} is not a probability (outside [0, 1])"
        else:
            j = 0
            why = (f"the probabilities {', '.join(probs)} sum to {tot[i]:.3g}, not 1 (within "
                   f"{PROB_SUM_TOL:g}): give p(A), p(B)[, p(tie)] of one verdict")
        errors.append(RowError(ids[i], probs[j], why + "; the pair counts as unjudged",
                               int(i)))
    ok = fin & ~off & ~unsummed
    if P.shape[1] == 2:
        P = np.column_stack([P, np.zeros(len(P))])
    f = np.where(ok, (P[:, 0] + 0.5 * P[:, 2]) / np.where(ok, tot, 1), np.nan)
    return f, errors


def bradley_terry_ppi(names, a, b, f, y, labeled, alpha: float = 0.1,
                      reference: str | None = None) -> dict:
    """Prediction-powered Bradley-Terry strengths (``reference``'s fixed at 0, default the
    last system) with normal intervals from the sandwich covariance; ``a``, ``b``: system
    indices per pair (into ``names``).

    The estimating equation is ``mean_all x (f - s(x b)) + mean_L x (y - f) = 0``: the
    judge's term over *every* pair (labeled ones too), the humans' rectifier over the
    labeled ones. Its variance counts both terms and their covariance on the labeled
    pairs: ``Cov_all(g) / (n + N) + Cov_L(r) / n + 2 sym Cov_L(g, r) / (n + N)``. (The
    judge's term over the unlabeled pairs alone, as first written, was fitted on a handful
    of pairs when nearly all were labeled: strengths' 90 % intervals covered 0.78 with 8
    unlabeled of 400; tests/pairwise/test_ranking.py.)"""
    names = list(names)
    if reference is not None and reference != names[-1]:
        # the reference last: permute the systems, solve, and report by name
        r = names.index(reference)
        perm = [i for i in range(len(names)) if i != r] + [r]
        inv = np.argsort(perm)
        out = bradley_terry_ppi([names[i] for i in perm], inv[np.asarray(a)],
                                inv[np.asarray(b)], f, y, labeled, alpha)
        return out
    k = len(names)
    n_rows = len(a)
    X = np.zeros((n_rows, k))
    X[np.arange(n_rows), a] += 1
    X[np.arange(n_rows), b] -= 1
    X = X[:, :-1]
    L = np.asarray(labeled, bool)
    XL, yL, fL = X[L], y[L], f[L]
    nL, n_all = max(int(L.sum()), 1), len(f)
    beta = _bt_solve(X, f, XL.T @ (yL - fL) / nL)
    s = 1 / (1 + np.exp(-(X @ beta)))
    H = (X * (s * (1 - s))[:, None]).T @ X / n_all
    g_all = X * (f - s)[:, None]
    r_l = XL * (yL - fL)[:, None]

    def cov(u, v):
        if len(u) < 2:
            return np.zeros((k - 1, k - 1))
        return (u - u.mean(0)).T @ (v - v.mean(0)) / (len(u) - 1)

    cross = cov(g_all[L], r_l)
    M = cov(g_all, g_all) / n_all + cov(r_l, r_l) / nL + (cross + cross.T) / n_all
    Hi = np.linalg.pinv(H)
    V = Hi @ M @ Hi
    full = np.append(beta, 0.0)
    Vf = np.zeros((k, k))
    Vf[:-1, :-1] = V
    from scipy.stats import norm

    z = norm.ppf(1 - alpha / 2)
    se = np.sqrt(np.maximum(np.diag(Vf), 0))
    return {"strength": dict(zip(names, full.tolist(), strict=True)),
            "se": dict(zip(names, se.tolist(), strict=True)),
            "ci": {s: [full[i] - z * se[i], full[i] + z * se[i]]
                   for i, s in enumerate(names)},
            "reference": names[-1], "covariance": Vf, "names": names}


def _bt_solve(X, f, rect) -> np.ndarray:
    """Newton's method on the prediction-powered estimating equation
    ``X' (f - s(X b)) / n + rect = 0``."""
    n_all, k1 = X.shape
    beta = np.zeros(k1)
    for _ in range(100):
        s = 1 / (1 + np.exp(-(X @ beta)))
        g = X.T @ (f - s) / n_all + rect
        H = (X * (s * (1 - s))[:, None]).T @ X / n_all + 1e-9 * np.eye(k1)
        step = np.linalg.solve(H, g)
        beta += step
        if np.max(np.abs(step)) < 1e-10:
            break
    return beta


def _clip(ci, lo: float, hi: float) -> list[float]:
    """An interval cut to the range its quantity lies in (a win rate in [0, 1]): it holds
    the true value whenever the uncut one does."""
    return [float(min(max(ci[0], lo), hi)), float(min(max(ci[1], lo), hi))]


def _oriented(a, b, f, y, s1, s2):
    """Rows comparing s1 and s2, oriented so that 1 means s1 preferred."""
    m1 = (a == s1) & (b == s2)
    m2 = (a == s2) & (b == s1)
    idx = np.flatnonzero(m1 | m2)
    flip = m2[idx]
    return idx, np.where(flip, 1 - f[idx], f[idx]), np.where(flip, 1 - y[idx], y[idx])


def _label_counts(a, b, names, lab) -> dict[str, tuple[int, int]]:
    """Per system: (judged pairs, human-labeled judged pairs)."""
    return {s: (int(((a == s) | (b == s)).sum()), int((lab & ((a == s) | (b == s))).sum()))
            for s in names}


def _skip_unlabeled(a, b, names, counts) -> tuple[list[str], dict, list[str]]:
    """The systems with no human-labeled pair: skipped (see the module docstring)."""
    skipped, notes = {}, []
    for s in names:
        n_pairs, n_lab = counts[s]
        if n_lab == 0:
            reason = (f"none of its {n_pairs} judged pair(s) has a human preference: the "
                      "labels are then not a random sample of the pairs, and its pairs, "
                      "which no label rectifies, would bias every other system's estimate")
            skipped[s] = {"n_pairs": n_pairs, "n_labeled": 0, "reason": reason}
            notes.append(f"system {s!r} skipped: {reason}; its pairs leave every estimate. "
                         "Label a random sample of its pairs and rank again")
    return [s for s in names if s not in skipped], skipped, notes


def _few_labels_note(s: str, n_pairs: int, n_lab: int, share: float) -> str:
    """A system with 1 .. MIN_LABELS - 1 labeled pairs: kept; warned when its labeled share
    is far below the table's (binomial lower tail < 1 %)."""
    from scipy.stats import binom  # lazy: scipy

    note = (f"system {s!r}: {n_lab} human-labeled pair(s), fewer than {MIN_LABELS}: its win "
            "rate and strength are the judge's alone (no interval, no decision); label some "
            "of its pairs")
    if 0 < share < 1 and binom.cdf(n_lab, n_pairs, share) < 0.01:
        note += (f". Its labeled share ({n_lab} of {n_pairs}) is far below the table's "
                 f"({share:.1%}): if its pairs were not labeled at random, its pairs bias "
                 "the others' estimates - label a random sample of them or drop its rows")
    return note


def cyclic_preferences(names, pairs: list[dict], alpha: float) -> list[dict]:
    """The cycles among the significant head-to-head decisions (``X > Y``, ``Y > Z``,
    ``Z > X``): the groups of systems each of which is significantly preferred, directly
    or through others, to every other one of its group (strongly connected components of
    the decisions' graph, 2 systems or more), with the decisions among them. Win rates of
    head-to-head pairs need not be transitive (rock, paper, scissors), and no ranking
    agrees with a cycle: its systems' rank sets must not order them.

    >>> ps = [{"a": "X", "b": "Y", "estimate": .3, "p_adjusted": .01},
    ...       {"a": "Y", "b": "Z", "estimate": .3, "p_adjusted": .01},
    ...       {"a": "X", "b": "Z", "estimate": -.3, "p_adjusted": .01}]
    >>> cyclic_preferences(["X", "Y", "Z"], ps, 0.05)[0]["systems"]
    ['X', 'Y', 'Z']
    """
    names = list(names)
    idx = {s: i for i, s in enumerate(names)}
    k = len(names)
    beats = np.zeros((k, k), dtype=bool)
    for p in pairs:
        if p["p_adjusted"] < alpha and p.get("estimate") is not None:
            hi, lo = (p["a"], p["b"]) if p["estimate"] > 0 else (p["b"], p["a"])
            beats[idx[hi], idx[lo]] = True
    reach = beats.copy()
    for m in range(k):  # Warshall: reach[i, j] = i beats j through any chain
        reach |= reach[:, m:m + 1] & reach[m:m + 1, :]
    both = reach & reach.T
    out, seen = [], set()
    for i in range(k):
        if i in seen or not both[i].any():
            continue
        members = sorted({i, *np.flatnonzero(both[i]).tolist()})
        seen.update(members)
        out.append({"systems": [names[j] for j in members],
                    "preferences": [[names[x], names[z]] for x in members for z in members
                                    if beats[x, z]]})
    return out


def _cycle_note(cycles: list[dict], alpha: float) -> str:
    parts = []
    for c in cycles[:3]:
        prefs = ", ".join(f"{a!r} > {b!r}" for a, b in c["preferences"][:8])
        more = ", ..." if len(c["preferences"]) > 8 else ""
        parts.append(f"{', '.join(map(repr, c['systems']))} ({prefs}{more})")
    return (f"the head-to-head preferences are cyclic (not transitive) at level {alpha:g}: "
            f"{'; '.join(parts)}. No ranking agrees with a cycle, so these systems' rank "
            "sets do not order them among themselves; their win rates (or --by "
            "bradley-terry) give one order, the head-to-head verdicts none")


def rank_arrays(a, b, f, y, *, alpha: float = 0.1, method: str = "ppi++",
                by: str = "head-to-head") -> dict:
    """The ranking document from arrays: ``a``, ``b`` system names per pair, ``f`` the
    judge's preference for A (NaN: unjudged), ``y`` the human one (NaN: unlabeled).
    ``by``: ``head-to-head`` (pairwise decisions from each pair of systems' own pairs) or
    ``bradley-terry`` (from the strengths' differences).

    A system none of whose judged pairs is labeled is skipped (``skipped_systems``): its
    pairs leave every estimate. A system with 1 to ``MIN_LABELS - 1`` labeled pairs is kept
    (``judge_only``: its own estimates without interval, placed by no decision, never the
    Bradley-Terry reference), because under the assumption that the labeled pairs are a
    random sample of all pairs, few labels are what chance gives a system with few pairs:
    its pairs then are a random part of every other system's pairs, labeled at the same
    rate, and the others' prediction-powered estimates (which need only that their labeled
    pairs be a random sample of their pairs) stay valid with them. Dropping it would only
    change what the other systems' win rates average over. Zero labels is the one case
    where the table itself shows the assumption broken for the system's pairs, so that is
    the case skipped; a labeled share far below the table's is warned about."""
    a, b = np.asarray(a).astype(str), np.asarray(b).astype(str)
    f, y = np.asarray(f, float), np.asarray(y, float)
    lam = {"ppi++": None, "ppi": 1.0, "classical": 0.0}.get(method, "bad")
    if lam == "bad":
        raise InputError(f"`method` {method!r}: choose ppi++, ppi or classical")
    if by not in ("head-to-head", "bradley-terry"):
        raise InputError(f"`by` {by!r}: choose head-to-head or bradley-terry")
    notes: list[str] = []
    names, skipped, counts, use, lab = _ranked_systems(a, b, f, y, notes)
    share = float(lab.sum() / max(use.sum(), 1))
    few = [s for s in names if counts[s][1] < MIN_LABELS]
    per = {s: _system_estimate(s, a, b, f, y, use, lab, s in few, share, alpha, lam, notes)
           for s in names}
    bt = _strengths(names, few, a, b, f, y, use, lab, alpha, per)
    pairs = [_bt_comparison(s1, s2, bt, few, notes)
             if by == "bradley-terry" and bt is not None else
             _head_to_head(s1, s2, a, b, f, y, alpha, lam, notes)
             for s1, s2 in itertools.combinations(names, 2)]
    ranks, cycles = _rank_sets(names, pairs, alpha, notes)

    def key(s):
        return -(per[s]["estimate"] if per[s]["estimate"] is not None else -1)

    ranking = [{"system": s, "estimate": per[s]["estimate"], "ci": per[s]["ci"],
                "strength": per[s].get("strength"), "ranks": list(ranks[s])}
               for s in sorted(names, key=key)]
    return {"study": "pairwise-systems", "alpha": alpha, "method": method, "by": by,
            "estimate": "win rate (mean preference over the system's pairs with the ranked "
                        "systems; tie = 1/2)",
            "systems": per, "pairs": pairs, "ranking": ranking,
            "skipped_systems": skipped,
            "transitive": not cycles, "cycles": cycles,
            "bradley_terry_reference": bt["reference"] if bt else None,
            "min_labels": MIN_LABELS, "n_pairs": int(len(a)),
            "n_pairs_ranked": int(use.sum()),
            "n_labeled_pairs": int(lab.sum()), "warnings": notes}


def _strengths(names, few, a, b, f, y, use, lab, alpha: float, per: dict) -> dict | None:
    """The Bradley-Terry strengths (:func:`bradley_terry_ppi`, the reference the last
    system with enough labels), each system's put in ``per``; None without unlabeled pairs
    or enough labels."""
    labeled_enough = [s for s in names if s not in few]
    if not (labeled_enough and lab.sum() >= MIN_LABELS and (use & ~lab).sum() > 0):
        return None
    idx = {s: i for i, s in enumerate(names)}
    ai = np.array([idx.get(s, -1) for s in a])
    bi = np.array([idx.get(s, -1) for s in b])
    bt = bradley_terry_ppi(names, ai[use], bi[use], f[use], np.nan_to_num(y[use]),
                           lab[use], alpha, reference=labeled_enough[-1])
    for s in names:
        per[s]["strength"] = bt["strength"][s]
        per[s]["strength_ci"] = None if s in few else [float(v) for v in bt["ci"][s]]
    return bt


def _ranked_systems(a, b, f, y, notes: list):
    """``(names, skipped, counts, use, lab)``: the systems ranked (those with a labeled
    judged pair), the ones skipped, the labeled / judged counts per system, and the masks of
    the judged and the labeled pairs left once the skipped systems' pairs are out."""
    use = np.isfinite(f)
    lab = use & np.isfinite(y)
    all_names = sorted({str(x) for x in set(a[use]) | set(b[use])})
    counts = _label_counts(a[use], b[use], all_names, lab[use])
    names, skipped, skip_notes = _skip_unlabeled(a, b, all_names, counts)
    notes += skip_notes
    if len(names) < 2:
        raise InputError(
            "fewer than 2 systems have a human-labeled pair among their judged pairs "
            f"({', '.join(repr(s) for s in names) or 'none'}; skipped: "
            f"{', '.join(repr(s) for s in skipped) or 'none'}): nothing can be ranked. "
            "Label a random sample of the pairs (the judge's verdicts alone give no "
            "interval)")
    if skipped:
        gone = np.isin(a, list(skipped)) | np.isin(b, list(skipped))
        use, lab = use & ~gone, lab & ~gone
    return names, skipped, counts, use, lab


def _system_estimate(s, a, b, f, y, use, lab, few: bool, share: float, alpha: float, lam,
                     notes: list) -> dict:
    """System ``s``'s win rate over its pairs: prediction-powered with its interval, or
    (fewer than :data:`MIN_LABELS` labels) the judge's alone, without one."""
    m = use & ((a == s) | (b == s))
    fs = np.where(a == s, f, 1 - f)[m]
    ys = np.where(a == s, y, 1 - y)[m]
    ls = lab[m]
    rec = {"n_labeled": int(ls.sum()), "n_unlabeled": int((~ls).sum())}
    if few:
        notes.append(_few_labels_note(s, int(m.sum()), int(ls.sum()), share))
        rec.update(estimate=float(np.mean(fs)) if len(fs) else None, ci=None,
                   classical=None, effective_labels=0.0, judge_only=True)
        return rec
    # labels with no spread (a system that won every labeled pair): the widest variance a
    # [0, 1] target can have, never a zero-width interval
    e, cl, why = guarded_estimate(ys[ls], fs[ls], fs[~ls], alpha, lam, f"system {s!r}", notes)
    rec.update(estimate=e.estimate, se=e.se, ci=_clip(e.ci, 0.0, 1.0),
               **{"lambda": e.lam}, df=e.df, degenerate=why,
               classical={"estimate": cl.estimate, "se": cl.se, "ci": _clip(cl.ci, 0.0, 1.0)},
               effective_labels=float(ls.sum() * (cl.se / e.se) ** 2)
               if e.se > 0 else float("inf"))
    return rec


def _bt_comparison(s1: str, s2: str, bt: dict, few: list, notes: list) -> dict:
    """The comparison of two systems by their Bradley-Terry strengths' difference."""
    rec = {"a": s1, "b": s2}
    if s1 in few or s2 in few:
        s_few = s1 if s1 in few else s2
        rec.update(estimate=bt["strength"][s1] - bt["strength"][s2], se=None,
                   p_value=1.0, judge_only=True, scale="strength difference")
        notes.append(f"pair {s1!r} - {s2!r}: {s_few!r} has fewer than {MIN_LABELS} "
                     "human-labeled pairs: no decision between them")
        return rec
    from scipy.stats import norm

    i, j = bt["names"].index(s1), bt["names"].index(s2)
    V = bt["covariance"]
    est = bt["strength"][s1] - bt["strength"][s2]
    se = math.sqrt(max(V[i, i] + V[j, j] - 2 * V[i, j], 0))
    rec.update(estimate=est, se=se, p_value=float(2 * norm.sf(abs(est) / se))
               if se > 0 else 1.0, scale="strength difference")
    return rec


def _head_to_head(s1: str, s2: str, a, b, f, y, alpha: float, lam, notes: list) -> dict:
    """The comparison of two systems on their own pairs: P(s1 preferred) - 1/2."""
    rec = {"a": s1, "b": s2}
    _, fo, yo = _oriented(a, b, f, y, s1, s2)
    ok = np.isfinite(fo)
    lo = ok & np.isfinite(yo)
    rec.update(n_labeled_both=int(lo.sum()), n_scored_both=int(ok.sum()),
               scale="P(a preferred) - 1/2")
    if lo.sum() < MIN_LABELS:
        notes.append(f"pair {s1!r} - {s2!r}: {int(lo.sum())} human-labeled pair(s), "
                     f"fewer than {MIN_LABELS}: no decision between them")
        rec.update(estimate=float(np.mean(fo[ok]) - 0.5) if ok.any() else None,
                   ci=None, p_value=1.0, judge_only=True)
        return rec
    e, _, why = guarded_estimate(yo[lo], fo[lo], fo[ok & ~lo], alpha, lam,
                                 f"pair {s1!r} - {s2!r}", notes)
    e = replace(e, estimate=e.estimate - 0.5, ci=(e.ci[0] - 0.5, e.ci[1] - 0.5))
    rec.update(estimate=e.estimate, se=e.se, ci=_clip(e.ci, -0.5, 0.5),
               df=e.df, p_value=p_value(e), degenerate=why)
    return rec


def _rank_sets(names: list, pairs: list[dict], alpha: float, notes: list):
    """Holm-adjusted decisions (each comparison's ``p_adjusted`` / ``significant`` set in
    place), the cycles among them, and the rank sets from the decisions outside a cycle."""
    adj = holm([p["p_value"] for p in pairs]) if pairs else []
    for p, q in zip(pairs, adj, strict=True):
        p["p_adjusted"] = float(q)
        p["significant"] = bool(q < alpha and p.get("estimate") is not None)
    decided = [p for p in pairs if p.get("estimate") is not None]
    cycles = cyclic_preferences(names, decided, alpha)
    if cycles:
        notes.append(_cycle_note(cycles, alpha))
        inside = {s: i for i, c in enumerate(cycles) for s in c["systems"]}
        # a cycle's own decisions order nothing: its systems' rank sets span each other
        decided = [p for p in decided if not (p["a"] in inside and p["b"] in inside
                                              and inside[p["a"]] == inside[p["b"]])]
    return rank_sets(names, decided, alpha), cycles


def _system_names(col: pd.Series) -> np.ndarray:
    """System names as written (a table read as text keeps ``01`` and ``1`` apart); an
    empty cell is ``""``."""
    return np.array(["" if v is None or (isinstance(v, float) and np.isnan(v)) else
                     _cell(v) for v in col.to_numpy(dtype=object)], dtype=object).astype(str)


def rank_systems(df: pd.DataFrame, *, label_col: str | None = None, votes=None,
                 probs=None, verdict: str | None = None, alpha: float = 0.1,
                 method: str = "ppi++", by: str = "head-to-head",
                 system_a: str = "system_a", system_b: str = "system_b"
                 ) -> tuple[dict, list[RowError]]:
    """The ranking document of a pair table (see module docstring): judge verdicts from
    ``probs`` (p(A), p(B)[, p(tie)] columns) or ``verdict`` (A / B / tie); the human
    preference from ``label_col`` or ``votes`` (vote shares are used as they are).

    System names are compared as written: read the table as text
    (``read_table(path, text=True)``, what ``systems --pairwise`` does) to keep ``01`` and
    ``1`` two systems. A system with no human-labeled pair is skipped (``skipped_systems``);
    see :func:`rank_arrays`."""
    from scoreband.columns import row_ids

    df = df.reset_index(drop=True)
    for c in (system_a, system_b):
        if c not in df.columns:
            raise InputError(f"system column {c!r} not in the table")
    ids = row_ids(df, None)
    errors: list[RowError] = []
    sa, sb = _system_names(df[system_a]), _system_names(df[system_b])
    empty = (np.char.strip(sa) == "") | (np.char.strip(sb) == "")
    for i in np.flatnonzero(empty):
        col = system_a if not sa[i].strip() else system_b
        errors.append(RowError(ids[i], col, "the system's name is empty; the pair is skipped",
                               int(i)))
    same = (sa == sb) & ~empty
    for i in np.flatnonzero(same):
        errors.append(RowError(ids[i], system_b, f"system {str(sa[i])!r} is compared with itself; "
                                                 "the pair is skipped", int(i)))
    f, e1 = judge_preference(df, probs=probs, verdict=verdict, ids=ids)
    lab, share, e2 = pair_labels(df, label_col=label_col, votes=votes, ids=ids)
    errors += e1 + e2
    y = np.where(lab != "", share[:, 0] + 0.5 * share[:, 2], np.nan)
    keep = ~same & ~empty & np.isfinite(f)
    doc = rank_arrays(sa[keep], sb[keep], f[keep], y[keep], alpha=alpha, method=method,
                      by=by)
    doc["n_rows"] = int(len(df))
    doc["skipped_rows"] = [str(e) for e in errors[:1000]]
    return doc, errors
