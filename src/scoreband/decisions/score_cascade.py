"""A cascade of score judges with one guarantee (issue 44, item 2, for scores): a cheap judge's
score kept where it is reliable, a stronger judge's next, a human last, so that among every
row any judge's score is kept for, at most ``risk`` are off the human score by more than
``tolerance``, with probability at least ``1 - delta`` over the draw of the labeled rows, for
rows drawn like them.

Each judge is a score column (on any scale) and optional feature columns (its score-token
log-probs). The labeled rows are split once, by their identity (the split of
:func:`scoreband.decisions.triage_fit.split`): on the **training share** each judge gets
its map onto the human scale and a learned stated error, ``P(|y - m| > tolerance)`` given
its score and features (k-NN, as score triage's ``knn-miss``), and a **joint** stated error
given the mapped scores and stated errors of every judge so far (where two judges agree
the error is smaller: agreement is an uncertainty); the **calibration share**, seen by
nothing fitted, runs the one Learn-then-Test chain of :func:`scoreband.decisions.cascade.fit_cascade`
over every stage (each view's stages at one threshold, and each judge alone), its sequences
started where the training share's curve predicts a test most likely to reject. The
family-wise error over every configuration of every stage is at most ``delta``: no stage
spends its own.

A judge whose cells are all empty on a row was not run there: the row goes to the next
judge. A cell that is not a number is a row error: that judge is skipped on the row (the
reason in ``cascade_error``). A row whose score lies outside the range a judge was fitted
on is not decided by that judge (a table mostly outside is refused: another scale).

>>> import numpy as np, pandas as pd
>>> rng = np.random.default_rng(0); n = 1200
>>> y = rng.uniform(1, 5, n); hard = rng.uniform(size=n)
>>> df = pd.DataFrame({"human": y, "cheap": y + rng.normal(0, 0.05 + hard, n),
...                    "strong": y + rng.normal(0, 0.15, n)})
>>> res = fit_score_cascade(df, judges=["cheap=cheap", "strong=strong"], target="human",
...                         scale=(1, 5), tolerance=0.5, alpha=0.1, delta=0.1)
>>> res.rule.report["decided_share"] > 0.5, sorted(set(res.table["decided_by"])) != []
(True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.datatypes import Scale
from scoreband.decisions.cascade import apply_cascade, fit_cascade
from scoreband.decisions.cascade_inputs import (
    HUMAN,
    add_error,
    answer_key,
    as_costs,
    as_number,
)
from scoreband.decisions.cascade_rule import CascadeResult, _stage_index, _unit
from scoreband.decisions.maps import ScoreMap
from scoreband.decisions.rule import Decision, Rule, register_rule
from scoreband.decisions.uncertainty import (
    Signals,
    fit_uncertainty,
    make_uncertainty,
    uncertainty_from_dict,
)
from scoreband.errors import ERROR_COLUMN, InputError

__all__ = ["ScoreJudge", "ScoreCascadeRule", "fit_score_cascade",
           "fit_score_cascade_arrays", "as_score_judges", "SCORE_CASCADE_FORMAT",
           "SCORE_CASCADE_COLUMNS"]

SCORE_CASCADE_FORMAT = "scoreband-score-cascade-rule"
REFIT = ("scoreband triage LABELED --cascade NAME=SCORE_COL[:FEATURES] ... --target HUMAN "
         "--scale A,B --tolerance T --out rule.json")
CASCADE_ERROR = ERROR_COLUMN["cascade"]
#: the columns every decided row gets (with :data:`CASCADE_ERROR`)
SCORE_CASCADE_COLUMNS = ("decided_by", "triage_score", "triage_uncertainty", "trusted")
#: the views of a stage's stated error (:func:`scoreband.decisions.cascade.fit_cascade`)
SCORE_VIEWS = ("own", "joint")


# ------------------------------------------------------------------ judges
@dataclass(frozen=True)
class ScoreJudge:
    """One stage: its ``name`` (written in ``decided_by``), its ``score`` column and the
    ``features`` its stated error may read (its score-token log-probs), globs expanded."""

    name: str
    score: str
    features: tuple[str, ...] = ()

    @classmethod
    def parse(cls, spec: str) -> ScoreJudge:
        """``NAME=SCORE_COL`` or ``NAME=SCORE_COL:FEATURES`` (a comma list or glob)."""
        name, eq, cols = str(spec).partition("=")
        score, _, feats = cols.partition(":")
        if not (eq and name.strip() and score.strip()):
            raise InputError(f"`cascade` {spec!r}: write NAME=SCORE_COL or "
                             "NAME=SCORE_COL:FEATURES (e.g. cheap=cheap_score:'cheap_logp_*'), "
                             "one per judge, cheapest first")
        return cls(name.strip(), score.strip(),
                   tuple(f.strip() for f in feats.split(",") if f.strip()))

    def columns(self) -> list[str]:
        return [self.score, *self.features]


def as_score_judges(judges, columns=None) -> list[ScoreJudge]:
    """Judges from :class:`ScoreJudge` objects, ``NAME=SCORE_COL[:FEATURES]`` strings or
    ``(name, score[, features])`` tuples, cheapest first; names unique and never ``human``;
    feature globs expanded against ``columns`` when given."""
    from scoreband.columns import expand_columns

    if isinstance(judges, (str, ScoreJudge)):
        judges = [judges]
    out = []
    for j in judges or []:
        if isinstance(j, str):
            j = ScoreJudge.parse(j)
        elif isinstance(j, (tuple, list)) and len(j) in (2, 3):
            feats = () if len(j) == 2 else j[2]
            j = ScoreJudge(str(j[0]), str(j[1]), tuple([feats] if isinstance(feats, str)
                                                       else feats))
        elif not isinstance(j, ScoreJudge):
            raise InputError(f"`cascade` {j!r}: give NAME=SCORE_COL[:FEATURES] or (name, "
                             "score column[, feature columns])")
        if columns is not None and j.features:
            j = ScoreJudge(j.name, j.score, tuple(expand_columns(list(j.features), columns)))
        out.append(j)
    if len(out) < 1:
        raise InputError("give at least one judge (NAME=SCORE_COL), cheapest first")
    names = [j.name for j in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup or HUMAN in names:
        what = f"{dup[0]!r} is given twice" if dup else \
            f"{HUMAN!r} names the rows no judge decides"
        raise InputError(f"`cascade` judge names must be unique and not {HUMAN!r}: {what}; "
                         "rename it")
    return out


def read_scores(df: pd.DataFrame, judges: list[ScoreJudge], offset: int = 0,
                id_col: str | None = None):
    """``(scores, features, errors)``: (n, S) scores (NaN: the judge gives no score on the
    row), each judge's (n, d) features (None without) and the row errors (the first reason
    per row). All of a judge's cells empty: not run there, no error; some empty or one not
    a finite number: a row error, the judge skipped on the row."""
    from scoreband.columns import require_columns, row_error, row_ids

    require_columns(df, [(f"`cascade` judge {j.name!r}", c) for j in judges
                         for c in j.columns()])
    ids = row_ids(df, id_col if id_col in df.columns else None, offset)
    errors, n = {}, len(df)
    scores, feats = np.full((n, len(judges)), np.nan), []
    for s, j in enumerate(judges):
        cols = j.columns()
        raw = [df[c].tolist() for c in cols]
        empty = np.array([[answer_key(v) is None for v in col] for col in raw],
                         dtype=bool).reshape(len(cols), n)
        vals = np.array([[as_number(v) for v in col] for col in raw],
                        dtype=float).reshape(len(cols), n)
        bad = ~empty.all(axis=0) & ~np.isfinite(vals).all(axis=0)
        for i in np.flatnonzero(bad):
            c = int(np.flatnonzero(~np.isfinite(vals[:, i]))[0])
            why = "empty cell beside the judge's other cells" if empty[c, i] else \
                f"{raw[c][i]!r} is not a finite number"
            add_error(errors, i, row_error(i, ids[i], cols[c], (
                f"judge {j.name!r}: {why}; this judge is skipped on the row (fill its "
                "cells, or empty all of them where it was not run)")))
        ok = np.isfinite(vals).all(axis=0)
        scores[:, s] = np.where(ok, vals[0], np.nan)
        feats.append(np.where(ok[:, None], vals[1:].T, np.nan) if len(cols) > 1 else None)
    return scores, feats, [errors[i] for i in sorted(errors)]


# ------------------------------------------------------------------ stated errors
def _own_signals(score, feats) -> Signals:
    return Signals(np.asarray(score, float), None if feats is None else np.asarray(feats))


def _joint_signals(M, U, s: int, fill) -> Signals:
    """Stage ``s``'s joint inputs: its mapped score, and the mapped scores and stated
    errors of the judges ``0..s`` (a judge not run on a row reads as ``fill``: the training
    means, every judge's mapped score then every judge's stated error)."""
    S = M.shape[1]
    X = np.column_stack([M[:, :s + 1], U[:, :s + 1]])
    f = np.concatenate([np.asarray(fill[:s + 1], float), np.asarray(fill[S:S + s + 1], float)])
    return Signals(M[:, s], np.where(np.isfinite(X), X, f[None, :]))


def _knn_name(feats) -> str:
    return "knn-miss" if feats is None else "knn-miss-features"


def _crossfit(name, sig: Signals, loss, absres, keys, folds) -> np.ndarray:
    """The training items' stated errors, each from the k-NN fitted on the other fold (a
    curve the start is read from must not be the items' own)."""
    from scoreband.decisions.uncertainty import choose_uncertainty

    return choose_uncertainty([name], sig, loss, absres, folds, keys,
                              lambda u, loss_: 0.0)[2][name]


def _stated(rule_maps, own, joint, fill, scores, feats, view: str):
    """``(M, U)``: every stage's mapped score and stated error in ``view`` (NaN where a
    judge gave no score)."""
    n, S = scores.shape
    M, U = np.full((n, S), np.nan), np.full((n, S), np.nan)
    for s in range(S):
        ok = np.isfinite(scores[:, s])
        if ok.any():
            M[ok, s] = rule_maps[s].predict(scores[ok, s])
            sig = _own_signals(scores[ok, s], None if feats[s] is None else feats[s][ok])
            U[ok, s] = own[s].predict(sig)
    return (M, U) if view == "own" else (M, _joint_errors(joint, fill, M, U))


def _joint_errors(joint, fill, M, U) -> np.ndarray:
    """Every stage's joint stated error from the stages' mapped scores and own stated
    errors (NaN where the stage gave no score)."""
    J = np.full(M.shape, np.nan)
    for s in range(M.shape[1]):
        ok = np.isfinite(M[:, s])
        if ok.any():
            J[ok, s] = joint[s].predict(_joint_signals(M[ok], U[ok], s, fill))
    return J


# ------------------------------------------------------------------ the rule
@register_rule
@dataclass(eq=False)
class ScoreCascadeRule(Rule):
    """A fitted cascade of score judges: per judge its map onto the human scale, its own
    and joint stated errors (k-NN), and the cascade's ``view`` / ``stages`` / ``threshold``
    on the stated error. ``apply(df)`` adds ``decided_by`` (a judge's name or ``human``),
    ``triage_score`` (the deciding judge's score on the human scale), ``triage_uncertainty``
    (its stated error), ``trusted`` and ``cascade_error``."""

    format = SCORE_CASCADE_FORMAT
    version = 1
    what = "score cascade rule"
    kind = "cascade"
    job = "cascade"
    refit = REFIT
    error_column = CASCADE_ERROR
    label = "cascading"

    judges: list[ScoreJudge]
    scale: Scale
    tolerance: float
    alpha: float
    delta: float
    maps: list[ScoreMap]
    own: list
    joint: list
    fill: list[float]
    view: str
    stages: list[int]
    threshold: float
    domains: list[dict | None] = field(default_factory=list)
    costs: list[float] | None = None
    human_cost: float = 0.0
    report: dict = field(default_factory=dict)
    #: the column naming rows in error reports (when the table has it)
    id_col: str | None = None

    def outputs(self) -> dict:
        return {"decided_by": "", "triage_score": np.nan, "triage_uncertainty": np.nan,
                "trusted": False}

    def decide_arrays(self, scores, feats):
        """``(stage, M, U)`` for (n, S) raw ``scores`` and each judge's features: the
        deciding stage (-1: a human), every stage's mapped score and stated error."""
        M, U = _stated(self.maps, self.own, self.joint, self.fill, np.asarray(scores, float),
                       feats, self.view)
        return apply_cascade(U, {"stages": self.stages, "threshold": self.threshold}), M, U

    def decide_frame(self, df: pd.DataFrame, offset: int = 0) -> Decision:
        from scoreband.decisions.rulefile import rule_outside

        scores, feats, errors = read_scores(df, self.judges, offset, self.id_col)
        notes, n_out = [], 0
        for s, dom in enumerate(self.domains or []):
            ok = np.flatnonzero(np.isfinite(scores[:, s]))
            if dom is None or not len(ok):
                continue
            out, note = rule_outside(dom, scores[ok, s], None if feats[s] is None
                                     else feats[s][ok], what=f"judge {self.judges[s].name!r}")
            scores[ok[out], s] = np.nan  # this judge does not decide rows outside its range
            n_out += int(out.sum())
            notes += [note] if note else []
        stage, M, U = self.decide_arrays(scores, feats)
        names = np.array([j.name for j in self.judges] + [HUMAN], dtype=object)
        rows, at = np.arange(len(df)), np.maximum(stage, 0)
        d = stage >= 0
        why = np.full(len(df), "", dtype=object)
        for e in errors:
            why[e.position] = f"column {e.column!r}: {e.reason}"
        cols = {"decided_by": names[np.where(d, stage, len(self.judges))],
                "triage_score": np.where(d, M[rows, at], np.nan) if len(df) else np.zeros(0),
                "triage_uncertainty": np.where(d, U[rows, at], np.nan) if len(df)
                else np.zeros(0),
                "trusted": d, self.error_column: why}
        return Decision(cols, errors, len(df), {"decided": int(d.sum()),
                                                "out_of_domain": n_out}, notes)

    def components(self, source: Path | None = None) -> dict:
        return {"cascade_rule": str(source) if source else "in memory",
                "judges": ", ".join(j.name for j in self.judges)}

    def to_dict(self) -> dict:
        return {**self.head(), "guarantee": self.report.get("guarantee"),
                "judges": [{"name": j.name, "score": j.score, "features": list(j.features)}
                           for j in self.judges],
                "scale": self.scale.to_dict(), "tolerance": self.tolerance,
                "risk": self.alpha, "delta": self.delta, "view": self.view,
                "stages": list(self.stages), "threshold": self.threshold,
                "maps": [m.to_dict() for m in self.maps],
                "own_uncertainty": [u.to_dict() for u in self.own],
                "joint_uncertainty": [u.to_dict() for u in self.joint],
                "fill": list(self.fill), "domains": self.domains, "costs": self.costs,
                "human_cost": self.human_cost, "id_col": self.id_col, "report": self.report}

    @classmethod
    def from_dict(cls, doc: dict, where: str = "the score cascade rule") -> ScoreCascadeRule:
        from scoreband.decisions.cascade_inputs import _cost
        from scoreband.decisions.rulefile import as_float, as_mapping, read_key

        fix = f"fit the rule again with `{REFIT}`"

        def key(k, parse, **kw):
            return read_key(doc, k, parse, where, fix=fix, **kw)

        def judge(x):
            x = as_mapping(x)
            return ScoreJudge(str(x["name"]), str(x["score"]),
                              tuple(str(f) for f in x.get("features") or ()))

        judges = key("judges", lambda v: as_score_judges([judge(x) for x in v]))
        S = len(judges)

        def per_judge(parse):
            def read(v):
                if not isinstance(v, list) or len(v) != S:
                    raise ValueError(f"expected a list of {S} (one per judge)")
                return [parse(x) for x in v]
            return read

        def view(v):
            if v not in SCORE_VIEWS:
                raise ValueError(f"the view is one of {', '.join(SCORE_VIEWS)}")
            return v

        costs = key("costs", lambda v: None if v is None else as_costs(list(v), judges)[0],
                    default=None)
        return cls(judges=judges, scale=key("scale", Scale.from_dict),
                   tolerance=key("tolerance", lambda v: as_float(v, finite=True)),
                   alpha=key("risk", lambda v: _unit(as_float(v))),
                   delta=key("delta", lambda v: _unit(as_float(v))),
                   maps=key("maps", per_judge(ScoreMap.from_dict)),
                   own=key("own_uncertainty", per_judge(uncertainty_from_dict)),
                   joint=key("joint_uncertainty", per_judge(uncertainty_from_dict)),
                   fill=key("fill", lambda v: [as_float(x, finite=True) for x in v]),
                   view=key("view", view),
                   stages=key("stages", lambda v: [_stage_index(x, S) for x in v]),
                   threshold=key("threshold", as_float),
                   domains=key("domains", per_judge(lambda d: d if d is None
                                                    else as_mapping(d)), default=[None] * S),
                   costs=costs, human_cost=key("human_cost", _cost, default=0.0),
                   report=key("report", as_mapping, default={}),
                   id_col=key("id_col", lambda v: v if v is None else str(v), default=None))


# ------------------------------------------------------------------ fitting on arrays
def _fit_stages(scores, y, feats, keys, T, folds, tolerance, scale, map, judges):
    """Each judge's map onto the human scale and own stated error (k-NN of P(miss) given its
    score [and features]) on the training rows ``T``: ``(maps, estimators, losses (n, S),
    the training rows' cross-fitted stated errors (len(T), S))``."""
    from scoreband.decisions.triage_fit import fit_score_map

    n, S = scores.shape
    maps, own, loss, uT = [], [], np.zeros((n, S)), np.full((len(T), S), np.nan)
    for s in range(S):
        ok = np.isfinite(scores[:, s])
        Ts = T[ok[T]]
        if len(Ts) < 20:
            name = judges[s].name if judges else s
            raise InputError(f"judge {name!r} scored {len(Ts)} training row(s): a judge needs "
                             "at least 20 labeled rows with its score to learn its map; run it "
                             "on more labeled rows")
        f = feats[s]
        sig = _own_signals(np.where(ok, scores[:, s], 0.0), f if f is None
                           else np.where(ok[:, None], f, 0.0))
        smap, ls, ab = fit_score_map(np.where(ok, scores[:, s], np.nanmean(scores[Ts, s])), y,
                                     Ts, folds[ok[T]], tolerance, scale, map, False)
        est = fit_uncertainty(make_uncertainty(_knn_name(f)), sig.take(Ts), ls[Ts], ab[Ts],
                              keys[Ts])
        uT[ok[T], s] = _crossfit(est.name, sig.take(Ts), ls[Ts], ab[Ts], keys[Ts],
                                 folds[ok[T]])
        maps.append(smap), own.append(est)
        loss[:, s] = np.where(ok, ls, 0.0)
    return maps, own, loss, uT


def fit_score_cascade_arrays(scores, y, *, scale, tolerance: float, alpha: float = 0.1,
                             delta: float = 0.1, features=None, keys=None, seed: int = 0,
                             train_frac: float = 0.5, map: str = "tolerance", costs=None,
                             human_cost: float = 0.0, judges=None) -> ScoreCascadeRule:
    """Fit the cascade on labeled items: ``scores`` (n, S) each judge's raw score (NaN: not
    run on the item), cheapest first; ``y`` (n,) the human score on ``scale``;
    ``features``: per judge (n, d) or None; ``keys``: each item's identity (the split);
    ``costs``: one per judge (a human's ``human_cost``), the cheapest configuration within
    10 % of the most decided kept (the least expected cost with a human cost)."""
    from scoreband.conformal.randomness import array_keys
    from scoreband.decisions.rulefile import rule_domain
    from scoreband.decisions.triage import _scale
    from scoreband.decisions.triage_fit import check_fit, check_spread, split

    scale = _scale(scale)
    check_fit(tolerance, alpha, delta, scale, train_frac, map)
    scores, y = np.atleast_2d(np.asarray(scores, float)), np.asarray(y, float)
    if scores.shape[0] != len(y):
        scores = scores.T
    n, S = scores.shape
    feats = list(features) if features is not None else [None] * S
    check_spread(y, scale)
    if keys is None:
        keys = array_keys(np.column_stack([np.nan_to_num(scores, nan=-1e9), y]))
    keys = np.asarray(keys)
    T, C, folds = split(keys, seed, train_frac, None, alpha, delta)
    maps, own, loss, uT = _fit_stages(scores, y, feats, keys, T, folds, tolerance, scale, map,
                                      judges)
    M, U = _stated(maps, own, [None] * S, [], scores, feats, "own")
    fill = [float(x) if np.isfinite(x) else 0.0 for x in
            np.concatenate([np.nanmean(M[T], axis=0), np.nanmean(U[T], axis=0)])]
    joint, jT = [], np.full((len(T), S), np.nan)
    MT = M[T]
    for s in range(S):
        ok = np.isfinite(MT[:, s])
        sig = _joint_signals(MT[ok], U[T][ok], s, fill)
        ab = np.abs(MT[ok, s] - y[T][ok])
        est = fit_uncertainty(make_uncertainty("knn-miss-features"), sig, loss[T][ok, s], ab,
                              keys[T][ok])
        jT[ok, s] = _crossfit(est.name, sig, loss[T][ok, s], ab, keys[T][ok], folds[ok])
        joint.append(est)
    rule = ScoreCascadeRule(judges or [ScoreJudge(f"judge{s + 1}", f"score{s + 1}")
                                       for s in range(S)],
                            scale, float(tolerance), float(alpha), float(delta), maps, own,
                            joint, fill, "own", [], -math.inf)
    JC = _joint_errors(joint, rule.fill, M[C], U[C])
    LC = np.where(np.isfinite(U[C]), loss[C], 0.0)
    LT = np.where(np.isfinite(uT), loss[T], 0.0)
    cost_list, human = (None, 0.0) if costs is None else (list(costs), float(human_cost))
    res = fit_cascade({"own": (U[C], LC), "joint": (JC, np.where(np.isfinite(JC), loss[C], 0.0))},
                      alpha, delta, costs=cost_list, human_cost=human, each_alone=True,
                      train={"own": (uT, LT), "joint": (jT, np.where(np.isfinite(jT),
                                                                      loss[T], 0.0))})
    rule.view, rule.stages, rule.threshold = res["view"], res["stages"], res["threshold"]
    rule.costs, rule.human_cost = cost_list, human
    names = [{"median": j.score, **{f"features[{k}]": c for k, c in enumerate(j.features)}}
             for j in rule.judges]
    rule.domains = [rule_domain(scores[np.isfinite(scores[:, s]), s],
                                None if feats[s] is None
                                else feats[s][np.isfinite(scores[:, s])], names[s])
                    for s in range(S)]
    rule.report = _report(rule, res, len(T), len(C), loss)
    return rule


def _report(rule: ScoreCascadeRule, res: dict, n_train: int, n_cal: int, loss) -> dict:
    names = [j.name for j in rule.judges]
    shares = {n: res["by_stage"][i] for i, n in enumerate(names)}
    shares[HUMAN] = 1 - res["decided"]
    how = ("each judge's own stated error" if rule.view == "own" else
           "each judge's stated error given the judges before it (agreement counts)")
    return {
        "guarantee": (f"among the rows any judge's score is kept for, at most "
                      f"{rule.alpha:g} are off the human score by more than "
                      f"{rule.tolerance:g}, with probability at least {1 - rule.delta:g} over "
                      f"the draw of the labeled rows, for rows drawn like them (one test "
                      "over every stage: fixed sequences sharing delta in one chain, "
                      "Learn-then-Test on the calibration share)"),
        "view": rule.view, "uncertainty": how,
        "stages": [names[i] for i in rule.stages],
        "n_training": n_train, "n_calibration": n_cal,
        "decided_share": res["decided"], "risk_on_calibration": res["risk"],
        "shares_on_calibration": shares,
        "accept_all_risk": {n: float(loss[:, i].mean()) for i, n in enumerate(names)},
        "cost_per_row": res["cost"], "human_cost": rule.human_cost,
        "judge_cost_per_row": None if res["cost"] is None else
        res["cost"] - rule.human_cost * (1 - res["decided"]),
        "n_hypotheses": res["n_hypotheses"], "n_rejected": res["n_rejected"]}


# ------------------------------------------------------------------ fitting on a table
def fit_score_cascade(table, judges, *, target: str, scale, tolerance: float,
                      alpha: float = 0.1, delta: float = 0.1, costs=None, seed: int = 0,
                      train_frac: float = 0.5, map: str = "tolerance",
                      id_col: str | None = None) -> CascadeResult:
    """Fit a cascade of score judges on the labeled rows of ``table`` (a DataFrame or a path,
    cells read as written).

    ``judges``: cheapest first, ``NAME=SCORE_COL[:FEATURES]`` (:func:`as_score_judges`);
    ``target``: the human score's column on ``scale``; ``tolerance``, ``alpha`` (the risk),
    ``delta``: among the rows any judge's score is kept for, at most ``alpha`` are off by
    more than ``tolerance`` with probability at least ``1 - delta``; ``costs``: one per judge
    (``{name: cost}`` or ``NAME=C`` strings; ``human=C`` the cost of a human score).
    A labeled row whose target is not a number on the scale is skipped and listed."""
    from scoreband.columns import numeric_column, row_ids
    from scoreband.conformal.randomness import frame_keys
    from scoreband.decisions.triage import _scale
    from scoreband.engine.rows import check_added_columns
    from scoreband.tables import read_table

    scale = _scale(scale)
    df = read_table(table, text=True) if isinstance(table, (str, Path)) else table
    js = as_score_judges(judges, df.columns)
    cost, human = as_costs(costs, js)
    if not target:
        raise InputError("give the human score's column (`target`, --target)")
    copies = [j.name for j in js if target in j.columns()]
    if copies:
        raise InputError(f"judge(s) {', '.join(repr(c) for c in copies)} read the `target` column "
                         f"{target!r}: a judge's score must be its own column, never the "
                         "human one")
    check_added_columns(df.columns, [*SCORE_CASCADE_COLUMNS, CASCADE_ERROR])
    from scoreband.columns import require_columns

    require_columns(df, [("`target`", target), ("`id_col`", id_col)])
    ids, errs = row_ids(df, id_col, 0), {}
    y = numeric_column(df, target, errs, ids)
    unlabeled = np.array([answer_key(v) is None for v in df[target].tolist()], dtype=bool)
    for i in np.flatnonzero(unlabeled):
        errs.pop(i, None)  # an empty target: a row to decide, not to fit on
    inside = np.isfinite(y) & (y >= scale.lo - 1e-9) & (y <= scale.hi + 1e-9)
    for i in np.flatnonzero(np.isfinite(y) & ~inside):
        from scoreband.columns import row_error

        errs.setdefault(i, row_error(i, ids[i], target, f"{y[i]:g} is outside the scale "
                                     f"[{scale.lo:g}, {scale.hi:g}]; fix the cell or --scale"))
    scores, feats, judge_errors = read_scores(df, js, 0, id_col)
    lab = np.flatnonzero(inside)
    used = [c for c in dict.fromkeys([target, *[c for j in js for c in j.columns()]])]
    rule = fit_score_cascade_arrays(
        scores[lab], y[lab], scale=scale, tolerance=tolerance, alpha=alpha, delta=delta,
        features=[None if f is None else f[lab] for f in feats],
        keys=frame_keys(df.iloc[lab][used]), seed=seed, train_frac=train_frac, map=map,
        costs=cost, human_cost=human, judges=js)
    rule.report["target"] = target
    rule.id_col = id_col
    out = rule.apply(df)
    warnings = list(rule.last_warnings)
    if not rule.stages:
        warnings.append(f"no configuration passed the test: every row goes to a human. The "
                        f"{len(lab)} labeled rows could not show a risk <= {alpha:g} at "
                        f"delta {delta:g}; label more rows, or allow a larger risk")
    errors = sorted([*errs.values(), *judge_errors], key=lambda e: e.position)
    return CascadeResult(rule, out, errors, warnings)
