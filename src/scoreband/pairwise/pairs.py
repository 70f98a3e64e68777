"""Pair tables from score tables, and human preferences from labels or vote counts.

A *score table* holds one row per (system, item): the systems' scores (any metric or judge
column) and optionally a human score. Its *pair table* holds one row per item and pair of
systems on it (``system_a < system_b`` by name): each score column's values for A and B and
their difference ``{score}_diff = A - B``, and, where both rows are labeled, the human
preference ``human`` (``A``, ``B`` or ``tie`` when the two human scores are within
``tie_tol``). A pair table given with a label column or vote-count columns is read by
:func:`pair_labels` into the same form.

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
    """
    scores = [scores] if isinstance(scores, str) else list(scores)
    need = [system_col, item_col, *scores] + ([target] if target else []) + \
        ([response_col] if response_col else []) + list(keep)
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise InputError(f"column(s) {missing} not in the table (it has "
                         f"{list(df.columns)[:20]}); fix the column option(s)")
    if not (np.isfinite(tie_tol) and tie_tol >= 0):
        raise InputError(f"`tie_tol` must be a number >= 0, got {tie_tol!r}")
    errors: list[RowError] = []
    d = df.reset_index(drop=True)
    nums = {}
    for c in scores + ([target] if target else []):
        v = pd.to_numeric(d[c], errors="coerce")
        bad = v.isna() & d[c].notna()
        for i in np.flatnonzero(bad.to_numpy())[:1000]:
            errors.append(RowError(str(i), c, f"{d[c].iloc[i]!r} is not a number; the row's "
                                              "pairs leave it empty", int(i)))
        nums[c] = v.to_numpy(float)
    sys_ = d[system_col].astype(str).to_numpy()
    item = d[item_col].astype(str).to_numpy()
    # a system twice on an item: which row is it? every row of it there is skipped (the
    # same whatever the order of the table)
    dup = pd.Series(list(zip(item, sys_, strict=True))).duplicated(keep=False).to_numpy()
    for i in np.flatnonzero(dup):
        errors.append(RowError(str(i), system_col,
                               f"system {sys_[i]!r} appears more than once on item "
                               f"{item[i]!r}: a system is not compared with itself; its rows "
                               "on this item are skipped", int(i)))
    rows = []
    resp = d[response_col].astype(str).to_numpy() if response_col else None
    order = np.lexsort((sys_, item))
    order = order[~dup[order]]
    bounds = np.flatnonzero(np.r_[True, item[order][1:] != item[order][:-1], True])
    for s, e in zip(bounds[:-1], bounds[1:], strict=False):
        idx = order[s:e]
        for x in range(len(idx)):
            for y in range(x + 1, len(idx)):
                i, j = idx[x], idx[y]
                if resp is not None and resp[i].strip() == resp[j].strip():
                    errors.append(RowError(f"{i}/{j}", response_col,
                                           f"systems {sys_[i]!r} and {sys_[j]!r} gave the "
                                           f"same response on item {item[i]!r}: nothing to "
                                           "prefer; the pair is skipped", int(j)))
                    continue
                rows.append((i, j))
    if not rows:
        raise InputError("no pair of systems on a shared item: the table needs several "
                         f"systems ({system_col!r}) scored on the same items ({item_col!r})")
    ia = np.array([r[0] for r in rows])
    ib = np.array([r[1] for r in rows])
    out = {item_col: d[item_col].to_numpy()[ia], "system_a": sys_[ia], "system_b": sys_[ib]}
    for c in keep:
        out[c] = d[c].to_numpy()[ia]
    if resp is not None:
        out[f"{response_col}_a"], out[f"{response_col}_b"] = resp[ia], resp[ib]
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


def parse_labels(values, column: str = "label") -> tuple[np.ndarray, list[RowError]]:
    """Verdict cells as ``A`` / ``B`` / ``tie`` (case-insensitive; ``1`` / ``2`` / ``0``,
    ``draw``, ``equal`` too); empty where missing; anything else reported and left empty.

    >>> parse_labels(["a", "B", "Tie", "", "C"])[0].tolist()
    ['A', 'B', 'tie', '', '']
    """
    s = pd.Series(values)
    out = np.full(len(s), "", dtype=object)
    errors = []
    for i, v in enumerate(s.to_numpy(dtype=object)):
        if v is None or (isinstance(v, float) and np.isnan(v)):
            continue
        t = str(v).strip()
        if isinstance(v, float) and v.is_integer():
            t = str(int(v))
        if t.lower() in ("", "nan", "na", "none"):
            continue
        lab = _SPELLINGS.get(t.lower())
        if lab is None:
            errors.append(RowError(str(i), column, f"{t[:40]!r} is not a verdict: use A, B "
                                                   "or tie; the row is treated as unlabeled",
                                   i))
            continue
        out[i] = lab
    raw = {str(int(v)) if isinstance(v, float) and v.is_integer() else str(v).strip()
           for v in s.to_numpy(dtype=object)
           if v is not None and not (isinstance(v, float) and np.isnan(v))}
    if raw and raw <= {"0", "1"} and "1" in raw:
        warnings.warn(f"{column}: only 0 and 1 in the verdicts, read as tie (0) and A (1) - "
                      "the 1 / 2 / 0 spelling of A / B / tie; if 1 means 'A better' and 0 "
                      "'B better', write A and B instead", UserWarning, stacklevel=2)
    return out, errors


def pair_labels(df: pd.DataFrame, *, label_col: str | None = None,
                votes: tuple | None = None) -> tuple[np.ndarray, np.ndarray, list[RowError]]:
    """The human preference of each pair: ``(label, share)``. ``label`` is ``A`` / ``B`` /
    ``tie`` or empty (unlabeled); ``share`` (n, 3) is the share of votes for A, B, tie (the
    one-hot label when only a label is given; NaN unlabeled).

    ``votes``: ``(col_a, col_b)`` or ``(col_a, col_b, col_tie)`` vote counts (PASCAL-50S:
    48 votes a pair): the label is the majority (``tie`` when A and B have as many votes,
    or the tie column the most) and the shares are kept, so win rates use every vote.
    """
    n = len(df)
    share = np.full((n, 3), np.nan)
    if votes:
        cols = list(votes)
        if len(cols) not in (2, 3):
            raise InputError("vote counts: give the columns of A's votes, B's votes and "
                             "optionally the tie votes")
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise InputError(f"vote column(s) {missing} not in the table")
        errors = []
        V = np.column_stack([pd.to_numeric(df[c], errors="coerce").to_numpy(float)
                             for c in cols] + ([np.zeros(n)] if len(cols) == 2 else []))
        bad = ~np.isfinite(V).all(axis=1) | (V < 0).any(axis=1)
        tot = V.sum(axis=1)
        for i in np.flatnonzero(bad | (tot <= 0)):
            if not np.isnan(V[i]).all():
                errors.append(RowError(str(i), cols[0], f"vote counts {V[i].tolist()} are not "
                                                        "counts >= 0 with at least one vote; "
                                                        "the pair is unlabeled", int(i)))
        ok = ~bad & (tot > 0)
        share[ok] = V[ok] / tot[ok, None]
        lab = np.full(n, "", dtype=object)
        a, b, t = V[:, 0], V[:, 1], V[:, 2]
        lab[ok] = np.where((t >= np.maximum(a, b)) | (a == b), "tie",
                           np.where(a > b, "A", "B"))[ok]
        return lab, share, errors
    if label_col is None:
        raise InputError("give the human preference: a label column (A / B / tie) or vote "
                         "count columns")
    if label_col not in df.columns:
        raise InputError(f"label column {label_col!r} not in the table (it has "
                         f"{list(df.columns)[:20]})")
    lab, errors = parse_labels(df[label_col], label_col)
    for j, name in enumerate(LABELS):
        share[lab != "", j] = (lab[lab != ""] == name).astype(float)
    return lab, share, errors
