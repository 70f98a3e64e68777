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
from typing import ClassVar

import numpy as np
import pandas as pd

from scoreband.decisions.pair_fit import (
    MIN_TRAINING_PAIRS,
    POOLED,
    nothing_decided,
    pair_report,
    selective_threshold,
    set_quantiles,
    sign_warning,
    split_pairs,
)
from scoreband.decisions.pair_inputs import PROB_SUM_TOL as PROB_SUM_TOL
from scoreband.decisions.pair_inputs import fit_columns_problem, no_usable_pair, rule_inputs
from scoreband.decisions.risk import VerdictLoss
from scoreband.decisions.rule import Decision, Rule, register_rule
from scoreband.decisions.rulefile import as_float, as_mapping, read_key
from scoreband.errors import ERROR_COLUMN, InputError, RowError
from scoreband.pairwise.pairs import LABELS, pair_labels
from scoreband.pairwise.sets import (
    SET_METHODS,
    VerdictModel,
    conformity,
    fit_verdict_model,
    prediction_sets,
    set_labels,
)
from scoreband.textsafe import complement_text, share_text

__all__ = ["PairRule", "fit_pairwise_triage", "fit_pairwise_arrays", "rule_inputs",
           "PAIR_RULE_FORMAT", "PAIR_COLUMNS", "VERDICT_ERROR", "ORDERS", "confidence_order",
           "is_label_free", "MIN_TRAINING_PAIRS", "PROB_SUM_TOL"]

PAIR_RULE_FORMAT = "scoreband-pairwise-rule"
#: the pairwise rule files this scoreband writes and reads
PAIR_RULE_VERSION = 1
#: why an applied row got no verdict (its own column: a judged table's ``pair_error``, the
#: judge's reason, is kept beside it)
VERDICT_ERROR = ERROR_COLUMN["pairwise-rule"]
#: the columns every applied row gets (a table that has one already is refused)
PAIR_COLUMNS = ("verdict", "p_a", "p_b", "p_tie", "pair_uncertainty", "decided", "pair_set",
                VERDICT_ERROR)
#: how a rule orders pairs by confidence and gives verdicts: ``max-prob`` (u = 1 - max p,
#: the most likely label) or ``abs-feature`` (one antisymmetric feature x: u = 1 / (1 + |x|),
#: the verdict sign(x))
ORDERS = ("max-prob", "abs-feature")


def _check(alpha, delta, set_alpha, train_frac) -> None:
    for name, v in (("alpha", alpha), ("delta", delta), ("set_alpha", set_alpha),
                    ("train_frac", train_frac)):
        if not (isinstance(v, (int, float)) and 0 < v < 1):
            raise InputError(f"`{name}` must lie in (0, 1), got {v!r}")


@register_rule
@dataclass(eq=False)
class PairRule(Rule):
    """A fitted pairwise rule: the verdict model, the set quantile(s), the threshold.

    ``apply(table)`` gives every row and column of a table (a DataFrame, or a path: its
    cells read as text) with :data:`PAIR_COLUMNS` added through the one rule stage:
    ``verdict`` empty where the pair is not decided, ``verdict_error`` saying why a row
    could not be judged (such a row gets no verdict, no probabilities and an empty set); a
    table that already has one of these columns is refused."""

    format: ClassVar[str] = PAIR_RULE_FORMAT
    version: ClassVar[int] = PAIR_RULE_VERSION
    what: ClassVar[str] = "pairwise rule"
    kind: ClassVar[str] = "pairwise"
    job: ClassVar[str] = "pairwise-rule"
    refit: ClassVar[str] = "scoreband triage LABELED --pairwise ... --out rule.json"
    error_column: ClassVar[str] = VERDICT_ERROR
    label: ClassVar[str] = "deciding pairs"
    decision_column: ClassVar[str] = "decided"

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

    def decide(self, X, groups=None, bad=None) -> dict:
        """Arrays for pairs with features ``X``: ``P`` (n, 3), ``verdict``, ``u``,
        ``decided``, ``sets`` (n, 3). ``bad``: rows that are not judged (a reported row
        error: a probability outside [0, 1], probabilities not summing to 1): no
        probabilities, no verdict, an empty set."""
        # the judge's probabilities are used as they are: a verdict no labeled pair had
        # keeps its mass (a fitted model gives such a class 0 itself)
        P = self.model.proba(X)
        if bad is not None:
            P[np.asarray(bad, bool)] = np.nan
        ok = np.isfinite(P).all(axis=1)
        u, best = confidence_order(P, X, self.order)
        u = np.where(ok, u, np.nan)
        decided = ok & np.isfinite(u) & (u <= self.threshold)
        # a verdict no labeled pair had was never tested: such pairs are not drawn like
        # the labeled ones, so the guarantee says nothing of them - escalated, and said
        never = [c for c in LABELS if (self.report.get("labels") or {}).get(c, 1) == 0]
        untested = decided & np.isin(best, never) if never else np.zeros(len(P), bool)
        decided &= ~untested
        unseen: list[str] = []
        if POOLED in self.set_q:
            q = np.full(len(P), self.set_q[POOLED])
        else:
            g = np.asarray(groups).astype(str) if groups is not None else \
                np.full(len(P), "")
            q = np.array([self.set_q.get(x, math.inf) for x in g])
            unseen = sorted(set(g[ok].tolist()) - set(self.set_q))
        sets = prediction_sets(np.nan_to_num(P), q, self.set_method, self.classes) & \
            ok[:, None]
        return {"P": P, "verdict": np.where(decided, best, ""), "u": u, "decided": decided,
                "sets": sets, "ok": ok, "verdict_all": best, "unseen_groups": unseen,
                "untested": {c: int((untested & (best == c)).sum()) for c in never
                             if (untested & (best == c)).any()}}

    def untested_note(self, untested: dict) -> str | None:
        """What a table is told when the rule would decide pairs with a verdict no labeled
        pair had: they are escalated (the guarantee was never tested on such a verdict)."""
        if not untested:
            return None
        labels = self.report.get("labels") or {}
        said = ", ".join(f"{n} pair(s) {c!r}" for c, n in untested.items())
        return (f"the rule would decide {said}: a verdict no labeled pair had (labels: "
                f"{', '.join(f'{k} {v}' for k, v in labels.items())}), so its "
                "guarantee was never tested there and they are not drawn like the labeled "
                "pairs; they are escalated (decided False). Label a random sample of the "
                "pairs, these included, and fit the rule again")

    def unseen_note(self, unseen) -> str | None:
        """What a table is told when its pairs hold groups the rule has no set quantile for
        (no labeled pair of that group): their sets hold every verdict."""
        if not unseen:
            return None
        known = [k for k in self.set_q if k != POOLED]
        return (f"group(s) {', '.join(repr(x) for x in unseen[:5])}"
                + (f" and {len(unseen) - 5} more" if len(unseen) > 5 else "")
                + f" of column {self.groups_col!r} had no labeled pairs when the rule was "
                f"fitted (its groups: {', '.join(repr(k) for k in known[:8])}): their "
                "prediction sets hold every verdict (the verdicts and the threshold are "
                "pooled and still apply)")

    # -------------------------------------------------------------- on the row engine
    def outputs(self) -> dict:
        return {"verdict": "", "p_a": np.nan, "p_b": np.nan, "p_tie": np.nan,
                "pair_uncertainty": np.nan, "decided": False, "pair_set": ""}

    def decide_frame(self, df: pd.DataFrame, offset: int = 0) -> Decision:
        """A row that cannot be judged (a missing or non-numeric feature, probabilities
        outside [0, 1] or not summing to 1) gets no verdict, ``decided`` False, empty
        probabilities and set, and the reason in ``verdict_error`` (the judge's reason
        where its ``pair_error`` has one)."""
        X, errs = rule_inputs(df, self.model.columns, probs=self.model.kind == "probs",
                              offset=offset)
        g = None
        if self.groups_col is not None:
            if self.groups_col not in df.columns:
                raise InputError(f"the rule has a set per group of column "
                                 f"{self.groups_col!r}, which the table lacks")
            g = df[self.groups_col].astype(str).to_numpy()
        bad = np.zeros(len(df), bool)
        bad[[e.position for e in errs]] = True
        res = self.decide(X, g, bad=bad)
        notes = [n for n in (self.unseen_note(res["unseen_groups"]),
                             self.untested_note(res["untested"])) if n is not None]
        why = np.full(len(df), "", dtype=object)
        for e in errs:
            why[e.position] = e.reason
        P = res["P"]
        cols = {"verdict": res["verdict"].astype(object), "p_a": P[:, 0], "p_b": P[:, 1],
                "p_tie": P[:, 2], "pair_uncertainty": res["u"],
                "decided": res["decided"].astype(bool), "pair_set": set_labels(res["sets"]),
                VERDICT_ERROR: why}
        return Decision(cols, errs, int((~bad).sum()),
                        {"decided": int(res["decided"].sum())}, notes)

    def components(self, source: Path | None = None) -> dict:
        return {"pairwise_rule": {"risk": self.alpha, "delta": self.delta,
                                  "threshold": self.threshold, "order": self.order}}

    # -------------------------------------------------------------- persistence
    def to_dict(self) -> dict:
        words = (f"Among the pairs this rule decides, the verdict differs from the human "
                 f"preference at most {share_text(self.alpha)} of the time, with probability at least "
                 f"{complement_text(self.delta)} over the draw of the labeled pairs (Learn-then-Test, "
                 f"fixed-sequence binomial tests); the prediction sets hold the human "
                 f"preference with probability at least {complement_text(self.set_alpha)} "
                 f"({self.set_method.upper()}"
                 + (f", per group of {self.groups_col!r}" if self.groups_col else "") +
                 "); for pairs drawn like the labeled ones.")
        return {**self.head(), "threshold": self.threshold,
                "decided_share": self.report.get("decided_share"),
                "risk": self.alpha, "delta": self.delta, "set_alpha": self.set_alpha,
                "set_method": self.set_method, "guarantee": words,
                "classes": self.classes, "set_quantile": self.set_q,
                "groups_col": self.groups_col, "order": self.order,
                "model": self.model.to_dict(), "report": self.report,
                "skipped_rows": [str(e) for e in self.errors[:1000]],
                "n_skipped_rows": len(self.errors), "warnings": self.warnings}

    @classmethod
    def from_dict(cls, doc: dict, where: str = "the rule") -> PairRule:
        """The rule of a checked rule document: an unknown model kind or a damaged key is
        an :class:`InputError` naming ``where``, the key and the fix."""
        def key(k, parse, **kw):
            return read_key(doc, k, parse, where, **kw)

        return cls(key("model", VerdictModel.from_dict), key("risk", _prob),
                   key("delta", _prob), key("set_alpha", _prob),
                   key("set_method", _one_of(SET_METHODS)), key("classes", _labels),
                   key("threshold", as_float),
                   key("set_quantile", lambda v: {str(k): as_float(x)
                                                  for k, x in as_mapping(v).items()}),
                   key("groups_col", _column, default=None),
                   key("report", lambda v: dict(as_mapping(v or {})), default={}),
                   order=key("order", _one_of(ORDERS), default="max-prob"))


def _prob(v):
    x = as_float(v)
    if not 0 < x < 1:
        raise ValueError(f"expected a number in (0, 1), got {v!r}")
    return x


def _labels(v):
    if not isinstance(v, list) or not v or not all(c in LABELS for c in v):
        raise ValueError(f"expected a list of labels among {', '.join(LABELS)}")
    return list(v)


def _one_of(choices):
    def parse(v):
        if v not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return v
    return parse


def _column(v):
    if v is not None and not isinstance(v, str):
        raise TypeError("expected a column name")
    return v


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


def is_label_free(kind: str, n_features: int, symmetric: bool = True) -> bool:
    """Whether pairs can be ordered by confidence and given verdicts without any label:
    the judge's probabilities used as they are, or one antisymmetric feature with the
    order-fair map (see the module docstring)."""
    return kind == "probs" or (kind == "logistic" and n_features == 1 and symmetric)


def fit_pairwise_arrays(X, labels, *, columns, kind: str = "logistic", alpha: float = 0.1,
                        delta: float = 0.1, set_alpha: float | None = None,
                        set_method: str = "lac", groups=None, keys=None,
                        train_frac: float = 0.5, seed: int = 0, start: str = "first",
                        grid_size: int | None = None, symmetric: bool = True,
                        label_free: bool | None = None) -> PairRule:
    """Fit on labeled pairs given as arrays (``labels`` in A / B / tie, all labeled).

    ``label_free``: order the pairs and give verdicts without labels, so that every labeled
    pair calibrates the threshold (:func:`is_label_free`; default: wherever possible, with
    ``start="first"``); False: a model fitted on ``train_frac`` of the pairs orders them,
    the rest calibrate. ``start`` and ``grid_size``: the fixed sequence
    (:class:`scoreband.decisions.risk.FixedSequence`, read from the training share, or
    :class:`~scoreband.decisions.risk.LabelFreeSequence`, read from the uncertainties
    alone). On the training-share path a fine grid over few calibration pairs stops the
    sequence at the first unlucky step: on THumB caption pairs (200 calibration pairs) 200
    thresholds decided 0.18 of the pairs and 10 decided 0.40 at the same guarantee.
    """
    from scoreband.conformal.randomness import array_keys, canonical_order

    set_alpha = alpha if set_alpha is None else set_alpha
    X, y = _check_pairs(X, labels, kind, alpha, delta, set_alpha, train_frac, set_method)
    label_free = _path(label_free, kind, X.shape[1], symmetric, start)
    keys = array_keys(X) if keys is None else keys
    T, Cl, thr_rows, sets_fitted = split_pairs(y, keys, groups, kind != "probs", seed,
                                                train_frac, label_free, alpha, delta)
    fit_rows = T if sets_fitted else canonical_order(keys, (y,) if groups is None
                                                     else (y, groups))
    model = fit_verdict_model(X[fit_rows], y[fit_rows], list(columns), kind=kind,
                              symmetric=symmetric)
    # the verdicts a pair may get: those labeled, and every one the judge's probabilities
    # give (used as they are: a verdict no labeled pair had is not dropped)
    classes = [c for c in LABELS if (y == c).any() or
               (kind == "probs" and (c != "tie" or X.shape[1] == 3))]
    rule = PairRule(model, float(alpha), float(delta), float(set_alpha), set_method,
                    classes, -math.inf, {}, None, order="abs-feature"
                    if label_free and kind != "probs" else "max-prob")
    r = rule.decide(X)
    loss = VerdictLoss()(r["verdict_all"], y)
    yi = np.array([LABELS.index(c) for c in y])
    set_quantiles(rule, conformity(r["P"], yi, set_method), Cl, groups, sets_fitted,
                   len(y), len(T), train_frac)
    res, thr_rows, T = selective_threshold(rule, r["u"], loss, thr_rows, T, Cl,
                                            label_free, grid_size, start)
    rule.threshold = res["threshold"]
    if res["index"] < 0:
        rule.warnings.append(nothing_decided(y, r["P"], alpha))
    rule.report = pair_report(rule, r, y, yi, loss, (T, Cl, thr_rows), groups, res,
                               label_free, {"seed": seed, "train_frac": train_frac,
                                            "start": start})
    rule.report["sets_fitted"] = bool(sets_fitted)
    rule.report["labels"] = {c: int((y == c).sum()) for c in LABELS}
    sign_warning(rule, X, y, columns)
    return rule


def _check_pairs(X, labels, kind, alpha, delta, set_alpha, train_frac, set_method):
    _check(alpha, delta, set_alpha, train_frac)
    if set_method not in SET_METHODS:
        raise InputError(f"set method {set_method!r}: choose lac or aps")
    if len(labels) == 0:
        raise InputError("no labeled pair (a human preference A / B / tie with usable "
                         f"{'probabilities' if kind == 'probs' else 'features'}) to fit on: "
                         "label some pairs")
    return (np.asarray(X, float).reshape(len(labels), -1),
            np.asarray(labels, dtype=object))


def _path(label_free, kind: str, n_features: int, symmetric: bool, start: str) -> bool:
    """Whether the label-free path is taken (by default wherever it exists, with start
    ``first``); asking for it where it does not exist is refused."""
    possible = is_label_free(kind, n_features, symmetric)
    if label_free is None:
        return possible and start == "first"
    if label_free and not possible:
        raise InputError("a label-free ordering needs the judge's probabilities (`probs`) or "
                         "one feature with the order-fair map; with several features (or "
                         "`symmetric=False`) a model must be fitted on a training share")
    return bool(label_free)


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
    X, ferrs = rule_inputs(df, cols, probs=probs is not None)
    bad = np.zeros(len(df), bool)
    bad[[e.position for e in ferrs]] = True
    labeled = lab != ""
    use = labeled & ~bad
    if labeled.any():
        why = fit_columns_problem(df, cols, X, labeled, probs is not None)
        if why is None and not use.any():
            why = no_usable_pair(cols, X, labeled, [e for e in ferrs if labeled[e.position]],
                                  probs is not None)
        if why is not None:
            raise InputError(why)
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
