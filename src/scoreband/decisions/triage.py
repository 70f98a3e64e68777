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
>>> fit = fit_triage(df.iloc[:2000], target="human", score="judge", scale=(1, 5),
...                  tolerance=0.5, alpha=0.1, delta=0.1, uncertainty="hard", seed=0)
>>> out = fit.rule.apply(df.iloc[2000:])
>>> kept = out[out.trusted]
>>> 0.1 < len(kept) / 1000 < 0.9, bool(np.mean(abs(kept.triage_score - kept.human) > 0.5) <= 0.13)
(True, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scoreband.datatypes import Scale
from scoreband.decisions.maps import ScoreMap
from scoreband.decisions.risk import LOSS_SLACK, FixedSequence
from scoreband.decisions.rule import Decision, Rule, register_rule
from scoreband.decisions.rule import load_rule as load_rule
from scoreband.decisions.rulefile import (
    TRIAGE_RULE_VERSION,
    as_float,
    as_mapping,
    read_key,
    rule_domain,
    rule_outside,
)
from scoreband.decisions.triage_fit import (
    POOLED,
    candidates,
    check_fit,
    check_levels,
    check_spread,
    fit_chosen_uncertainty,
    fit_report,
    fit_score_map,
    group_thresholds,
    losses,
    pooled_groups,
    split,
)
from scoreband.decisions.triage_inputs import domain_inputs, fit_spec, signals_of, with_bands
from scoreband.decisions.uncertainty import (
    Signals,
    uncertainty_from_dict,
)
from scoreband.errors import ERROR_COLUMN as _ERROR_COLUMNS
from scoreband.errors import InputError, NotFittedError, RowError
from scoreband.textsafe import complement_text, share_text

__all__ = ["TriageRule", "TriageResult", "Triage", "fit_triage", "fit_triage_arrays",
           "load_rule", "TRIAGE_COLUMNS", "RULE_FORMAT", "LOSS_SLACK", "ERROR_COLUMN",
           "losses", "accepted_share"]

RULE_FORMAT = "scoreband-triage-rule"
RULE_VERSION = TRIAGE_RULE_VERSION
ERROR_COLUMN = _ERROR_COLUMNS["triage"]
#: the columns every triaged row gets
TRIAGE_COLUMNS = ("triage_score", "triage_uncertainty", "trusted", ERROR_COLUMN)
#: the ``triage_error`` of a row of a group the rule had no labeled rows of (escalated)
UNSEEN_GROUP = "unseen_group: the rule had no labeled rows of this group; escalated"
#: the ``triage_error`` of a row outside the range the rule was fitted on (escalated)
OUT_OF_DOMAIN = ("out_of_domain: an input lies outside the range of the rows the rule was "
                 "fitted on; escalated")


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


# ------------------------------------------------------------------ the rule
@register_rule
@dataclass(eq=False)
class TriageRule(Rule):
    """A fitted trust-or-escalate rule: the map, the uncertainty, a threshold per group.

    ``apply(df)`` adds the :data:`TRIAGE_COLUMNS` to every row of a table (``triage_group``
    too with groups) through the one rule stage; ``predict(df)`` returns only ``trusted``;
    ``decide`` works on arrays; ``save(path)`` writes the rule as JSON and
    :func:`scoreband.decisions.rule.load_rule` reads it back.
    """

    format = RULE_FORMAT
    version = RULE_VERSION
    what = "triage rule"
    kind = "triage"
    job = "triage"
    refit = "scoreband triage LABELED ... --out rule.json"
    error_column = ERROR_COLUMN
    label = "triaging"

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

    @property
    def per_group(self) -> bool:
        return POOLED not in self.groups

    @property
    def reads_groups(self) -> bool:
        """Whether applying the rule reads the groups column: a threshold per group, or a
        pooled one whose guarantee covers the mixture of the groups it was fitted on."""
        return self.per_group or bool(self.report.get("per_group"))

    def _known_groups(self) -> dict:
        return self.groups if self.per_group else self.report["per_group"]

    def thresholds_for(self, groups, n: int) -> tuple[np.ndarray, list[str]]:
        """Each of ``n`` items' threshold; an unseen group is escalated (-inf), said (a
        pooled rule's too: its guarantee covers only the groups it was fitted on)."""
        if not self.reads_groups:
            return np.full(n, self.threshold), []
        if groups is None:
            raise InputError(f"the rule was fitted on the groups of column "
                             f"{self.columns.get('groups')!r}; give the items' groups")
        g = self.group_labels(groups)
        known = self._known_groups()
        thr = np.full(len(g), -math.inf)
        for name, v in known.items():
            thr[g == name] = v["threshold"] if self.per_group else self.threshold
        unseen = sorted(set(g.tolist()) - set(known))
        notes = [f"group(s) {', '.join(repr(str(x)) for x in unseen[:5])} of column "
                 f"{self.columns.get('groups')!r} had no labeled rows when the rule was "
                 f"fitted (its groups: {', '.join(repr(k) for k in list(known)[:8])}): "
                 "their items are all escalated"] if unseen else []
        return thr, notes

    def group_labels(self, groups) -> np.ndarray:
        """Group cells read as the rule wrote its groups: the text as written, and a label
        that is the same number as one of the rule's (``1`` for ``1.0``, a column with an
        empty cell read as floats) read as that one (:func:`scoreband.domain.same_labels`).
        """
        from scoreband.domain import same_labels

        g = np.array([_label(x) for x in np.asarray(groups, dtype=object)], dtype=object)
        return np.asarray(same_labels(g, list(self._known_groups())), dtype=object).astype(str)

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

    # -------------------------------------------------------------- on the row engine
    def outputs(self) -> dict:
        out = {"triage_score": np.nan, "triage_uncertainty": np.nan, "trusted": False}
        return {**out, "triage_group": ""} if self.reads_groups else out

    def decide_frame(self, df: pd.DataFrame, offset: int = 0) -> Decision:
        """Every row's columns: a row that cannot be judged (a bad or missing cell, a
        calibrator band it cannot get) is escalated with the reason in ``triage_error``; a
        row outside the range the rule was fitted on is escalated with
        :data:`OUT_OF_DOMAIN` (warned once); a table mostly outside it (another scale) is
        refused (:func:`scoreband.decisions.rulefile.rule_outside`)."""
        from scoreband.decisions.triage_inputs import chunk_signals  # lazy: columns

        inp, sig, keep, errs = chunk_signals(self, df, offset)
        n, notes, ood = len(df), [], np.zeros(len(keep), bool)
        cols = {"triage_score": np.full(n, np.nan), "triage_uncertainty": np.full(n, np.nan),
                "trusted": np.zeros(n, dtype=bool)}
        errors = np.full(n, "", dtype=object)
        if len(keep):
            ood, note = rule_outside(self.domain, sig.score, domain_inputs(sig),
                                     what="triage")
            notes += [note] if note else []
            groups = None if inp.groups is None else inp.groups[keep]
            thr, unseen = self.thresholds_for(groups, len(keep))
            m, u, _ = self.decide(sig.score, sig, groups)
            at = inp.rows[keep]
            cols["triage_score"][at], cols["triage_uncertainty"][at] = m, u
            cols["trusted"][at] = np.isfinite(u) & (u <= thr) & ~ood
            errors[at[ood]] = OUT_OF_DOMAIN
            if unseen:  # the rows of a group the rule never saw: escalated, said per row
                new = ~np.isin(self.group_labels(groups), list(self._known_groups()))
                errors[at[new]] = UNSEEN_GROUP
            notes += unseen
        for pos, e in errs.items():
            errors[pos] = f"{e.column}: {e.reason}"
        if self.reads_groups:
            cols["triage_group"] = np.full(n, "", dtype=object)
            cols["triage_group"][inp.rows] = inp.groups
        cols[ERROR_COLUMN] = errors
        return Decision(cols, [errs[p] for p in sorted(errs)], len(keep),
                        {"trusted": int(cols["trusted"].sum()),
                         "out_of_domain": int(ood.sum())}, notes)

    def components(self, source: Path | None = None) -> dict:
        return {"triage_rule": str(source) if source else "in memory",
                "uncertainty": self.uncertainty.name, "map": self.map.kind}

    # -------------------------------------------------------------- persistence
    def to_dict(self) -> dict:
        return {**self.head(), **_summary(self), "scale": self.scale.to_dict(),
                "columns": self.columns, "domain": self.domain, "map": self.map.to_dict(),
                "uncertainty_model": self.uncertainty.to_dict(), "groups": self.groups,
                "report": self.report, "calibrator": self.calibrator,
                "skipped_rows": [e.__dict__ for e in self.errors[:1000]],
                "n_skipped_rows": len(self.errors), "warnings": self.warnings}

    @classmethod
    def from_dict(cls, doc: dict, where="the rule") -> TriageRule:
        """The rule of a checked rule document; a damaged key is an :class:`InputError`
        naming ``where`` and the key (:mod:`scoreband.decisions.rulefile`)."""
        def key(k, parse, **kw):
            return read_key(doc, k, parse, where, **kw)

        def group(name, v):
            v = as_mapping(v)
            return {**v, "threshold": read_key(v, "threshold", as_float,
                                               f"{where}: group {name!r}")}

        def optional(d):
            return d if d is None else as_mapping(d)

        groups = key("groups", lambda d: {str(k): group(k, v)
                                          for k, v in as_mapping(d).items()})
        if not groups:
            raise InputError(f"{where}: key 'groups' is empty; fit the rule again")
        rule = cls(key("scale", Scale.from_dict), key("tolerance", as_float),
                   key("risk", as_float), key("delta", as_float),
                   key("map", ScoreMap.from_dict),
                   key("uncertainty_model", uncertainty_from_dict), groups,
                   dict(key("columns", as_mapping, default={}) or {}),
                   dict(key("report", as_mapping, default={}) or {}),
                   key("calibrator", optional, default=None),
                   key("domain", optional, default=None))
        if rule.uncertainty.name == "band-width" and rule.calibrator is None:
            raise InputError(f"{where} thresholds a calibrator's band width but holds no "
                             "calibrator; fit the rule again")
        return rule

    @cached_property
    def cal_pair(self):
        """The embedded calibrator as ``(calibrator, document)`` (band-width uncertainty),
        read once."""
        if self.calibrator is None:
            return None
        from scoreband.conformal.persist import calibrator_from_document

        return calibrator_from_document(self.calibrator, "the rule's embedded calibrator")


def _summary(rule: TriageRule) -> dict:
    """The head of rule.json: what a reader needs without reading further."""
    one = len(rule.groups) == 1
    g0 = next(iter(rule.groups.values()))
    words = (f"Among the items this rule trusts, the score is off the human score by more "
             f"than {rule.tolerance:g} at most {share_text(rule.alpha)} of the time, with probability "
             f"at least {complement_text(rule.delta)} over the draw of the labeled rows "
             f"(Learn-then-Test, fixed-sequence binomial tests), for items drawn like the "
             f"labeled ones" + ("" if one else ", per group (each group its own guarantee)")
             + (f", over the mixture of the groups of column {rule.columns.get('groups')!r} "
                "(one threshold; each group's kept share is in report.per_group, measured, "
                "not guaranteed per group)" if rule.report.get("per_group") else "")
             + ".")
    return {"threshold": g0["threshold"] if one else None,
            "accepted_share": (g0["accepted_share"] if one else
                               rule.report.get("accepted_share")),
            "risk": rule.alpha, "delta": rule.delta, "tolerance": rule.tolerance,
            "uncertainty": rule.uncertainty.name, "map_kind": rule.map.kind,
            "guarantee": words,
            "accept_all_risk": rule.report.get("accept_all_risk")}


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
                      grid_size: int | None = None, crossfit_map: bool = False,
                      pool: bool = False) -> TriageRule:
    """Fit a trust-or-escalate rule on labeled items given as arrays: ``score`` (n,) the
    judge's score on any scale, ``y`` (n,) the human target on ``scale`` (``"A,B"``, (A, B)
    or a Scale); kept scores are off ``y`` by more than ``tolerance`` at most ``alpha`` of
    the time with probability >= ``1 - delta``. ``signals``: features / an uncertainty
    column / band widths (:class:`Signals`); ``groups``: a threshold and a guarantee per
    group; ``keys``: each item's identity (the split is drawn from it and ``seed``; default
    a hash of its values); ``by``: ``auto`` or a registered uncertainty
    (:data:`scoreband.decisions.uncertainty.UNCERTAINTY`); ``map``: tolerance | isotonic |
    none (:mod:`scoreband.decisions.maps`); ``train_frac``: the training share; ``start``
    and ``grid_size``: the fixed sequence (:class:`scoreband.decisions.risk.FixedSequence`).
    ``pool``: with ``groups``, one threshold over the mixture of groups (the split still
    drawn within each group), each group's kept share and risk reported in
    ``report["per_group"]`` (measured, not guaranteed per group).
    ``crossfit_map``: the training share's losses come from a map fitted on the other half
    of it (off by default: on the judge tables it lowered the accepted share at alpha 0.2,
    qwen/Dialsumm/relevance 0.79 -> 0.64, benchmarks/triage.py; the calibration test, not
    the curve, carries the guarantee).
    """
    from scoreband.conformal.randomness import array_keys

    scale = _scale(scale)
    check_fit(tolerance, alpha, delta, scale, train_frac, map)
    score, y = np.asarray(score, float), np.asarray(y, float)
    check_spread(y, scale)
    sig = signals if signals is not None else Signals(score)
    sig.score = score
    names = candidates(by, sig)
    if keys is None:
        keys = array_keys(np.column_stack([score, y] + ([sig.features] if sig.features
                                                         is not None else [])))
    T, C, folds = split(keys, seed, train_frac, groups, alpha, delta)
    smap, loss, absres = fit_score_map(score, y, T, folds, tolerance, scale, map, crossfit_map)
    name, shares, est, uT = fit_chosen_uncertainty(names, sig, T, C, loss, absres, keys, folds,
                                             alpha, delta)
    u = np.full(len(score), np.nan)
    u[C] = est.predict(sig.take(C))
    seq = FixedSequence(start, grid_size)
    by = None if pool else groups
    out, notes = group_thresholds(u, uT, loss, T, C, by, seq, alpha, delta)
    report = fit_report(u, loss, T, C, out, by, seq.grid(uT, len(C)),
                         {"train_frac": train_frac, "seed": seed, "start_rule": start},
                         {"chosen": name, "training_share_accepted": shares})
    if pool and groups is not None:
        report["per_group"] = pooled_groups(u, loss, C, out[POOLED]["threshold"], groups)
    return TriageRule(scale, float(tolerance), float(alpha), float(delta), smap, est, out,
                      report=report, warnings=notes,
                      domain=rule_domain(score, domain_inputs(sig)))


# ------------------------------------------------------------------ fitting on a table
@dataclass
class TriageResult:
    """What :func:`fit_triage` found (as :class:`scoreband.system_level.study.SystemsResult`
    for systems): the fitted ``rule``, the rows it reported and skipped (``errors``) and
    what it said of its inputs (``warnings``). ``save(out, html=None)`` writes the rule
    file (and the report); ``table()`` is the per-group summary the command prints."""

    rule: TriageRule
    errors: list[RowError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def report(self) -> dict:
        return self.rule.report

    def save(self, out, html=None) -> Path:
        """Write the rule to ``out`` (JSON) and, with ``html``, its report; the rule's path.
        ``html`` naming ``out`` is refused (the report would replace the rule)."""
        from scoreband.files import distinct_outputs

        distinct_outputs(("`out`", out), ("`html`", html))
        path = self.rule.save(out)
        if html is not None:
            from scoreband.decisions.report import write_triage_html

            write_triage_html(self.rule, html)
        return path

    def table(self) -> pd.DataFrame:
        """One row per group: calibration rows, threshold, share accepted, the risk among
        the accepted calibration rows and the risk of accepting all; a pooled rule's groups
        follow its one row, each at the pooled threshold."""
        pooled = self.rule.report.get("per_group") or {}
        thr = self.rule.threshold
        return pd.DataFrame([{"group": g, "calibration rows": v["n_calibration"],
                              "threshold": v.get("threshold", thr),
                              "accepted": v["accepted_share"],
                              "risk": v.get("risk_on_calibration"),
                              "accept-all risk": v.get("accept_all_risk")}
                             for g, v in [*self.rule.groups.items(),
                                          *((f"  {k} (pooled)", v) for k, v in pooled.items())]])


def fit_triage(table, *, target: str, score: str, scale, tolerance: float,
               alpha: float = 0.1, delta: float = 0.1, features: Sequence[str] | str = (),
               groups: str | None = None, uncertainty: str | None = None,
               calibrator=None, by: str = "auto", map: str = "tolerance",
               train_frac: float = 0.5, seed: int = 0, start: str = "likely",
               id_col: str | None = None, pool: bool = False) -> TriageResult:
    """Fit a trust-or-escalate rule on a labeled table (a DataFrame or a path; cells read
    as written, so a group ``01`` stays ``01`` as the apply reads it).

    ``target``: the human score's column; ``score``: the judge's or metric's column;
    ``features``: columns (or globs, ``"logp_*"``) the uncertainty may read (a judge's
    log-probs give ``judge-confidence``); ``uncertainty``: a column of your own uncertainty
    (larger = less sure); ``calibrator``: a calibrator file (or a
    :class:`scoreband.api.Calibration`) whose band width is an uncertainty - fitted on
    other rows than these; ``groups``: a threshold per group. Other parameters as
    :func:`fit_triage_arrays`. Rows with a bad cell are skipped and listed in ``errors``.
    """
    from scoreband.columns import load_inputs
    from scoreband.conformal.randomness import frame_keys
    from scoreband.tables import read_table

    scale = _scale(scale)
    check_levels(tolerance, alpha, delta, scale)
    df = read_table(table, text=True) if isinstance(table, (str, Path)) else table
    if not target or not score:
        raise InputError("give the human score's column (`target`) and the judge's score "
                         "column (`score`)")
    spec, feats = fit_spec(scale, target, score, features, groups, uncertainty, id_col, df)
    inp = load_inputs(df, spec)
    errors, band, cal_doc = list(inp.errors), None, None
    if calibrator is not None:
        inp, errors, band, cal_doc = with_bands(df, inp, errors, calibrator)
    # each row's identity from the cells the rule reads: the CLI (which reads only those
    # columns) and the API (the whole frame) draw the same split
    used = [c for c in dict.fromkeys([target, score, *feats, uncertainty, groups, id_col])
            if c]
    rule = fit_triage_arrays(inp.pred.median, scale.from01(inp.y01), scale=scale,
                             tolerance=tolerance, alpha=alpha, delta=delta,
                             signals=signals_of(inp, feats, uncertainty, band),
                             groups=inp.groups, keys=frame_keys(df.iloc[inp.rows][used]),
                             by=by, map=map, train_frac=train_frac, seed=seed, start=start,
                             pool=pool)
    rule.columns = {"score": score, "features": feats, "groups": groups,
                    "uncertainty": uncertainty, "id_col": id_col, "target": target}
    read = [*feats, *([uncertainty] if uncertainty else [])]
    rule.domain["names"] = {"median": score, **{f"features[{j}]": c
                                                for j, c in enumerate(read)}}
    rule.calibrator, rule.errors = cal_doc, errors
    rule.warnings = [*inp.notes, *rule.warnings]
    return TriageResult(rule, rule.errors, rule.warnings)


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
        self.rule_ = fit_triage(table, **self.params).rule
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


def accepted_share(y, score, *, scale, tolerance: float, alpha: float = 0.1,
                   delta: float = 0.1, uncertainty=None, features=None, seed: int = 0,
                   map: str = "tolerance") -> dict:
    """The demo's question on its embedded world: of these labeled items (human target
    ``y`` and the judge's / scorer's ``score``, both (n,)), what share can be trusted at
    ``tolerance`` with risk ``alpha`` (probability ``1 - delta``)?

    ``uncertainty``: (n,) per item (e.g. a band's width), a candidate beside the fitted
    ones; ``features``: (n, d) (e.g. log-probs). Returns ``accepted_share`` (on the
    calibration share), ``threshold``, ``uncertainty`` (the one chosen),
    ``accept_all_risk``, ``risk_among_accepted`` (calibration share), ``n_labeled`` and
    ``guarantee`` (in words).

    >>> rng = np.random.default_rng(0)
    >>> sd = 0.1 + rng.uniform(size=1500) * 0.6                # how unsure each score is
    >>> y = rng.uniform(1, 5, 1500); s = y + rng.normal(0, sd)
    >>> r = accepted_share(y, s, scale=(1, 5), tolerance=0.5, alpha=0.1, uncertainty=sd)
    >>> 0.3 < r["accepted_share"] < 1.0, r["accept_all_risk"] > 0.1, r["uncertainty"]
    (True, True, 'column')
    """

    s = np.asarray(score, float)
    sig = Signals(s, None if features is None else np.asarray(features, float),
                  None if uncertainty is None else np.asarray(uncertainty, float))
    rule = fit_triage_arrays(s, np.asarray(y, float), scale=scale, tolerance=tolerance,
                             alpha=alpha, delta=delta, signals=sig, seed=seed, map=map)
    rep = rule.report
    return {"accepted_share": rep["accepted_share"], "threshold": rule.threshold,
            "uncertainty": rule.uncertainty.name, "accept_all_risk": rep["accept_all_risk"],
            "risk_among_accepted": rep["risk_among_accepted_on_calibration"],
            "n_labeled": rep["n_labeled"], "tolerance": tolerance, "alpha": alpha,
            "delta": delta, "guarantee": _summary(rule)["guarantee"]}
