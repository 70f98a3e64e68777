"""Pair tables from score tables, and human preferences from labels or vote counts.

A *score table* holds one row per (system, item): the systems' scores (any metric or judge
column) and optionally a human score. Its *pair table* holds one row per item and pair of
systems on it (``system_a < system_b`` by name): each score column's values for A and B and
their difference ``{score}_diff = A - B``, and, where both rows are labeled, the human
preference ``human`` (``A``, ``B`` or ``tie`` when the two human scores are within
``tie_tol``). A pair table given with a label column or vote-count columns is read by
:func:`pair_labels` into the same form.

Names, throughout scoreband: an *item* is what a score is given to (an image and its caption,
one row of a score table per system); a *pair* is always two systems (two responses)
compared on one item, never an image and its caption.

>>> import pandas as pd
>>> df = pd.DataFrame({"sys": ["x", "y", "z"], "item": [1, 1, 1], "m": [0.9, 0.2, 0.5],
...                    "h": [5, 2, 2]})
>>> res = make_pairs(df, system_col="sys", item_col="item", scores=["m"], target="h")
>>> res.table[["system_a", "system_b", "m_diff", "human"]].round(2).values.tolist()
[['x', 'y', 0.7, 'A'], ['x', 'z', 0.4, 'A'], ['y', 'z', -0.3, 'tie']]
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from scoreband.errors import InputError, RowError
from scoreband.tables import NA_TEXT

__all__ = ["LABELS", "PairTable", "make_pairs", "pair_labels", "parse_labels", "preference"]

#: the verdicts: the first system better, the second better, neither
LABELS = ("A", "B", "tie")
_SPELLINGS = {"a": "A", "b": "B", "tie": "tie", "t": "tie", "draw": "tie", "equal": "tie",
              "=": "tie", "1": "A", "2": "B", "0": "tie"}


@dataclass
class PairTable:
    """A pair table, the rows skipped (with reasons) and warnings."""

    table: pd.DataFrame
    errors: list[RowError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def preference(diff, tie_tol: float = 0.0) -> np.ndarray:
    """``A`` where ``diff > tie_tol``, ``B`` where ``diff < -tie_tol``, ``tie`` between;
    empty where ``diff`` is NaN.

    >>> preference([0.4, -0.1, 0.0, float("nan")], 0.25).tolist()
    ['A', 'tie', 'tie', '']
    """
    d = np.asarray(diff, float)
    out = np.where(d > tie_tol, "A", np.where(d < -tie_tol, "B", "tie")).astype(object)
    out[np.isnan(d)] = ""
    return out


def make_pairs(df: pd.DataFrame, *, system_col: str, item_col: str, scores, target=None,
               tie_tol: float = 0.0, response_col: str | None = None,
               keep=()) -> PairTable:
    """Every pair of systems on the same item (see module docstring).

    Parameters
    ----------
    df : the score table (one row per system and item).
    system_col, item_col : str
    scores : list of str
        Score columns (a metric's, a judge's): ``{s}_a``, ``{s}_b`` and ``{s}_diff`` per pair.
    target : str, optional
        The human score; ``human`` is the preference where both rows have one.
    tie_tol : float
        Human scores within this of each other are a tie (0: only equal scores).
    response_col : str, optional
        The responses: a pair whose two responses are identical is reported and skipped.
    keep : columns of the item copied to the pair (e.g. the task, the image).

    Cells are kept as written: the item, the ``keep`` columns and the responses are copied,
    never parsed, and systems are compared by their text (``01`` and ``1`` are two
    systems). Read the table as text to keep them so in a written pair table
    (``read_table(path, text=True)``, as ``scoreband pairs`` does for a CSV / TSV / JSONL
    output). Rows are named as every command names them
    (:class:`scoreband.columns.RowIds`).
    """
    from scoreband.columns import row_ids

    scores = [scores] if isinstance(scores, str) else list(scores)
    _check_options(df, [system_col, item_col, *scores] + ([target] if target else []) +
                   ([response_col] if response_col else []) + list(keep), tie_tol)
    errors: list[RowError] = []
    d = df.reset_index(drop=True)
    ids = row_ids(d, None)
    nums = _number_cells(d, scores + ([target] if target else []), ids, errors)
    sys_, item = _texts(d[system_col]), _texts(d[item_col])
    skip, n_dup = _unpairable_rows(sys_, item, ids, system_col, item_col, errors)
    resp = _texts(d[response_col]) if response_col else None
    rows = _pair_rows(sys_, item, resp, skip, ids, response_col, errors)
    if not rows:
        why = (f" ({n_dup} row(s) skipped: a system more than once on an item)"
               if n_dup else "")
        raise InputError("no pair of systems on a shared item: the table needs several "
                         f"systems ({system_col!r}) scored on the same items ({item_col!r})"
                         + why)
    ia = np.array([r[0] for r in rows])
    ib = np.array([r[1] for r in rows])
    out = _copied_cells(d, ia, ib, sys_, item_col, keep, response_col)
    for c in scores:
        out[f"{c}_a"], out[f"{c}_b"] = nums[c][ia], nums[c][ib]
        out[f"{c}_diff"] = nums[c][ia] - nums[c][ib]
    warnings = []
    if target:
        ya, yb = nums[target][ia], nums[target][ib]
        out[f"{target}_a"], out[f"{target}_b"] = ya, yb
        out["human"] = preference(ya - yb, tie_tol)
        if not (out["human"] != "").any():
            warnings.append(f"no pair has a human score ({target!r}) for both systems: "
                            "the pair table has no human preference")
    return PairTable(pd.DataFrame(out), errors, warnings)


def _check_options(df: pd.DataFrame, need: list, tie_tol: float) -> None:
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise InputError(f"column(s) {missing} not in the table (it has "
                         f"{list(df.columns)[:20]}); fix the column option(s)")
    if not (np.isfinite(tie_tol) and tie_tol >= 0):
        raise InputError(f"`tie_tol` must be a number >= 0, got {tie_tol!r}")


def _copied_cells(d: pd.DataFrame, ia, ib, sys_, item_col: str, keep,
                  response_col: str | None) -> dict:
    """The pair table's copied columns: the item, the two systems, the ``keep`` columns
    (system A's row) and both responses - cells as written, never parsed (read the table
    as text, as ``scoreband pairs`` does, to keep 0007 so)."""
    out = {item_col: d[item_col].to_numpy()[ia], "system_a": sys_[ia], "system_b": sys_[ib]}
    for c in keep:
        out[c] = d[c].to_numpy()[ia]
    if response_col:
        cells = d[response_col].to_numpy()
        out[f"{response_col}_a"], out[f"{response_col}_b"] = cells[ia], cells[ib]
    return out


def _number_cells(d: pd.DataFrame, cols: list, ids, errors: list) -> dict:
    """Each column's numbers (NaN where missing); a cell that is not a number (and not a
    missing-value text) is a row error (the first 1000 of each column)."""
    nums = {}
    for c in cols:
        v = pd.to_numeric(d[c], errors="coerce")
        text = _texts(d[c])
        bad = v.isna().to_numpy() & ~np.isin(np.char.strip(text), list(NA_TEXT))
        for i in np.flatnonzero(bad)[:1000]:
            errors.append(RowError(ids[i], c, f"{text[i][:40]!r} is not a number; the row's "
                                              "pairs leave it empty", int(i)))
        nums[c] = v.to_numpy(float)
    return nums


def _unpairable_rows(sys_, item, ids, system_col: str, item_col: str,
                     errors: list) -> tuple[np.ndarray, int]:
    """The rows in no pair (a mask) and how many are a system twice on an item; each a row
    error: an empty system or item cell, or a system
    twice on an item (which row is it? every row of it there is skipped, the same whatever
    the order of the table)."""
    empty = (np.char.strip(sys_) == "") | (np.char.strip(item) == "")
    for i in np.flatnonzero(empty):
        col = system_col if not sys_[i].strip() else item_col
        errors.append(RowError(ids[i], col, "the cell is empty: the row is in no pair", int(i)))
    dup = pd.Series(list(zip(item, sys_, strict=True))).duplicated(keep=False).to_numpy() \
        & ~empty
    for i in np.flatnonzero(dup):
        errors.append(RowError(ids[i], system_col,
                               f"system {str(sys_[i])!r} appears more than once on item "
                               f"{str(item[i])!r}: a system is not compared with itself; "
                               "its rows on this item are skipped", int(i)))
    return dup | empty, int(dup.sum())


def _pair_rows(sys_, item, resp, skip, ids, response_col, errors: list) -> list:
    """``(i, j)`` row positions of every pair of systems on the same item (systems in text
    order within an item); a pair of identical responses is a row error, skipped."""
    rows = []
    order = np.lexsort((sys_, item))
    order = order[~skip[order]]
    bounds = np.flatnonzero(np.r_[True, item[order][1:] != item[order][:-1], True])
    for s, e in zip(bounds[:-1], bounds[1:], strict=False):
        idx = order[s:e]
        for x in range(len(idx)):
            for y in range(x + 1, len(idx)):
                i, j = idx[x], idx[y]
                if resp is not None and resp[i].strip() == resp[j].strip():
                    errors.append(RowError(
                        f"{ids[i]}/{ids[j]}", response_col,
                        f"systems {str(sys_[i])!r} and {str(sys_[j])!r} gave the same "
                        f"response on item {str(item[i])!r}: nothing to prefer; the pair is "
                        "skipped", int(j)))
                    continue
                rows.append((i, j))
    return rows


def _texts(col: pd.Series) -> np.ndarray:
    """A column's cells as written (a JSON number's literal; empty for None / NaN): names
    and ids are compared as text, so ``01`` and ``1`` stay two."""
    return np.array(["" if _is_missing(v) else (getattr(v, "text", None) or str(v))
                     for v in col.to_numpy(dtype=object)], dtype=object).astype(str)


def _note_spellings(spellings: dict, column: str) -> None:
    """One warning per distinct spelling read as a verdict it is not written as."""
    for raw, (lab, n) in list(spellings.items())[:20]:
        warnings.warn(f"{column}: {raw!r} read as {lab} ({n} cell{'s' if n > 1 else ''})",
                      UserWarning, stacklevel=3)
    if len(spellings) > 20:
        warnings.warn(f"{column}: {len(spellings) - 20} more spellings read as A / B / tie",
                      UserWarning, stacklevel=3)


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v))


def parse_labels(values, column: str = "label", *, ids=None
                 ) -> tuple[np.ndarray, list[RowError]]:
    """Verdict cells as ``A`` / ``B`` / ``tie`` (case-insensitive, spaces around ignored;
    ``1`` / ``2`` / ``0``, ``draw``, ``equal`` too); empty where missing; anything else
    reported and left empty. A cell not written exactly ``A``, ``B`` or ``tie`` is said
    once per distinct spelling (a warning: ``'a' read as A (3 cells)``). ``ids``: the
    rows' names (default 1-based numbers, :class:`scoreband.columns.RowIds`).

    >>> parse_labels(["A", "B", "tie", "", "C"])[0].tolist()
    ['A', 'B', 'tie', '', '']
    """
    s = pd.Series(values)
    ids = [str(i + 1) for i in range(len(s))] if ids is None else ids
    out = np.full(len(s), "", dtype=object)
    errors = []
    spellings: dict[str, list] = {}
    raw = set()
    for i, v in enumerate(s.to_numpy(dtype=object)):
        if _is_missing(v):
            continue
        written = getattr(v, "text", None) or str(v)
        t = written.strip()
        if isinstance(v, float) and v.is_integer():
            t = str(int(v))
        if t in NA_TEXT or t.lower() in ("nan", "na", "none"):
            continue
        raw.add(t)
        lab = _SPELLINGS.get(t.lower())
        if lab is None:
            errors.append(RowError(ids[i], column, f"{written[:40]!r} is not a verdict: use "
                                                   "A, B or tie; the pair is treated as "
                                                   "unlabeled", i))
            continue
        out[i] = lab
        if written != lab:
            spellings.setdefault(written, [lab, 0])[1] += 1
    if raw and raw <= {"0", "1"} and "1" in raw:
        warnings.warn(f"{column}: only 0 and 1 in the verdicts, read as tie (0) and A (1) - "
                      "the 1 / 2 / 0 spelling of A / B / tie; if 1 means 'A better' and 0 "
                      "'B better', write A and B instead", UserWarning, stacklevel=2)
    else:
        _note_spellings(spellings, column)
    return out, errors


def _vote_counts(df: pd.DataFrame, cols: list[str], ids) -> tuple[np.ndarray, list[RowError]]:
    """Vote-count cells as floats: a whole number >= 0, or empty (the pair unlabeled); any
    other cell (``2.5``, ``x``, ``-1``) is a row error quoting the cell as written, and the
    row's counts are NaN."""
    n = len(df)
    V = np.full((n, len(cols)), np.nan)
    errors = []
    bad_rows = set()
    for j, c in enumerate(cols):
        vals = df[c].to_numpy(dtype=object)
        num = pd.to_numeric(df[c], errors="coerce").to_numpy(float)
        for i in range(n):
            v = vals[i]
            written = "" if _is_missing(v) else (getattr(v, "text", None) or str(v))
            if written.strip() in NA_TEXT:
                continue
            x = num[i]
            if not (np.isfinite(x) and x >= 0 and float(x).is_integer()):
                if i not in bad_rows and len(errors) < 100000:
                    errors.append(RowError(ids[i], c, f"{written[:40]!r} is not a vote count "
                                                      "(a whole number >= 0); the pair is "
                                                      "unlabeled", i))
                bad_rows.add(i)
                continue
            V[i, j] = x
    for i in bad_rows:
        V[i] = np.nan
    return V, errors


def pair_labels(df: pd.DataFrame, *, label_col: str | None = None,
                votes: tuple | None = None, ids=None
                ) -> tuple[np.ndarray, np.ndarray, list[RowError]]:
    """The human preference of each pair: ``(label, share)``. ``label`` is ``A`` / ``B`` /
    ``tie`` or empty (unlabeled); ``share`` (n, 3) is the share of votes for A, B, tie (the
    one-hot label when only a label is given; NaN unlabeled).

    ``votes``: ``(col_a, col_b)`` or ``(col_a, col_b, col_tie)`` vote counts (PASCAL-50S:
    48 votes a pair): the label is the majority (``tie`` when A and B have as many votes,
    or the tie column the most) and the shares are kept, so win rates use every vote. A
    count that is not a whole number >= 0 is a row error quoting the cell; a row whose
    counts are all empty is unlabeled. ``ids``: the rows' names (default
    :func:`scoreband.columns.row_ids`).
    """
    from scoreband.columns import row_ids

    n = len(df)
    ids = row_ids(df.reset_index(drop=True), None) if ids is None else ids
    share = np.full((n, 3), np.nan)
    if votes:
        cols = list(votes)
        if len(cols) not in (2, 3):
            raise InputError("vote counts: give the columns of A's votes, B's votes and "
                             "optionally the tie votes")
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise InputError(f"vote column(s) {missing} not in the table")
        V, errors = _vote_counts(df, cols, ids)
        if len(cols) == 2:
            V = np.column_stack([V, np.where(np.isnan(V).all(axis=1), np.nan, 0.0)])
        some = ~np.isnan(V).all(axis=1)
        part = some & np.isnan(V).any(axis=1)
        tot = np.nansum(V, axis=1)
        seen = {e.position for e in errors}
        for i in np.flatnonzero((part | (some & (tot <= 0))) & ~np.isin(
                np.arange(n), list(seen))):
            errors.append(RowError(ids[i], cols[0], "vote counts "
                                   f"{[('' if np.isnan(v) else int(v)) for v in V[i, :len(cols)]]} need "
                                   "every column and at least one vote; the pair is "
                                   "unlabeled", int(i)))
        ok = ~np.isnan(V).any(axis=1) & (tot > 0)
        share[ok] = V[ok] / tot[ok, None]
        lab = np.full(n, "", dtype=object)
        a, b, t = V[:, 0], V[:, 1], V[:, 2]
        with np.errstate(invalid="ignore"):
            lab[ok] = np.where((t >= np.maximum(a, b)) | (a == b), "tie",
                               np.where(a > b, "A", "B"))[ok]
        return lab, share, errors
    if label_col is None:
        raise InputError("give the human preference: a label column (A / B / tie) or vote "
                         "count columns")
    if label_col not in df.columns:
        raise InputError(f"label column {label_col!r} not in the table (it has "
                         f"{list(df.columns)[:20]})")
    lab, errors = parse_labels(df[label_col], label_col, ids=ids)
    for j, name in enumerate(LABELS):
        share[lab != "", j] = (lab[lab != ""] == name).astype(float)
    return lab, share, errors
