"""Which rows to send to humans (``scoreband systems --propose-labels N``): active labeling
for system means (Zrnic and Candes, ICML 2024; :mod:`scoreband.system_level.active`).

Data flow: the table -> a per-row uncertainty ``u`` on the target's scale - a calibrator's
band width (``calibrator``, applied through :func:`scoreband.api.apply`), else a model of the
metric's squared error fitted on the rows already labeled (a burn-in: cells of stratum x
score tertile, each shrunk towards its stratum and the whole), else none (uniform) -> the
inclusion probabilities (proportional to ``u`` mixed with uniform, so none is below ``mix``
times the uniform one; capped at 1), ``n_labels`` expected per system -> one systematic draw
in an order fixed by a hash of the seed and each row's (or item's) identity, so the draw does
not depend on the table's order -> the table with every input row and column plus
``inclusion_prob`` and ``propose_label``. Rows already labeled get ``inclusion_prob`` 1 (they
are certain; the estimate is then valid conditionally on them) and are not proposed again.
With ``item_col`` the draw is by item: an item drawn is labeled for every system that
answered it, which keeps the pairwise differences paired.

``systems --inclusion-prob inclusion_prob`` then estimates from the labels that came back.
The predicted gain (``predicted_width_ratio``: the active interval's width over the uniform
one's at equal expected labels) comes from the burn-in's residuals when there are labels (the
uncertainty model cross-fitted, so the prediction is not read off the rows it was fitted on),
or from ``u`` alone (which assumes it is proportional to the error spread) when there are none.
The design is used only where that predicted gain beats what it would cost were the
uncertainty uninformative (:func:`scoreband.system_level.active.active_is_worth_it`);
otherwise every candidate gets the uniform probability (``design: uniform`` in the document).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from scoreband.columns import SystemsInputs, require_columns, systems_inputs
from scoreband.conformal.randomness import frame_keys, item_uniforms, row_uniforms
from scoreband.datatypes import Scale
from scoreband.errors import InputError, RowError
from scoreband.system_level import MIN_LABELS
from scoreband.system_level.active import (
    DEFAULT_MIX,
    active_is_worth_it,
    inclusion_probabilities,
    predicted_variance_ratio,
    systematic_draw,
    uninformative_cost,
)
from scoreband.system_level.design import build_design
from scoreband.system_level.ppi import labels_for_width, ppi_mean, unlabeled_variance
from scoreband.system_level.study import ACTIVE_PAYS, cross_fit

__all__ = ["propose_labels", "proposal_arrays", "Drawn", "Proposal", "OUT_COLUMNS", "MIN_BURN_IN"]

#: the columns the proposal adds
OUT_COLUMNS = ("inclusion_prob", "propose_label")
#: labeled rows (all systems together) from which a residual model is fitted
MIN_BURN_IN = 20
#: pseudo-count pulling a cell's mean squared residual towards its parent's
SHRINK = 10.0


@dataclass
class Proposal:
    """What :func:`propose_labels` chose: ``table`` (every input row and column plus
    ``inclusion_prob`` and ``propose_label``), ``doc`` (JSON-ready summary: uncertainty
    source, expected labels and predicted gain per system, plan), skipped rows, warnings."""

    table: pd.DataFrame
    doc: dict
    errors: list[RowError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: the design keyed by row identity (:mod:`scoreband.system_level.design`), for
    #: ``systems --design`` to check the labels against
    design: dict | None = None


def _cells(f01, st, r2, fit, pred_f01, pred_st) -> np.ndarray:
    """Mean squared residual of each predicted row's cell (stratum x tertile of the mapped
    score, tertiles from the fitting rows), shrunk towards the stratum, the stratum towards
    the whole (``SHRINK`` pseudo-rows)."""
    r2f, ff, sf = r2[fit], f01[fit], st[fit]
    overall = float(np.mean(r2f))
    edges = np.quantile(ff, [1 / 3, 2 / 3]) if len(ff) >= 6 else np.array([np.inf, np.inf])
    bf, bp = np.searchsorted(edges, ff), np.searchsorted(edges, pred_f01)
    out = np.empty(len(pred_f01))
    for k in np.unique(pred_st):
        ms = sf == k
        s_mean = (r2f[ms].sum() + SHRINK * overall) / (ms.sum() + SHRINK)
        for b in range(3):
            mc = ms & (bf == b)
            v = (r2f[mc].sum() + SHRINK * s_mean) / (mc.sum() + SHRINK)
            out[(pred_st == k) & (bp == b)] = v
    return out


def _burn_in_model(X, y01, labeled, items, st, folds, seed, half=None):
    """Cross-fitted map ``f01`` for every row, squared residuals on the labeled rows, the
    uncertainty ``u01`` of every row (cell model on all labels) and the same uncertainty for
    each labeled row from a model fitted without its half (for an honest predicted gain).
    ``half``: 0 / 1 per labeled row, drawn from the rows' identity so that the prediction
    (which decides the design) does not depend on the table's row order."""
    f01, _ = cross_fit(X, np.nan_to_num(y01), labeled, items, folds, seed)
    lab = np.flatnonzero(labeled)
    r2 = np.zeros(len(y01))
    r2[lab] = (y01[lab] - f01[lab]) ** 2
    u2 = _cells(f01, st, r2, labeled, f01, st)
    if half is None or len(np.unique(half)) < 2:
        half = np.random.default_rng([seed, 23]).permutation(len(lab)) % 2
    u2_held = np.empty(len(lab))
    for h in (0, 1):
        fit = np.zeros(len(y01), bool)
        fit[lab[half != h]] = True
        idx = lab[half == h]
        u2_held[half == h] = _cells(f01, st, r2, fit, f01[idx], st[idx])
    return f01, r2, np.sqrt(u2), np.sqrt(u2_held)


def _design_p(u, u_ref, mix):
    """The (uncapped) design weight ``(1 - mix) u / mean(u_ref) + mix`` of rows with ``u``."""
    m = float(np.mean(u_ref))
    return (1 - mix) * (u / m if m > 0 else np.ones(len(u))) + mix


def propose_labels(df: pd.DataFrame, *, system_col: str, n_labels: float, scores=(),
                   target: str | None = None, scale=None, item_col: str | None = None,
                   calibrator=None, strata: str | None = None, mix: float = DEFAULT_MIX,
                   seed: int = 0, alpha: float = 0.05, plan: float | None = None,
                   folds: int = 5, adaptive: bool = True) -> Proposal:
    """Choose the rows to label: ``n_labels`` expected new labels per system, each row (or
    item, with ``item_col``) labeled with probability proportional to its uncertainty mixed
    with uniform (see the module docstring). ``target``: the human score column (its filled
    cells are the burn-in; may be absent from the table: no labels yet). ``calibrator``: a
    path or :class:`scoreband.api.Calibration` whose band widths are the uncertainty.
    ``plan``: a full interval width on the target's scale; labels per system needed for it,
    uniform and active. ``adaptive`` (default): label uniformly when the predicted gain is
    smaller than what the design would cost were its uncertainty uninformative
    (:func:`scoreband.system_level.active.active_is_worth_it`); False: always the design.

    The table layer: the rows are read by :func:`scoreband.columns.systems_inputs`, the
    design drawn on arrays by :func:`proposal_arrays`."""
    scores, scale = _check_args(df, n_labels, mix, scores, scale, system_col, item_col, strata)
    has_target = target is not None and target in df.columns
    rows = systems_inputs(df, system_col=system_col, scores=scores, scale=scale,
                          target=target if has_target else None, item_col=item_col,
                          strata=strata)
    notes = [] if has_target else [f"no `target` column {target!r} in the table: no labels "
                                   "yet" if target else "no `target`: no labels yet"]
    ok = np.ones(len(df), bool)
    ok[list(rows.errors)] = False
    if not ok.any():
        raise InputError("no usable rows: " + "; ".join(str(e) for e in
                                                        list(rows.errors.values())[:5]))
    band = None if calibrator is None else _band_widths(df, calibrator, scale, ok, notes)
    d = proposal_arrays(rows, ok, frame_keys(df), n_labels=n_labels, scale=scale, mix=mix,
                        seed=seed, folds=folds, adaptive=adaptive, band=band,
                        item_col=item_col, strata=strata)
    doc = _proposal_doc(d, rows, ok, n_labels=n_labels, mix=mix, seed=seed,
                        item_col=item_col, strata=strata, adaptive=adaptive, notes=notes)
    if plan is not None:
        doc["plan"] = _plan(plan, alpha, scale, rows.system, d.y01, d.labeled, ok,
                            rows.scores, rows.items, d.u01, d.cand,
                            d.ratio if d.use_active else 1.0, d.band_alpha, d.systems, folds,
                            seed)
    out = df.copy()
    out["inclusion_prob"] = d.pi
    out["propose_label"] = d.draw
    design = build_design(df, d.pi, d.labeled, d.draw, target=target, meta={
        "system_col": system_col, "item_col": item_col, "seed": seed,
        "n_labels_per_system": float(n_labels), "design": doc["design"]})
    return Proposal(out, doc, list(rows.errors.values()), notes, design)


def _check_args(df, n_labels, mix, scores, scale, system_col, item_col, strata
                ) -> tuple[list[str], Scale]:
    """Choices wrong before any row is read: an ``InputError`` naming the parameter."""
    if not n_labels > 0:
        raise InputError(f"`n_labels` (--propose-labels N), the expected number of new "
                         f"labels per system, must be > 0; got {n_labels}")
    if not 0 <= mix <= 1:
        raise InputError(f"`mix` (the weight of the uniform design) must lie in [0, 1], "
                         f"got {mix}")
    scores = [scores] if isinstance(scores, str) else list(scores or [])
    clash = [c for c in OUT_COLUMNS if c in df.columns]
    if clash:
        raise InputError(f"the table already has column(s) {', '.join(clash)}: the proposal "
                         "adds them; rename or drop them (is this already a proposal?)")
    if scale is None:
        raise InputError("`scale`: give the human score's scale, 'A,B'")
    scale = scale if isinstance(scale, Scale) else Scale.parse(scale)
    require_columns(df, [("`system_col`", system_col), *(("`score`", c) for c in scores),
                        ("`item_col`", item_col), ("`strata`", strata)])
    return scores, scale


def _band_widths(df, calibrator, scale: Scale, ok, notes: list) -> tuple:
    """Each row's band width on [0, 1] of ``scale`` from ``calibrator`` (a path or an
    in-memory Calibration, through the one :func:`scoreband.apply_stage.bands`), the band's
    alpha and the uncertainty's description."""
    from scoreband.apply_stage import bands  # lazy: loads the conformal package

    banded = bands(df, calibrator, on_warning=notes.append)
    band = banded.band
    u01 = banded.widths01() * (band.scale.hi - band.scale.lo) / (scale.hi - scale.lo)
    bad = ok & ~np.isfinite(u01)
    if bad.any():
        notes.append(f"{int(bad.sum())} rows got no band from the calibrator: they take "
                     "the mean width of the others")
    return (u01, float(band.alpha),
            f"calibrator band width ({band.method}, alpha {band.alpha:g})")


@dataclass(frozen=True)
class Drawn:
    """What :func:`proposal_arrays` chose, per row (``pi``: NaN for rows left out, 1 for
    rows labeled before; ``draw``; ``u01`` the uncertainty) and for the whole design."""

    pi: np.ndarray
    draw: np.ndarray
    labeled: np.ndarray
    cand: np.ndarray
    y01: np.ndarray
    u01: np.ndarray
    systems: list
    source: str
    band_alpha: float | None
    ratio: float
    gain_from: str
    use_active: bool
    mix_used: float
    cost: float


def proposal_arrays(rows: SystemsInputs, ok, keys, *, n_labels: float, scale: Scale,
                    mix: float, seed: int, folds: int, adaptive: bool, band=None,
                    item_col: str | None = None, strata: str | None = None) -> Drawn:
    """The design on arrays: ``rows`` (:class:`~scoreband.columns.SystemsInputs`), ``ok``
    the usable rows, ``keys`` each row's identity (:func:`frame_keys`), ``band`` the
    calibrator's ``(widths, alpha, description)`` or None. The uncertainty
    (:func:`_uncertainty`), the predicted gain and the choice between it and uniform
    labels (:func:`_choose`), then one systematic draw (:func:`_draw`)."""
    labeled = ok & np.isfinite(rows.target)
    y01 = np.where(labeled, (rows.target - scale.lo) / (scale.hi - scale.lo), np.nan)
    u01, r2, u_held, source = _uncertainty(rows, ok, labeled, y01, keys, band, folds, seed,
                                           strata)
    cand = ok & ~labeled
    ratio, gain_from, use_active, mix_used, cost = _choose(
        u01, r2, u_held, labeled, cand, ok, band is not None, mix, adaptive)
    systems = sorted(set(rows.system[ok]), key=str)
    pi, draw = _draw(rows, u01, cand, labeled, keys, systems, n_labels, mix_used, seed,
                     item_col)
    return Drawn(pi, draw, labeled, cand, y01, u01, systems, source,
                 None if band is None else band[1], ratio, gain_from, use_active, mix_used,
                 cost)


def _uncertainty(rows: SystemsInputs, ok, labeled, y01, keys, band, folds, seed, strata):
    """Each row's uncertainty on [0, 1] (the calibrator's band width, else the burn-in's
    residual model from :data:`MIN_BURN_IN` labels, else 1: uniform; rows without one take
    the mean of the others), the burn-in's squared residuals and held-out uncertainties
    (None without a burn-in), and the description."""
    u01 = np.ones(len(ok)) if band is None else band[0]
    r2 = u_held = None
    n_lab = int(labeled.sum())
    source = None if band is None else band[2]
    if n_lab >= MIN_BURN_IN and rows.scores.shape[1]:
        items = rows.items
        st = (rows.strata if rows.strata is not None
              else np.full(len(ok), "all", dtype=object))
        lab_rows = np.flatnonzero(ok)[labeled[ok]]
        # the halves: repeated rows split independently (row_uniforms); the rows of one
        # item stay together (item_uniforms of the item's key)
        half = ((row_uniforms(keys[lab_rows], seed, 23) if items is None else item_uniforms(
            frame_keys(pd.DataFrame({"item": items[lab_rows].astype(str)})), seed, 23))
                < 0.5).astype(int)
        _, r2_ok, u_ok, u_held = _burn_in_model(
            rows.scores[ok], y01[ok], labeled[ok], None if items is None else items[ok],
            st[ok], folds, seed, half)
        r2 = r2_ok[labeled[ok]]
        if band is None:
            u01 = np.ones(len(ok))
            u01[ok] = u_ok
            source = (f"residual model (stratum x score tertile) on {n_lab} labeled rows"
                      + (f" by `{strata}`" if strata else ""))
    elif band is None:
        source = "none: uniform" + ("" if n_lab >= MIN_BURN_IN else
                                    f" (fewer than {MIN_BURN_IN} labeled rows for a residual "
                                    "model, and no calibrator)")
    u01 = np.where(np.isfinite(u01), u01, np.nan)
    fill = float(np.nanmean(u01[ok])) if np.isfinite(u01[ok]).any() else 1.0
    return np.where(np.isfinite(u01), u01, fill), r2, u_held, source


def _choose(u01, r2, u_held, labeled, cand, ok, banded: bool, mix, adaptive):
    """The predicted variance ratio active / uniform (from the burn-in's residuals, else the
    band widths alone), where it comes from, whether the design is used - only where its
    predicted gain beats what it would cost were the uncertainty uninformative and the
    plan's own verdict says it pays (the advice and the design never disagree) - the mix
    used (1: uniform) and the uninformative cost."""
    if r2 is not None and len(r2) and float(np.mean(r2)) > 0:
        u_lab = u01[labeled] if banded else u_held
        u_ref = u01[cand] if banded else u01[ok]
        ratio = predicted_variance_ratio(r2, _design_p(u_lab, u_ref, mix))
        gain_from = (f"the {int(labeled.sum())} labeled rows' residuals" + (
            " (the residual model cross-fitted over two halves)" if not banded else ""))
    elif banded and cand.any():
        ratio = predicted_variance_ratio(u01[cand] ** 2, _design_p(u01[cand], u01[cand], mix))
        gain_from = ("the calibrator's band widths alone (assumes the width is proportional "
                     "to the metric's error spread; label a burn-in to check)")
    else:
        ratio, gain_from = 1.0, "no uncertainty: the design is uniform"
    pred_ratio = float(np.sqrt(ratio))
    p_design = _design_p(u01[cand], u01[cand], mix) if cand.any() else np.ones(1)
    cost = uninformative_cost(p_design)
    use_active = (active_is_worth_it(pred_ratio, p_design) and pred_ratio <= ACTIVE_PAYS
                  ) or not adaptive
    return ratio, gain_from, use_active, mix if use_active else 1.0, cost


def _draw(rows: SystemsInputs, u01, cand, labeled, keys, systems, n_labels, mix_used, seed,
          item_col) -> tuple[np.ndarray, np.ndarray]:
    """Inclusion probabilities (1 for rows labeled before, NaN for rows left out) and one
    systematic draw in an order fixed by the rows' (or items') identity: per system, or by
    item (an item drawn is labeled for every system that answered it)."""
    pi = np.full(len(cand), np.nan)
    pi[labeled] = 1.0
    draw = np.zeros(len(cand), bool)
    names = rows.system
    start = np.random.default_rng([seed, 31]).random()
    if item_col is not None:
        ci = np.flatnonzero(cand)
        frame = pd.DataFrame({"item": rows.items[ci], "u2": u01[ci] ** 2})
        per_item = frame.groupby("item", sort=True)["u2"].mean()
        rows_per_system = np.mean([np.sum(cand & (names == s)) for s in systems])
        budget = n_labels * len(per_item) / max(rows_per_system, 1)
        p_item = inclusion_probabilities(np.sqrt(per_item.to_numpy()), budget, mix_used)
        item_keys = frame_keys(pd.DataFrame({item_col: per_item.index.astype(str)}))
        d_item = systematic_draw(p_item, item_uniforms(item_keys, seed, 7), start)
        pos = per_item.index.get_indexer(rows.items[ci])
        pi[ci], draw[ci] = p_item[pos], d_item[pos]
        return pi, draw
    for s in systems:
        ci = np.flatnonzero(cand & (names == s))
        if len(ci):
            pi[ci] = inclusion_probabilities(u01[ci], n_labels, mix_used)
            # the order of systematic sampling (each row still drawn with its probability)
            draw[ci] = systematic_draw(pi[ci], item_uniforms(keys[ci], seed, 7), start)
    return pi, draw


def _proposal_doc(d: Drawn, rows: SystemsInputs, ok, *, n_labels, mix, seed, item_col,
                  strata, adaptive, notes) -> dict:
    """The proposal's JSON-ready summary (per system, the design and why, the advice)."""
    pred_ratio, cost, cand = float(np.sqrt(d.ratio)), d.cost, d.cand
    case = "active" if pred_ratio <= ACTIVE_PAYS else "uniform"
    per = {s: {"n_rows": int(((m := rows.system == s) & ok).sum()),
               "n_labeled": int((m & d.labeled).sum()),
               "expected_new_labels": float(np.nansum(d.pi[m & cand])),
               "proposed": int((m & d.draw).sum())} for s in d.systems}
    return {"study": "propose_labels", "n_labels_per_system": float(n_labels), "mix": mix,
            "min_inclusion_prob": float(np.nanmin(d.pi[cand]) if cand.any() else np.nan),
            "uncertainty": d.source, "seed": seed, "by_item": item_col is not None,
            "item_col": item_col, "strata": strata, "predicted_width_ratio": pred_ratio,
            "predicted_from": d.gain_from, "case": case,
            "design": "active" if d.use_active else "uniform", "mix_used": d.mix_used,
            "uninformative_cost": cost,
            "design_reason": (
                f"predicted {pred_ratio:.3f}x the uniform width; were the uncertainty "
                f"uninformative the design would cost {cost:.3f}x: "
                + ("the gain is larger, labels drawn by the uncertainty" if d.use_active and
                   adaptive else "labels drawn by the uncertainty (adaptive off)" if
                   d.use_active else "the gain is not larger, labels drawn uniformly")),
            "advice": (f"active labeling pays: intervals ~{pred_ratio:.2f}x the uniform "
                       "width at equal labels" if case == "active" else
                       f"active labeling gains little here (predicted {pred_ratio:.2f}x the "
                       "uniform width): the metric's error spread does not vary enough (or "
                       "the uncertainty does not track it); uniform labels do as well")
            + ("" if d.use_active or not cand.any() else
               f"; the proposal draws uniformly (the design would cost {cost:.2f}x were the "
               "uncertainty uninformative, more than it is predicted to gain)"),
            "systems": per, "n_rows": int(len(ok)),
            "skipped_rows": [str(e) for e in rows.errors.values()], "warnings": notes}


def _plan(width, alpha, scale, names, y01, labeled, ok, X, items, u01, cand, ratio,
          band_alpha, systems, folds, seed) -> dict:
    """Labels per system for an interval of ``width`` (native scale), uniform PPI++ and
    active, from the system's labels when it has :data:`MIN_LABELS`, else from the
    calibrator's band widths (residual sd ~ width / (2 z_{1 - alpha_cal / 2}), errors roughly
    normal), else unknown."""
    w = scale.hi - scale.lo
    out = {"width": width, "predicted_width_ratio": float(np.sqrt(ratio)), "systems": {}}
    f01 = None
    if labeled.sum() >= 4 and X.shape[1]:
        f01 = np.full(len(y01), np.nan)
        f01[ok], _ = cross_fit(X[ok], np.nan_to_num(y01[ok]), labeled[ok],
                               None if items is None else items[ok], folds, seed)
    for s in systems:
        m = (names == s) & ok
        rec: dict = {"from": None, "classical": None, "ppi++": None, "active": None}
        if (m & labeled).sum() >= MIN_LABELS and f01 is not None:
            yl, fl, fu = y01[m & labeled], f01[m & labeled], f01[m & ~labeled]
            e = ppi_mean(yl, fl, fu, alpha)
            rec.update(labels_for_width(
                width / w, alpha, float(np.var(yl, ddof=1)),
                float(np.var(yl - e.lam * fl, ddof=1)), e.lam,
                float(unlabeled_variance(fl, fu)), len(fu)))
            rec["from"] = f"{int((m & labeled).sum())} labels"
        elif band_alpha is not None:
            z = float(stats.norm.ppf(1 - band_alpha / 2))
            var_r = float(np.mean((u01[m] / (2 * z)) ** 2))
            rec.update(labels_for_width(width / w, alpha, var_r, var_r, 1.0, 0.0,
                                        int((m & cand).sum())))
            rec["classical"] = None
            rec["from"] = ("the calibrator's band widths (residual sd ~ width / 2z; assumes "
                           "roughly normal errors and the calibrator's scale)")
        if rec["ppi++"] is not None:
            rec["active"] = int(max(MIN_LABELS, np.ceil(rec["ppi++"] * ratio)))
        rec.pop("width", None)
        out["systems"][s] = rec
    return out
