"""The steps of a triage rule's fit on arrays (:func:`scoreband.decisions.triage.fit_triage_arrays`):
pure functions of the labeled items' scores, targets and signals - the split, the map, the
choice of the uncertainty, the per-group Learn-then-Test thresholds and what was measured."""

from __future__ import annotations

import math

import numpy as np

from scoreband.datatypes import Scale
from scoreband.decisions.ltt import (
    accepted_counts,
    min_rejectable,
    predicted_rejection,
    threshold_grid,
)
from scoreband.decisions.maps import MAP_KINDS, fit_map
from scoreband.decisions.risk import FixedSequence, ToleranceLoss
from scoreband.decisions.uncertainty import (
    NOT_IN_AUTO,
    UNCERTAINTY,
    Signals,
    available,
    choose_uncertainty,
    fit_uncertainty,
    make_uncertainty,
    needs,
)
from scoreband.errors import InputError

__all__ = ["losses", "check_levels", "check_fit", "candidates", "split", "fit_score_map",
           "fit_chosen_uncertainty", "group_thresholds", "fit_report", "check_spread",
           "MIN_GROUP_TRAIN", "POOLED", "pooled_groups"]

#: the training items below which a group's risk curve is the pooled one
MIN_GROUP_TRAIN = 30
POOLED = "(all)"


def losses(m, y, tol: float) -> np.ndarray:
    """1 where the mapped score ``m`` is off the target ``y`` by more than ``tol``."""
    return ToleranceLoss(tol)(m, y)



def check_levels(tolerance, alpha, delta, scale: Scale) -> None:
    for name, v in (("alpha", alpha), ("delta", delta)):
        if not (isinstance(v, (int, float)) and 0 < v < 1):
            shown = "`alpha` (the risk, --risk)" if name == "alpha" else "`delta` (--delta)"
            raise InputError(f"{shown} must lie in (0, 1), got {v!r}")
    if not (isinstance(tolerance, (int, float)) and math.isfinite(tolerance) and tolerance >= 0):
        raise InputError(f"`tolerance` must be a number >= 0 on the target's scale, got "
                         f"{tolerance!r}")
    if tolerance >= scale.width:
        raise InputError(f"`tolerance` {tolerance:g} is at least the whole scale "
                         f"[{scale.lo:g}, {scale.hi:g}]: every score is within it; give a "
                         "smaller tolerance (e.g. a quarter of the scale)")



def check_fit(tolerance, alpha, delta, scale: Scale, train_frac, map) -> None:
    check_levels(tolerance, alpha, delta, scale)
    if not 0 < train_frac < 1:
        raise InputError(f"`train_frac` must lie in (0, 1), got {train_frac!r}")
    if map not in MAP_KINDS:
        raise InputError(f"`map` {map!r}: choose one of {', '.join(MAP_KINDS)}")


def candidates(by: str, sig: Signals) -> list[str]:
    """The uncertainties to choose among: ``by`` alone, or every one ``auto`` tries that
    the signals allow."""
    names = available(sig)
    if by == "auto":
        return [x for x in names if x not in NOT_IN_AUTO]
    if by not in UNCERTAINTY:
        raise InputError(f"`by` {by!r}: choose auto or one of {', '.join(UNCERTAINTY)}")
    if by not in names:
        raise InputError(f"`by` {by}: needs {needs(by)}")
    return [by]


def split(keys, seed: int, train_frac: float, groups, alpha: float, delta: float):
    """The training / calibration rows, drawn from each row's identity (copies of a row
    numbered in group order: the same split in any row order), and the training rows'
    two folds."""
    from scoreband.conformal.randomness import row_uniforms

    within = None if groups is None else (np.asarray(groups).astype(str),)
    train = row_uniforms(keys, seed, 41, within=within) < train_frac
    need_cal = min_rejectable(alpha, delta)
    if train.sum() < 20 or (~train).sum() < need_cal:
        raise InputError(
            f"{len(keys)} labeled row(s): {int(train.sum())} for training and "
            f"{int((~train).sum())} for calibration; the calibration share needs at least "
            f"{need_cal} to trust anything at risk {alpha:g} (`alpha`, --risk), delta "
            f"{delta:g} (and training at least 20): label more rows, or raise the risk / "
            "delta")
    T, C = np.flatnonzero(train), np.flatnonzero(~train)
    return T, C, (row_uniforms(np.asarray(keys)[T], seed, 42) < 0.5).astype(int)


def fit_score_map(score, y, T, folds, tolerance, scale, kind, crossfit: bool):
    """The map onto the target's scale, fitted on the training share, with every item's
    loss and |residual|; with ``crossfit`` the training items' own from the map fitted on
    the other fold, so what is learned from them is not optimistic."""
    smap = fit_map(score[T], y[T], tol=tolerance, scale=scale, kind=kind)
    m = smap.predict(score)
    loss, absres = losses(m, y, tolerance), np.abs(m - y)
    if crossfit and kind != "none" and min(np.sum(folds == 0), np.sum(folds == 1)) >= 10:
        for f in (0, 1):
            fit_, out_ = T[folds != f], T[folds == f]
            mf = fit_map(score[fit_], y[fit_], tol=tolerance, scale=scale,
                         kind=kind).predict(score[out_])
            loss[out_] = losses(mf, y[out_], tolerance)
            absres[out_] = np.abs(mf - y[out_])
    return smap, loss, absres


def fit_chosen_uncertainty(names, sig, T, C, loss, absres, keys, folds, alpha, delta):
    """The uncertainty: each candidate cross-fitted on the training share, the one whose
    curve promises the largest accepted share kept and fitted on the whole training share.
    Returns ``(name, merit per name, estimator, its cross-fitted training values)``."""
    def merit(u_, loss_):  # the accepted share a test started there is expected to give
        if len(names) == 1:
            return math.nan
        grid_ = threshold_grid(u_, 100)
        nj, kj = accepted_counts(u_, loss_, grid_)
        share_ = nj / len(u_)
        return float(np.max(share_ * predicted_rejection(share_, nj, kj, len(C), alpha,
                                                          delta)))

    name, shares, crossfit = choose_uncertainty(names, sig.take(T), loss[T], absres[T],
                                                folds, keys[T], merit)
    est = fit_uncertainty(make_uncertainty(name), sig.take(T), loss[T], absres[T], keys[T])
    return name, shares, est, crossfit[name]


def group_thresholds(u, uT, loss, T, C, groups, seq: FixedSequence, alpha, delta):
    """Learn-then-Test on the calibration share, per group (pooled without groups): the
    group's record (threshold, accepted share ...) and the notes to say."""
    g = np.full(len(u), POOLED) if groups is None else np.asarray(groups).astype(str)
    out, notes = {}, []
    for name in sorted({str(x) for x in set(g[C]) | set(g[T])}):
        tg, cg = T[g[T] == name], C[g[C] == name]
        grid = seq.grid(uT, len(C) if groups is None else len(cg))
        own = len(tg) >= MIN_GROUP_TRAIN
        out[name] = rec = _group_record(u[cg], loss[cg], len(tg), grid, seq,
                                        uT[g[T] == name] if own else uT,
                                        loss[tg] if own else loss[T], alpha, delta)
        if rec["note"] and (groups is not None) == (rec["start"] is None):
            notes.append(f"group {name!r}: {rec['note']}" if groups is not None
                         else rec["note"])
    if groups is not None:
        notes += _per_group_notes(out, len(C), min_rejectable(alpha, delta), alpha, delta)
    return out, notes


def _group_record(u, loss, n_train, grid, seq, u_train, loss_train, alpha, delta) -> dict:
    """One group's threshold: escalate all with too few calibration rows, else the fixed
    sequence started where the training share's curve says."""
    need = min_rejectable(alpha, delta)
    rec = {"n_calibration": int(len(u)), "n_training": int(n_train),
           "accept_all_risk": float(loss.mean()) if len(u) else None}
    if len(u) < need:
        return {**rec, "threshold": -math.inf, "accepted_share": 0.0, "start": None,
                "risk_on_calibration": None,
                "note": f"{len(u)} calibration row(s): fewer than the {need} needed to "
                        f"trust anything at risk {alpha:g}, delta {delta:g}; every item of "
                        "this group is escalated"}
    j0 = seq.first(u_train, loss_train, grid, len(u), alpha, delta)
    res = seq.control(u, loss, grid, alpha, delta, j0)
    return {**rec, "threshold": res["threshold"], "accepted_share": res["accepted"],
            "risk_on_calibration": res["risk"], "start": j0,
            "start_threshold": float(grid[j0]), "grid_index": res["index"],
            "grid_size": int(len(grid)),
            "note": "" if res["index"] >= 0 else
            "the first test did not reject: nothing can be trusted at this risk with these "
            "labels (every item escalated); label more rows or raise the risk (--risk, "
            "`alpha`)"}


def fit_report(u, loss, T, C, out, groups, grid, how: dict, choice: dict) -> dict:
    """What the fit measured on the calibration share (the rule file's ``report``)."""
    g = np.full(len(u), POOLED) if groups is None else np.asarray(groups).astype(str)
    acc = u[C] <= np.array([out[x]["threshold"] for x in g[C]])
    nC, kC = accepted_counts(u[C], loss[C], grid)
    return {
        "n_labeled": int(len(u)), "n_training": int(len(T)), "n_calibration": int(len(C)),
        **how, "accepted_share": float(acc.mean()),
        "risk_among_accepted_on_calibration": float(loss[C][acc].mean()) if acc.any()
        else None,
        "accept_all_risk": float(loss[C].mean()),
        "accept_all_risk_all_labeled": float(loss.mean()), "uncertainty_choice": choice,
        "curve": {"threshold": grid, "accepted_share": nC / max(len(C), 1),
                  "risk": np.where(nC > 0, kC / np.maximum(nC, 1), np.nan)}}


def check_spread(y, scale: Scale) -> None:
    """Refuse labels that are all one value: the map would send every score to it and the
    rule trust every item whatever the judge said (a constant column, a wrong --target)."""
    fin = y[np.isfinite(y)]
    if len(fin) and np.ptp(fin) == 0:
        raise InputError(
            f"every one of the {len(fin)} labeled rows has the same human score "
            f"({fin[0]:g} on [{scale.lo:g}, {scale.hi:g}]): a rule fitted on them maps every "
            "judge score to it and trusts every item whatever the judge said. Check the "
            "target column (--target), or label rows across the scale")


def _per_group_notes(out: dict, n_cal: int, need_cal: int, alpha: float,
                     delta: float) -> list[str]:
    """Why a per-group rule keeps nothing, with the numbers, and the pooled fit to try."""
    if any(v["accepted_share"] > 0 for v in out.values()):
        return []
    small = {k: v["n_calibration"] for k, v in out.items() if v["n_calibration"] < need_cal}
    sizes = ", ".join(f"{k!r} {v['n_calibration']}" for k, v in list(out.items())[:8])
    why = (f"{len(small)} of {len(out)} groups have fewer than the {need_cal} calibration "
           f"rows a group needs to trust anything at risk {alpha:g}, delta {delta:g}"
           if small else f"no group's tests rejected at risk {alpha:g}, delta {delta:g}")
    return [f"the per-group rule keeps nothing: {why} (calibration rows per group: {sizes}; "
            f"{n_cal} in all). Pool the groups (`pool = true` in --config, or pool=True: one "
            "pooled threshold whose guarantee holds over the mixture of groups, not per "
            "group, with each group's kept share reported), label more rows per group, or raise the risk"]


def pooled_groups(u, loss, C, threshold: float, groups) -> dict:
    """A pooled rule's per-group account on the calibration share (what it keeps of each
    group, and the risk among those: measured, not guaranteed per group)."""
    g = np.asarray(groups).astype(str)[C]
    acc = np.isfinite(u[C]) & (u[C] <= threshold)
    out = {}
    for name in sorted(set(g.tolist())):
        m = g == name
        k = acc & m
        out[name] = {"n_calibration": int(m.sum()), "accepted_share": float(k.sum() / m.sum()),
                     "risk_on_calibration": float(loss[C][k].mean()) if k.any() else None,
                     "accept_all_risk": float(loss[C][m].mean())}
    return out
