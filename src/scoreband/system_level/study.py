"""System-level inference: which system is better, and by how much in human terms, from a
few human labels and many metric scores (``scoreband systems``).

Data flow: a table with one row per (system, item) output -> rows checked (a bad row is
reported and skipped) -> a map from the metric columns to the human scale, **cross-fitted**
over the labeled rows (each labeled row's prediction comes from a map fitted on the other
folds, so no label both fits the map and rectifies it; unlabeled rows get the mean of the
fold maps) -> per system the PPI++ mean (:mod:`scoreband.system_level.ppi`) beside the
labels-only mean -> every pair of systems, paired on shared items when an item column is
given -> Holm-adjusted p-values -> simultaneous rank sets.

The map is shared by every system (ridge + isotonic, :mod:`scoreband.conformal.pointfit`): a
metric biased differently for each system costs width, not coverage, because each system's
estimate is rectified by its own labels. What the intervals assume: each system's labeled rows
are a random sample of its rows (labeling does not depend on the target or the score), the
unlabeled rows come from the same population, and Student's t (``n - 1`` degrees of freedom,
``n - 2`` when PPI++ fits its weight) is accurate for the studentised mean - checked by
simulation from :data:`MIN_LABELS` labels per system (``tests/system_level``). Degenerate inputs
are said and handled, never turned into a zero-width interval: labels with no spread, a score
column that copies the label, the target given as a score.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.columns import SystemsInputs, require_columns, systems_inputs
from scoreband.datatypes import Scale
from scoreband.errors import InputError
from scoreband.report.result import StudyResult
from scoreband.system_level.active import (
    MIN_STRATUM_LABELS,
    design_variance_ratio,
    weighted_estimate,
)
from scoreband.system_level.ppi import (
    MIN_LABELS,
    MeanEstimate,
    classical_mean,
    difference,
    holm,
    labels_for_width,
    p_value,
    ppi_mean,
    rank_sets,
    unlabeled_variance,
    worst_case_mean,
)

__all__ = ["systems_study", "systems_arrays", "SystemsResult", "METHODS", "MIN_LABELS", "MIN_PAIRED_FRACTION",
           "MIN_STRATUM_LABELS", "ACTIVE_PAYS"]

#: the estimators ``method`` names: power-tuned PPI, plain PPI (lam = 1), labels alone
METHODS = {"ppi++": None, "ppi": 1.0, "classical": 0.0}
#: a pair is compared paired (on the items labeled for both systems) when at least
#: ``MIN_LABELS`` items and at least this fraction of the fewer labels of the two systems are
#: labeled for both; otherwise unpaired (each system on all of its labels, variances added).
#: The choice depends on the counts only, never on the labels' values, so it keeps coverage.
#: Pairing on ``n_both`` items beats the unpaired estimate on ``n`` labels each when
#: ``n_both > n (1 - rho)``, rho the within-item correlation of the two systems' labels:
#: one half is the break-even at rho = 0.5.
MIN_PAIRED_FRACTION = 0.5
#: the predicted width ratio active / uniform below which ``plan`` says active labeling pays
ACTIVE_PAYS = 0.95


class SystemsResult(StudyResult):
    """What :func:`systems_study` found: a :class:`~scoreband.report.result.StudyResult` of
    kind ``systems`` (``doc``: the keys of ``--out``; ``errors``: the skipped rows;
    ``warnings``) with its per-system table; ``write(out, html=None)`` writes the JSON file
    and, with ``html``, the report."""

    def __init__(self, doc: dict, errors=(), warnings=()):
        super().__init__("systems", doc, errors=list(errors), warnings=list(warnings))

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

    def write(self, out, html=None) -> list[Path]:  # a file, where a study writes a folder
        """Write the JSON (``out``) and, with ``html``, the HTML report."""
        return self.save(out, html)


# ------------------------------------------------------------------ reading the table
def _vanished_systems(names, keep, errors: dict, system_col: str) -> list[str]:
    """A warning per system every row of which was skipped (say, its score cells all
    empty): it would otherwise vanish from the results without a word. Rows with no
    system name are not a system."""
    kept = set(names[keep]) if len(keep) else set()
    named = [i for i in errors if str(errors[i].column) != system_col]
    out = []
    for s in sorted(set(names[named]) - kept, key=str):
        rows = [i for i in named if names[i] == s]
        cols = sorted({str(errors[i].column) for i in rows})
        out.append(f"system {s!r}: all of its {len(rows)} rows were skipped (column(s) "
                   f"{', '.join(map(repr, cols))}: e.g. {errors[rows[0]].reason}): it has no "
                   "result; fill its cells or drop the system")
    return out


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
    """An estimate on [0, 1] on the native scale (a difference is not shifted); its interval
    cut to the range the quantity lies in (a mean on the scale, a difference within +-its
    width): it holds the true value whenever the uncut one does."""
    w = scale.hi - scale.lo
    lo = scale.lo if shift else 0.0
    a, b = (scale.lo, scale.hi) if shift else (-w, w)
    return {"estimate": lo + w * e.estimate, "se": w * e.se,
            "ci": [min(max(lo + w * e.ci[0], a), b), min(max(lo + w * e.ci[1], a), b)]}


def _copied_columns(X, y, labeled, scores) -> list[int]:
    """Score columns equal to the target on every labeled row: a copy of the label (or the
    label pasted into the score column), not a metric. Its residual on the labeled rows is 0,
    which would shrink the PPI interval to nothing and leave the estimate unrectified."""
    lab = np.flatnonzero(labeled)
    if len(lab) < 2:
        return []
    return [j for j in range(len(scores))
            if np.allclose(X[lab, j], y[lab], rtol=0, atol=1e-9)]


def guarded_estimate(yl, fl, fu, alpha, lam, name, notes
                     ) -> tuple[MeanEstimate, MeanEstimate, str | None]:
    """One system's (or one paired difference's) estimate, its labels-alone estimate and why
    it is degenerate (None when it is not); targets on [0, 1] (a difference of two: the
    worst case is the same 1/4 per label). Labels with no spread get the widest variance a
    [0, 1] target can have instead of 0; a metric that predicts every label exactly (zero
    residual spread) is not used."""
    if np.ptp(yl) == 0:
        why = (f"{name}: its {len(yl)} labels are all equal (no spread in the labels), so the "
               "sample variance is 0 and the interval would have width 0 (p = 0): the "
               "interval uses the largest variance a target on the scale can have instead")
        notes.append(why)
        cl = worst_case_mean(yl, alpha)
        return cl, cl, why
    cl = classical_mean(yl, alpha)
    if lam == 0.0:
        return cl, cl, None
    e = ppi_mean(yl, fl, fu, alpha, lam)
    if e.lam > 0 and np.ptp(yl - e.lam * fl) < 1e-12:
        why = (f"{name}: the mapped score predicts every label exactly (no spread in the "
               "residuals), so the interval would rest on the score alone: the labels alone "
               "are used")
        notes.append(why)
        return cl, cl, why
    return e, cl, None


def systems_study(df: pd.DataFrame, *, system_col: str, scores, target: str, scale,
                  item_col: str | None = None, alpha: float = 0.05, method: str = "ppi++",
                  plan: float | None = None, strict: bool = False, folds: int = 5,
                  seed: int = 0, inclusion_prob: str | None = None,
                  strata: str | None = None, design=None) -> SystemsResult:
    """Every system's mean human score with a ``1 - alpha`` interval, every pair's
    difference, Holm-adjusted p-values and rank sets (see the module docstring for what
    the coverage assumes: labeled rows a random sample of each system's rows).

    Rows whose ``target`` is empty are unlabeled; ``scores`` (one column or several) are
    mapped onto ``scale`` by a cross-fitted map. A system needs :data:`MIN_LABELS` labels
    (fewer: left out with a warning, ``strict``: an error). Pairs are paired on the items
    labeled for both when enough are (:data:`MIN_PAIRED_FRACTION`; each says which and
    why). ``plan``: a full interval width on the native scale: the labels that reach it.

    ``inclusion_prob``: the column of each row's probability of having been labeled: the
    inverse-probability-weighted, self-normalised PPI++ estimates, valid for any
    probabilities fixed before the labels were seen (:mod:`.active`); a pair is paired when,
    on every item both scored, the two rows had the same probability or one was certain. On
    a proposal's table (its ``propose_label`` column) the labels are checked against the
    draw. ``strata``: a column (task, dimension): size-weighted per-stratum PPI++ estimates,
    each with its own weight. ``design``: the label design ``propose_labels`` wrote (a path
    or its dict, :mod:`.design`) instead of ``inclusion_prob``: the labels are checked
    against it (an error naming the rows) and rows labeled before the proposal are certain.

    A table layer: rows read by :func:`scoreband.columns.systems_inputs`, estimates made on
    arrays by :func:`systems_arrays`."""
    scores, scale = _check_args(df, system_col=system_col, scores=scores, target=target,
                                scale=scale, item_col=item_col, alpha=alpha, method=method,
                                plan=plan, inclusion_prob=inclusion_prob, strata=strata,
                                design=design)
    rows = systems_inputs(df, system_col=system_col, scores=scores, target=target,
                          scale=scale, item_col=item_col, inclusion_prob=inclusion_prob,
                          strata=strata)
    rows, checked = _checked_design(df, rows, design)
    errors = rows.errors
    keep = np.array(sorted(set(range(len(df))) - set(errors)), dtype=int)
    if len(keep) == 0:
        raise InputError("no usable rows: " + "; ".join(str(e) for e in
                                                        list(errors.values())[:5]))
    notes = _vanished_systems(rows.system, keep, errors, system_col)
    core = systems_arrays(rows.take(keep), scale=scale, score_names=scores, alpha=alpha,
                          method=method, plan=plan, strict=strict, folds=folds, seed=seed,
                          weighted=inclusion_prob is not None or strata is not None
                          or design is not None, notes=notes)
    ipw = inclusion_prob is not None or design is not None
    doc = {"study": "systems", "alpha": alpha, "method": method,
           "scale": {"lo": scale.lo, "hi": scale.hi}, "target": target, "scores": scores,
           "system_col": system_col, "item_col": item_col, "map": core["map"],
           "min_labels": MIN_LABELS, "inclusion_prob": inclusion_prob, "strata": strata,
           "design": checked,
           "estimator": ("inverse-probability-weighted (Hajek) PPI" if ipw else "PPI")
           + (", stratified" if strata else ""),
           "systems": core["systems"], "pairs": core["pairs"], "ranking": core["ranking"],
           "n_rows": int(len(df)), "skipped_rows": [str(e) for e in errors.values()],
           "warnings": notes}
    if plan is not None:
        doc["plan"] = {"width": plan, "systems": {s: v["plan"]
                                                  for s, v in core["systems"].items()}}
    return SystemsResult(doc, list(errors.values()), notes)


def _check_args(df, *, system_col, scores, target, scale, item_col, alpha, method, plan,
                inclusion_prob, strata, design) -> tuple[list[str], Scale]:
    """The choices that are wrong before any row is read: an ``InputError`` naming the
    parameter (its CLI option) and the fix. Returns the score columns and the scale."""
    from scoreband.conformal.core import check_alpha  # lazy: loads pydantic

    check_alpha(alpha)
    if method not in METHODS:
        raise InputError(f"unknown `method` {method!r}; choose one of {', '.join(METHODS)}")
    scores = [scores] if isinstance(scores, str) else list(scores or [])
    if not scores and method != "classical":
        raise InputError("`score`: give at least one metric or judge column (or `method` "
                         "classical for the labels alone)")
    if target in scores:
        raise InputError(f"`score` column {target!r} is the `target` column: a score must be "
                         "a metric or judge column known on every row, not the human labels "
                         "(its unlabeled rows are empty); give the metric's column as `score`")
    if item_col is not None and item_col in (target, system_col, *scores):
        raise InputError(f"`item_col` {item_col!r} is also the `target`, `system_col` or a "
                         "`score`: give the column naming the item (prompt, image) of each row")
    scale = scale if isinstance(scale, Scale) else Scale.parse(scale)
    require_columns(df, [("`system_col`", system_col), *(("`score`", c) for c in scores),
                        ("`target`", target), ("`item_col`", item_col),
                        ("`inclusion_prob`", inclusion_prob), ("`strata`", strata)])
    if plan is not None and not plan > 0:
        raise InputError(f"`plan` is an interval width on the target's scale (> 0), got {plan}")
    if design is not None and inclusion_prob is not None:
        raise InputError("give `design` or `inclusion_prob`, not both: the design file holds "
                         "the probabilities")
    return scores, scale


def _checked_design(df, rows: SystemsInputs, design) -> tuple[SystemsInputs, str | None]:
    """The labels checked against the design: a design file's (its probabilities replace
    the column's), else a proposal table's ``propose_label`` column with
    ``inclusion_prob``; what was checked, for the results (None: nothing)."""
    labeled = np.isfinite(rows.target)
    if design is not None:
        from scoreband.system_level.design import design_probabilities, read_design

        design = design if isinstance(design, dict) else read_design(design)
        rows = replace(rows, inclusion_prob=design_probabilities(df, design, labeled))
        return rows, "checked: the labels match the design"
    if rows.inclusion_prob is not None and rows.proposed is not None:
        from scoreband.system_level.design import check_proposal_column

        check_proposal_column(rows.proposed, labeled, rows.inclusion_prob, rows.ids)
        return rows, "checked: the labels match the table's propose_label column"
    return rows, None


# ------------------------------------------------------------------ the study on arrays
def systems_arrays(rows: SystemsInputs, *, scale: Scale, score_names, alpha: float,
                   method: str, plan, strict: bool, folds: int, seed: int, weighted: bool,
                   notes: list) -> dict:
    """The study on the good rows (``rows``: :class:`~scoreband.columns.SystemsInputs`,
    ``inclusion_prob`` the design's where there is one): the systems with enough labels,
    the cross-fitted map, each system's estimate (:func:`_system_record`), every pair's
    difference, Holm's adjustment and the rank sets. Returns ``map``, ``systems``,
    ``pairs`` and ``ranking``; what it did to the data goes into ``notes``."""
    systems = _enough_labels(rows.system, np.isfinite(rows.target), strict, notes)
    rows = rows.take(np.flatnonzero(np.isin(rows.system, systems)))
    names, labeled = rows.system, np.isfinite(rows.target)
    y01 = np.where(labeled, (rows.target - scale.lo) / (scale.hi - scale.lo), np.nan)
    f01, map_info, lam = _mapped(rows, y01, score_names, method, folds, seed, notes)
    pi = None
    if weighted:
        pi = (rows.inclusion_prob if rows.inclusion_prob is not None else
              np.array([labeled[names == s].mean() for s in names]))
    fit = _Fit(names, y01, f01, labeled, rows.items, pi, rows.strata, lam)
    per, est01, cl01 = {}, {}, {}
    for s in systems:
        per[s], est01[s], cl01[s] = _system_record(
            fit, s, alpha=alpha, plan=plan, scale=scale, has_pi=rows.inclusion_prob is not None, notes=notes)
    pairs = _pairs(systems, fit, est01, cl01, alpha, scale, notes)
    for p, a in zip(pairs, holm([p["p_value"] for p in pairs]) if pairs else [],
                    strict=True):
        p["p_adjusted"] = float(a)
        p["significant"] = bool(a < alpha)
    ranks = rank_sets(systems, pairs, alpha)
    ranking = [{"system": s, "estimate": per[s]["estimate"], "ci": per[s]["ci"],
                "ranks": list(ranks[s])}
               for s in sorted(systems, key=lambda s: -per[s]["estimate"])]
    return {"map": map_info, "systems": per, "pairs": pairs, "ranking": ranking}


@dataclass(frozen=True)
class _Fit:
    """The arrays every estimate reads: per row the system, the target and the mapped score
    on [0, 1], whether labeled, the item, the design's probability (None: uniform labels)
    and stratum; ``lam`` the method's PPI weight (None: tuned)."""

    names: np.ndarray
    y01: np.ndarray
    f01: np.ndarray
    labeled: np.ndarray
    items: np.ndarray | None
    pi: np.ndarray | None
    strata: np.ndarray | None
    lam: float | None


def _enough_labels(names, labeled, strict: bool, notes: list) -> list:
    """The systems with :data:`MIN_LABELS` labels or more (the others said, or with
    ``strict`` an error); none at all is an error."""
    systems = sorted(set(names), key=str)
    n_lab = {s: int(labeled[names == s].sum()) for s in systems}
    few = [s for s in systems if n_lab[s] < MIN_LABELS]
    if few:
        msg = (f"system(s) {', '.join(f'{s!r} ({n_lab[s]} labeled)' for s in few)} have fewer "
               f"than {MIN_LABELS} labeled rows, the fewest for which the intervals' coverage "
               "was checked: no interval is given for them")
        if strict:
            raise InputError(msg)
        notes.append(msg + "; excluded (`strict` makes this an error)")
        systems = [s for s in systems if s not in few]
    if not systems:
        raise InputError(f"no system has {MIN_LABELS} or more labeled rows (a labeled row has "
                         f"a `target`; {MIN_LABELS} is the fewest for which the intervals' "
                         f"coverage was checked); {sum(n_lab.values())} labeled rows in all")
    return systems


def _mapped(rows: SystemsInputs, y01, score_names, method: str, folds: int, seed: int,
            notes: list) -> tuple[np.ndarray, dict | None, float | None]:
    """The cross-fitted map of the informative score columns (a copy of the label or a
    constant column left out, said), its description, and the PPI weight (0 when no score
    is used: the labels alone)."""
    X, y, labeled = rows.scores, rows.target, np.isfinite(rows.target)
    lam = METHODS[method]
    copied = _copied_columns(X, y, labeled, score_names) if method != "classical" else []
    for j in copied:
        notes.append(f"score column {score_names[j]!r} equals the target on every labeled "
                     f"row ({int(labeled.sum())} of {int(labeled.sum())}): it looks like a "
                     "copy of the human label, not a metric, and would shrink the interval to "
                     "nothing without correcting the estimate; it is left out")
    informative = [j for j in range(X.shape[1]) if np.ptp(X[:, j]) > 0 and j not in copied]
    for j in sorted(set(range(X.shape[1])) - set(informative) - set(copied)):
        notes.append(f"score column {score_names[j]!r} is constant ({X[0, j]:g}) on every "
                     "usable row: it carries no information and is left out")
    if not informative and method != "classical" and X.shape[1]:
        notes.append("no usable score column: the intervals are those of the labels alone")
    if method == "classical" or not informative:
        return np.zeros(len(y)), None, 0.0
    if labeled.sum() < 4:
        raise InputError(f"the metric-to-human map needs at least 4 labeled rows in all; "
                         f"got {int(labeled.sum())} (or use `method` classical)")
    f01, map_info = cross_fit(X[:, informative], np.nan_to_num(y01), labeled, rows.items,
                              folds, seed)
    return f01, map_info, lam


def _system_record(fit: _Fit, s, *, alpha, plan, scale: Scale, has_pi: bool, notes: list) -> tuple[dict, MeanEstimate, MeanEstimate]:
    """One system's record (estimate, interval, its labels-alone twin, effective labels,
    strata, plan) and its two estimates on [0, 1]."""
    m, lab = fit.names == s, fit.labeled
    yl, fl, fu = fit.y01[m & lab], fit.f01[m & lab], fit.f01[m & ~lab]
    st_info = None
    if fit.pi is not None:
        e, cl, why, st_info = weighted_estimate(np.nan_to_num(fit.y01)[m], fit.f01[m], fit.pi[m],
                                        lab[m], None if fit.strata is None else fit.strata[m],
                                        alpha, fit.lam, f"system {s!r}", notes)
    else:
        e, cl, why = guarded_estimate(yl, fl, fu, alpha, fit.lam, f"system {s!r}", notes)
    eff = len(yl) * (cl.se / e.se) ** 2 if e.se > 0 else float("inf")
    if fit.pi is not None and e.se > 0:  # the labels a uniform design would need
        wl = 1.0 / fit.pi[m & lab]
        var_y = float(np.sum(wl * (yl - np.sum(wl * yl) / wl.sum()) ** 2) / wl.sum()
                      * len(yl) / max(len(yl) - 1, 1))
        eff = var_y / e.se ** 2 if var_y > 0 else eff
    rec = {"n_labeled": int(len(yl)), "n_unlabeled": int(len(fu)), **_native(e, scale),
           "lambda": e.lam, "df": e.df, "classical": _native(cl, scale),
           "effective_labels": float(eff),
           "width_ratio": (e.se / cl.se) if cl.se > 0 else 1.0, "degenerate": why}
    if fit.pi is not None:  # Kish's count of the labels' weights: what the labels are worth
        wl = 1.0 / fit.pi[m & lab]
        rec["design_effective_labels"] = (float(wl.sum() ** 2 / np.sum(wl ** 2))
                                          if e.se > 0 else float(len(yl)))
    if st_info is not None:
        rec["strata"] = st_info
    if plan is not None:
        rec["plan"] = labels_for_width(
            plan / (scale.hi - scale.lo), alpha, float(np.var(yl, ddof=1)),
            float(np.var(yl - e.lam * fl, ddof=1)), e.lam, float(unlabeled_variance(fl, fu)),
            len(fu), tuned=fit.lam is None)
        if has_pi:
            ratio = design_variance_ratio(np.nan_to_num(fit.y01)[m], fit.f01[m], fit.pi[m], lab[m],
                                 e.lam)
            rec["plan"]["design_variance_ratio"] = ratio
            rec["plan"]["predicted_width_ratio"] = float(np.sqrt(ratio))
    return rec, e, cl


def _pair_mode(n_both: int, n_a: int, n_b: int) -> tuple[bool, str]:
    """Paired or unpaired, and why, from the label counts alone."""
    need = max(MIN_LABELS, int(np.ceil(MIN_PAIRED_FRACTION * min(n_a, n_b))))
    if n_both >= need:
        return True, (f"{n_both} items labeled for both systems (>= {need}): the difference "
                      "is estimated on them, the other shared items as its unlabeled part")
    return False, (f"only {n_both} items labeled for both systems (a paired difference "
                   f"needs {need}: at least {MIN_LABELS} and {MIN_PAIRED_FRACTION:g} of the "
                   f"fewer labels, {min(n_a, n_b)}): the two means are compared with their "
                   "variances added, which assumes the two systems' errors are not "
                   "negatively correlated")


def _pairs(systems, fit: _Fit, est01, cl01, alpha, scale: Scale, notes) -> list[dict]:
    """Every pair's difference ``a - b``: paired on the items labeled for both when there
    are enough of them (the labeled part; the items scored for both and not labeled for both
    are the unlabeled part), unpaired otherwise. Each record says which and why. With a
    design (``fit.pi``): an item's probability of being labeled for both is the smaller of
    its two rows' when they are equal or one is 1 (an item drawn for every system at once, or
    a certain row); any other pair of probabilities leaves the joint one unknown, and the
    pair is compared unpaired."""
    wide = None
    if fit.items is not None:
        frame = pd.DataFrame({"s": fit.names, "item": fit.items, "y": fit.y01, "f": fit.f01,
                              "pi": fit.pi, "st": fit.strata})
        wide = {k: frame.pivot(index="item", columns="s", values=k)
                for k in ("y", "f", "pi", "st")}
    out = []
    for a, b in itertools.combinations(systems, 2):
        paired, e, cl, why, n_both, n_scored = _paired_difference(a, b, wide, fit, est01,
                                                                  cl01, alpha, notes)
        if not paired:
            e = difference(est01[a], est01[b], alpha)
            cl = difference(cl01[a], cl01[b], alpha)
        out.append({"a": a, "b": b, **_native(e, scale, shift=False), "df": e.df,
                    "p_value": p_value(e), "paired": paired,
                    "pairing": "paired" if paired else "unpaired", "pairing_reason": why,
                    "n_labeled_both": n_both, "n_scored_both": n_scored,
                    "classical": _native(cl, scale, shift=False)})
    return out


def _paired_difference(a, b, wide, fit: _Fit, est01, cl01, alpha, notes) -> tuple:
    """Pair ``a - b`` on the items labeled for both where they are enough (and, with a design,
    the joint probability is known): ``(paired, estimate, labels-alone estimate, why,
    n_labeled_both, n_scored_both)``; the estimates are None when unpaired."""
    if wide is None:
        return (False, None, None, "no `item_col`: unpaired (the two means with their "
                "variances added)", None, None)
    Y, F, P, S = wide["y"], wide["f"], wide["pi"], wide["st"]
    both = F[a].notna() & F[b].notna()
    lab = both & Y[a].notna() & Y[b].notna()
    n_both, n_scored = int(lab.sum()), int(both.sum())
    paired, why = _pair_mode(n_both, est01[a].n, est01[b].n)
    if paired and fit.pi is not None:
        pa, pb = P[a][both].to_numpy(float), P[b][both].to_numpy(float)
        joint_known = np.isclose(pa, pb, rtol=0, atol=1e-9) | (pa >= 1) | (pb >= 1)
        if not joint_known.all():
            return (False, None, None, f"{int((~joint_known).sum())} items scored for both "
                    "systems had different probabilities of being labeled for each (rows "
                    "drawn one by one), so the probability of an item being labeled for both "
                    "is unknown: unpaired (the two means with their variances added)",
                    n_both, n_scored)
    if not paired:
        return False, None, None, why, n_both, n_scored
    name = f"pair {a!r} - {b!r}"
    if fit.pi is not None:
        pj = np.minimum(P[a][both], P[b][both]).to_numpy(float)
        st = None if fit.strata is None else S[a][both].to_numpy()
        yd = np.nan_to_num((Y[a] - Y[b])[both].to_numpy(float))
        fd = (F[a] - F[b])[both].to_numpy(float)
        e, cl, degenerate, _ = weighted_estimate(yd, fd, pj, lab[both].to_numpy(), st, alpha,
                                         fit.lam, name, [])
    else:
        e, cl, degenerate = guarded_estimate(
            (Y[a] - Y[b])[lab].to_numpy(float), (F[a] - F[b])[lab].to_numpy(float),
            (F[a] - F[b])[both & ~lab].to_numpy(float), alpha, fit.lam, name, [])
    if degenerate is not None:  # either paired estimate, no spread
        why = (f"{n_both} items labeled for both systems, but their label differences "
               "are all equal or predicted exactly by the score (no spread): compared "
               "unpaired instead")
        notes.append(f"{name}: {why}")
        return False, None, None, why, n_both, n_scored
    return True, e, cl, why, n_both, n_scored
