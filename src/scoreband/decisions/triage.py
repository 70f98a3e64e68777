"""Trust or escalate with a guaranteed risk: which judge scores can be kept as they are, and
which must a human redo (SPEC section 12).

An item is *trusted* (its score kept) when its uncertainty is at most a threshold, else
escalated to a human. The threshold is chosen on labeled rows so that, among trusted items,
the score is off by more than ``tolerance`` at most ``alpha`` of the time, with probability
at least ``1 - delta`` over the draw of the labeled rows (Learn-then-Test:
:mod:`scoreband.decisions.ltt`).

The labeled rows are split by their identity (a hash of each row and the seed, never its
position) into

* a **training share**: the map of the score onto the human scale
  (:mod:`scoreband.decisions.maps`), the uncertainty models and the choice among them
  (:mod:`scoreband.decisions.uncertainty`), the grid of thresholds and where the fixed
  sequence starts;
* a **calibration share**: the Learn-then-Test step alone. Nothing fitted above sees it, so
  the guarantee holds whatever was chosen.

>>> import numpy as np, pandas as pd
>>> rng = np.random.default_rng(0)
>>> n = 3000
>>> hard = rng.uniform(size=n)                       # how hard each item is
>>> y = np.clip(rng.normal(3, 1, n), 1, 5)
>>> df = pd.DataFrame({"human": y, "judge": y + rng.normal(0, 0.1 + hard, n),
...                    "hard": hard})
>>> rule = fit_triage(df.iloc[:2000], target="human", score="judge", scale=(1, 5),
...                   tolerance=0.5, alpha=0.1, delta=0.1, uncertainty="hard", seed=0)
>>> out = rule.apply(df.iloc[2000:])
>>> kept = out[out.trusted]
>>> 0.1 < len(kept) / 1000 < 0.9, bool(np.mean(abs(kept.triage_score - kept.human) > 0.5) <= 0.13)
(True, True)
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scoreband.datatypes import Scale
from scoreband.decisions.ltt import (
    accepted_counts,
    choose_start,
    ltt_threshold,
    min_rejectable,
    predicted_rejection,
    threshold_grid,
)
from scoreband.decisions.maps import MAP_KINDS, ScoreMap, fit_map
from scoreband.decisions.rulefile import (
    as_float,
    as_mapping,
    check_rule_doc,
    read_key,
    rule_domain,
    rule_outside,
)
from scoreband.decisions.uncertainty import (
    NOT_IN_AUTO,
    UNCERTAINTIES,
    Signals,
    available,
    choose_uncertainty,
    make_uncertainty,
    uncertainty_from_dict,
)
from scoreband.engine.rows import Stage
from scoreband.errors import ERROR_COLUMN as _ERROR_COLUMNS
from scoreband.errors import InputError, NotFittedError, RowError

__all__ = ["TriageRule", "Triage", "fit_triage", "fit_triage_arrays", "load_rule",
           "TRIAGE_COLUMNS", "RULE_FORMAT", "LOSS_SLACK", "TriageStage", "triage_stage",
           "apply_rule_file", "ERROR_COLUMN"]

RULE_FORMAT = "scoreband-triage-rule"
RULE_VERSION = 1
#: the columns every triaged row gets
TRIAGE_COLUMNS = ("triage_score", "triage_uncertainty", "trusted", _ERROR_COLUMNS["triage"])
#: ``|m - y| > tol + LOSS_SLACK`` is a miss: a score exactly ``tol`` away is within it even
#: when the targets are thirds stored in floating point
LOSS_SLACK = 1e-9
#: the training items below which a group's risk curve is the pooled one
MIN_GROUP_TRAIN = 30
POOLED = "(all)"


def _scale(scale) -> Scale:
    if isinstance(scale, Scale):
        return scale
    if isinstance(scale, str):
        return Scale.parse(scale)
    try:
        a, b = scale
    except (TypeError, ValueError):
        raise InputError(f"`scale` expects 'A,B' or (A, B), got {scale!r}") from None
    return Scale(float(a), float(b), integer=float(a).is_integer() and float(b).is_integer())


def _check_levels(tolerance, alpha, delta, scale: Scale) -> None:
    for name, v in (("alpha", alpha), ("delta", delta)):
        if not (isinstance(v, (int, float)) and 0 < v < 1):
            shown = "`alpha` (the risk, --risk)" if name == "alpha" else "`delta` (--delta)"
            raise InputError(f"{shown} must lie in (0, 1), got {v!r}")
    if not (isinstance(tolerance, (int, float)) and math.isfinite(tolerance) and tolerance >= 0):
        raise InputError(f"`tolerance` must be a number >= 0 on the target's scale, got "
                         f"{tolerance!r}")
    if tolerance >= scale.width:
        raise InputError(f"`tolerance` {tolerance:g} is at least the whole scale "
                         f"[{scale.lo:g}, {scale.hi:g}]: every score is within it; give a "
                         "smaller tolerance (e.g. a quarter of the scale)")


def losses(m, y, tol: float) -> np.ndarray:
    """1 where the mapped score ``m`` is off the target ``y`` by more than ``tol``."""
    return (np.abs(np.asarray(m, float) - np.asarray(y, float)) > tol + LOSS_SLACK).astype(float)


# ------------------------------------------------------------------ the rule
@dataclass
class TriageRule:
    """A fitted trust-or-escalate rule: the map, the uncertainty, a threshold per group.

    ``apply(df)`` adds the :data:`TRIAGE_COLUMNS` to every row of a table (``triage_group``
    too with groups); ``predict(df)`` returns only ``trusted``; ``decide`` works on arrays;
    ``save(path)`` writes the rule as JSON and :func:`load_rule` reads it back.
    """

    scale: Scale
    tolerance: float
    alpha: float
    delta: float
    map: ScoreMap
    uncertainty: Any
    groups: dict[str, dict]  #: group -> threshold, accepted_share, guarantee ...
    columns: dict = field(default_factory=dict)  #: score, features, groups, uncertainty
    report: dict = field(default_factory=dict)  #: what was measured while fitting
    calibrator: dict | None = None  #: the calibrator document (band-width uncertainty)
    #: the range of each input over the labeled rows (:func:`rulefile.rule_domain`)
    domain: dict | None = None
    errors: list[RowError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        thr = {g: round(v["threshold"], 4) for g, v in self.groups.items()}
        return (f"TriageRule(tolerance={self.tolerance:g}, risk={self.alpha:g}, "
                f"delta={self.delta:g}, uncertainty={self.uncertainty.name!r}, "
                f"map={self.map.kind!r}, thresholds={thr})")

    @property
    def threshold(self) -> float:
        """The threshold (the pooled one, or the only group's)."""
        return next(iter(self.groups.values()))["threshold"]

    def thresholds_for(self, groups, n: int) -> tuple[np.ndarray, list[str]]:
        """Each of ``n`` items' threshold; an unseen group is escalated (-inf), said."""
        if POOLED in self.groups:
            return np.full(n, self.threshold), []
        if groups is None:
            raise InputError(f"the rule has a threshold per group of column "
                             f"{self.columns.get('groups')!r}; give the items' groups")
        g = self.group_labels(groups)
        thr = np.full(len(g), -math.inf)
        for name, v in self.groups.items():
            thr[g == name] = v["threshold"]
        unseen = sorted(set(g.tolist()) - set(self.groups))
        notes = [f"group(s) {', '.join(repr(str(x)) for x in unseen[:5])} of column "
                 f"{self.columns.get('groups')!r} had no labeled rows when the rule was "
                 f"fitted (its groups: {', '.join(repr(k) for k in list(self.groups)[:8])}): "
                 "their items are all escalated"] if unseen else []
        return thr, notes

    def group_labels(self, groups) -> np.ndarray:
        """Group cells read as the rule wrote its groups: the text as written, and a label
        that is the same number as one of the rule's (``1`` for ``1.0``, a column with an
        empty cell read as floats) read as that one (:func:`scoreband.domain.same_labels`).
        """
        from scoreband.domain import same_labels

        g = np.array([_label(x) for x in np.asarray(groups, dtype=object)], dtype=object)
        return np.asarray(same_labels(g, list(self.groups)), dtype=object).astype(str)

    def decide(self, score, signals: Signals | None = None, groups=None
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(m, u, trusted)`` for items with raw ``score`` (n,): the score on the target's
        scale, the uncertainty and the decision."""
        score = np.asarray(score, float)
        sig = signals if signals is not None else Signals(score)
        sig.score = score
        m = self.map.predict(score)
        u = np.asarray(self.uncertainty.predict(sig), float)
        thr = self.thresholds_for(groups, len(score))[0]
        return m, u, np.isfinite(u) & (u <= thr)

    def apply(self, table, on_warning=None):
        """Every row of ``table`` (a DataFrame or a path) with its decision columns; rows
        that cannot be judged are escalated (``trusted`` False) with the reason in
        ``triage_error``. See :class:`TriageStage`."""
        from scoreband.engine.rows import run_rows
        from scoreband.tables import read_table

        df = read_table(table, text=True) if isinstance(table, (str, Path)) else table
        stage = TriageStage(self, on_warning=on_warning)
        return run_rows(df, stage).table

    def predict(self, table) -> np.ndarray:
        """``trusted`` for every row of ``table`` (bool (n,))."""
        return self.apply(table)["trusted"].to_numpy(dtype=bool)

    # -------------------------------------------------------------- persistence
    def to_dict(self) -> dict:
        from scoreband._version import __version__

        return {"format": RULE_FORMAT, "format_version": RULE_VERSION,
                "scoreband_version": __version__,
                **_summary(self), "scale": self.scale.to_dict(),
                "columns": self.columns, "domain": self.domain, "map": self.map.to_dict(),
                "uncertainty_model": self.uncertainty.to_dict(), "groups": self.groups,
                "report": self.report, "calibrator": self.calibrator,
                "skipped_rows": [e.__dict__ for e in self.errors[:1000]],
                "n_skipped_rows": len(self.errors), "warnings": self.warnings}

    def save(self, path) -> Path:
        from scoreband.json_io import write_json

        write_json(path, self.to_dict())
        return Path(path)

    def calibrator_pair(self):
        """The embedded calibrator as ``(calibrator, document)`` (band-width uncertainty)."""
        if self.calibrator is None:
            return None

        from scoreband.conformal import load_calibrator

        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / "calibrator.json"
            f.write_text(json.dumps(self.calibrator), encoding="utf-8")
            return load_calibrator(f)


def _summary(rule: TriageRule) -> dict:
    """The head of rule.json: what a reader needs without reading further."""
    one = len(rule.groups) == 1
    g0 = next(iter(rule.groups.values()))
    words = (f"Among the items this rule trusts, the score is off the human score by more "
             f"than {rule.tolerance:g} at most {rule.alpha:.0%} of the time, with probability "
             f"at least {1 - rule.delta:.0%} over the draw of the labeled rows "
             f"(Learn-then-Test, fixed-sequence binomial tests), for items drawn like the "
             f"labeled ones" + ("" if one else ", per group (each group its own guarantee)")
             + ".")
    return {"threshold": g0["threshold"] if one else None,
            "accepted_share": (g0["accepted_share"] if one else
                               rule.report.get("accepted_share")),
            "risk": rule.alpha, "delta": rule.delta, "tolerance": rule.tolerance,
            "uncertainty": rule.uncertainty.name, "map_kind": rule.map.kind,
            "guarantee": words,
            "accept_all_risk": rule.report.get("accept_all_risk")}


def load_rule(path) -> TriageRule:
    """Read a rule written by :meth:`TriageRule.save` (``scoreband triage --out``)."""
    from scoreband.json_io import read_json

    doc = read_json(path, what="triage rule",
                    missing="write one with `scoreband triage LABELED ... --out rule.json`",
                    fix="is it a rule written by `scoreband triage --out`?")
    return rule_from_dict(doc, path)


def rule_from_dict(doc: dict, where="the rule") -> TriageRule:
    """The rule of a rule document; another format or version, or a damaged key, is an
    :class:`InputError` naming ``where`` and the key (:mod:`scoreband.decisions.rulefile`)."""
    where = str(where)
    check_rule_doc(doc, where, fmt=RULE_FORMAT, version=RULE_VERSION, what="triage rule",
                   refit="scoreband triage LABELED ... --out rule.json")

    def key(k, parse, **kw):
        return read_key(doc, k, parse, where, **kw)

    def group(name, v):
        v = as_mapping(v)
        return {**v, "threshold": read_key(v, "threshold", as_float, f"{where}: group "
                                                                     f"{name!r}")}

    groups = key("groups", lambda d: {str(k): group(k, v) for k, v in as_mapping(d).items()})
    if not groups:
        raise InputError(f"{where}: key 'groups' is empty; fit the rule again")
    rule = TriageRule(key("scale", Scale.from_dict), key("tolerance", as_float),
                      key("risk", as_float), key("delta", as_float),
                      key("map", ScoreMap.from_dict),
                      key("uncertainty_model", uncertainty_from_dict), groups,
                      dict(key("columns", as_mapping, default={}) or {}),
                      dict(key("report", as_mapping, default={}) or {}),
                      key("calibrator", lambda d: d if d is None else as_mapping(d),
                          default=None),
                      key("domain", lambda d: d if d is None else as_mapping(d),
                          default=None))
    if rule.uncertainty.name == "band-width" and rule.calibrator is None:
        raise InputError(f"{where} thresholds a calibrator's band width but holds no "
                         "calibrator; fit the rule again")
    return rule


def _label(v) -> str:
    """A group cell as written (a JSON number's literal, text as it is); empty for a
    missing one."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return getattr(v, "text", None) or str(v)


# ------------------------------------------------------------------ fitting on arrays
def fit_triage_arrays(score, y, *, scale, tolerance: float, alpha: float = 0.1,
                      delta: float = 0.1, signals: Signals | None = None, groups=None,
                      keys=None, by: str = "auto", map: str = "tolerance",
                      train_frac: float = 0.5, seed: int = 0, start: str = "likely",
                      grid_size: int | None = None, crossfit_map: bool = False) -> TriageRule:
    """Fit a trust-or-escalate rule on labeled items given as arrays.

    Parameters
    ----------
    score : (n,) array
        The judge's or metric's score, on any scale (``map`` puts it on the target's).
    y : (n,) array
        The human target on its native ``scale``.
    scale : Scale, ``"A,B"`` or ``(A, B)``
    tolerance : float
        How far from the human score a kept score may be (target units).
    alpha, delta : float in (0, 1)
        Risk among trusted items at most ``alpha`` with probability >= ``1 - delta``.
    signals : Signals, optional
        Features / an uncertainty column / band widths for the uncertainty (the score is
        always there).
    groups : (n,) array, optional
        Mondrian: a threshold (and a guarantee) per group.
    keys : (n,) uint64 array, optional
        Each item's identity (:func:`scoreband.conformal.randomness.frame_keys`): the
        training / calibration split is drawn from it and ``seed``, so a table sorted by
        its target splits as the same table shuffled. Default: a hash of the item's values.
    by : ``"auto"`` or a name of :data:`scoreband.decisions.uncertainty.UNCERTAINTIES`
        The uncertainty; ``auto`` picks the one that accepts most on the training share.
    map : ``"tolerance"``, ``"isotonic"`` or ``"none"``
    train_frac : float in (0, 1)
        The training share of the labeled items; the rest calibrate.
    start : ``"likely"`` or ``"first"``
        Where the fixed sequence starts (:func:`scoreband.decisions.ltt.choose_start`).
    grid_size : int, optional
        The thresholds tested (quantiles of the training share's uncertainties). Default:
        one per 20 calibration rows of the group, 5 to 200 - a fine grid over few
        calibration rows stops the fixed sequence at the first unlucky step.
    crossfit_map : bool
        The training share's losses (which the uncertainty learns and the sequence start
        reads) come from a map fitted on the other half of the training share, not from
        the map fitted on all of it, whose in-sample hits are optimistic where the targets
        spread. Off by default: on the judge tables it lowered the accepted share at
        alpha 0.2 (qwen/Dialsumm/relevance 0.79 -> 0.64, benchmarks/triage.py) - an
        optimistic curve starts the sequence higher, and the calibration test, not the
        curve, carries the guarantee. The calibration rows are judged by the map fitted on
        the whole training share either way.
    """
    from scoreband.conformal.randomness import array_keys, row_uniforms

    scale = _scale(scale)
    _check_levels(tolerance, alpha, delta, scale)
    if not 0 < train_frac < 1:
        raise InputError(f"`train_frac` must lie in (0, 1), got {train_frac!r}")
    if map not in MAP_KINDS:
        raise InputError(f"`map` {map!r}: choose one of {', '.join(MAP_KINDS)}")
    score, y = np.asarray(score, float), np.asarray(y, float)
    n = len(score)
    _check_spread(y, scale)
    sig = signals if signals is not None else Signals(score)
    sig.score = score
    names = available(sig)
    if by != "auto":
        if by not in UNCERTAINTIES:
            raise InputError(f"`by` {by!r}: choose auto or one of {', '.join(UNCERTAINTIES)}")
        if by not in names:
            need = {"column": "an `uncertainty` column", "band-width": "a `calibrator`",
                    "knn-miss-features": "`features`", "knn-abs-features": "`features`",
                    "judge-confidence": "`features` holding the judge's log-probs (<= 0)"}
            raise InputError(f"`by` {by}: needs {need.get(by, 'more inputs')}")
        names = [by]
    else:
        names = [x for x in names if x not in NOT_IN_AUTO]
    if keys is None:
        keys = array_keys(np.column_stack([score, y] + ([sig.features] if sig.features
                                                         is not None else [])))
    # copies of a row are numbered in group order: the same split in any row order
    train = row_uniforms(keys, seed, 41,
                         within=None if groups is None else (np.asarray(groups).astype(str),)
                         ) < train_frac
    cal = ~train
    need_cal = min_rejectable(alpha, delta)
    if train.sum() < 20 or cal.sum() < need_cal:
        raise InputError(
            f"{n} labeled row(s): {int(train.sum())} for training and {int(cal.sum())} for "
            f"calibration; the calibration share needs at least {need_cal} to trust anything "
            f"at risk {alpha:g} (`alpha`, --risk), delta {delta:g} (and training at least "
            "20): label more rows, or raise the risk / delta")
    T, C = np.flatnonzero(train), np.flatnonzero(cal)

    folds = (row_uniforms(keys[T], seed, 42) < 0.5).astype(int)
    # 1. the map, on the training share; the training items' own losses from the map
    # fitted without them (crossfit_map), so what is learned from them is not optimistic
    smap = fit_map(score[T], y[T], tol=tolerance, scale=scale, kind=map)
    m = smap.predict(score)
    loss = losses(m, y, tolerance)
    absres = np.abs(m - y)
    if crossfit_map and map != "none" and min(np.sum(folds == 0), np.sum(folds == 1)) >= 10:
        for f in (0, 1):
            fit_, out_ = T[folds != f], T[folds == f]
            mf = fit_map(score[fit_], y[fit_], tol=tolerance, scale=scale,
                         kind=map).predict(score[out_])
            loss[out_] = losses(mf, y[out_], tolerance)
            absres[out_] = np.abs(mf - y[out_])

    # 2. the uncertainty: each candidate cross-fitted on the training share, the best kept
    n_cal_all = len(C)

    def merit(u_, loss_):  # the accepted share a test started there is expected to give
        if len(names) == 1:
            return math.nan
        grid_ = threshold_grid(u_, 100)
        nj, kj = accepted_counts(u_, loss_, grid_)
        share_ = nj / len(u_)
        return float(np.max(share_ * predicted_rejection(share_, nj, kj, n_cal_all, alpha,
                                                          delta)))

    name, shares, crossfit = choose_uncertainty(names, sig.take(T), loss[T], absres[T],
                                                folds, keys[T], merit)
    est = make_uncertainty(name)
    if hasattr(est, "k"):
        est.fit(sig.take(T), loss[T], absres[T], keys=keys[T])
    elif name == "fitted-abs":
        est.fit(sig.take(T), loss[T], absres[T])
    u = np.full(n, np.nan)
    u[C] = est.predict(sig.take(C))
    uT = crossfit[name]

    def size_for(n_cal: int) -> int:  # one threshold per 20 calibration rows, 5 to 200
        return int(grid_size) if grid_size else int(np.clip(n_cal // 20, 5, 200))

    grid = threshold_grid(uT, size_for(len(C)))

    # 3. Learn-then-Test on the calibration share, per group
    g = np.full(n, POOLED) if groups is None else np.asarray(groups).astype(str)
    out, notes = {}, []
    for name_g in sorted({str(x) for x in set(g[C]) | set(g[T])}):
        tg, cg = T[g[T] == name_g], C[g[C] == name_g]
        ut = uT[g[T] == name_g]
        grid_g = grid if groups is None else threshold_grid(uT, size_for(len(cg)))
        share, nt, kt = (_curve(ut, loss[tg], grid_g) if len(tg) >= MIN_GROUP_TRAIN
                         else _curve(uT, loss[T], grid_g))
        rec = {"n_calibration": int(len(cg)), "n_training": int(len(tg)),
               "accept_all_risk": float(loss[cg].mean()) if len(cg) else None}
        if len(cg) < need_cal:
            rec.update(threshold=-math.inf, accepted_share=0.0, start=None,
                       risk_on_calibration=None,
                       note=f"{len(cg)} calibration row(s): fewer than the {need_cal} "
                            f"needed to trust anything at risk {alpha:g}, delta "
                            f"{delta:g}; every item of this group is escalated")
            if groups is not None:
                notes.append(f"group {name_g!r}: {rec['note']}")
            out[name_g] = rec
            continue
        j0 = choose_start(share, nt, kt, len(cg), alpha, delta, rule=start)
        res = ltt_threshold(u[cg], loss[cg], grid_g, alpha, delta, j0)
        rec.update(threshold=res["threshold"], accepted_share=res["accepted"],
                   risk_on_calibration=res["risk"], start=j0,
                   start_threshold=float(grid_g[j0]), grid_index=res["index"],
                   grid_size=int(len(grid_g)),
                   note="" if res["index"] >= 0 else
                   "the first test did not reject: nothing can be trusted at this risk "
                   "with these labels (every item escalated); label more rows or raise the "
                   "risk (--risk, `alpha`)")
        out[name_g] = rec
        if res["index"] < 0 and groups is None:
            notes.append(rec["note"])

    thr_c = np.array([out[x]["threshold"] for x in g[C]])
    acc = u[C] <= thr_c
    nC, kC = accepted_counts(u[C], loss[C], grid)
    report = {
        "n_labeled": int(n), "n_training": int(len(T)), "n_calibration": int(len(C)),
        "train_frac": train_frac, "seed": seed, "start_rule": start,
        "accepted_share": float(acc.mean()),
        "risk_among_accepted_on_calibration": float(loss[C][acc].mean()) if acc.any() else None,
        "accept_all_risk": float(loss[C].mean()),
        "accept_all_risk_all_labeled": float(loss.mean()),
        "uncertainty_choice": {"chosen": name, "training_share_accepted": shares},
        "curve": {"threshold": grid, "accepted_share": nC / max(len(C), 1),
                  "risk": np.where(nC > 0, kC / np.maximum(nC, 1), np.nan)},
    }
    if groups is not None:
        notes += _per_group_notes(out, len(C), need_cal, alpha, delta)
    return TriageRule(scale, float(tolerance), float(alpha), float(delta), smap, est, out,
                      report=report, warnings=notes,
                      domain=rule_domain(score, _domain_inputs(sig)))


def _domain_inputs(sig: Signals) -> np.ndarray | None:
    """The inputs beside the score whose range the rule records: the features, then the
    uncertainty column (the band width is the embedded calibrator's to check)."""
    cols = [c for c in (sig.features, None if sig.column is None else
                        np.asarray(sig.column, float)[:, None]) if c is not None]
    return np.column_stack(cols) if cols else None


def _check_spread(y, scale: Scale) -> None:
    """Refuse labels that are all one value: the map would send every score to it and the
    rule trust every item whatever the judge said (a constant column, a wrong --target)."""
    fin = y[np.isfinite(y)]
    if len(fin) and np.ptp(fin) == 0:
        raise InputError(
            f"every one of the {len(fin)} labeled rows has the same human score "
            f"({fin[0]:g} on [{scale.lo:g}, {scale.hi:g}]): a rule fitted on them maps every "
            "judge score to it and trusts every item whatever the judge said. Check the "
            "target column (--target), or label rows across the scale")


def _per_group_notes(out: dict, n_cal: int, need_cal: int, alpha: float,
                     delta: float) -> list[str]:
    """Why a per-group rule keeps nothing, with the numbers, and the pooled fit to try."""
    if any(v["accepted_share"] > 0 for v in out.values()):
        return []
    small = {k: v["n_calibration"] for k, v in out.items() if v["n_calibration"] < need_cal}
    sizes = ", ".join(f"{k!r} {v['n_calibration']}" for k, v in list(out.items())[:8])
    why = (f"{len(small)} of {len(out)} groups have fewer than the {need_cal} calibration "
           f"rows a group needs to trust anything at risk {alpha:g}, delta {delta:g}"
           if small else f"no group's tests rejected at risk {alpha:g}, delta {delta:g}")
    return [f"the per-group rule keeps nothing: {why} (calibration rows per group: {sizes}; "
            f"{n_cal} in all). Fit one pooled rule (drop --groups: its guarantee then holds "
            "over all items, not per group), label more rows per group, or raise the risk"]


def _curve(u, loss, grid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(share, n, k)`` accepted at each threshold, and the wrong ones among them."""
    n, k = accepted_counts(u, loss, grid)
    return n / max(len(u), 1), n, k


# ------------------------------------------------------------------ fitting on a table
def _spec(scale: Scale, target, score, features, groups, uncertainty, id_col, df):
    from scoreband.columns import ColumnSpec, expand_columns

    feats = expand_columns(features, df.columns) if features else []
    extra = [uncertainty] if uncertainty else []
    return ColumnSpec(scale=scale, target=target, median=score, features=feats + extra,
                      groups=groups, id_col=id_col, raw_predictions=True), feats


def signals_of(inp, feats: list[str], uncertainty: str | None, band=None) -> Signals:
    """The :class:`Signals` of loaded inputs (the uncertainty column rides last among the
    features)."""
    f = inp.pred.features
    col = None
    if uncertainty:
        col, f = f[:, -1], (f[:, :-1] if f.shape[1] > 1 else None)
    if f is not None and f.shape[1] == 0:
        f = None
    return Signals(np.asarray(inp.pred.median, float), f, col, band)


def band_widths(df, calibrator, offset: int = 0) -> tuple[np.ndarray, list[RowError]]:
    """Each row's band width on [0, 1] under ``calibrator`` (a path or a ``(calibrator,
    document)`` pair), NaN with a row error where it gives none."""
    from scoreband.apply_stage import ApplyStage

    stage = ApplyStage(calibrator)
    stage.offset = offset
    cols = stage.frame(df.reset_index(drop=True))
    w = np.asarray(cols["band_hi01"], float) - np.asarray(cols["band_lo01"], float)
    return w, list(stage.errors)


def fit_triage(table, *, target: str, score: str, scale, tolerance: float,
               alpha: float = 0.1, delta: float = 0.1, features: Sequence[str] | str = (),
               groups: str | None = None, uncertainty: str | None = None,
               calibrator=None, by: str = "auto", map: str = "tolerance",
               train_frac: float = 0.5, seed: int = 0, start: str = "likely",
               id_col: str | None = None) -> TriageRule:
    """Fit a trust-or-escalate rule on a labeled table (a DataFrame or a path).

    ``target``: the human score's column; ``score``: the judge's or metric's column;
    ``features``: columns (or globs, ``"logp_*"``) the uncertainty may read (a judge's
    log-probs give ``judge-confidence``); ``uncertainty``: a column of your own uncertainty
    (larger = less sure); ``calibrator``: a calibrator file (or a
    :class:`scoreband.api.Calibration`) whose band width is an uncertainty - fitted on
    other rows than these; ``groups``: a threshold per group. Other parameters as
    :func:`fit_triage_arrays`. Rows with a bad cell are skipped and listed in
    ``rule.errors``; the rule's ``apply`` / ``predict`` / ``save`` use it.
    """
    from scoreband.columns import load_inputs
    from scoreband.conformal.randomness import frame_keys
    from scoreband.tables import read_table

    scale = _scale(scale)
    _check_levels(tolerance, alpha, delta, scale)
    # cells as written (a group 01 stays 01, as the apply reads it); numbers parsed where
    # they are used
    df = read_table(table, text=True) if isinstance(table, (str, Path)) else table
    if not target or not score:
        raise InputError("give the human score's column (`target`) and the judge's score "
                         "column (`score`)")
    spec, feats = _spec(scale, target, score, features, groups, uncertainty, id_col, df)
    inp = load_inputs(df, spec)
    errors = list(inp.errors)
    rows = inp.rows
    band, cal_doc = None, None
    if calibrator is not None:
        pair = _calibrator_pair(calibrator)
        cal_doc = pair[1]
        w, bad = band_widths(df, pair)
        have = {e.position for e in errors}
        errors += [e for e in bad if e.position not in have]
        ok = np.isfinite(w[rows])
        if not ok.all():
            inp = _subset(inp, np.flatnonzero(ok))
            rows = inp.rows
        band = w[rows]
        errors.sort(key=lambda e: e.position or 0)
    sig = signals_of(inp, feats, uncertainty, band)
    y = scale.from01(inp.y01)
    # each row's identity from the cells the rule reads: the CLI (which reads only those
    # columns) and the API (the whole frame) draw the same split
    used = [c for c in dict.fromkeys([target, score, *feats, uncertainty, groups, id_col])
            if c]
    keys = frame_keys(df.iloc[rows][used])
    rule = fit_triage_arrays(inp.pred.median, y, scale=scale, tolerance=tolerance,
                             alpha=alpha, delta=delta, signals=sig, groups=inp.groups,
                             keys=keys, by=by, map=map, train_frac=train_frac, seed=seed,
                             start=start)
    rule.columns = {"score": score, "features": feats, "groups": groups,
                    "uncertainty": uncertainty, "id_col": id_col, "target": target}
    rule.domain["names"] = {"median": score, **{f"features[{j}]": c for j, c in
                                                enumerate([*feats, *([uncertainty] if
                                                                     uncertainty else [])])}}
    rule.calibrator = cal_doc
    rule.errors = errors
    rule.warnings = [*inp.notes, *rule.warnings]
    return rule


def _calibrator_pair(calibrator):
    from scoreband.conformal import load_calibrator

    if hasattr(calibrator, "calibrator") and hasattr(calibrator, "inputs"):  # a Calibration
        with tempfile.TemporaryDirectory() as d:  # its saved form: the rule embeds it
            f = calibrator.save(Path(d) / "calibrator.json")
            doc = json.loads(Path(f).read_text(encoding="utf-8"))
        return calibrator.calibrator, doc
    return load_calibrator(calibrator)


def _subset(inp, keep):
    p = inp.pred
    pred = type(p)(median=p.median[keep],
                   features=None if p.features is None else p.features[keep],
                   n_ratings=None if p.n_ratings is None else p.n_ratings[keep])
    return replace(inp, pred=pred, y01=None if inp.y01 is None else inp.y01[keep],
                   rows=inp.rows[keep], groups=None if inp.groups is None else inp.groups[keep],
                   n_ratings=inp.n_ratings[keep])


# ------------------------------------------------------------------ estimator
class Triage:
    """Estimator-style trust or escalate: ``Triage(...).fit(labeled).predict(table)``.

    The parameters are those of :func:`fit_triage`; ``fit`` returns ``self`` with the
    fitted :class:`TriageRule` as ``rule_``; ``predict`` gives ``trusted`` per row and
    ``apply`` the whole table with its decision columns.
    """

    def __init__(self, *, target: str, score: str, scale, tolerance: float,
                 alpha: float = 0.1, delta: float = 0.1, **options):
        self.params = dict(target=target, score=score, scale=scale, tolerance=tolerance,
                           alpha=alpha, delta=delta, **options)
        self.rule_: TriageRule | None = None

    def fit(self, table) -> Triage:
        self.rule_ = fit_triage(table, **self.params)
        return self

    def _rule(self) -> TriageRule:
        if self.rule_ is None:
            raise NotFittedError("call fit(labeled_table) before predict / apply")
        return self.rule_

    def predict(self, table) -> np.ndarray:
        return self._rule().predict(table)

    def apply(self, table):
        return self._rule().apply(table)

    def __repr__(self) -> str:
        return f"Triage({self.rule_!r})" if self.rule_ is not None else \
            f"Triage(unfitted, {self.params})"


# ----------------------------------------------------------------- the row engine's stage
ERROR_COLUMN = _ERROR_COLUMNS["triage"]
#: the ``triage_error`` of a row outside the range the rule was fitted on (escalated)
OUT_OF_DOMAIN = ("out_of_domain: an input lies outside the range of the rows the rule was "
                 "fitted on; escalated")


class TriageStage(Stage):
    """Adds ``triage_score`` (the score on the target's scale), ``triage_uncertainty``,
    ``trusted`` (True / False) and ``triage_error`` to every row (``triage_group`` with a
    per-group rule). A row that cannot be judged (a bad or missing cell, a calibrator band
    it cannot get) is escalated: ``trusted`` False, the reason in ``triage_error``. A row
    whose score or features lie outside the range the rule was fitted on is escalated with
    :data:`OUT_OF_DOMAIN` (warned once); a table mostly outside it (another scale) is
    refused (:func:`scoreband.decisions.rulefile.rule_outside`). After the run: ``errors``
    (every bad row), ``judged``, ``trusted``, ``out_of_domain`` (counts)."""

    label = "triaging"
    error_column = ERROR_COLUMN
    vectorized = True

    def __init__(self, rule, *, on_warning=None, base_dir=None):
        super().__init__(base_dir)
        self.rule = load_rule(rule) if isinstance(rule, (str, Path)) else rule
        self.source = Path(rule) if isinstance(rule, (str, Path)) else None
        self.on_warning = on_warning
        self.warnings: list[str] = []
        self.errors: list[RowError] = []
        self.judged = 0
        self.trusted = 0
        self.out_of_domain = 0
        self.cal_pair = self.rule.calibrator_pair() if self.rule.calibrator else None
        self.per_group = "(all)" not in self.rule.groups

    @property
    def outputs(self) -> dict:
        out = {"triage_score": np.nan, "triage_uncertainty": np.nan, "trusted": False}
        if self.per_group:
            out["triage_group"] = ""
        return out

    @property
    def calibrator(self):  # the output's provenance hashes the rule file
        return None

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
            if self.on_warning is not None:
                self.on_warning(message)

    def frame(self, df: pd.DataFrame) -> dict[str, np.ndarray]:
        from scoreband.columns import ColumnSpec, load_inputs

        r = self.rule
        cols = r.columns
        if not cols.get("score"):
            raise InputError("the rule records no score column; fit it with `scoreband "
                             "triage` or scoreband.decisions.fit_triage")
        feats = list(cols.get("features") or [])
        unc = cols.get("uncertainty")
        need = [("score", cols["score"]), *[("features", c) for c in feats],
                ("uncertainty", unc), ("groups", cols.get("groups"))]
        missing = [(k, c) for k, c in need if c and c not in df.columns]
        if missing:
            k, c = missing[0]
            raise InputError(f"the rule reads the {k} column {c!r}, which this table lacks; "
                             f"score these rows the same way (available: "
                             f"{', '.join(map(str, list(df.columns)[:30]))})")
        spec = ColumnSpec(scale=r.scale, median=cols["score"], features=feats + ([unc] if unc
                                                                            else []),
                          groups=cols.get("groups") if self.per_group else None,
                          id_col=cols.get("id_col") if cols.get("id_col") in df.columns
                          else None, raw_predictions=True)
        inp = load_inputs(df, spec, require_target=False, row_offset=self.offset,
                          allow_none=True)
        errs = {e.position: e for e in inp.errors}
        rows = inp.rows
        band = None
        if self.cal_pair is not None and len(rows):
            w, bad = band_widths(df, self.cal_pair, self.offset)
            for e in bad:
                errs.setdefault(e.position - self.offset, replace(
                    e, position=e.position - self.offset))
            ok = np.isfinite(w[rows])
            band = w[rows][ok]
            keep = np.flatnonzero(ok)
        else:
            keep = np.arange(len(rows))
        n = len(df)
        score = np.full(n, np.nan)
        unc_out = np.full(n, np.nan)
        trusted = np.zeros(n, dtype=bool)
        errors = np.full(n, "", dtype=object)
        if len(keep):
            sig = signals_of(inp, feats, unc, None)
            sig = sig.take(keep)
            sig.band = band
            ood, note = rule_outside(r.domain, sig.score, _domain_inputs(sig),
                                     what="triage")
            if note:
                self._warn(note)
            groups = None if inp.groups is None else inp.groups[keep]
            thr, notes = r.thresholds_for(groups, len(keep))
            for note in notes:
                self._warn(note)
            m, u, _ = r.decide(sig.score, sig, groups)
            at = rows[keep]
            score[at], unc_out[at] = m, u
            trusted[at] = np.isfinite(u) & (u <= thr) & ~ood
            errors[at[ood]] = OUT_OF_DOMAIN
            self.out_of_domain += int(ood.sum())
        for pos, e in sorted(errs.items()):
            errors[pos] = f"{e.column}: {e.reason}"
            self.errors.append(replace(e, position=pos + self.offset))
        self.judged += len(keep)
        self.trusted += int(trusted.sum())
        out = {"triage_score": score, "triage_uncertainty": unc_out, "trusted": trusted}
        if self.per_group:
            g = np.full(n, "", dtype=object)
            g[inp.rows] = inp.groups
            out["triage_group"] = g
        out[ERROR_COLUMN] = errors
        return out

    def components(self) -> dict:
        return {"triage_rule": str(self.source) if self.source else "in memory",
                "uncertainty": self.rule.uncertainty.name, "map": self.rule.map.kind}

    def summary(self) -> dict:
        return {"judged": self.judged, "trusted": self.trusted, "errors": len(self.errors),
                "out_of_domain": self.out_of_domain}


def triage_stage(rule: str, on_warning=None, base_dir=None) -> TriageStage:
    """The stage from plain values (the rule file), as the CLI builds it."""
    return TriageStage(rule, on_warning=on_warning, base_dir=base_dir)


def apply_rule_file(table, rule, out, *, chunk_rows: int = 100_000, on_warning=None):
    """Triage every row of the file ``table`` into ``out`` (CSV / TSV / JSONL / Parquet,
    streamed chunk by chunk; every input row and column kept). Returns the stage (its
    ``judged``, ``trusted``, ``errors``)."""
    from scoreband.engine.rows import run_file

    stage = TriageStage(rule, on_warning=on_warning)
    run_file(table, stage, out, chunk_rows=chunk_rows)
    if stage.judged == 0 and stage.errors:
        raise InputError("no row could be triaged: " + "; ".join(str(e)
                                                                 for e in stage.errors[:5]))
    return stage
