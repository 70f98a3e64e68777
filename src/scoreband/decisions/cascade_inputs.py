"""The judges of a cascade and how their cells are read (:mod:`scoreband.decisions.cascade_rule`):
each judge's columns, the costs, and a table's cells as answers and confidences - a plain
decimal number compared by value, any other text as written, an empty cell as no verdict."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from scoreband.errors import InputError

__all__ = ["Judge", "as_judges", "as_costs", "answer_key", "read_judges", "HUMAN",
           "PAIR_VERDICTS", "add_error", "as_number"]

#: ``decided_by`` of a row no judge decides
HUMAN = "human"

# ------------------------------------------------------------------ judges and costs
@dataclass(frozen=True)
class Judge:
    """One stage: its ``name`` (written in ``decided_by``), its ``confidence`` column and
    its ``answer`` column; or, for a pair judge, its ``probs`` columns (p(A), p(B)[, p(tie)]:
    its verdict is the most probable of A / B / tie, its confidence that probability)."""

    name: str
    confidence: str = ""
    answer: str = ""
    probs: tuple[str, ...] = ()

    @classmethod
    def parse(cls, spec: str) -> Judge:
        """``NAME=CONF_COL:ANSWER_COL`` (the last ``:`` splits the columns), or a pair judge's
        ``NAME=PA_COL,PB_COL[,PT_COL]``."""
        name, eq, cols = str(spec).partition("=")
        conf, colon, ans = cols.rpartition(":")
        if eq and name.strip() and not colon and "," in cols:
            probs = tuple(c.strip() for c in cols.split(","))
            if len(probs) in (2, 3) and all(probs):
                return cls(name.strip(), probs=probs)
        if not (eq and colon and name.strip() and conf and ans):
            raise InputError(f"judge {spec!r} (--judge, --cascade): write "
                             "NAME=CONF_COL:ANSWER_COL (e.g. "
                             "cheap=cheap_conf:cheap_answer), or for a pair judge "
                             "NAME=PA_COL,PB_COL[,PT_COL], one per judge, cheapest first")
        return cls(name.strip(), conf, ans)

    def columns(self) -> list[str]:
        """The columns the judge reads."""
        return list(self.probs) if self.probs else [self.confidence, self.answer]

    def to_dict(self) -> dict:
        return {"name": self.name, "probs": list(self.probs)} if self.probs else \
            {"name": self.name, "confidence": self.confidence, "answer": self.answer}

    @classmethod
    def from_dict(cls, d: dict) -> Judge:
        if d.get("probs"):
            return cls(str(d["name"]), probs=tuple(str(c) for c in d["probs"]))
        return cls(str(d["name"]), str(d["confidence"]), str(d["answer"]))


#: a pair judge's verdicts, in the order of its probability columns
PAIR_VERDICTS = ("A", "B", "tie")


def as_judges(judges) -> list[Judge]:
    """Judges from :class:`Judge` objects, ``NAME=CONF:ANSWER`` strings, ``(name, conf,
    answer)`` tuples or a ``{name: (conf, answer)}`` mapping, cheapest first; names unique
    and never ``human``."""
    if isinstance(judges, dict):
        judges = [(k, *v) for k, v in judges.items()]
    if isinstance(judges, (str, Judge)):
        judges = [judges]
    out = []
    for j in judges or []:
        if isinstance(j, Judge):
            out.append(j)
        elif isinstance(j, str):
            out.append(Judge.parse(j))
        elif isinstance(j, (tuple, list)) and len(j) == 3:
            out.append(Judge(*map(str, j)))
        elif isinstance(j, (tuple, list)) and len(j) == 2 and not isinstance(j[1], str):
            out.append(Judge(str(j[0]), probs=tuple(map(str, j[1]))))
        else:
            raise InputError(f"`judge` {j!r}: give NAME=CONF_COL:ANSWER_COL or (name, "
                             "confidence column, answer column)")
    if not out:
        raise InputError("give at least one `judge` (NAME=CONF_COL:ANSWER_COL), cheapest "
                         "first")
    names = [j.name for j in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup or HUMAN in names:
        what = f"{dup[0]!r} is given twice" if dup else f"{HUMAN!r} is the name of the " \
            "last stage (rows no judge decides)"
        raise InputError(f"`judge` names must be unique and not {HUMAN!r}: {what}; rename it")
    return out


def as_costs(costs, judges: list[Judge]) -> tuple[list[float] | None, float]:
    """``(per judge, human)``: one cost per judge (of running it on one row) from
    ``{name: cost}``, ``NAME=C`` strings or a list in the judges' order (None when
    ``costs`` is None), and the cost of a human answer (``human=C``; 0 when not given)."""
    if costs is None or (isinstance(costs, (list, tuple)) and not costs):
        return None, 0.0
    human = 0.0
    names = [j.name for j in judges]
    if isinstance(costs, (list, tuple)) and all(isinstance(c, str) for c in costs):
        pairs = [str(c).partition("=") for c in costs]
        if any(not eq for _, eq, _ in pairs):
            raise InputError(f"`cost` {costs!r}: write NAME=C per judge (e.g. cheap=1)")
        names_given = [k.strip() for k, _, _ in pairs]
        twice = sorted({k for k in names_given if names_given.count(k) > 1})
        if twice:
            raise InputError(f"`cost` gives {twice[0]!r} twice; give each judge one cost")
        costs = {k.strip(): v for k, _, v in pairs}
    if isinstance(costs, dict):
        costs = dict(costs)
        human = _cost(costs.pop(HUMAN, 0.0))
        unknown = [k for k in costs if k not in names]
        if unknown:
            raise InputError(f"`cost` names {unknown[0]!r}, which is not a judge; judges: "
                             f"{', '.join(names)}")
        missing = [n for n in names if n not in costs]
        if missing:
            raise InputError(f"`cost`: give every judge a cost; {missing[0]!r} has none")
        costs = [costs[n] for n in names]
    if len(costs) != len(names):
        raise InputError(f"{len(costs)} costs for {len(names)} judges: give one per judge")
    return [_cost(c) for c in costs], human


def _cost(c) -> float:
    try:
        x = float(c)
    except (TypeError, ValueError):
        x = math.nan
    if not (math.isfinite(x) and x >= 0):
        raise InputError(f"`cost` {c!r}: each cost must be a finite number >= 0")
    return x


# ------------------------------------------------------------------ reading the table
#: a plain decimal number: the only text compared by value (``4`` and ``4.0`` are one
#: answer); ``01``, ``+1``, ``1e0`` are codes, compared as written
_DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")


def answer_key(cell) -> str | None:
    """How an answer cell is compared: None when empty; a plain decimal number by its value
    (``4`` and ``4.0`` are one answer); any other text as written, outer spaces stripped
    (``01`` is not ``1``: a code read as a number would count a wrong answer as right).

    >>> answer_key("4"), answer_key("4.0"), answer_key("01"), answer_key(" yes ")
    ('4.0', '4.0', '01', 'yes')
    """
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return None
    if isinstance(cell, (int, float, np.integer, np.floating)) and not isinstance(cell, bool):
        return repr(float(cell)) if math.isfinite(cell) else str(cell)
    s = str(cell).strip()
    from scoreband.tables import NA_TEXT

    if s == "" or s in NA_TEXT:
        return None
    return repr(float(s)) if _DECIMAL.fullmatch(s) else s


def _pair_cells(df: pd.DataFrame, judge: Judge, ids, errors: dict):
    """A pair judge's ``(conf, keys)``: the most probable verdict (A, B, tie: a tie in
    probability goes to the earlier) and its probability. All cells empty: not run; some
    empty, or one not a number in [0, 1]: a row error, the judge skipped on the row."""
    from scoreband.columns import row_error

    raw = [df[c].tolist() for c in judge.probs]
    n = len(df)
    empty = np.array([[answer_key(v) is None for v in col] for col in raw], bool).reshape(-1, n)
    for c, col in enumerate(raw):
        _refuse_percentages(np.array([as_number(v) for v in col], float), judge,
                            judge.probs[c])
    P = np.array([[_prob(v) for v in col] for col in raw], float).reshape(-1, n)
    ok = np.isfinite(P).all(axis=0)
    for i in np.flatnonzero(~ok & ~empty.all(axis=0)):
        c = int(np.flatnonzero(~np.isfinite(P[:, i]))[0])
        why = "empty probability beside the others" if empty[c, i] else \
            f"{raw[c][i]!r} is not a probability in [0, 1]"
        add_error(errors, i, row_error(i, ids[i], judge.probs[c], (
            f"judge {judge.name!r}: {why}; this judge is skipped on the row (fill its cells, "
            "or empty all of them where it was not run)")))
    best = np.argmax(np.where(np.isfinite(P), P, -1.0), axis=0) if n else np.zeros(0, int)
    conf = np.where(ok, P.max(axis=0, initial=-np.inf) if n else np.zeros(0), np.nan)
    keys = np.array([PAIR_VERDICTS[b] if o else None for b, o in zip(best, ok, strict=True)],
                    dtype=object)
    return conf, keys


def add_error(errors: dict, i: int, e) -> None:
    """Row ``i``'s error: a second judge's reason on the same row is added to the first
    (the row's one error names every judge skipped on it)."""
    from dataclasses import replace

    old = errors.get(i)
    errors[i] = e if old is None else replace(old, reason=f"{old.reason}; column "
                                                         f"{e.column!r}: {e.reason}")


def _refuse_percentages(values: np.ndarray, judge: Judge, col: str) -> None:
    """A column whose numbers mostly lie above 1 (percentages, a 1-10 score) is refused:
    every row would be a row error and every row would go to a human, said row by row."""
    fin = values[np.isfinite(values)]
    if len(fin) and np.mean(fin > 1) > 0.5:
        raise InputError(
            f"judge {judge.name!r}: column {col!r} holds numbers above 1 in "
            f"{np.mean(fin > 1):.0%} of its rows (e.g. {fin[fin > 1][0]:g}); a judge's "
            "confidence is a probability in [0, 1]: divide percentages by 100, or name the "
            "probability column")


def as_number(v) -> float:
    """A cell as a float (text stripped), NaN when it is not one (a boolean is not)."""
    if isinstance(v, bool) or v is None:
        return math.nan
    try:
        return float(str(v).strip()) if isinstance(v, str) else float(v)
    except (TypeError, ValueError):
        return math.nan


def _prob(v) -> float:
    x = as_number(v)
    return x if 0 <= x <= 1 else math.nan


def _judge_cells(df: pd.DataFrame, judge: Judge, ids, errors: dict):
    """``(conf, keys)`` of one judge: (n,) floats (NaN: no verdict) and answer keys."""
    from scoreband.columns import row_error

    if judge.probs:
        return _pair_cells(df, judge, ids, errors)

    raw_c = df[judge.confidence]
    no_c = np.array([answer_key(c) is None for c in raw_c.tolist()], dtype=bool)
    conf = pd.to_numeric(raw_c.astype(str).str.strip().where(~no_c), errors="coerce") \
        .to_numpy(dtype=float)
    _refuse_percentages(conf, judge, judge.confidence)
    keys = np.array([answer_key(c) for c in df[judge.answer].tolist()], dtype=object)
    no_a = np.array([k is None for k in keys], dtype=bool)
    bad = np.zeros(len(df), bool)
    for i in np.flatnonzero(~(no_c & no_a)):
        why = col = None
        if no_c[i]:
            col, why = judge.confidence, "empty confidence beside an answer"
        elif no_a[i]:
            col, why = judge.answer, "empty answer beside a confidence"
        elif not (np.isfinite(conf[i]) and 0 <= conf[i] <= 1):
            col, why = judge.confidence, f"confidence {raw_c.iloc[i]!r} is not a number in [0, 1]"
        if why:
            bad[i] = True
            add_error(errors, i, row_error(i, ids[i], col, f"judge {judge.name!r}: {why}; "
                                           "this judge is skipped on the row (fill both cells, "
                                           "or empty both where it was not run)"))
    skip = bad | no_c | no_a
    return np.where(skip, np.nan, conf), np.where(skip, None, keys)


def read_judges(df: pd.DataFrame, judges: list[Judge], offset: int = 0):
    """``(conf, keys, errors)``: (n, S) confidences (NaN: no verdict), (n, S) answer keys
    (:func:`answer_key`) and the row errors (one per row, the first reason)."""
    from scoreband.columns import require_columns, row_ids

    require_columns(df, [(f"`judge` {j.name!r}", c) for j in judges for c in j.columns()])
    ids, errors = row_ids(df, None, offset), {}
    cols = [_judge_cells(df, j, ids, errors) for j in judges]
    conf = np.column_stack([c for c, _ in cols]) if len(df) else np.zeros((0, len(judges)))
    keys = np.column_stack([k for _, k in cols]) if len(df) else \
        np.zeros((0, len(judges)), dtype=object)
    return conf, keys, [errors[i] for i in sorted(errors)]
