"""Calibrated pairwise verdicts: prediction sets over {A, B, tie} and selective verdicts
with a guaranteed error rate (SPEC sections 12-13).

The labeled pairs are split by their identity (a hash of each row and the seed,
:mod:`scoreband.conformal.randomness`, never the position) into a **training share** that
fits the verdict model (:mod:`scoreband.pairwise.sets`), the grid of thresholds and where the
fixed sequence starts, and a **calibration share** seen by nothing else, on which

* the conformal quantile of the prediction sets is computed (per group with ``groups``):
  ``P(human preference in set) >= 1 - set_alpha``;
* the selective threshold is chosen by Learn-then-Test (:mod:`scoreband.decisions.ltt`):
  a pair is decided (its verdict the most likely label) when ``u = 1 - max p <= lambda``;
  with loss ``[verdict != human preference]`` the fixed-sequence binomial tests give
  ``P(error among decided pairs <= alpha) >= 1 - delta`` over the draw of the labeled pairs.

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
           "PAIR_RULE_FORMAT", "PAIR_COLUMNS"]

PAIR_RULE_FORMAT = "scoreband-pairwise-rule"
#: the columns every applied row gets
PAIR_COLUMNS = ("verdict", "p_a", "p_b", "p_tie", "pair_uncertainty", "decided", "pair_set",
                "pair_error")
POOLED = "(all)"
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

    def decide(self, X, groups=None) -> dict:
        """Arrays for pairs with features ``X``: ``P`` (n, 3), ``verdict``, ``u``,
        ``decided``, ``sets`` (n, 3)."""
        P = self.model.proba(X)
        if len(self.classes) < 3:  # a label no pair had: its mass goes to the others
            live = np.array([c in self.classes for c in LABELS])
            P = np.where(live[None, :], P, 0.0)
            P = P / P.sum(axis=1, keepdims=True)
        ok = np.isfinite(P).all(axis=1)
        u = np.where(ok, 1.0 - np.nanmax(np.where(ok[:, None], P, 0), axis=1), np.nan)
        best = np.array(LABELS, dtype=object)[np.argmax(np.nan_to_num(P, nan=-1), axis=1)]
        decided = ok & (u <= self.threshold)
        if POOLED in self.set_q:
            q = np.full(len(P), self.set_q[POOLED])
        else:
            g = np.asarray(groups).astype(str) if groups is not None else \
                np.full(len(P), "")
            q = np.array([self.set_q.get(x, math.inf) for x in g])
        sets = prediction_sets(np.nan_to_num(P), q, self.set_method, self.classes) & \
            ok[:, None]
        return {"P": P, "verdict": np.where(decided, best, ""), "u": u, "decided": decided,
                "sets": sets, "ok": ok}

    def apply(self, table) -> pd.DataFrame:
        """Every row of ``table`` with :data:`PAIR_COLUMNS` (``verdict`` empty where the
        pair is not decided; ``pair_error`` says why a row could not be judged)."""
        from scoreband.tables import read_table

        df = read_table(table) if isinstance(table, (str, Path)) else table
        X, errs = _features(df, self.model.columns)
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
                "groups_col": self.groups_col, "model": self.model.to_dict(),
                "report": self.report,
                "skipped_rows": [str(e) for e in self.errors[:1000]],
                "n_skipped_rows": len(self.errors), "warnings": self.warnings}

    def save(self, path) -> Path:
        from scoreband.files import write_json

        write_json(path, self.to_dict())
        return Path(path)


def load_pair_rule(path) -> PairRule:
    """Read a rule written by :meth:`PairRule.save`."""
    from scoreband.files import read_json

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
                        doc.get("groups_col"), dict(doc.get("report") or {}))
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"{path} is incomplete ({type(e).__name__}: {e}); fit the rule "
                         "again") from None


def _features(df: pd.DataFrame, columns) -> tuple[np.ndarray, list[RowError]]:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"column(s) {missing} not in the table (it has "
                         f"{list(df.columns)[:20]})")
    X = np.column_stack([pd.to_numeric(df[c], errors="coerce").to_numpy(float)
                         for c in columns])
    errors = []
    for i in np.flatnonzero(~np.isfinite(X).all(axis=1))[:100000]:
        j = int(np.flatnonzero(~np.isfinite(X[i]))[0])
        errors.append(RowError(str(i), columns[j], f"{df[columns[j]].iloc[i]!r} is not a "
                                                   "finite number: the pair is not judged",
                               int(i)))
    return X, errors


def fit_pairwise_arrays(X, labels, *, columns, kind: str = "logistic", alpha: float = 0.1,
                        delta: float = 0.1, set_alpha: float | None = None,
                        set_method: str = "lac", groups=None, keys=None,
                        train_frac: float = 0.5, seed: int = 0, start: str = "first",
                        grid_size: int | None = None, symmetric: bool = True) -> PairRule:
    """Fit on labeled pairs given as arrays (``labels`` in A / B / tie, all labeled).

    ``start``: where the fixed sequence starts (:func:`scoreband.decisions.ltt.choose_start`:
    ``first`` = where enough training-share pairs are accepted for a test to reject,
    ``likely`` = where a test is predicted most likely to reject). ``grid_size``: the
    thresholds tested (default: one per 20 calibration pairs, 5 to 200; read from the
    counts only). A fine grid over few calibration pairs stops the fixed sequence at the
    first unlucky step: on THumB caption pairs (200 calibration pairs) 200 thresholds
    decided 0.18 of the pairs and 10 decided 0.40 at the same guarantee.
    """
    from scoreband.conformal.randomness import array_keys, row_uniforms

    set_alpha = alpha if set_alpha is None else set_alpha
    _check(alpha, delta, set_alpha, train_frac)
    if set_method not in SET_METHODS:
        raise InputError(f"set method {set_method!r}: choose lac or aps")
    X = np.asarray(X, float).reshape(len(labels), -1)
    y = np.asarray(labels, dtype=object)
    n = len(y)
    if keys is None:
        keys = array_keys(X)
    train = row_uniforms(keys, seed, _SPLIT_STREAM) < train_frac
    T, Cl = np.flatnonzero(train), np.flatnonzero(~train)
    # the model sees its rows in the order of their keys: the same fit for any row order
    T = T[np.argsort(np.asarray(keys)[T], kind="stable")]
    need = min_rejectable(alpha, delta)
    if len(T) < 20 or len(Cl) < need:
        raise InputError(f"{n} labeled pair(s): {len(T)} for training and {len(Cl)} for "
                         f"calibration; calibration needs at least {need} to decide any pair "
                         f"at alpha = {alpha:g}, delta = {delta:g} (training at least 20): "
                         "label more pairs, or raise alpha / delta")
    model = fit_verdict_model(X[T], y[T], list(columns), kind=kind, symmetric=symmetric)
    classes = [c for c in LABELS if (y == c).any()]
    rule = PairRule(model, float(alpha), float(delta), float(set_alpha), set_method,
                    classes, -math.inf, {}, None)
    r = rule.decide(X)
    P, u = r["P"], r["u"]
    yi = np.array([LABELS.index(c) for c in y])
    best = np.argmax(P, axis=1)
    loss = (best != yi).astype(float)

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

    # 2. the selective threshold: grid and start from the training share, test on the rest
    if grid_size is None:
        grid_size = int(np.clip(len(Cl) // 20, 5, 200))
    grid = threshold_grid(u[T], grid_size)
    nT, kT = accepted_counts(u[T], loss[T], grid)
    j0 = choose_start(nT / len(T), nT, kT, len(Cl), alpha, delta, rule=start)
    res = ltt_threshold(u[Cl], loss[Cl], grid, alpha, delta, j0)
    rule.threshold = res["threshold"]
    if res["index"] < 0:
        rule.warnings.append("the first test did not reject: no pair can be decided at this "
                             "risk with these labels; label more pairs or raise alpha")
    sets = prediction_sets(P[Cl], [rule.set_q.get(POOLED, math.inf)] * len(Cl)
                           if groups is None else
                           [rule.set_q[x] for x in np.asarray(groups).astype(str)[Cl]],
                           set_method, classes)
    acc = u[Cl] <= rule.threshold
    rule.report = {
        "n_labeled": int(n), "n_training": int(len(T)), "n_calibration": int(len(Cl)),
        "seed": seed, "train_frac": train_frac, "start_rule": start, "start": int(j0),
        "grid_size": int(len(grid)),
        "decided_share": float(acc.mean()),
        "error_among_decided_on_calibration": float(loss[Cl][acc].mean()) if acc.any()
        else None,
        "accuracy_deciding_all": float(1 - loss[Cl].mean()),
        "set_coverage_on_calibration": float(sets[np.arange(len(Cl)), yi[Cl]].mean()),
        "set_size_on_calibration": float(sets.sum(axis=1).mean()),
        "labels": {c: int((y == c).sum()) for c in LABELS},
    }
    return rule


def fit_pairwise_triage(table, *, label_col: str | None = None, votes=None, features=None,
                        probs=None, alpha: float = 0.1, delta: float = 0.1,
                        set_alpha: float | None = None, set_method: str = "lac",
                        groups: str | None = None, train_frac: float = 0.5, seed: int = 0,
                        start: str = "first", symmetric: bool = True) -> PairRule:
    """Fit a pairwise rule on a labeled pair table (a DataFrame or a path).

    ``label_col``: the human preference (A / B / tie) or ``votes`` (vote-count columns, the
    majority is the label); ``features``: antisymmetric feature columns (a score difference,
    a judge's preference) for the logistic verdict model, or ``probs``: columns of p(A),
    p(B)[, p(tie)] used as they are; ``symmetric=False``: the logistic model may learn an
    order effect (:func:`scoreband.pairwise.sets.fit_verdict_model`). Unlabeled rows are left out; rows with a verdict other
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
    X, ferrs = _features(df, cols)
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
                               start=start, symmetric=symmetric)
    rule.groups_col = groups
    rule.errors = errs + [e for e in ferrs if lab[e.position] != ""]
    rule.report["n_unlabeled_rows"] = int((lab == "").sum())
    return rule
