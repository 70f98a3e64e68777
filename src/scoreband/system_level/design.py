"""The label design ``systems --propose-labels`` draws, written to a file and checked against
the labels that come back (``systems --design FILE``).

What the file holds: for every row of the proposal's table, keyed by the row's identity
(:func:`scoreband.conformal.randomness.frame_keys` of every input column but the human score,
so the key survives the labeling, a reordering, a format change or a column added), its
inclusion probability and its state - ``prior`` (labeled before the proposal: probability 1),
``proposed`` (drawn) or ``not proposed``. Identical rows share a key and are matched by count.

What the check refuses, each with the rows and the fix (an error, not a correction: no
weighting makes these labels a draw of the design):

* a row of the table that is not in the design (another table, or rows added);
* a proposed row left unlabeled - a non-response, which the design's probabilities do not
  describe (the labeled ones might be the easy ones); label it, or give up the design;
* a row labeled that was never proposed (nor labeled before) - weighting it as a draw would
  count a choice as chance;
* a row labeled before the proposal whose label is gone.

Rows labeled before the proposal keep probability 1: ``systems`` estimates the mean from them
(a uniform sample, as without a design) and from the drawn rows (weighted by ``1 / pi``)
separately and combines the two (:func:`scoreband.system_level.active.certain_and_drawn`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.columns import row_ids
from scoreband.conformal.randomness import frame_keys
from scoreband.errors import InputError

__all__ = ["build_design", "write_design", "read_design", "design_probabilities",
           "check_proposal_column", "DESIGN_KIND", "STATES"]

DESIGN_KIND = "scoreband-label-design"
FORMAT_VERSION = 1
STATES = ("prior", "proposed", "not proposed")
#: columns a proposal adds, never part of a row's identity
_ADDED = ("inclusion_prob", "propose_label")


def key_columns(df: pd.DataFrame, target: str | None) -> list[str]:
    """Every column that identifies a row: all but the human score and the proposal's own."""
    return [c for c in df.columns if c != target and c not in _ADDED]


def build_design(df: pd.DataFrame, pi, prior, proposed, *, target: str | None,
                 meta: dict) -> dict:
    """The design of a proposal: ``pi`` (NaN for rows left out), ``prior`` and ``proposed``
    (booleans per row of ``df``, the proposal's input table)."""
    cols = key_columns(df, target)
    keys = frame_keys(df[cols])
    pi = np.asarray(pi, float)
    state = np.where(prior, "prior", np.where(proposed, "proposed", "not proposed"))
    rows = [[f"{int(k):016x}", None if not np.isfinite(p) else float(p), str(s)]
            for k, p, s in zip(keys, pi, state, strict=True)]
    return {"kind": DESIGN_KIND, "format_version": FORMAT_VERSION, "key_columns": cols,
            "target": target, **meta, "rows": rows}


def write_design(path, design: dict) -> Path:
    """Write ``design`` to ``path`` (JSON, atomically; the output policy applies)."""
    from scoreband.files import check_output
    from scoreband.json_io import write_json

    p = check_output(path, what="`--design` file")
    write_json(p, design)
    return p


def read_design(path) -> dict:
    """A design file, its kind, version and rows checked."""
    from scoreband.json_io import read_json

    d = read_json(path, what="`--design` file",
                  missing="give the file `systems --propose-labels` wrote (`--design`)")
    if not isinstance(d, dict) or d.get("kind") != DESIGN_KIND:
        raise InputError(f"`--design` file {str(path)!r} is not a label design (its 'kind' "
                         f"is not {DESIGN_KIND!r}): give the file `systems --propose-labels` "
                         "wrote")
    if d.get("format_version") != FORMAT_VERSION:
        raise InputError(f"`--design` file {str(path)!r} has format_version "
                         f"{d.get('format_version')!r}; this scoreband reads {FORMAT_VERSION}")
    rows, cols = d.get("rows"), d.get("key_columns")
    ok = (isinstance(rows, list) and isinstance(cols, list) and all(
        isinstance(r, list) and len(r) == 3 and isinstance(r[0], str) and r[2] in STATES
        and (r[1] is None or (isinstance(r[1], (int, float)) and 0 < r[1] <= 1))
        for r in rows))
    if not ok:
        raise InputError(f"`--design` file {str(path)!r} is damaged: 'rows' must be "
                         "[key, probability in (0, 1] or null, state] entries and "
                         "'key_columns' a list; write it again with --propose-labels")
    return d


def _listed(ids, idx, limit=5) -> str:
    idx = np.sort(np.asarray(idx, dtype=int))  # in table order
    shown = ", ".join(str(ids[i]) for i in idx[:limit])
    return f"{len(idx)} row(s) ({shown}{', ...' if len(idx) > limit else ''})"


def design_probabilities(df: pd.DataFrame, design: dict, labeled) -> np.ndarray:
    """Each row's inclusion probability under ``design`` (1 for rows labeled before the
    proposal), after checking the labels against it (see the module docstring; an
    :class:`InputError` naming the rows and the fix)."""
    cols = design["key_columns"]
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise InputError(f"the table lacks column(s) {', '.join(map(repr, missing))} that "
                         "identify its rows in the `--design` file: give the proposal's "
                         "table with its labels filled in")
    labeled = np.asarray(labeled, bool)
    keys = np.array([f"{int(k):016x}" for k in frame_keys(df[cols])])
    ids = row_ids(df, None)
    entries: dict[str, list] = {}
    for k, p, s in design["rows"]:
        entries.setdefault(k, []).append((p, s))
    pi = np.full(len(df), np.nan)
    problems = {"absent": [], "unlabeled": [], "unproposed": [], "lost": [], "count": []}
    for k, idx in pd.Series(np.arange(len(df))).groupby(keys).groups.items():
        idx = np.asarray(idx)
        got = entries.get(k)
        if got is None:
            problems["absent"].extend(idx)
            continue
        if len(got) != len(idx):
            problems["count"].extend(idx)
            continue
        drawn = [e for e in got if e[1] != "not proposed"]
        rest = [e for e in got if e[1] == "not proposed"]
        lab, unl = idx[labeled[idx]], idx[~labeled[idx]]
        n_prior = sum(e[1] == "prior" for e in got)
        if len(lab) < n_prior:
            problems["lost"].extend(unl[:n_prior - len(lab)])
        elif len(lab) < len(drawn):
            problems["unlabeled"].extend(unl[:len(drawn) - len(lab)])
        elif len(lab) > len(drawn):
            problems["unproposed"].extend(lab[len(drawn):])
        order = sorted(drawn, key=lambda e: e[1] != "prior") + rest
        for i, (p, s) in zip(list(lab) + list(unl), order, strict=True):
            pi[i] = 1.0 if s == "prior" else (np.nan if p is None else p)
    _raise(problems, ids)
    return pi


def _raise(problems: dict, ids) -> None:
    why = {
        "absent": "are not in the `--design` file (another table, or rows added since the "
                  "proposal): give the proposal's table",
        "count": "repeat a row a different number of times than the proposal's table did: "
                 "give the proposal's table with its labels filled in",
        "unlabeled": "were proposed but have no label: label them (an unlabeled proposed row "
                     "is a non-response the design's probabilities do not describe, so "
                     "weighting the others would be biased), or run without --design",
        "unproposed": "are labeled but were never proposed (nor labeled before the "
                      "proposal): a choice, not a draw of the design, so no weight makes them "
                      "one; remove their labels, or run without --design (all labels then "
                      "taken as a uniform sample)",
        "lost": "were labeled before the proposal and their label is gone: restore it",
    }
    msgs = [f"{_listed(ids, v)} {why[k]}" for k, v in problems.items() if len(v)]
    if msgs:
        raise InputError("the labels do not match the `--design` file: " + "; ".join(msgs))


def check_proposal_column(proposed, labeled, pi, ids) -> None:
    """``systems --inclusion-prob`` on a proposal's table (its ``propose_label`` column): the
    labels must be the draw's - every proposed row labeled, no row labeled that was neither
    proposed nor certain (probability 1: labeled before the proposal). Otherwise an
    :class:`InputError` naming the rows and the fix (``--design``, which checks and weights
    the labels by the rows' identity)."""
    proposed, labeled = np.asarray(proposed, bool), np.asarray(labeled, bool)
    certain = np.isfinite(pi) & (pi >= 1)
    unlabeled = np.flatnonzero(proposed & ~labeled)
    unproposed = np.flatnonzero(labeled & ~proposed & ~certain)
    msgs = ([f"{_listed(ids, unlabeled)} were proposed (propose_label) but have no label: "
             "label them (weighting the others would be biased)"] if len(unlabeled) else []
            ) + ([f"{_listed(ids, unproposed)} are labeled but were not proposed (nor "
                  "labeled before the proposal, probability 1): a choice, not a draw of the "
                  "design; remove their labels"] if len(unproposed) else [])
    if msgs:
        raise InputError("the labels do not match the table's propose_label column: "
                         + "; ".join(msgs) + ". Give the design file the proposal wrote "
                         "(--design FILE / `design`) instead of --inclusion-prob: it checks "
                         "the labels by row identity and says what to do; or drop the "
                         "propose_label column to weight the labels as they are")
