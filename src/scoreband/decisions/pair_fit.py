"""The steps of a pairwise rule's fit on arrays (:func:`scoreband.pairwise.selective.fit_pairwise_arrays`):
the split, the conformal sets' quantiles, the selective threshold (Learn-then-Test through
:mod:`scoreband.decisions.risk`), what was measured and the refusals that name the limit."""

from __future__ import annotations

import math

import numpy as np

from scoreband.conformal.core import conformal_quantile
from scoreband.decisions.ltt import min_rejectable
from scoreband.decisions.risk import FixedSequence, LabelFreeSequence
from scoreband.errors import InputError
from scoreband.pairwise.sets import prediction_sets

__all__ = ["split_pairs", "set_quantiles", "selective_threshold", "pair_report",
           "sign_warning", "nothing_decided", "MIN_TRAINING_PAIRS", "POOLED"]

#: the fewest labeled pairs a verdict model is fitted on (its training share)
MIN_TRAINING_PAIRS = 20
POOLED = "(all)"
#: the stream of :func:`scoreband.conformal.randomness.row_uniforms` for the split
_SPLIT_STREAM = 61


def nothing_decided(y, P, alpha: float) -> str:
    """Why no pair is decided, and where the labels' ties make it so: a verdict of A or B
    is wrong on every pair a human called a tie."""
    msg = ("the first test did not reject: no pair can be decided at this risk with these "
           "labels; label more pairs or raise alpha (`--risk`)")
    ties = float(np.mean(np.asarray(y) == "tie")) if len(y) else 0.0
    tie_verdicts = bool(np.nanmax(np.asarray(P)[:, 2], initial=0.0) > 0) if len(P) else False
    if ties > 0 and not tie_verdicts:
        msg += (f". {ties:.0%} of the labeled pairs are ties, and the judge never gives a tie "
                f"verdict (no p(tie) column, or p(tie) 0): every tie counts as an error"
                + (f", more than the risk {alpha:g} allows on its own" if ties > alpha else "")
                + "; give the judge's p(tie) column, or leave ties out of the labels")
    elif ties > 0:
        msg += f" ({ties:.0%} of the labeled pairs are ties)"
    return msg


def _plural(k: int, noun: str) -> str:
    """``1 labeled pair``, ``2 labeled pairs``."""
    return f"{k:,} {noun}{'' if k == 1 else 's'}"


def _too_few(n: int, n_train: int, n_cal: int, need: int, alpha: float, delta: float,
             label_free: bool, train_frac: float) -> str:
    """The refusal of too few labeled pairs, naming the limit that binds: on the label-free
    path only the count calibrating the threshold; on the training-share path the training
    share (the verdict model) and / or the calibration share (the threshold)."""
    at = f"at alpha = {alpha:g}, delta = {delta:g}"
    why = (f"the first fixed-sequence test rejects only when its {need} most confident "
           "pairs hold no error")
    if label_free:
        return (f"{_plural(n, 'labeled pair')}: every labeled pair calibrates the threshold "
                f"(no label orders the pairs), and deciding any pair {at} needs at least "
                f"{need} ({why}): label at least {need - n} more pairs, or raise `alpha` / `delta`")
    parts = []
    if n_train < MIN_TRAINING_PAIRS:
        parts.append(f"the training share that fits the verdict model holds {n_train} "
                     f"(at least {MIN_TRAINING_PAIRS} needed)")
    if n_cal < need:
        parts.append(f"the calibration share holds {n_cal} (deciding any pair {at} needs "
                     f"at least {need}: {why})")
    total = max(math.ceil(MIN_TRAINING_PAIRS / train_frac),
                math.ceil(need / (1 - train_frac)))
    return (f"{_plural(n, 'labeled pair')}, split at random by `train_frac` {train_frac:g} "
            f"(a model of several features, an order effect or start 'likely' is fitted on "
            f"a training share): " + " and ".join(parts) + f"; label more pairs (about "
            f"{total} in all, more to be safe: the split is random)"
            + (", or raise `alpha` / `delta`" if n_cal < need else ", or raise `train_frac`"))


def split_pairs(y, keys, groups, fitted: bool, seed, train_frac, label_free, alpha, delta):
    """``(training rows, calibration rows, rows calibrating the threshold, whether the
    model is fitted on the training rows)``: the split drawn from each pair's identity; the model sees its rows
    in the order of their keys, copies of a key in label / group order (the same fit, bit
    for bit, for any row order). With too few pairs for a training share on the
    label-free path the verdicts are still decided; the model (probabilities and sets
    only) is then fitted on every pair, and the sets hold every verdict."""
    from scoreband.conformal.randomness import canonical_order, row_uniforms

    n = len(y)
    within = (y,) if groups is None else (y, groups)
    train = (row_uniforms(keys, seed, _SPLIT_STREAM, within=within) < train_frac
             if fitted else np.zeros(n, bool))  # nothing to fit: every pair calibrates
    T, Cl = np.flatnonzero(train), np.flatnonzero(~train)
    T = T[canonical_order(np.asarray(keys)[T], tuple(w[T] for w in map(np.asarray, within)))]
    thr_rows = np.arange(n) if label_free else Cl
    need = min_rejectable(alpha, delta)
    few_train = fitted and len(T) < MIN_TRAINING_PAIRS
    if len(thr_rows) < need or (few_train and not label_free):
        raise InputError(_too_few(n, len(T), len(Cl), need, alpha, delta, label_free,
                                  train_frac))
    return T, Cl, thr_rows, not (few_train and label_free)


def set_quantiles(rule, scores, Cl, groups, sets_fitted: bool, n: int,
                   n_train: int, train_frac: float) -> None:
    """The conformal sets' quantile(s) on the calibration share (per group: Mondrian)."""
    names = [POOLED] if groups is None else sorted({str(v) for v in
                                                    np.asarray(groups).astype(str)})
    if not sets_fitted:
        rule.set_q = dict.fromkeys(names, math.inf)
        rule.warnings.append(
            f"{n} labeled pairs: enough to decide pairs (no label orders them), too few for "
            f"informative prediction sets, whose verdict model needs a training share of at "
            f"least {MIN_TRAINING_PAIRS} pairs (here {n_train} at train_frac "
            f"{train_frac:g}): every set holds every verdict, and p_a / p_b / p_tie come from "
            f"a model fitted on every labeled pair (no set guarantee beyond the trivial one); "
            f"label at least {math.ceil(MIN_TRAINING_PAIRS / train_frac)} pairs for sets")
        return
    if groups is None:
        rule.set_q = {POOLED: conformal_quantile(scores[Cl], rule.set_alpha)}
        return
    g = np.asarray(groups).astype(str)
    rule.set_q = {name: conformal_quantile(scores[Cl][g[Cl] == name], rule.set_alpha)
                  for name in names}
    small = [k for k, v in rule.set_q.items() if not math.isfinite(v)]
    if small:
        rule.warnings.append(
            f"group{'s' if len(small) > 1 else ''} {', '.join(map(repr, small[:5]))}"
            + (f" and {len(small) - 5} more" if len(small) > 5 else "")
            + f" {'has' if len(small) == 1 else 'have'} too few calibration pairs for "
            f"sets at {rule.set_alpha:g}: {'its' if len(small) == 1 else 'their'} sets hold "
            "every verdict")


def selective_threshold(rule, u, loss, thr_rows, T, Cl, label_free: bool,
                         grid_size, start: str):
    """The threshold: fixed-sequence tests on pairs whose labels chose nothing; a pair
    that can never be decided (a zero difference) is in no decided set: left out.
    Returns ``(result, the rows it calibrated on, the live training rows)``."""
    alpha, delta = rule.alpha, rule.delta
    live = np.isfinite(u)
    thr_rows, T = thr_rows[live[thr_rows]], T[live[T]]
    need = min_rejectable(alpha, delta)
    if len(thr_rows) < need:
        raise InputError(f"only {_plural(len(thr_rows), 'labeled pair')} of the "
                         f"{'labeled pairs' if label_free else 'calibration share'} can be "
                         f"decided at all (the others have no preference, e.g. a zero "
                         f"difference); deciding any pair at alpha = {alpha:g}, delta = "
                         f"{delta:g} needs at least {need}: label more pairs, or raise "
                         "`alpha` / `delta`")
    uc, lc = u[thr_rows], loss[thr_rows]
    if label_free:
        res = LabelFreeSequence(grid_size, stated=rule.order == "max-prob").control(
            uc, lc, alpha, delta)
        return res, thr_rows, T
    seq = FixedSequence(start, grid_size)
    grid = seq.grid(u[T], len(Cl))
    j0 = seq.first(u[T], loss[T], grid, len(Cl), alpha, delta)
    return {**seq.control(uc, lc, grid, alpha, delta, j0), "grid": grid}, thr_rows, T


def pair_report(rule, r: dict, y, yi, loss, rows, groups, res,
                 label_free: bool, how: dict) -> dict:
    """What the fit measured (the rule file's ``report``)."""
    T, Cl, thr_rows = rows
    P = r["P"]
    best = np.argmax(np.nan_to_num(P, nan=-1), axis=1)
    q = ([rule.set_q.get(POOLED, math.inf)] * len(Cl) if groups is None else
         [rule.set_q[x] for x in np.asarray(groups).astype(str)[Cl]])
    sets = prediction_sets(P[Cl], q, rule.set_method, rule.classes)
    acc = r["u"][thr_rows] <= rule.threshold
    fitted = rule.model.kind != "probs"
    return {
        "n_labeled": int(len(y)), "n_training": int(len(T)), "n_calibration": int(len(Cl)),
        "n_threshold_calibration": int(len(thr_rows)),
        "threshold_calibration": ("every labeled pair (label-free ordering and verdict)"
                                  if label_free else "the calibration share"),
        "order": rule.order, "seed": how["seed"],
        "train_frac": how["train_frac"] if fitted else None,
        "start_rule": ("stated" if rule.order == "max-prob" else "first") if label_free
        else how["start"], "start": int(res["start"]),
        "starts": [int(x) for x in res.get("starts", [res["start"]])],
        "grid_size": int(len(res["grid"])),
        "decided_share": float(acc.mean()),
        "error_among_decided_on_calibration": float(loss[thr_rows][acc].mean())
        if acc.any() else None,
        "accuracy_deciding_all": float(1 - (best[Cl] != yi[Cl]).mean()),
        "set_coverage_on_calibration": float(sets[np.arange(len(Cl)), yi[Cl]].mean()),
        "set_size_on_calibration": float(sets.sum(axis=1).mean())}


def sign_warning(rule, X, y, columns) -> None:
    """Say where the sign of the one feature seems the wrong way round."""
    if rule.order != "abs-feature":
        return
    x = X[:, 0]
    agree = ((x > 0) == (y == "A"))[(x != 0) & (y != "tie")]
    if len(agree) >= 20 and agree.mean() < 0.5:
        rule.warnings.append(
            f"the verdict is A where {columns[0]!r} > 0 (a larger score is the better "
            f"response), but it agrees with the human preference on only "
            f"{agree.mean():.0%} of the labeled pairs: if smaller is better, negate the "
            "column")
