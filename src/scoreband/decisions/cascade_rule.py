"""A cascade of judges on a table (issue 44, item 2): fit on labeled rows, decide every row,
save the rule, apply it to new tables. The statistics are :mod:`scoreband.decisions.cascade`.

Each judge is a pair of columns: its answer (a verdict ``A`` / ``B``, a score ``4``, any
label the human column also holds) and its confidence in that answer (a probability in
[0, 1]: ``max p`` of its verdict, or its score token's probability). Judges are listed
cheapest first; a row is decided by the first judge whose stated error (alone, or combined
with the judges before it: the ``joint`` view, where agreement counts) is at most the rule's
threshold, and goes to a human otherwise. The guarantee: among all rows any judge decides,
at most ``risk`` get an answer other than the human's, with probability at least
``1 - delta`` over the draw of the labeled rows, for rows drawn like them.

Cells are compared as written, a number by its value (``4`` and ``4.0`` are one answer);
``decided_answer`` is the deciding judge's cell as written. A judge whose two cells are both
empty gave no verdict on the row (it was not run); one cell without the other, or a
confidence that is not a number in [0, 1], is a row error: that judge is skipped on the row,
the others still decide it, and the reason is in ``cascade_error``.

>>> import pandas as pd
>>> df = pd.DataFrame({"a_p": ["0.99"] * 60, "a": ["A"] * 60, "human": ["A"] * 60})
>>> res = cascade(df, judges=["cheap=a_p:a"], label="human", risk=0.1, delta=0.1)
>>> res.table["decided_by"].iloc[0], res.rule.report["decided_share"]
('cheap', 1.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.decisions.cascade import VIEWS, apply_cascade, fit_cascade, stage_views
from scoreband.decisions.cascade_inputs import (
    HUMAN,
    Judge,
    _cost,
    answer_key,
    as_costs,
    as_judges,
    read_judges,
)
from scoreband.decisions.rule import Decision, Rule, register_rule
from scoreband.errors import ERROR_COLUMN, InputError, RowError

__all__ = ["CascadeRule", "CascadeResult", "cascade", "load_cascade_rule", "CASCADE_FORMAT",
           "DECIDED_BY", "DECIDED_ANSWER", "CASCADE_ERROR"]

CASCADE_FORMAT = "scoreband-cascade-rule"
CASCADE_VERSION = 1
DECIDED_BY, DECIDED_ANSWER = "decided_by", "decided_answer"
#: why a row's judge could not be read (ERROR_COLUMN["cascade"] once registered there)
CASCADE_ERROR = ERROR_COLUMN["cascade"]
REFIT = ("scoreband cascade LABELED --judge NAME=CONF_COL:ANSWER_COL ... --label-col HUMAN "
         "--rule-out rule.json")


def _encode(keys: np.ndarray, classes: list[str]) -> np.ndarray:
    """Integer codes of answer keys (-1: none): ``classes`` first, unseen keys after."""
    index = {c: i for i, c in enumerate(classes)}
    flat = keys.ravel()
    out = np.full(len(flat), -1)
    for i, k in enumerate(flat):
        if k is not None:
            out[i] = index.setdefault(k, len(index))
    return out.reshape(keys.shape)


def _source_cells(df: pd.DataFrame, judges, codes, stage, verdict, keys) -> np.ndarray:
    """The deciding answer as written: the cell of the latest judge up to the deciding stage
    whose answer is the verdict (in the ``own`` view, the deciding judge's own)."""
    n, S = codes.shape
    out = np.full(n, "", dtype=object)
    d = np.flatnonzero(stage >= 0)
    if not len(d):
        return out
    match = (codes[d] == verdict[d, None]) & (np.arange(S)[None, :] <= stage[d, None])
    src = S - 1 - np.argmax(match[:, ::-1], axis=1)
    cells = np.column_stack([keys[:, s] if j.probs else df[j.answer].to_numpy(dtype=object)
                             for s, j in enumerate(judges)])
    out[d] = cells[d, src]
    return out


# ------------------------------------------------------------------ the rule
@register_rule
@dataclass(eq=False)
class CascadeRule(Rule):
    """A fitted cascade: the ``judges`` (cheapest first), the ``view`` of their verdicts
    (``own`` or ``joint``), the ``stages`` allowed to decide and the ``threshold`` on their
    stated error; ``n_classes`` (answers the joint view weighs), ``alpha`` (the risk),
    ``delta``, ``costs``, ``human_cost`` and the fit's ``report``. A :class:`Rule`: its
    file is read by :func:`scoreband.decisions.rule.load_rule` too, and ``apply(table)``
    runs the one rule stage on the row engine."""

    format = CASCADE_FORMAT
    version = CASCADE_VERSION
    what = "cascade rule"
    kind = "cascade"
    job = "cascade"
    refit = REFIT
    error_column = CASCADE_ERROR
    label = "cascading"

    judges: list[Judge]
    view: str
    stages: list[int]
    threshold: float
    n_classes: int
    alpha: float
    delta: float
    costs: list[float] | None = None
    human_cost: float = 0.0
    report: dict = field(default_factory=dict)

    def outputs(self) -> dict:
        """Added column -> the value of a row that gets none."""
        return {DECIDED_BY: "", DECIDED_ANSWER: ""}

    def decide_columns(self, df: pd.DataFrame, offset: int = 0):
        """``(columns, errors)``: ``decided_by`` (a judge's name or ``human``),
        ``decided_answer`` (its cell as written, empty for ``human``) and the error column
        of every row of ``df``; the row errors (positions from ``offset``)."""
        conf, keys, errors = read_judges(df, self.judges, offset)
        codes = _encode(keys, [])
        U, V = stage_views(conf, codes, self.n_classes, views=(self.view,))[self.view]
        stage = apply_cascade(U, {"stages": self.stages, "threshold": self.threshold})
        names = np.array([j.name for j in self.judges] + [HUMAN], dtype=object)
        verdict = V[np.arange(len(df)), np.maximum(stage, 0)] if len(df) else V[:, 0]
        why = np.full(len(df), "", dtype=object)
        for e in errors:  # positions in this chunk
            why[e.position] = f"column {e.column!r}: {e.reason}"
        return ({DECIDED_BY: names[np.where(stage >= 0, stage, len(self.judges))],
                 DECIDED_ANSWER: _source_cells(df, self.judges, codes, stage, verdict,
                                                              keys),
                 self.error_column: why}, errors)

    def decide_frame(self, df: pd.DataFrame, offset: int = 0) -> Decision:
        """The rule's columns for the chunk ``df`` (the row engine's stage calls it)."""
        cols, errors = self.decide_columns(df, offset)
        return Decision(cols, errors, len(df),
                        {"decided": int((cols[DECIDED_BY] != HUMAN).sum())})

    def decide(self, table) -> CascadeResult:
        """Every row and column of ``table`` (a DataFrame, or a path: its cells read as
        text) with the rule's columns added, through the one rule stage
        (:meth:`Rule.apply`); a table that already has one of them is refused."""
        out = self.apply(table)
        return CascadeResult(self, out, list(self.last_errors), list(self.last_warnings))

    def predict(self, table) -> np.ndarray:
        """Whether a judge decides each row of ``table`` (bool (n,))."""
        return (self.apply(table)[DECIDED_BY] != HUMAN).to_numpy()

    def to_dict(self) -> dict:
        return {**self.head(),
                "judges": [j.to_dict() for j in self.judges],
                "view": self.view, "stages": list(self.stages), "threshold": self.threshold,
                "n_classes": self.n_classes, "risk": self.alpha, "delta": self.delta,
                "costs": self.costs, "human_cost": self.human_cost, "report": self.report}

    @classmethod
    def from_dict(cls, doc: dict, where: str = "the cascade rule") -> CascadeRule:
        from scoreband.decisions.rulefile import as_float, as_mapping, check_rule_doc, read_key

        check_rule_doc(doc, where, fmt=CASCADE_FORMAT, version=CASCADE_VERSION, what=cls.what,
                       refit=REFIT)
        fix = f"write the rule again with `{REFIT}`"

        def key(k, parse, **kw):
            return read_key(doc, k, parse, where, fix=fix, **kw)

        judges = key("judges", lambda v: as_judges([Judge.from_dict(as_mapping(x)) for x in v]))
        S = len(judges)
        stages = key("stages", lambda v: [_stage_index(x, S) for x in v])
        costs = key("costs", lambda v: None if v is None else as_costs(list(v), judges)[0],
                    default=None)
        return cls(judges=judges, view=key("view", _view), stages=stages,
                   threshold=key("threshold", as_float), n_classes=key("n_classes", _classes),
                   alpha=key("risk", lambda v: _unit(as_float(v))),
                   delta=key("delta", lambda v: _unit(as_float(v))), costs=costs,
                   human_cost=key("human_cost", _cost, default=0.0),
                   report=key("report", as_mapping, default={}))



def _stage_index(v, S: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < S:
        raise ValueError(f"a stage is a judge's index, 0 to {S - 1}")
    return v


def _view(v) -> str:
    if v not in VIEWS:
        raise ValueError(f"the view is one of {', '.join(VIEWS)}")
    return v


def _classes(v) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 2:
        raise ValueError("n_classes is an integer >= 2")
    return v


def _unit(x: float) -> float:
    if not 0 < x < 1:
        raise ValueError("expected a number in (0, 1)")
    return x


def load_cascade_rule(path) -> CascadeRule:
    """Read a rule written by :meth:`CascadeRule.save` (``scoreband cascade --rule-out``)."""
    from scoreband.json_io import read_json

    doc = read_json(path, what="cascade rule", missing=f"write one with `{REFIT}`",
                    fix="is it a rule written by `scoreband cascade --rule-out`?")
    return CascadeRule.from_dict(doc, str(path))


# ------------------------------------------------------------------ fitting
@dataclass
class CascadeResult:
    """A cascade's rule (of answer / pair judges, or a
    :class:`scoreband.decisions.score_cascade.ScoreCascadeRule`) and the table it decided:
    ``table`` (every input row and column, with the rule's columns: ``decided_by`` and
    ``cascade_error`` among them), the row ``errors`` and the ``warnings``."""

    rule: Rule
    table: pd.DataFrame
    errors: list[RowError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def shares(self) -> dict[str, float]:
        """The share of the table's rows each judge (and ``human``) decides."""
        by = self.table[DECIDED_BY]
        return {n: float((by == n).mean()) if len(by) else 0.0
                for n in [j.name for j in self.rule.judges] + [HUMAN]}

    def save(self, path) -> Path:
        """Write the decided table (its format from the extension)."""
        from scoreband.tables import write_table

        return write_table(self.table, path)


def cascade(table, judges, label: str, risk: float = 0.1, delta: float = 0.1, *,
            costs=None, views=VIEWS) -> CascadeResult:
    """Fit a cascade of judges on the labeled rows of ``table`` and decide all its rows.

    Parameters
    ----------
    table : DataFrame or path (cells read as text)
    judges : cheapest first; ``NAME=CONF_COL:ANSWER_COL`` strings, ``(name, conf, answer)``
        tuples or :class:`Judge` objects (:func:`as_judges`)
    label : the column of the human answer; rows where it is empty are decided, not fitted on
    risk, delta : among the rows any judge decides at most ``risk`` err, with probability at
        least ``1 - delta`` over the draw of the labeled rows
    costs : one per judge (``{name: cost}``, or ``NAME=C`` strings), and optionally
        ``human``: among the configurations that pass, the one deciding within 10 % of the
        most at the least judge cost per row; with a human cost, the one of least expected
        cost per row, a human's answer included. The report gives the expected cost
    views : which uncertainties a stage may use (:data:`scoreband.decisions.cascade.VIEWS`):
        ``own`` (each judge's confidence), ``joint`` (the judges so far combined:
        agreement), ``joint-strict`` (the same, the cheaper judges held to twice the
        confidence); each is one sequence of the one test

    Returns a :class:`CascadeResult`; ``result.rule.save(path)`` writes the rule.
    """
    from scoreband.columns import require_columns
    from scoreband.engine.rows import check_added_columns
    from scoreband.tables import read_table

    df = read_table(table, text=True) if isinstance(table, (str, Path)) else table
    js = as_judges(judges)
    cost, human = as_costs(costs, js)
    for name, v in (("risk", risk), ("delta", delta)):
        if not (isinstance(v, (int, float)) and 0 < v < 1):
            raise InputError(f"`{name}` {v!r}: give a number in (0, 1)")
    require_columns(df, [("`label`", label)])
    copies = [j.name for j in js if label in j.columns()]
    if copies:
        raise InputError(f"judge(s) {', '.join(map(repr, copies))} read the `label` column "
                         f"{label!r}: a judge's answer and confidence must be its own columns, "
                         "never the human answer")
    check_added_columns(df.columns, [DECIDED_BY, DECIDED_ANSWER, CASCADE_ERROR])
    conf, keys, _ = read_judges(df, js)
    lab = _label_keys(df, label, any(j.probs for j in js))
    has = np.array([k is not None for k in lab], dtype=bool)
    _check_labeled(js, conf, has, label)
    classes = sorted({k for k in keys[has].ravel() if k is not None} | set(lab[has]))
    K = max(2, len(classes))
    codes = _encode(np.column_stack([keys, lab]), classes)
    y = codes[has, -1]
    fitted = {}
    for v, (U, V) in stage_views(conf[has], codes[has, :-1], K, views).items():
        fitted[v] = (U, np.where(np.isfinite(U), (V != y[:, None]).astype(float), 0.0))
    res = fit_cascade(fitted, risk, delta, costs=cost, human_cost=human)
    rule = CascadeRule(js, res["view"], res["stages"], res["threshold"], K, float(risk),
                       float(delta), cost, human)
    rule.report = _report(rule, res, label, int(has.sum()), int((~has).sum()))
    out = rule.decide(df)
    if not res["stages"]:
        out.warnings.append(
            f"no configuration passed the test: every row goes to a human. The {has.sum()} "
            f"labeled rows could not show an error <= {risk:g} at delta {delta:g}; label more "
            "rows, or allow a larger risk")
    return out


def _label_keys(df: pd.DataFrame, label: str, pairs: bool) -> np.ndarray:
    """The human answers as keys (None: unlabeled); with pair judges, a preference A / B /
    tie (or 1 / 2 / 0, ``draw``: :func:`scoreband.pairwise.pairs.parse_labels`), a cell that
    is none of them refused naming the row."""
    if not pairs:
        return np.array([answer_key(c) for c in df[label].tolist()], dtype=object)
    from scoreband.columns import row_ids
    from scoreband.pairwise.pairs import parse_labels

    lab, errors = parse_labels(df[label].tolist(), label, ids=row_ids(df, None))
    if errors:
        e = errors[0]
        raise InputError(f"row {e.row}, column {label!r}: {e.reason.split(';')[0]}; the "
                         f"pair judges answer A, B or tie: write the human preference as A, B "
                         f"or tie (or 1 / 2 / 0), empty where unlabeled ({len(errors)} such "
                         "cell(s))")
    return np.array([x if x else None for x in lab], dtype=object)


def _check_labeled(judges, conf, has, label) -> None:
    if not has.any():
        raise InputError(f"`label` column {label!r} has no labeled row (every cell empty): "
                         "label some rows with the human answer to fit the cascade")
    for s, j in enumerate(judges):
        if not np.isfinite(conf[has, s]).any():
            raise InputError(
                f"judge {j.name!r} gave no verdict on any labeled row (columns "
                f"{', '.join(map(repr, j.columns()))}: "
                + ("probabilities in [0, 1]" if j.probs else
                   "both filled, a confidence in [0, 1]")
                + "); check its `judge` columns, or run the judge on the labeled rows")


def _report(rule: CascadeRule, res: dict, label: str, n_lab: int, n_unlab: int) -> dict:
    """The rule's summary: thresholds per judge (the confidence it must state), shares and
    error on the labeled rows, cost, and the guarantee in words."""
    names = [j.name for j in rule.judges]
    ok = set(res["stages"])
    how = "its own confidence" if rule.view == "own" else \
        "the confidence of its answer combined with the judges before it (agreement counts)"
    shares = {n: res["by_stage"][i] for i, n in enumerate(names)}
    shares[HUMAN] = 1 - res["decided"]
    return {
        "guarantee": (f"among the rows any judge decides, at most {rule.alpha:g} get an "
                      f"answer other than the human's ({label!r}), with probability at least "
                      f"{1 - rule.delta:g} over the draw of the {n_lab} labeled rows, for rows "
                      "drawn like them (one test over every stage: fixed sequences sharing "
                      "delta in one chain, Learn-then-Test)"),
        "label": label, "view": rule.view, "uncertainty": how,
        "min_confidence": {n: (1 - res["threshold"] if i in ok and
                               math.isfinite(res["threshold"]) else None)
                           for i, n in enumerate(names)},
        "n_labeled": n_lab, "n_unlabeled": n_unlab,
        "decided_share": res["decided"], "risk_on_calibration": res["risk"],
        "shares_on_calibration": shares,
        "cost_per_row": res["cost"], "human_cost": rule.human_cost,
        "judge_cost_per_row": None if res["cost"] is None else
        res["cost"] - rule.human_cost * (1 - res["decided"]),
        "judge_cost_strongest_alone_per_row": None if rule.costs is None else rule.costs[-1],
        "n_hypotheses": res["n_hypotheses"], "n_rejected": res["n_rejected"],
    }
