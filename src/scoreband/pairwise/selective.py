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
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.decisions.ltt import (
    TOP_BLOCK_RESOLUTION,
    accepted_counts,
    choose_start,
    label_free_start,
    ltt_threshold,
    min_rejectable,
    threshold_grid,
)
from scoreband.engine.cells import cell_text
from scoreband.engine.rows import Stage
from scoreband.errors import ERROR_COLUMN, InputError, RowError
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

__all__ = ["PairRule", "PairStage", "pair_stage", "fit_pairwise_triage",
           "fit_pairwise_arrays", "load_pair_rule", "rule_inputs", "PAIR_RULE_FORMAT",
           "PAIR_COLUMNS", "VERDICT_ERROR", "ORDERS", "confidence_order", "is_label_free",
           "label_free_threshold", "LABEL_FREE_START_SHARE", "MIN_TRAINING_PAIRS",
           "PROB_SUM_TOL"]

PAIR_RULE_FORMAT = "scoreband-pairwise-rule"
#: why an applied row got no verdict (its own column: a judged table's ``pair_error``, the
#: judge's reason, is kept beside it)
VERDICT_ERROR = ERROR_COLUMN["pairwise-rule"]
#: the columns every applied row gets (a table that has one already is refused)
PAIR_COLUMNS = ("verdict", "p_a", "p_b", "p_tie", "pair_uncertainty", "decided", "pair_set",
                VERDICT_ERROR)
#: the fewest labeled pairs a verdict model is fitted on (its training share)
MIN_TRAINING_PAIRS = 20
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
                "sets": sets, "ok": ok, "verdict_all": best, "unseen_groups": unseen}

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

    def apply(self, table, on_warning=None) -> pd.DataFrame:
        """Every row and column of ``table`` (a DataFrame, or a path: its cells read as
        text) with :data:`PAIR_COLUMNS` added: ``verdict`` empty where the pair is not
        decided, ``verdict_error`` saying why a row could not be judged (such a row gets no
        verdict, no probabilities and an empty set). The same :class:`PairStage` on the row
        engine as the command line; a table that already has one of these columns is
        refused. The row errors are kept in ``last_errors``, the warnings (pairs of a
        group the rule has no labeled pair of) in ``last_warnings`` and sent to
        ``on_warning``."""
        from scoreband.engine.rows import run_rows
        from scoreband.tables import read_table

        df = read_table(table, text=True) if isinstance(table, (str, Path)) else table
        stage = PairStage(self, on_warning=on_warning)
        run = run_rows(df, stage)
        self.last_errors = stage.errors
        self.last_warnings = stage.warnings
        return run.table

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
        return {"format": PAIR_RULE_FORMAT, "format_version": PAIR_RULE_VERSION,
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


#: the pairwise rule files this scoreband writes and reads
PAIR_RULE_VERSION = 1


def load_pair_rule(path) -> PairRule:
    """Read a rule written by :meth:`PairRule.save`: another ``format`` or
    ``format_version``, an unknown model kind or a damaged key is an :class:`InputError`
    naming the file, the key and the fix (the one check of every rule file,
    :mod:`scoreband.decisions.rulefile`)."""
    from scoreband.decisions.rulefile import as_float, as_mapping, check_rule_doc, read_key
    from scoreband.json_io import read_json

    refit = "scoreband triage LABELED --pairwise ... --out rule.json"
    doc = read_json(path, what="pairwise rule",
                    missing="write one with `scoreband pairwise-triage ... --out rule.json`",
                    fix="is it a rule written by `scoreband pairwise-triage --out`?")
    where = str(path)
    check_rule_doc(doc, where, fmt=PAIR_RULE_FORMAT, version=PAIR_RULE_VERSION,
                   what="pairwise rule", refit=refit)

    def prob(v):
        x = as_float(v)
        if not 0 < x < 1:
            raise ValueError(f"expected a number in (0, 1), got {v!r}")
        return x

    def labels(v):
        if not isinstance(v, list) or not v or not all(c in LABELS for c in v):
            raise ValueError(f"expected a list of labels among {', '.join(LABELS)}")
        return list(v)

    def order(v):
        if v not in ORDERS:
            raise ValueError(f"expected one of {', '.join(ORDERS)}")
        return v

    def column(v):
        if v is not None and not isinstance(v, str):
            raise TypeError("expected a column name")
        return v

    def method(v):
        if v not in SET_METHODS:
            raise ValueError(f"expected one of {', '.join(SET_METHODS)}")
        return v

    model = read_key(doc, "model", VerdictModel.from_dict, where)
    return PairRule(model, read_key(doc, "risk", prob, where),
                    read_key(doc, "delta", prob, where),
                    read_key(doc, "set_alpha", prob, where),
                    read_key(doc, "set_method", method, where),
                    read_key(doc, "classes", labels, where),
                    read_key(doc, "threshold", as_float, where),
                    read_key(doc, "set_quantile",
                             lambda v: {str(k): as_float(x) for k, x in as_mapping(v).items()},
                             where),
                    read_key(doc, "groups_col", column, where, default=None),
                    read_key(doc, "report", lambda v: dict(as_mapping(v or {})), where,
                             default={}),
                    order=read_key(doc, "order", order, where, default="max-prob"))


class PairStage(Stage):
    """A pairwise rule's verdicts on a table's rows, a whole chunk at a time: the stage of
    the row engine behind ``triage --pairwise --apply``, ``triage --rule RULE --apply`` and
    ``apply --calibrator RULE`` (and :meth:`PairRule.apply`), so a CSV / TSV table's cells
    come back byte for byte and a file is streamed chunk by chunk like every row command's.

    Adds :data:`PAIR_COLUMNS`; a row that cannot be judged (a missing or non-numeric
    feature, probabilities outside [0, 1] or not summing to 1) gets no verdict, ``decided``
    False, empty probabilities and set, and the reason in ``verdict_error`` (the judge's
    reason where its ``pair_error`` has one). Rows are independent: one row alone, a chunk
    or the whole table give the same row. After the run: ``errors`` (positions in the whole
    table), ``judged`` and ``decided`` (counts)."""

    label = "deciding pairs"
    error_column = VERDICT_ERROR
    vectorized = True
    outputs = {"verdict": "", "p_a": np.nan, "p_b": np.nan, "p_tie": np.nan,
               "pair_uncertainty": np.nan, "decided": False, "pair_set": ""}

    def __init__(self, rule, *, on_warning=None, base_dir=None):
        super().__init__(base_dir)
        self.rule = load_pair_rule(rule) if isinstance(rule, (str, Path)) else rule
        self.on_warning = on_warning
        #: what the run was warned of (each once; also to ``on_warning``)
        self.warnings: list[str] = []
        self.errors: list[RowError] = []
        self.judged = 0
        self.decided = 0

    @property
    def calibrator(self):  # as the triage rule's stage: no calibrator file to hash
        return None

    def frame(self, df: pd.DataFrame) -> dict[str, np.ndarray]:
        r = self.rule
        X, errs = rule_inputs(df, r.model.columns, probs=r.model.kind == "probs",
                              offset=self.offset)
        g = None
        if r.groups_col is not None:
            if r.groups_col not in df.columns:
                raise InputError(f"the rule has a set per group of column "
                                 f"{r.groups_col!r}, which the table lacks")
            g = df[r.groups_col].astype(str).to_numpy()
        n = len(df)
        bad = np.zeros(n, bool)
        bad[[e.position for e in errs]] = True
        res = r.decide(X, g, bad=bad)
        note = r.unseen_note(res["unseen_groups"])
        if note is not None and note not in self.warnings:
            self.warnings.append(note)
            if self.on_warning is not None:
                self.on_warning(note)
        why = np.full(n, "", dtype=object)
        for e in errs:
            why[e.position] = e.reason
        self.errors.extend(replace(e, position=e.position + self.offset) for e in errs)
        self.judged += int((~bad).sum())
        self.decided += int(res["decided"].sum())
        P = res["P"]
        return {"verdict": res["verdict"].astype(object), "p_a": P[:, 0], "p_b": P[:, 1],
                "p_tie": P[:, 2], "pair_uncertainty": res["u"],
                "decided": res["decided"].astype(bool), "pair_set": set_labels(res["sets"]),
                VERDICT_ERROR: why}

    def components(self) -> dict:
        """What the output's provenance records of this stage."""
        return {"pairwise_rule": {"risk": self.rule.alpha, "delta": self.rule.delta,
                                  "threshold": self.rule.threshold,
                                  "order": self.rule.order}}

    def summary(self) -> dict:
        return {"judged": self.judged, "decided": self.decided}


def pair_stage(rule: str, on_warning=None, base_dir=None) -> PairStage:
    """The stage from plain values (the rule file), as the command line builds it."""
    return PairStage(rule, on_warning=on_warning, base_dir=base_dir)


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


#: where the label-free fixed sequence starts at the earliest: the first threshold accepting
#: at least this share of the calibration pairs (and at least enough for a test to reject).
#: The first tests, on the few most confident pairs, are the sequence's weakest link: a test
#: on 22 pairs rejects (alpha = delta = 0.1) only with no error at all, so where even the
#: most confident pairs err a few percent of the time one early error stops the sequence.
#: Chosen on pair tables before any label of the rule's own calibration draw is read, so the
#: guarantee is untouched (benchmarks/RESULTS.md, round 12: THumB 0.36 -> 0.40 decided, a
#: PASCAL-50S-shaped table 0.67 -> 0.71, the simulated world 0.74 -> 0.78 at 400 labels).
LABEL_FREE_START_SHARE = 0.2
#: the label-free grid: one threshold per this many calibration pairs (5 to 400 thresholds)
LABEL_FREE_GRID_STEP = 5


def label_free_threshold(u, loss, alpha: float, delta: float,
                         grid_size: int | None = None,
                         start_share: float = LABEL_FREE_START_SHARE,
                         stated: bool = False) -> dict:
    """The Learn-then-Test threshold where the uncertainties ``u`` and the verdicts (whose
    ``loss`` is 1 when wrong) never looked at a label: every pair calibrates; the grid
    (``grid_size`` quantiles of ``u``; default one per :data:`LABEL_FREE_GRID_STEP` pairs,
    5 to 400) and the start are read from ``u`` alone:

    * ``stated=False`` (``u`` only orders the pairs, e.g. ``1 / (1 + |x|)``): the first
      threshold accepting at least ``start_share`` of the pairs and at least enough for a
      test to reject (:func:`scoreband.decisions.ltt.min_rejectable`);
    * ``stated=True`` (``u = 1 - max p``, the error the judge states): the pairs within
      :data:`scoreband.decisions.ltt.TOP_BLOCK_RESOLUTION` of the most confident enter as
      one block (the published rule's first test), and a second sequence starts where a
      test is predicted most likely to reject if the pairs erred as the judge states plus
      half the risk level (:func:`scoreband.decisions.ltt.label_free_start`): a judge
      whose probabilities pile up near 1 gets a test on the whole pile, which one
      confidently wrong pair does not stop. The two sequences share ``delta``, half each,
      joined into one chain (:func:`scoreband.decisions.ltt.chained_sequences`: a
      sequence that reaches the other's start goes on at the full ``delta``), so the
      guarantee is that of one fixed sequence.

    Returns :func:`scoreband.decisions.ltt.ltt_threshold`'s dict with ``grid`` and ``start``.

    >>> u = np.linspace(0.01, 1, 400); loss = (np.arange(400) % 20 == 0) & (u > 0.7)
    >>> res = label_free_threshold(u, loss, 0.1, 0.1)
    >>> float(res["threshold"]), int((u <= res["start_threshold"]).sum())
    (inf, 80)
    """
    u = np.asarray(u, float)
    if grid_size is None:
        grid_size = int(np.clip(len(u) // LABEL_FREE_GRID_STEP, 5, 400))
    grid = threshold_grid(u, grid_size, top_block=TOP_BLOCK_RESOLUTION if stated else 0.0)
    n_acc = np.searchsorted(np.sort(u), grid, side="right")
    need = max(min_rejectable(alpha, delta), int(math.ceil(start_share * len(u))))
    ok = np.flatnonzero(n_acc >= need)
    j0 = int(ok[0]) if len(ok) else len(grid) - 1
    starts = [j0]
    if stated:
        deep = label_free_start(u, grid, alpha, delta, min_share=start_share)
        if deep > j0:
            starts.append(deep)
    return {**ltt_threshold(u, loss, grid, alpha, delta, starts=starts), "grid": grid,
            "start_threshold": float(grid[j0])}


def is_label_free(kind: str, n_features: int, symmetric: bool = True) -> bool:
    """Whether pairs can be ordered by confidence and given verdicts without any label:
    the judge's probabilities used as they are, or one antisymmetric feature with the
    order-fair map (see the module docstring)."""
    return kind == "probs" or (kind == "logistic" and n_features == 1 and symmetric)


#: how far a pair's probabilities may sum from 1 (rounding in a written table)
PROB_SUM_TOL = 0.02


def rule_inputs(df: pd.DataFrame, columns, probs: bool = False,
                offset: int = 0) -> tuple[np.ndarray, list[RowError]]:
    """The feature (or probability) columns as floats, read from numbers or from cells read
    as text (:func:`scoreband.columns.numeric_column`); a row with a value that is not a
    finite number - or, for ``probs``, a probability outside [0, 1] or probabilities not
    summing to 1 within :data:`PROB_SUM_TOL` - is a row error (the pair is not judged),
    never a verdict. Where such a row has the judge's reason in ``pair_error`` (the judge
    could not judge it), the error carries that reason. Rows are named as every command
    names them (:func:`scoreband.columns.row_ids`: 1-based from ``offset``, the ``id``
    column beside); each error's ``position`` is the row's in ``df``."""
    from scoreband.columns import numeric_column, row_ids

    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"column{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(map(repr, missing))} of the rule not in the table; "
                         f"available: {', '.join(map(str, list(df.columns)[:30]))}")
    ids = row_ids(df, None, offset)
    found: dict[int, RowError] = {}
    X = np.column_stack([numeric_column(df, c, found, ids) for c in columns]) if len(df) \
        else np.zeros((0, len(columns)))
    errors = {i: replace(e, reason=f"{e.reason}; the pair is not judged")
              for i, e in found.items()}
    if probs:
        fin = np.isfinite(X).all(axis=1)
        off = fin & ((X < -1e-9) | (X > 1 + 1e-9)).any(axis=1)
        tot = np.where(fin, X.sum(axis=1), 1.0)
        unsummed = fin & ~off & (np.abs(tot - 1) > PROB_SUM_TOL)
        for i in np.flatnonzero(off | unsummed):
            if off[i]:
                j = int(np.flatnonzero((X[i] < -1e-9) | (X[i] > 1 + 1e-9))[0])
                why = f"{X[i, j]:g} is not a probability (outside [0, 1])"
            else:
                j, why = 0, (f"the probabilities {', '.join(columns)} sum to {tot[i]:.3g}, not "
                             "1: give p(A), p(B)[, p(tie)] of one verdict")
            errors[int(i)] = RowError(ids[i], columns[j], why + "; the pair is not judged",
                                      int(i))
    judge_col = ERROR_COLUMN["pairwise"]
    if judge_col in df.columns and judge_col not in columns:
        for i, e in errors.items():
            why = cell_text(df, judge_col, i)
            if why is not None:
                errors[i] = replace(e, column=judge_col,
                                    reason=f"the judge could not judge this pair: {why}")
    return X, [errors[i] for i in sorted(errors)]


def _fit_columns_problem(df: pd.DataFrame, columns, X: np.ndarray, labeled: np.ndarray,
                         probs: bool) -> str | None:
    """Why a feature / probability column cannot be fitted on, naming it and the fix: it
    is not numeric (most of its labeled cells are not numbers), or it is empty in every
    labeled row. None when every column holds numbers."""
    from scoreband.tables import NA_TEXT

    rows = np.flatnonzero(labeled)
    what = "probability" if probs else "feature"
    fix = ("give the judge's p(A), p(B)[, p(tie)] columns" if probs else
           "give a numeric antisymmetric feature: a score difference A - B (the *_diff "
           "columns of `scoreband pairs`) or the judge's pair_pref")
    for j, c in enumerate(columns):
        raw = df[c].iloc[rows].tolist()
        filled = [k for k, v in enumerate(raw)
                  if not (v is None or (isinstance(v, float) and math.isnan(v))
                          or str(v).strip() in NA_TEXT)]
        text = [raw[k] for k in filled if not math.isfinite(X[rows[k], j])]
        if filled and 2 * len(text) > len(filled):
            seen = list(dict.fromkeys(str(v) for v in text))[:3]
            return (f"the {what} column {c!r} is not numeric ({len(text)} of its "
                    f"{len(filled)} filled labeled cells are not numbers, e.g. "
                    f"{', '.join(map(repr, seen))}): {fix}")
        if not filled:
            if probs and j == 2:
                return (f"the tie column {c!r} is empty in every labeled row: for a judge "
                        f"without a tie verdict give p(A) and p(B) alone "
                        f"(`probs` {columns[0]},{columns[1]}), or fill it")
            return (f"the {what} column {c!r} is empty (or nan) in every one of the "
                    f"{len(rows)} labeled rows: nothing to fit on; {fix}")
    return None


def _no_usable_pair(columns, X: np.ndarray, labeled: np.ndarray, errors: list[RowError],
                    probs: bool) -> str:
    """Why no labeled pair can be used though every column holds numbers: probabilities
    that never sum to 1, or the rows' own problems."""
    rows = np.flatnonzero(labeled)
    if probs:
        fin = np.isfinite(X[rows]).all(axis=1)
        tot = X[rows][fin].sum(axis=1)
        if len(tot):
            return (f"the probabilities {', '.join(columns)} sum to {np.median(tot):.3g} "
                    f"(median), not 1, or lie outside [0, 1], in every labeled row: give "
                    f"p(A), p(B)[, p(tie)] of one verdict (each row summing to 1); are "
                    f"columns of two verdicts mixed, or one column given twice?")
    first = "; ".join(str(e) for e in errors[:3])
    return (f"none of the {len(rows)} labeled pairs can be used ({first}): fix the "
            f"{'probability' if probs else 'feature'} columns "
            f"{', '.join(map(repr, columns))}")


def _nothing_decided(y, P, alpha: float) -> str:
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
    per 5, 5 to 400, on the label-free path, which starts at the most confident fifth and,
    with the judge's probabilities, also where their stated errors predict a test most
    likely to reject, the two sequences sharing ``delta``: :func:`label_free_threshold`). On the training-share path, where the sequence starts
    at the first test able to reject, a fine grid over few calibration pairs stops the
    fixed sequence at the first unlucky step: on THumB caption pairs (200 calibration pairs)
    200 thresholds decided 0.18 of the pairs and 10 decided 0.40 at the same guarantee.
    """
    from scoreband.conformal.randomness import array_keys, canonical_order, row_uniforms

    set_alpha = alpha if set_alpha is None else set_alpha
    _check(alpha, delta, set_alpha, train_frac)
    if set_method not in SET_METHODS:
        raise InputError(f"set method {set_method!r}: choose lac or aps")
    if len(labels) == 0:
        raise InputError("no labeled pair (a human preference A / B / tie with usable "
                         f"{'probabilities' if kind == 'probs' else 'features'}) to fit on: "
                         "label some pairs")
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
    within = (y,) if groups is None else (y, groups)
    if fitted:
        train = row_uniforms(keys, seed, _SPLIT_STREAM,  # copies in label / group order
                             within=within) < train_frac
    else:
        train = np.zeros(n, bool)  # nothing to fit: every pair calibrates
    T, Cl = np.flatnonzero(train), np.flatnonzero(~train)
    # the model sees its rows in the order of their keys, copies of a key in label / group
    # order: the same fit, bit for bit, for any row order (copies with different labels in
    # row order changed the fit's last bits, and a verdict at p(A) = p(B) with them)
    T = T[canonical_order(np.asarray(keys)[T], tuple(w[T] for w in map(np.asarray, within)))]
    thr_rows = np.arange(n) if label_free else Cl
    need = min_rejectable(alpha, delta)
    few_train = fitted and len(T) < MIN_TRAINING_PAIRS
    if len(thr_rows) < need or (few_train and not label_free):
        raise InputError(_too_few(n, len(T), len(Cl), need, alpha, delta, label_free,
                                  train_frac))
    # on the label-free path the model gives only the probabilities and the sets: with too
    # few pairs for a training share, the verdicts (which need no model) are still decided
    sets_fitted = not (few_train and label_free)
    fit_rows = T if sets_fitted else canonical_order(keys, within)
    model = fit_verdict_model(X[fit_rows], y[fit_rows], list(columns), kind=kind,
                              symmetric=symmetric)
    # the verdicts a pair may get: those labeled, and every one the judge's probabilities
    # give (used as they are: a verdict no labeled pair had is not dropped)
    classes = [c for c in LABELS if (y == c).any() or
               (kind == "probs" and (c != "tie" or X.shape[1] == 3))]
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
    names = [POOLED] if groups is None else sorted({str(v) for v in
                                                    np.asarray(groups).astype(str)})
    if not sets_fitted:
        rule.set_q = dict.fromkeys(names, math.inf)
        rule.warnings.append(
            f"{n} labeled pairs: enough to decide pairs (no label orders them), too few for "
            f"informative prediction sets, whose verdict model needs a training share of at "
            f"least {MIN_TRAINING_PAIRS} pairs (here {len(T)} at train_frac "
            f"{train_frac:g}): every set holds every verdict, and p_a / p_b / p_tie come from "
            f"a model fitted on every labeled pair (no set guarantee beyond the trivial one); "
            f"label at least {math.ceil(MIN_TRAINING_PAIRS / train_frac)} pairs for sets")
    elif groups is None:
        rule.set_q = {POOLED: conformal_quantile(scores[Cl], set_alpha)}
    else:
        g = np.asarray(groups).astype(str)
        rule.set_q = {name: conformal_quantile(scores[Cl][g[Cl] == name], set_alpha)
                      for name in names}
        small = [k for k, v in rule.set_q.items() if not math.isfinite(v)]
        if small:
            rule.warnings.append(
                f"group{'s' if len(small) > 1 else ''} {', '.join(map(repr, small[:5]))}"
                + (f" and {len(small) - 5} more" if len(small) > 5 else "")
                + f" {'has' if len(small) == 1 else 'have'} too few calibration pairs for "
                f"sets at {set_alpha:g}: {'its' if len(small) == 1 else 'their'} sets hold "
                "every verdict")

    # 2. the selective threshold: fixed-sequence tests on pairs whose labels chose nothing;
    # a pair that can never be decided (a zero difference) is in no decided set: left out
    live = np.isfinite(u)
    thr_rows, T = thr_rows[live[thr_rows]], T[live[T]]
    if len(thr_rows) < need:
        raise InputError(f"only {_plural(len(thr_rows), 'labeled pair')} of the "
                         f"{'labeled pairs' if label_free else 'calibration share'} can be "
                         f"decided at all (the others have no preference, e.g. a zero "
                         f"difference); deciding any pair at alpha = {alpha:g}, delta = "
                         f"{delta:g} needs at least {need}: label more pairs, or raise "
                         "`alpha` / `delta`")
    uc = u[thr_rows]
    if label_free:
        res = label_free_threshold(uc, loss[thr_rows], alpha, delta, grid_size,
                                   stated=rule.order == "max-prob")
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
        rule.warnings.append(_nothing_decided(y, P, alpha))
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
        "start_rule": ("stated" if rule.order == "max-prob" else "first") if label_free
        else start, "start": int(j0), "starts": [int(x) for x in res.get("starts", [j0])],
        "grid_size": int(len(grid)),
        "decided_share": float(acc.mean()),
        "error_among_decided_on_calibration": float(loss[thr_rows][acc].mean())
        if acc.any() else None,
        "accuracy_deciding_all": float(1 - (best[Cl] != yi[Cl]).mean()),
        "set_coverage_on_calibration": float(sets[np.arange(len(Cl)), yi[Cl]].mean()),
        "set_size_on_calibration": float(sets.sum(axis=1).mean()),
        # False: too few labeled pairs for the sets' model; every set holds every verdict
        "sets_fitted": bool(sets_fitted),
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
    X, ferrs = rule_inputs(df, cols, probs=probs is not None)
    bad = np.zeros(len(df), bool)
    bad[[e.position for e in ferrs]] = True
    labeled = lab != ""
    use = labeled & ~bad
    if labeled.any():
        why = _fit_columns_problem(df, cols, X, labeled, probs is not None)
        if why is None and not use.any():
            why = _no_usable_pair(cols, X, labeled, [e for e in ferrs if labeled[e.position]],
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
