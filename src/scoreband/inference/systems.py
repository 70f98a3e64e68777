"""System-level inference: which system is better, and by how much in human terms, from a
few human labels and many metric scores (``scoreband systems``).

Data flow: a table with one row per (system, item) output -> rows checked (a bad row is
reported and skipped) -> a map from the metric columns to the human scale, **cross-fitted**
over the labeled rows (each labeled row's prediction comes from a map fitted on the other
folds, so no label both fits the map and rectifies it; unlabeled rows get the mean of the
fold maps) -> per system the PPI++ mean (:mod:`scoreband.inference.ppi`) beside the
labels-only mean -> every pair of systems, paired on shared items when an item column is
given -> Holm-adjusted p-values -> simultaneous rank sets.

The map is shared by every system (ridge + isotonic, :mod:`scoreband.conformal.pointfit`): a metric
biased differently for each system only costs width, never validity, because each system's
estimate is rectified by its own labels.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.columns import _check_columns, _numeric, _row_error, _row_ids
from scoreband.errors import InputError, RowError
from scoreband.files import write_json
from scoreband.inference.ppi import (
    MeanEstimate,
    classical_mean,
    difference,
    holm,
    labels_for_width,
    p_value,
    ppi_mean,
    rank_sets,
)
from scoreband.records import Scale

__all__ = ["systems_study", "SystemsResult", "METHODS", "MIN_LABELS"]

#: the estimators ``method`` names: power-tuned PPI, plain PPI (lam = 1), labels alone
METHODS = {"ppi++": None, "ppi": 1.0, "classical": 0.0}
#: labeled rows a system needs to be estimated at all
MIN_LABELS = 2


@dataclass
class SystemsResult:
    """What :func:`systems_study` found: ``doc`` (JSON-ready, the keys of ``--out``), the
    skipped rows and the warnings."""

    doc: dict
    errors: list[RowError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if "provenance" not in self.doc:
            from scoreband.provenance import provenance  # lazy: loads httpx, rich

            self.doc["provenance"] = provenance({})

    def to_dict(self) -> dict:
        return self.doc

    def table(self) -> pd.DataFrame:
        """One row per system: estimates and intervals side by side."""
        rows = []
        for name, s in self.doc["systems"].items():
            rows.append({"system": name, "n_labeled": s["n_labeled"],
                         "n_unlabeled": s["n_unlabeled"], "estimate": s["estimate"],
                         "ci_lo": s["ci"][0], "ci_hi": s["ci"][1],
                         "classical": s["classical"]["estimate"],
                         "classical_ci_lo": s["classical"]["ci"][0],
                         "classical_ci_hi": s["classical"]["ci"][1],
                         "effective_labels": s["effective_labels"]})
        return pd.DataFrame(rows)

    def write(self, out, html=None) -> list[Path]:
        """Write the JSON (``out``) and, with ``html``, the HTML report."""
        write_json(out, self.doc)
        paths = [Path(out)]
        if html is not None:
            from scoreband.report.html import write_report  # lazy: loads pydantic

            paths.append(write_report([self.doc], html))
        return paths


# ------------------------------------------------------------------ reading the table
def _rows(df, system_col, scores, target, scale: Scale, item_col, errors: dict):
    """Per-row system, score matrix, target (NaN: unlabeled) and item, with bad rows in
    ``errors`` (0-based position -> RowError)."""
    ids = _row_ids(df, None)
    sysv = df[system_col]
    for i in np.flatnonzero(sysv.isna().to_numpy()):
        errors.setdefault(i, _row_error(i, ids[i], system_col, "no system name (empty cell)"))
    X = np.column_stack([_numeric(df, c, errors, ids) for c in scores])
    raw = df[target]
    y = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float, copy=True)
    empty = raw.isna().to_numpy() | raw.astype(str).str.strip().eq("").to_numpy()
    for i in np.flatnonzero(~empty & ~np.isfinite(y)):
        errors.setdefault(i, _row_error(i, ids[i], target, f"target {raw.iloc[i]!r} is not a "
                                        "number (leave the cell empty for an unlabeled row)"))
    out = ~empty & np.isfinite(y) & ((y < scale.lo - 1e-9) | (y > scale.hi + 1e-9))
    for i in np.flatnonzero(out):
        errors.setdefault(i, _row_error(i, ids[i], target, f"target {y[i]:g} outside the "
                                        f"scale [{scale.lo:g}, {scale.hi:g}] (`scale`)"))
    y[empty] = np.nan
    items = None
    if item_col is not None:
        items = df[item_col].astype(str).to_numpy()
        for i in np.flatnonzero(df[item_col].isna().to_numpy()):
            errors.setdefault(i, _row_error(i, ids[i], item_col, "no item id (empty cell)"))
        seen: dict[tuple, int] = {}
        names = sysv.astype(str).to_numpy()
        for i in range(len(df)):
            if i in errors:
                continue
            key = (names[i], items[i])
            if key in seen:
                errors[i] = _row_error(i, ids[i], item_col, f"item {items[i]!r} appears again "
                                       f"for system {names[i]!r} (first at row "
                                       f"{ids[seen[key]]}): each system scores an item once")
            else:
                seen[key] = i
    return sysv.astype(str).to_numpy(), X, y, items


def _folds(n_lab: int, items, k: int, seed: int) -> np.ndarray:
    """Fold of each labeled row; rows of one item share a fold (an image's difficulty must
    not leak from the map's training folds into the rows it rectifies)."""
    rng = np.random.default_rng([seed, 11])
    if items is None:
        return rng.permutation(np.arange(n_lab) % k)
    uniq, inv = np.unique(items, return_inverse=True)
    return rng.permutation(np.arange(len(uniq)) % k)[inv]


def cross_fit(X, y01, labeled, items, k: int = 5, seed: int = 0) -> tuple[np.ndarray, dict]:
    """Predictions on [0, 1] for every row: out-of-fold for the labeled rows, the mean of
    the ``k`` fold maps for the others."""
    from scoreband.conformal.pointfit import (  # lazy: loads pydantic
        fit_point_model,
        predict_point_model,
    )

    lab = np.flatnonzero(labeled)
    groups = None if items is None else items[lab]
    n_groups = len(lab) if groups is None else len(np.unique(groups))
    if n_groups < 2:  # every label on one item: folds of rows
        groups, n_groups = None, len(lab)
    k = int(min(k, len(lab) // 2, n_groups))
    fold = _folds(len(lab), groups, k, seed)
    f = np.zeros(len(X))
    rest = np.flatnonzero(~labeled)
    for j in range(k):
        train, held = lab[fold != j], lab[fold == j]
        model = fit_point_model(X[train], y01[train])
        f[held] = predict_point_model(model, X[held])
        if len(rest):
            f[rest] += predict_point_model(model, X[rest]) / k
    return f, {"kind": "ridge + isotonic", "folds": k, "n_labeled": len(lab),
               "grouped_by_item": groups is not None}


# ------------------------------------------------------------------ the study
def _native(e: MeanEstimate, scale: Scale, shift: bool = True) -> dict:
    """An estimate on [0, 1] on the native scale (a difference is not shifted)."""
    w = scale.hi - scale.lo
    lo = scale.lo if shift else 0.0
    return {"estimate": lo + w * e.estimate, "se": w * e.se,
            "ci": [lo + w * e.ci[0], lo + w * e.ci[1]]}


def systems_study(df: pd.DataFrame, *, system_col: str, scores, target: str, scale,
                  item_col: str | None = None, alpha: float = 0.05, method: str = "ppi++",
                  plan: float | None = None, strict: bool = False, folds: int = 5,
                  seed: int = 0) -> SystemsResult:
    """Every system's mean human score with a valid ``1 - alpha`` interval, every pair's
    difference, Holm-adjusted p-values and rank sets (see the module docstring).

    Rows whose ``target`` is empty are unlabeled; ``scores`` (one column or several) are
    mapped onto the target's ``scale`` by a cross-fitted map. ``plan``: a full interval
    width on the native scale; the labels per system that reach it are added.
    """
    from scoreband.conformal._core import check_alpha  # lazy: loads pydantic

    check_alpha(alpha)
    if method not in METHODS:
        raise InputError(f"unknown `method` {method!r}; choose one of {', '.join(METHODS)}")
    scores = [scores] if isinstance(scores, str) else list(scores or [])
    if not scores and method != "classical":
        raise InputError("`score`: give at least one metric or judge column (or `method` "
                         "classical for the labels alone)")
    scale = scale if isinstance(scale, Scale) else Scale.parse(scale)
    _check_columns(df, [("`system_col`", system_col), *(("`score`", c) for c in scores),
                        ("`target`", target), ("`item_col`", item_col)])
    if plan is not None and not plan > 0:
        raise InputError(f"`plan` is an interval width on the target's scale (> 0), got {plan}")
    errors: dict[int, RowError] = {}
    notes: list[str] = []
    names, X, y, items = _rows(df, system_col, scores, target, scale, item_col, errors)
    keep = np.array(sorted(set(range(len(df))) - set(errors)), dtype=int)
    if len(keep) == 0:
        raise InputError("no usable rows: " + "; ".join(str(e) for e in
                                                        list(errors.values())[:5]))
    names, X, y = names[keep], X[keep] if len(scores) else np.zeros((len(keep), 0)), y[keep]
    items = None if items is None else items[keep]
    labeled = np.isfinite(y)

    # systems with too few labels
    systems = sorted(set(names), key=str)
    n_lab = {s: int(labeled[names == s].sum()) for s in systems}
    few = [s for s in systems if n_lab[s] < MIN_LABELS]
    if few:
        msg = (f"system(s) {', '.join(f'{s!r} ({n_lab[s]} labeled)' for s in few)} have fewer "
               f"than {MIN_LABELS} labeled rows: no interval can be computed for them")
        if strict:
            raise InputError(msg)
        notes.append(msg + "; excluded (`strict` makes this an error)")
        systems = [s for s in systems if s not in few]
    if not systems:
        raise InputError(f"no system has {MIN_LABELS} or more labeled rows (a labeled row has "
                         f"a `target`); {sum(n_lab.values())} labeled rows in all")
    use = np.isin(names, systems)
    names, X, y, labeled = names[use], X[use], y[use], labeled[use]
    items = None if items is None else items[use]
    y01 = np.where(labeled, (y - scale.lo) / (scale.hi - scale.lo), np.nan)

    lam = METHODS[method]
    informative = [j for j in range(X.shape[1]) if np.ptp(X[:, j]) > 0]
    for j in sorted(set(range(X.shape[1])) - set(informative)):
        notes.append(f"score column {scores[j]!r} is constant ({X[0, j]:g}) on every usable "
                     "row: it carries no information and is left out"
                     + ("; the intervals are those of the labels alone" if not informative
                        else ""))
    if method == "classical" or not informative:
        f01, map_info = np.zeros(len(y)), None
        lam = 0.0
    else:
        X = X[:, informative]
        if labeled.sum() < 4:
            raise InputError(f"the metric-to-human map needs at least 4 labeled rows in all; "
                             f"got {int(labeled.sum())} (or use `method` classical)")
        f01, map_info = cross_fit(X, np.nan_to_num(y01), labeled, items, folds, seed)

    per: dict[str, dict] = {}
    est01: dict[str, MeanEstimate] = {}
    cl01: dict[str, MeanEstimate] = {}
    for s in systems:
        m = names == s
        yl, fl, fu = y01[m & labeled], f01[m & labeled], f01[m & ~labeled]
        cl = classical_mean(yl, alpha)
        e = cl if lam == 0.0 else ppi_mean(yl, fl, fu, alpha, lam)
        est01[s], cl01[s] = e, cl
        eff = len(yl) * (cl.se / e.se) ** 2 if e.se > 0 else float("inf")
        per[s] = {"n_labeled": int(len(yl)), "n_unlabeled": int(len(fu)),
                  **_native(e, scale), "lambda": e.lam,
                  "classical": _native(cl, scale), "effective_labels": float(eff),
                  "width_ratio": (e.se / cl.se) if cl.se > 0 else 1.0}
        if plan is not None:
            w = scale.hi - scale.lo
            lam_s = e.lam
            per[s]["plan"] = labels_for_width(
                plan / w, alpha, float(np.var(yl)), float(np.var(yl - lam_s * fl)), lam_s,
                float(np.var(fu)) if len(fu) else 0.0, len(fu))

    pairs = _pairs(systems, names, y01, f01, labeled, items, est01, cl01, alpha, lam, method,
                   scale, notes)
    adj = holm([p["p_value"] for p in pairs]) if pairs else []
    for p, a in zip(pairs, adj, strict=True):
        p["p_adjusted"] = float(a)
        p["significant"] = bool(a < alpha)
    ranks = rank_sets(systems, pairs, alpha)
    ranking = [{"system": s, "estimate": per[s]["estimate"], "ci": per[s]["ci"],
                "ranks": list(ranks[s])}
               for s in sorted(systems, key=lambda s: -per[s]["estimate"])]
    doc = {"study": "systems", "alpha": alpha, "method": method,
           "scale": {"lo": scale.lo, "hi": scale.hi}, "target": target, "scores": scores,
           "system_col": system_col, "item_col": item_col, "map": map_info,
           "systems": per, "pairs": pairs, "ranking": ranking,
           "n_rows": int(len(df)), "skipped_rows": [str(e) for e in errors.values()],
           "warnings": notes}
    if plan is not None:
        doc["plan"] = {"width": plan, "systems": {s: per[s]["plan"] for s in systems}}
    return SystemsResult(doc, list(errors.values()), notes)


def _pairs(systems, names, y01, f01, labeled, items, est01, cl01, alpha, lam, method, scale,
           notes) -> list[dict]:
    """Every pair's difference ``a - b`` (paired on shared items when ``items``)."""
    out = []
    if items is not None:
        frame = pd.DataFrame({"s": names, "item": items, "y": y01, "f": f01})
        Y = frame.pivot(index="item", columns="s", values="y")
        F = frame.pivot(index="item", columns="s", values="f")
    for a, b in itertools.combinations(systems, 2):
        paired = False
        if items is not None:
            both = F[a].notna() & F[b].notna()
            lab = both & Y[a].notna() & Y[b].notna()
            if lab.sum() >= MIN_LABELS:
                paired = True
                yd = (Y[a] - Y[b])[lab].to_numpy()
                fd = (F[a] - F[b])[lab].to_numpy()
                fu = (F[a] - F[b])[both & ~lab].to_numpy()
                cl = classical_mean(yd, alpha)
                e = cl if lam == 0.0 else ppi_mean(yd, fd, fu, alpha, lam)
                n_items = int(both.sum())
            else:
                notes.append(f"systems {a!r} and {b!r} share fewer than {MIN_LABELS} labeled "
                             "items: compared unpaired")
        if not paired:
            e = difference(est01[a], est01[b], alpha)
            cl = difference(cl01[a], cl01[b], alpha)
            n_items = None
        rec = {"a": a, "b": b, **_native(e, scale, shift=False), "p_value": p_value(e),
               "paired": paired, "n_items": n_items}
        rec["classical"] = _native(cl, scale, shift=False)
        out.append(rec)
    return out
