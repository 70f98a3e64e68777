"""Rankings from pairwise verdicts: many judge verdicts rectified by a few human
preferences (prediction-powered ranking, Chatzi et al. 2024; SPEC sections 10 and 13).

Each pair (row) compares ``system_a`` with ``system_b``; ``f`` is the judge's preference for
A on [0, 1] (``p(A) + p(tie) / 2``, or a verdict 1 / 0 / 0.5), ``y`` the human one where the
pair is labeled (the majority label as 1 / 0 / 0.5, or the share of votes). Assumed: the
labeled pairs are a random sample of the pairs of their two systems (labeling does not look
at the preference).

* **Head-to-head**: for systems a, b, ``theta_ab = E[y] - 1/2`` over their pairs, by PPI++
  (:func:`scoreband.system_level.ppi.ppi_mean`: labeled pairs rectify the judge on all pairs);
  its Student-t p-value of ``theta_ab = 0``; Holm over all system pairs; simultaneous rank
  sets (:func:`scoreband.system_level.ppi.rank_sets`).
* **Win rate** of a system: its mean preference over every pair it is in, PPI++ likewise.
* **Bradley-Terry strengths** ``beta`` (``P(a beats b) = sigmoid(beta_a - beta_b)``, the
  last system 0): the prediction-powered M-estimator ``mean_U x (f - s(x b)) + mean_L
  x (y - f) = 0`` with its sandwich covariance.

The JSON has the keys of ``scoreband systems`` (``systems``, ``pairs``, ``ranking``).
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
from scoreband.system_level.ppi import classical_mean, holm, p_value, ppi_mean, rank_sets

__all__ = ["rank_systems", "rank_arrays", "bradley_terry_ppi", "judge_preference"]

_VALUE = {"A": 1.0, "B": 0.0, "tie": 0.5}


def judge_preference(df: pd.DataFrame, *, probs=None, verdict: str | None = None
                     ) -> tuple[np.ndarray, list[RowError]]:
    """The judge's preference for A per row: ``p(A) + p(tie) / 2`` from probability columns
    (``probs``: p(A), p(B)[, p(tie)], renormalised), or 1 / 0 / 0.5 from a verdict column."""
    if verdict is not None:
        if verdict not in df.columns:
            raise InputError(f"verdict column {verdict!r} not in the table")
        lab, errors = parse_labels(df[verdict], verdict)
        return np.array([_VALUE.get(v, np.nan) for v in lab]), errors
    if not probs:
        raise InputError("give the judge's verdicts: probability columns or a verdict column")
    missing = [c for c in probs if c not in df.columns]
    if missing:
        raise InputError(f"column(s) {missing} not in the table")
    P = np.column_stack([pd.to_numeric(df[c], errors="coerce").to_numpy(float)
                         for c in probs])
    if P.shape[1] == 2:
        P = np.column_stack([P, np.zeros(len(P))])
    tot = P.sum(axis=1)
    ok = np.isfinite(P).all(axis=1) & (tot > 0) & (P >= 0).all(axis=1)
    f = np.where(ok, (P[:, 0] + 0.5 * P[:, 2]) / np.where(ok, tot, 1), np.nan)
    errors = [RowError(str(i), probs[0], "the judge's probabilities are missing or not "
                                         "numbers >= 0: the pair counts as unjudged", int(i))
              for i in np.flatnonzero(~ok & np.isfinite(P).any(axis=1))]
    return f, errors


def bradley_terry_ppi(names, a, b, f, y, labeled, alpha: float = 0.1) -> dict:
    """Prediction-powered Bradley-Terry strengths (the last system's fixed at 0) with
    normal intervals from the sandwich covariance; ``a``, ``b``: system indices per pair.

    The estimating equation is ``mean_all x (f - s(x b)) + mean_L x (y - f) = 0``: the
    judge's term over *every* pair (labeled ones too), the humans' rectifier over the
    labeled ones. Its variance counts both terms and their covariance on the labeled
    pairs: ``Cov_all(g) / (n + N) + Cov_L(r) / n + 2 sym Cov_L(g, r) / (n + N)``. (The
    judge's term over the unlabeled pairs alone, as first written, was fitted on a handful
    of pairs when nearly all were labeled: strengths' 90 % intervals covered 0.78 with 8
    unlabeled of 400; tests/pairwise/test_ranking.py.)"""
    k = len(names)
    n_rows = len(a)
    X = np.zeros((n_rows, k))
    X[np.arange(n_rows), a] += 1
    X[np.arange(n_rows), b] -= 1
    X = X[:, :-1]
    L = np.asarray(labeled, bool)
    XL, yL, fL = X[L], y[L], f[L]
    nL, n_all = max(int(L.sum()), 1), len(f)
    beta = np.zeros(k - 1)
    rect = XL.T @ (yL - fL) / nL
    for _ in range(100):
        s = 1 / (1 + np.exp(-(X @ beta)))
        g = X.T @ (f - s) / n_all + rect
        H = (X * (s * (1 - s))[:, None]).T @ X / n_all + 1e-9 * np.eye(k - 1)
        step = np.linalg.solve(H, g)
        beta += step
        if np.max(np.abs(step)) < 1e-10:
            break
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
            "reference": names[-1], "covariance": Vf}


def _oriented(a, b, f, y, s1, s2):
    """Rows comparing s1 and s2, oriented so that 1 means s1 preferred."""
    m1 = (a == s1) & (b == s2)
    m2 = (a == s2) & (b == s1)
    idx = np.flatnonzero(m1 | m2)
    flip = m2[idx]
    return idx, np.where(flip, 1 - f[idx], f[idx]), np.where(flip, 1 - y[idx], y[idx])


def rank_arrays(a, b, f, y, *, alpha: float = 0.1, method: str = "ppi++",
                by: str = "head-to-head") -> dict:
    """The ranking document from arrays: ``a``, ``b`` system names per pair, ``f`` the
    judge's preference for A (NaN: unjudged), ``y`` the human one (NaN: unlabeled).
    ``by``: ``head-to-head`` (pairwise decisions from each pair of systems' own pairs) or
    ``bradley-terry`` (from the strengths' differences)."""
    a, b = np.asarray(a).astype(str), np.asarray(b).astype(str)
    f, y = np.asarray(f, float), np.asarray(y, float)
    lam = {"ppi++": None, "ppi": 1.0, "classical": 0.0}.get(method, "bad")
    if lam == "bad":
        raise InputError(f"`method` {method!r}: choose ppi++, ppi or classical")
    if by not in ("head-to-head", "bradley-terry"):
        raise InputError(f"`by` {by!r}: choose head-to-head or bradley-terry")
    names = sorted({str(x) for x in set(a) | set(b)})
    notes: list[str] = []
    use = np.isfinite(f)
    lab = use & np.isfinite(y)
    per: dict[str, dict] = {}
    for s in names:
        m = use & ((a == s) | (b == s))
        fs = np.where(a == s, f, 1 - f)[m]
        ys = np.where(a == s, y, 1 - y)[m]
        ls = lab[m]
        rec = {"n_labeled": int(ls.sum()), "n_unlabeled": int((~ls).sum())}
        if ls.sum() < MIN_LABELS:
            notes.append(f"system {s!r}: {int(ls.sum())} human-labeled pair(s), fewer than "
                         f"{MIN_LABELS}: its win rate cannot be rectified (no interval); "
                         "label some of its pairs")
            rec.update(estimate=float(np.mean(fs)) if len(fs) else None, ci=None,
                       classical=None, effective_labels=0.0, judge_only=True)
        else:
            e = ppi_mean(ys[ls], fs[ls], fs[~ls], alpha, lam)
            cl = classical_mean(ys[ls], alpha)
            rec.update(estimate=e.estimate, se=e.se, ci=list(e.ci), **{"lambda": e.lam},
                       df=e.df, classical={"estimate": cl.estimate, "se": cl.se,
                                           "ci": list(cl.ci)},
                       effective_labels=float(ls.sum() * (cl.se / e.se) ** 2)
                       if e.se > 0 else float("inf"))
        per[s] = rec
    bt = None
    if len(names) >= 2 and lab.sum() >= MIN_LABELS and (use & ~lab).sum() > 0:
        idx = {s: i for i, s in enumerate(names)}
        ai, bi = np.array([idx[s] for s in a]), np.array([idx[s] for s in b])
        bt = bradley_terry_ppi(names, ai[use], bi[use], f[use], np.nan_to_num(y[use]),
                               lab[use], alpha)
        for s in names:
            per[s]["strength"] = bt["strength"][s]
            per[s]["strength_ci"] = [float(v) for v in bt["ci"][s]]
    pairs = []
    for s1, s2 in itertools.combinations(names, 2):
        rec = {"a": s1, "b": s2}
        if by == "bradley-terry" and bt is not None:
            i, j = names.index(s1), names.index(s2)
            V = bt["covariance"]
            est = bt["strength"][s1] - bt["strength"][s2]
            se = math.sqrt(max(V[i, i] + V[j, j] - 2 * V[i, j], 0))
            from scipy.stats import norm

            rec.update(estimate=est, se=se, p_value=float(2 * norm.sf(abs(est) / se))
                       if se > 0 else 1.0, scale="strength difference")
        else:
            idx, fo, yo = _oriented(a, b, f, y, s1, s2)
            ok = np.isfinite(fo)
            lo = ok & np.isfinite(yo)
            rec.update(n_labeled_both=int(lo.sum()), n_scored_both=int(ok.sum()),
                       scale="P(a preferred) - 1/2")
            if lo.sum() < MIN_LABELS:
                notes.append(f"pair {s1!r} - {s2!r}: {int(lo.sum())} human-labeled pair(s), "
                             f"fewer than {MIN_LABELS}: no decision between them")
                rec.update(estimate=float(np.mean(fo[ok]) - 0.5) if ok.any() else None,
                           ci=None, p_value=1.0, judge_only=True)
            else:
                e = ppi_mean(yo[lo], fo[lo], fo[ok & ~lo], alpha, lam)
                e = replace(e, estimate=e.estimate - 0.5, ci=(e.ci[0] - 0.5, e.ci[1] - 0.5))
                rec.update(estimate=e.estimate, se=e.se, ci=list(e.ci), df=e.df,
                           p_value=p_value(e))
        pairs.append(rec)
    adj = holm([p["p_value"] for p in pairs]) if pairs else []
    for p, q in zip(pairs, adj, strict=True):
        p["p_adjusted"] = float(q)
        p["significant"] = bool(q < alpha and p.get("estimate") is not None)
    ranks = rank_sets(names, [p for p in pairs if p.get("estimate") is not None], alpha)

    def key(s):
        return -(per[s]["estimate"] if per[s]["estimate"] is not None else -1)

    ranking = [{"system": s, "estimate": per[s]["estimate"], "ci": per[s]["ci"],
                "strength": per[s].get("strength"), "ranks": list(ranks[s])}
               for s in sorted(names, key=key)]
    return {"study": "pairwise-systems", "alpha": alpha, "method": method, "by": by,
            "estimate": "win rate (mean preference over the system's pairs; tie = 1/2)",
            "systems": per, "pairs": pairs, "ranking": ranking,
            "bradley_terry_reference": bt["reference"] if bt else None,
            "min_labels": MIN_LABELS, "n_pairs": int(len(a)),
            "n_labeled_pairs": int(lab.sum()), "warnings": notes}


def rank_systems(df: pd.DataFrame, *, label_col: str | None = None, votes=None,
                 probs=None, verdict: str | None = None, alpha: float = 0.1,
                 method: str = "ppi++", by: str = "head-to-head",
                 system_a: str = "system_a", system_b: str = "system_b"
                 ) -> tuple[dict, list[RowError]]:
    """The ranking document of a pair table (see module docstring): judge verdicts from
    ``probs`` (p(A), p(B)[, p(tie)] columns) or ``verdict`` (A / B / tie); the human
    preference from ``label_col`` or ``votes`` (vote shares are used as they are)."""
    df = df.reset_index(drop=True)
    for c in (system_a, system_b):
        if c not in df.columns:
            raise InputError(f"system column {c!r} not in the table")
    errors: list[RowError] = []
    sa, sb = df[system_a].astype(str).to_numpy(), df[system_b].astype(str).to_numpy()
    same = sa == sb
    for i in np.flatnonzero(same):
        errors.append(RowError(str(i), system_b, f"system {sa[i]!r} is compared with itself; "
                                                 "the pair is skipped", int(i)))
    f, e1 = judge_preference(df, probs=probs, verdict=verdict)
    lab, share, e2 = pair_labels(df, label_col=label_col, votes=votes)
    errors += e1 + e2
    y = np.where(lab != "", share[:, 0] + 0.5 * share[:, 2], np.nan)
    keep = ~same & np.isfinite(f)
    doc = rank_arrays(sa[keep], sb[keep], f[keep], y[keep], alpha=alpha, method=method,
                      by=by)
    doc["n_rows"] = int(len(df))
    doc["skipped_rows"] = [str(e) for e in errors[:1000]]
    return doc, errors
