"""A pairwise rule's inputs read from a pair table: the feature or probability columns as
floats, a bad row named (never a verdict), and why a column cannot be fitted on. The rule
itself lives in :mod:`scoreband.pairwise.selective`."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from scoreband.engine.cells import cell_text
from scoreband.errors import ERROR_COLUMN, InputError, RowError

__all__ = ["PROB_SUM_TOL", "rule_inputs", "fit_columns_problem", "no_usable_pair"]

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


def fit_columns_problem(df: pd.DataFrame, columns, X: np.ndarray, labeled: np.ndarray,
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


def no_usable_pair(columns, X: np.ndarray, labeled: np.ndarray, errors: list[RowError],
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
