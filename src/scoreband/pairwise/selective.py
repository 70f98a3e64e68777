"""Calibrated pairwise verdicts: prediction sets over {A, B, tie} and selective verdicts
with a guaranteed error rate (SPEC sections 12-13).

A pair is decided (given its verdict) when its uncertainty ``u <= lambda``; the threshold
``lambda`` is chosen by Learn-then-Test (:mod:`scoreband.decisions.ltt`): with loss
``[verdict != human preference]`` the fixed-sequence binomial tests give
``P(error among decided pairs <= alpha) >= 1 - delta`` over the draw of the labeled pairs,
provided the ordering of the pairs (``u``) and their verdicts never looked at the labels the
tests use. Which labeled pairs the tests use depends on whether that ordering needs labels:

* **label-free ordering** (the default where it exists): with the judge's probabilities
  used as they are (``probs``), ``u = 1 - max p`` and the verdict is the most likely label;
  with one antisymmetric feature and the order-fair map (a score difference ``A - B``, a
  judge's ``pair_pref``), the ordering by confidence is ``|x|`` (``u = 1 / (1 + |x|)``) and
  the verdict is ``sign(x)`` (A when ``x > 0``: a larger score is the better response).
  Neither needs a label, so **every** labeled pair calibrates the threshold, and the grid
  of thresholds and the start of the sequence are read from the labeled pairs'
  uncertainties (never from their labels);
* **fitted ordering** (several features, or an order effect with ``symmetric=False``): a
  model must be fitted before pairs can be ordered, so the labeled pairs are split by their
  identity (a hash of each row and the seed, :mod:`scoreband.conformal.randomness`, never
  the position) into a training share (the model, the grid, the start) and a calibration
  share seen by nothing else. Cross-fitting (each half ordered by a model fitted on the
  other) is *not* valid here: the fixed-sequence tests need one ordering fixed before the
  calibration labels are read.

The conformal prediction sets (``P(human preference in set) >= 1 - set_alpha``; per group
with ``groups``: Mondrian) use the verdict model's probabilities: a fitted logistic map is
fitted on the training share and the set quantile computed on the calibration share; given
probabilities are used as they are and every labeled pair calibrates the sets.

>>> import numpy as np, pandas as pd
>>> rng = np.random.default_rng(0)
>>> d = rng.normal(0, 1, 4000)
>>> human = np.where(d + rng.logistic(0, 0.3, 4000) > 0, "A", "B")
>>> df = pd.DataFrame({"diff": d, "human": human})
>>> rule = fit_pairwise_triage(df.iloc[:2000], label_col="human", features=["diff"],
...                            alpha=0.1, delta=0.1)
>>> out = rule.apply(df.iloc[2000:])
>>> dec = out[out.verdict != ""]
>>> bool(len(dec) > 1200), bool((dec.verdict != dec.human).mean() <= 0.1)
(True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.decisions.ltt import (
    accepted_counts,
    choose_start,
    ltt_threshold,
    min_rejectable,
    threshold_grid,
)
from scoreband.errors import InputError, RowError
from scoreband.pairwise.pairs import LABELS, pair_labels
from scoreband.pairwise.sets import (
    SET_METHODS,
    VerdictModel,
    conformal_quantile,
    conformity,
    fit_verdict_model,
    prediction_sets,
    set_labels,
)

__all__ = ["PairRule", "fit_pairwise_triage", "fit_pairwise_arrays", "load_pair_rule",
           "PAIR_RULE_FORMAT", "PAIR_COLUMNS", "ORDERS", "confidence_order", "is_label_free",
           "label_free_threshold", "LABEL_FREE_START_SHARE"]

PAIR_RULE_FORMAT = "scoreband-pairwise-rule"
#: the columns every applied row gets
PAIR_COLUMNS = ("verdict", "p_a", "p_b", "p_tie", "pair_uncertainty", "decided", "pair_set",
                "pair_error")
POOLED = "(all)"
#: how a rule orders pairs by confidence and gives verdicts: ``max-prob`` (u = 1 - max p,
#: the most likely label) or ``abs-feature`` (one antisymmetric feature x: u = 1 / (1 + |x|),
#: the verdict sign(x))
ORDERS = ("max-prob", "abs-feature")
#: the stream of :func:`scoreband.conformal.randomness.row_uniforms` for the split
_SPLIT_STREAM = 61


def _check(alpha, delta, set_alpha, train_frac) -> None:
    for name, v in (("alpha", alpha), ("delta", delta), ("set_alpha", set_alpha),
                    ("train_frac", train_frac)):
        if not (isinstance(v, (int, float)) and 0 < v < 1):
            raise InputError(f"`{name}` must lie in (0, 1), got {v!r}")


@dataclass
class PairRule:
    """A fitted pairwise rule: the verdict model, the set quantile(s), the threshold."""

    model: VerdictModel
    alpha: float
    delta: float
    set_alpha: float
    set_method: str
    classes: list[str]
    threshold: float
    set_q: dict[str, float]
    groups_col: str | None = None
    report: dict = field(default_factory=dict)
    errors: list[RowError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    order: str = "max-prob"

    def decide(self, X, groups=None) -> dict:
        """Arrays for pairs with features ``X``: ``P`` (n, 3), ``verdict``, ``u``,
        ``decided``, ``sets`` (n, 3)."""
        P = self.model.proba(X)
        if len(self.classes) < 3:  # a label no pair had: its mass goes to the others
            live = np.array([c in self.classes for c in LABELS])
            P = np.where(live[None, :], P, 0.0)
            P = P / P.sum(axis=1, keepdims=True)
        ok = np.isfinite(P).all(axis=1)
        u, best = confidence_order(P, X, self.order)
        decided = ok & np.isfinite(u) & (u <= self.threshold)
        if POOLED in self.set_q:
            q = np.full(len(P), self.set_q[POOLED])
        else:
            g = np.asarray(groups).astype(str) if groups is not None else \
                np.full(len(P), "")
            q = np.array([self.set_q.get(x, math.inf) for x in g])
        sets = prediction_sets(np.nan_to_num(P), q, self.set_method, self.classes) & \
            ok[:, None]
        return {"P": P, "verdict": np.where(decided, best, ""), "u": u, "decided": decided,
                "sets": sets, "ok": ok, "verdict_all": best}

    def apply(self, table) -> pd.DataFrame:
        """Every row of ``table`` with :data:`PAIR_COLUMNS` (``verdict`` empty where the
        pair is not decided; ``pair_error`` says why a row could not be judged)."""
        from scoreband.tables import read_table

        df = read_table(table) if isinstance(table, (str, Path)) else table
        X, errs = _features(df, self.model.columns, probs=self.model.kind == "probs")
        g = None
        if self.groups_col is not None:
            if self.groups_col not in df.columns:
                raise InputError(f"the rule has a set per group of column "
                                 f"{self.groups_col!r}, which the table lacks")
            g = df[self.groups_col].astype(str).to_numpy()
        r = self.decide(X, g)
        out = df.copy()
        out["verdict"] = r["verdict"]
        out["p_a"], out["p_b"], out["p_tie"] = r["P"][:, 0], r["P"][:, 1], r["P"][:, 2]
        out["pair_uncertainty"] = r["u"]
        out["decided"] = r["decided"]
        out["pair_set"] = set_labels(r["sets"])
        err = np.full(len(df), "", dtype=object)
        for e in errs:
            err[e.position] = e.reason
        out["pair_error"] = err
        self.last_errors = errs
        return out

    def to_dict(self) -> dict:
        from scoreband._version import __version__

        words = (f"Among the pairs this rule decides, the verdict differs from the human "
                 f"preference at most {self.alpha:.0%} of the time, with probability at least "
                 f"{1 - self.delta:.0%} over the draw of the labeled pairs (Learn-then-Test, "
                 f"fixed-sequence binomial tests); the prediction sets hold the human "
                 f"preference with probability at least {1 - self.set_alpha:.0%} "
                 f"({self.set_method.upper()}"
                 + (f", per group of {self.groups_col!r}" if self.groups_col else "") +
                 "); for pairs drawn like the labeled ones.")
        return {"format": PAIR_RULE_FORMAT, "format_version": 1,
                "scoreband_version": __version__, "threshold": self.threshold,
                "decided_share": self.report.get("decided_share"),
                "risk": self.alpha, "delta": self.delta, "set_alpha": self.set_alpha,
                "set_method": self.set_method, "guarantee": words,
                "classes": self.classes, "set_quantile": self.set_q,
                "groups_col": self.groups_col, "order": self.order,
                "model": self.model.to_dict(),
                "report": self.report,
                "skipped_rows": [str(e) for e in self.errors[:1000]],
                "n_skipped_rows": len(self.errors), "warnings": self.warnings}

    def save(self, path) -> Path:
        from scoreband.json_io import write_json

        write_json(path, self.to_dict())
        return Path(path)


def load_pair_rule(path) -> PairRule:
    """Read a rule written by :meth:`PairRule.save`."""
    from scoreband.json_io import read_json

    doc = read_json(path, what="pairwise rule",
                    missing="write one with `scoreband pairwise-triage ... --out rule.json`",
                    fix="is it a rule written by `scoreband pairwise-triage --out`?")
    if not isinstance(doc, dict) or doc.get("format") != PAIR_RULE_FORMAT:
        raise InputError(f"{path} is not a scoreband pairwise rule")
    try:
        return PairRule(VerdictModel.from_dict(doc["model"]), float(doc["risk"]),
                        float(doc["delta"]), float(doc["set_alpha"]), doc["set_method"],
                        list(doc["classes"]), float(doc["threshold"]),
                        {k: float(v) for k, v in doc["set_quantile"].items()},
                        doc.get("groups_col"), dict(doc.get("report") or {}),
                        order=str(doc.get("order", "max-prob")))
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"{path} is incomplete ({type(e).__name__}: {e}); fit the rule "
                         "again") from None


def confidence_order(P, X, order: str = "max-prob") -> tuple[np.ndarray, np.ndarray]:
    """``(u, verdict)`` per pair: the uncertainty the threshold is set on and the verdict a
    decided pair gets. ``max-prob``: ``u = 1 - max p`` and the most likely label of ``P``
    (n, 3); ``abs-feature``: one antisymmetric feature ``x`` (the first column of ``X``),
    ``u = 1 / (1 + |x|)`` and ``A`` for ``x > 0``, ``B`` for ``x < 0`` (``u`` NaN, never
    decided, at ``x = 0`` or a missing ``x``).

    >>> u, v = confidence_order(None, np.array([[2.0], [-0.5], [0.0]]), "abs-feature")
    >>> [round(float(a), 3) for a in u[:2]], list(v[:2])
    ([0.333, 0.667], ['A', 'B'])
    """
    if order == "abs-feature":
        x = np.asarray(X, float).reshape(len(X), -1)[:, 0]
        live = np.isfinite(x) & (x != 0)
        u = np.where(live, 1.0 / (1.0 + np.abs(np.where(live, x, 0.0))), np.nan)
        return u, np.where(x > 0, "A", "B").astype(object)
    if order != "max-prob":
        raise InputError(f"confidence order {order!r}: choose one of {ORDERS}")
    P = np.asarray(P, float)
    ok = np.isfinite(P).all(axis=1)
    u = np.where(ok, 1.0 - np.nanmax(np.where(ok[:, None], P, 0), axis=1), np.nan)
    return u, np.array(LABELS, dtype=object)[np.argmax(np.nan_to_num(P, nan=-1), axis=1)]


#: where the label-free fixed sequence starts: the first threshold accepting at least this
#: share of the calibration pairs (and at least enough for a test to reject). The first
#: tests, on the few most confident pairs, are the sequence's weakest link: a test on 22
#: pairs rejects (alpha = delta = 0.1) only with no error at all, so where even the most
#: confident pairs err a few percent of the time one early error stops the sequence. Chosen
#: on pair tables before any label of the rule's own calibration draw is read, so the
#: guarantee is untouched (benchmarks/RESULTS.md, round 12: THumB 0.36 -> 0.40 decided, a
#: PASCAL-50S-shaped table 0.67 -> 0.71, the simulated world 0.74 -> 0.78 at 400 labels).
LABEL_FREE_START_SHARE = 0.2
#: the label-free grid: one threshold per this many calibration pairs (5 to 400 thresholds)
LABEL_FREE_GRID_STEP = 5


def label_free_threshold(u, loss, alpha: float, delta: float,
                         grid_size: int | None = None,
                         start_share: float = LABEL_FREE_START_SHARE) -> dict:
    """The Learn-then-Test threshold where the uncertainties ``u`` and the verdicts (whose
    ``loss`` is 1 when wrong) never looked at a label: every pair calibrates; the grid
    (``grid_size`` quantiles of ``u``; default one per :data:`LABEL_FREE_GRID_STEP` pairs,
    5 to 400) and the start (the first threshold accepting at least ``start_share`` of the
    pairs and at least enough for a test to reject,
    :func:`scoreband.decisions.ltt.min_rejectable`) are read from ``u`` alone. Returns
    :func:`scoreband.decisions.ltt.ltt_threshold`'s dict with ``grid`` and ``start``.

    >>> u = np.linspace(0.01, 1, 400); loss = (np.arange(400) % 20 == 0) & (u > 0.7)
    >>> res = label_free_threshold(u, loss, 0.1, 0.1)
    >>> float(res["threshold"]), int((u <= res["start_threshold"]).sum())
    (inf, 80)
    """
    u = np.asarray(u, float)
    if grid_size is None:
        grid_size = int(np.clip(len(u) // LABEL_FREE_GRID_STEP, 5, 400))
    grid = threshold_grid(u, grid_size)
    n_acc = np.searchsorted(np.sort(u), grid, side="right")
    need = max(min_rejectable(alpha, delta), int(math.ceil(start_share * len(u))))
    ok = np.flatnonzero(n_acc >= need)
    j0 = int(ok[0]) if len(ok) else len(grid) - 1
    return {**ltt_threshold(u, loss, grid, alpha, delta, j0), "grid": grid,
            "start_threshold": float(grid[j0])}


def is_label_free(kind: str, n_features: int, symmetric: bool = True) -> bool:
    """Whether pairs can be ordered by confidence and given verdicts without any label:
    the judge's probabilities used as they are, or one antisymmetric feature with the
    order-fair map (see the module docstring)."""
    return kind == "probs" or (kind == "logistic" and n_features == 1 and symmetric)


#: how far a pair's probabilities may sum from 1 (rounding in a written table)
PROB_SUM_TOL = 0.02


def _features(df: pd.DataFrame, columns, probs: bool = False) -> tuple[np.ndarray,
                                                                    list[RowError]]:
    """The feature (or probability) columns as floats; a row with a value that is not a
    finite number - or, for ``probs``, a probability outside [0, 1] or probabilities not
    summing to 1 - is a row error (the pair is not judged), never a verdict."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"column(s) {missing} not in the table (it has "
                         f"{list(df.columns)[:20]})")
    X = np.column_stack([pd.to_numeric(df[c], errors="coerce").to_numpy(float)
                         for c in columns])
    errors = []
    for i in np.flatnonzero(~np.isfinite(X).all(axis=1))[:100000]:
        j = int(np.flatnonzero(~np.isfinite(X[i]))[0])
        cell = df[columns[j]].iloc[i]
        what = "an empty cell" if pd.isna(cell) else repr(str(cell))
        errors.append(RowError(str(i), columns[j], f"{what} is not a finite number: the pair "
                                                   "is not judged", int(i)))
    if probs:
        seen = {e.position for e in errors}
        fin = np.isfinite(X).all(axis=1)
        off = fin & ((X < -1e-9) | (X > 1 + 1e-9)).any(axis=1)
        tot = np.where(fin, X.sum(axis=1), 1.0)
        unsummed = fin & ~off & (np.abs(tot - 1) > PROB_SUM_TOL)
        for i in np.flatnonzero(off | unsummed)[:100000]:
            if int(i) in seen:
                continue
            if off[i]:
                j = int(np.flatnonzero((X[i] < -1e-9) | (X[i] > 1 + 1e-9))[0])
                why = f"{X[i, j]:g} is not a probability (outside [0, 1])"
            else:
                j, why = 0, (f"the probabilities {', '.join(columns)} sum to {tot[i]:.3g}, not "
                             "1: give p(A), p(B)[, p(tie)] of one verdict")
            errors.append(RowError(str(i), columns[j], why + ": the pair is not judged",
                                   int(i)))
    return X, errors


def fit_pairwise_arrays(X, labels, *, columns, kind: str = "logistic", alpha: float = 0.1,
                        delta: float = 0.1, set_alpha: float | None = None,
                        set_method: str = "lac", groups=None, keys=None,
                        train_frac: float = 0.5, seed: int = 0, start: str = "first",
                        grid_size: int | None = None, symmetric: bool = True,
                        label_free: bool | None = None) -> PairRule:
    """Fit on labeled pairs given as arrays (``labels`` in A / B / tie, all labeled).

    ``label_free``: order the pairs and give verdicts without labels, so that every labeled
    pair calibrates the threshold (:func:`is_label_free`; default: wherever possible, with
    ``start="first"``); False: the training-share path (a model fitted on ``train_frac`` of
    the pairs orders them, the rest calibrate). ``start``: where the fixed sequence starts
    (:func:`scoreband.decisions.ltt.choose_start`: ``first`` = the first threshold where
    enough pairs are accepted for a test to reject, ``likely`` = where a test is predicted
    most likely to reject, read from the training share's labels, so it takes the
    training-share path). ``grid_size``: the thresholds tested, quantiles of uncertainties
    the tests never read labels of (default: one per 20 calibration pairs, 5 to 200; one
    per 5, 5 to 400, on the label-free path, which starts at the most confident fifth:
    :func:`label_free_threshold`). On the training-share path, where the sequence starts
    at the first test able to reject, a fine grid over few calibration pairs stops the
    fixed sequence at the first unlucky step: on THumB caption pairs (200 calibration pairs)
    200 thresholds decided 0.18 of the pairs and 10 decided 0.40 at the same guarantee.
    """
    from scoreband.conformal.randomness import array_keys, row_uniforms

    set_alpha = alpha if set_alpha is None else set_alpha
    _check(alpha, delta, set_alpha, train_frac)
    if set_method not in SET_METHODS:
        raise InputError(f"set method {set_method!r}: choose lac or aps")
    X = np.asarray(X, float).reshape(len(labels), -1)
    y = np.asarray(labels, dtype=object)
    n = len(y)
    possible = is_label_free(kind, X.shape[1], symmetric)
    if label_free is None:
        label_free = possible and start == "first"
    elif label_free and not possible:
        raise InputError("a label-free ordering needs the judge's probabilities (`probs`) or "
                         "one feature with the order-fair map; with several features (or "
                         "`symmetric=False`) a model must be fitted on a training share")
    if keys is None:
        keys = array_keys(X)
    fitted = kind != "probs"
    if fitted:
        train = row_uniforms(keys, seed, _SPLIT_STREAM) < train_frac
    else:
        train = np.zeros(n, bool)  # nothing to fit: every pair calibrates
    T, Cl = np.flatnonzero(train), np.flatnonzero(~train)
    # the model sees its rows in the order of their keys: the same fit for any row order
    T = T[np.argsort(np.asarray(keys)[T], kind="stable")]
    thr_rows = np.arange(n) if label_free else Cl
    need = min_rejectable(alpha, delta)
    if (fitted and len(T) < 20) or len(thr_rows) < need:
        where = ("all of them calibrate the threshold" if label_free else
                 f"{len(T)} for training and {len(Cl)} for calibration")
        raise InputError(f"{n} labeled pair(s): {where}; calibration needs at least {need} "
                         f"to decide any pair at alpha = {alpha:g}, delta = {delta:g}"
                         + (" (training at least 20)" if fitted else "")
                         + ": label more pairs, or raise alpha / delta")
    model = fit_verdict_model(X[T], y[T], list(columns), kind=kind, symmetric=symmetric)
    classes = [c for c in LABELS if (y == c).any()]
    rule = PairRule(model, float(alpha), float(delta), float(set_alpha), set_method,
                    classes, -math.inf, {}, None,
                    order="abs-feature" if label_free and fitted else "max-prob")
    r = rule.decide(X)
    P, u = r["P"], r["u"]
    yi = np.array([LABELS.index(c) for c in y])
    best = np.argmax(np.nan_to_num(P, nan=-1), axis=1)
    loss = (np.asarray(r["verdict_all"]) != y).astype(float)

    # 1. conformal sets on the calibration share (per group: Mondrian)
    scores = conformity(P, yi, set_method)
    if groups is None:
        rule.set_q = {POOLED: conformal_quantile(scores[Cl], set_alpha)}
    else:
        g = np.asarray(groups).astype(str)
        rule.set_q = {name: conformal_quantile(scores[Cl][g[Cl] == name], set_alpha)
                      for name in sorted(set(g))}
        small = [k for k, v in rule.set_q.items() if not math.isfinite(v)]
        if small:
            rule.warnings.append(f"group(s) {small[:5]} have too few calibration pairs for "
                                 f"sets at {set_alpha:g}: their sets hold every verdict")

    # 2. the selective threshold: fixed-sequence tests on pairs whose labels chose nothing;
    # a pair that can never be decided (a zero difference) is in no decided set: left out
    live = np.isfinite(u)
    thr_rows, T = thr_rows[live[thr_rows]], T[live[T]]
    if len(thr_rows) < need:
        raise InputError(f"{len(thr_rows)} labeled pair(s) can be decided at all (the others "
                         f"have no preference, e.g. a zero difference); calibration needs at "
                         f"least {need}: label more pairs, or raise alpha / delta")
    uc = u[thr_rows]
    if label_free:
        res = label_free_threshold(uc, loss[thr_rows], alpha, delta, grid_size)
        grid, j0 = res["grid"], res["start"]
    else:
        if grid_size is None:
            grid_size = int(np.clip(len(Cl) // 20, 5, 200))
        grid = threshold_grid(u[T], grid_size)
        nT, kT = accepted_counts(u[T], loss[T], grid)
        j0 = choose_start(nT / len(T), nT, kT, len(Cl), alpha, delta, rule=start)
        res = ltt_threshold(uc, loss[thr_rows], grid, alpha, delta, j0)
    rule.threshold = res["threshold"]
    if res["index"] < 0:
        rule.warnings.append("the first test did not reject: no pair can be decided at this "
                             "risk with these labels; label more pairs or raise alpha")
    sets = prediction_sets(P[Cl], [rule.set_q.get(POOLED, math.inf)] * len(Cl)
                           if groups is None else
                           [rule.set_q[x] for x in np.asarray(groups).astype(str)[Cl]],
                           set_method, classes)
    acc = uc <= rule.threshold
    rule.report = {
        "n_labeled": int(n), "n_training": int(len(T)), "n_calibration": int(len(Cl)),
        "n_threshold_calibration": int(len(thr_rows)),
        "threshold_calibration": ("every labeled pair (label-free ordering and verdict)"
                                  if label_free else "the calibration share"),
        "order": rule.order, "seed": seed, "train_frac": train_frac if fitted else None,
        "start_rule": "first" if label_free else start, "start": int(j0),
        "grid_size": int(len(grid)),
        "decided_share": float(acc.mean()),
        "error_among_decided_on_calibration": float(loss[thr_rows][acc].mean())
        if acc.any() else None,
        "accuracy_deciding_all": float(1 - (best[Cl] != yi[Cl]).mean()),
        "set_coverage_on_calibration": float(sets[np.arange(len(Cl)), yi[Cl]].mean()),
        "set_size_on_calibration": float(sets.sum(axis=1).mean()),
        "labels": {c: int((y == c).sum()) for c in LABELS},
    }
    if rule.order == "abs-feature":
        x = X[:, 0]
        agree = ((x > 0) == (y == "A"))[(x != 0) & (y != "tie")]
        if len(agree) >= 20 and agree.mean() < 0.5:
            rule.warnings.append(
                f"the verdict is A where {columns[0]!r} > 0 (a larger score is the better "
                f"response), but it agrees with the human preference on only "
                f"{agree.mean():.0%} of the labeled pairs: if smaller is better, negate the "
                "column")
    return rule


def fit_pairwise_triage(table, *, label_col: str | None = None, votes=None, features=None,
                        probs=None, alpha: float = 0.1, delta: float = 0.1,
                        set_alpha: float | None = None, set_method: str = "lac",
                        groups: str | None = None, train_frac: float = 0.5, seed: int = 0,
                        start: str = "first", symmetric: bool = True,
                        label_free: bool | None = None) -> PairRule:
    """Fit a pairwise rule on a labeled pair table (a DataFrame or a path).

    ``label_col``: the human preference (A / B / tie) or ``votes`` (vote-count columns, the
    majority is the label); ``features``: antisymmetric feature columns (a score difference,
    a judge's preference) for the logistic verdict model, or ``probs``: columns of p(A),
    p(B)[, p(tie)] used as they are; ``symmetric=False``: the logistic model may learn an
    order effect (:func:`scoreband.pairwise.sets.fit_verdict_model`); ``label_free``: see
    :func:`fit_pairwise_arrays`. Unlabeled rows are left out; rows with a verdict other
    than A / B / tie or a missing feature are reported (``rule.errors``) and skipped.
    """
    from scoreband.conformal.randomness import frame_keys
    from scoreband.tables import read_table

    df = read_table(table) if isinstance(table, (str, Path)) else table.reset_index(drop=True)
    if (features is None) == (probs is None):
        raise InputError("give either `features` (columns for the logistic verdict model) or "
                         "`probs` (columns of p(A), p(B)[, p(tie)]), not both or neither")
    cols = list(features if features is not None else probs)
    lab, _, errs = pair_labels(df, label_col=label_col, votes=votes)
    X, ferrs = _features(df, cols, probs=probs is not None)
    bad = {e.position for e in ferrs}
    use = (lab != "") & np.array([i not in bad for i in range(len(df))])
    g = None
    if groups is not None:
        if groups not in df.columns:
            raise InputError(f"groups column {groups!r} not in the table")
        g = df[groups].astype(str).to_numpy()[use]
    rule = fit_pairwise_arrays(X[use], lab[use], columns=cols,
                               kind="logistic" if features is not None else "probs",
                               alpha=alpha, delta=delta, set_alpha=set_alpha,
                               set_method=set_method, groups=g,
                               keys=frame_keys(df)[use], train_frac=train_frac, seed=seed,
                               start=start, symmetric=symmetric, label_free=label_free)
    rule.groups_col = groups
    rule.errors = errs + [e for e in ferrs if lab[e.position] != ""]
    rule.report["n_unlabeled_rows"] = int((lab == "").sum())
    return rule
