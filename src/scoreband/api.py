"""evaluate / calibrate / apply on a table: the Python face of the three table commands.

One calling convention, as in scikit-learn / MAPIE: each function takes a table (a pandas
DataFrame or a path) and keywords naming the columns (the fields of
:class:`~scoreband.columns.ColumnSpec`: ``target=``, ``ratings=``, ``scale=``, ``median=``,
``lo=``, ``hi=``, ``features=``, ``groups=`` ...) and how to calibrate (the fields of
:class:`CalibrationConfig`: ``method=``, ``alpha=``, ``mondrian=`` ...), keywords only: a
keyword that is none of these, or a dict of them given as a positional argument, is a
TypeError naming the valid ones. The CLI commands of the same names are these calls plus
printing.

>>> import scoreband.api as sb
>>> df = sb.read_table(sb.example_table())
>>> cols = dict(ratings="ratings", scale="1,5", median="median", lo="q05", hi="q95",
...             pred_scale="0,1", groups="task")
>>> res = sb.evaluate(df, **cols, method="crc", seeds=2)
>>> round(res["after"]["coverage"]["mean"], 2) >= 0.85
True
>>> fit = sb.calibrate(df.iloc[:1000], **cols, method="crc")
>>> out = fit.predict(df.iloc[1000:])               # the same as sb.apply(df, fit)
>>> list(out.table.columns[-3:])
['band_hi01', 'band_flag', 'band_error']
>>> sb.evaluate(df, cols, seeds=2)   # doctest: +ELLIPSIS
Traceback (most recent call last):
TypeError: evaluate() takes 1 positional argument(s), got 2; give the options as keywords: ...
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from scoreband.api_names import NAMES, STUDIES
from scoreband.apply_stage import ApplyStage, band_columns, table_fingerprint
from scoreband.calibration_config import (
    MONDRIAN_BY,
    CalibrationConfig,
    check_keywords,
    config_fields,
    keywords_only,
    option_keys,
    options_of,
)
from scoreband.columns import ColumnSpec, expand_columns, load_inputs
from scoreband.conformal import load_calibrator, save_calibrator
from scoreband.conformal.base import delta_of, uses_row_draws
from scoreband.conformal.boundary import check_on_grid
from scoreband.conformal.randomness import frame_keys
from scoreband.domain import check_domain, fit_domain, off_scale_rows
from scoreband.engine.rows import run_rows
from scoreband.errors import ERROR_COLUMN, InputError, RowError
from scoreband.jobs import JOBS, RayEngine, judge, judge_pairwise, roundtrip, run, score
from scoreband.tables import read_table

if TYPE_CHECKING:  # pandas is imported with the tables it reads, not with scoreband
    import pandas as pd

    from scoreband.evaluation import EvaluateResult
    from scoreband.system_level.study import SystemsResult
from scoreband.datatypes import Band, Scale

__all__ = ["CalibrationConfig", "Calibration", "Applied", "AppliedFile", "evaluate",
           "calibrate", "recalibrate", "apply", "apply_file", "systems", "propose_labels",
           "calibration_curve", "curve_splits", "reads_whole_rows", "config_fields",
           "band_columns", "read_table", "example_table", "ERROR_COLUMN", "MONDRIAN_BY",
           "monitor", "run", "JOBS", "RayEngine", "score", "judge", "judge_pairwise",
           "roundtrip"]

@keywords_only(option_keys)
def reads_whole_rows(**keywords) -> bool:
    """Whether the calibrator these options build draws per-row uniforms (randomised
    tie-breaking), whose row identity is every cell of the row: a reader must then give it
    the whole table, not only the columns it reads, so a row gets the same draw in
    ``evaluate``, ``calibrate`` and ``apply`` (which reads every column)."""
    spec, cfg = options_of("reads_whole_rows", keywords)
    return uses_row_draws(cfg.factory(spec.scale, spec.groups is not None)())


def _frame(table):
    return read_table(table) if isinstance(table, (str, Path)) else table


def example_table() -> Path:
    """Path of the bundled example predictions (2,000 rows, 3 ratings each)."""
    return Path(str(resources.files("scoreband") / "data" / "example_predictions.csv"))


def _domain(inp, spec: ColumnSpec, names: dict) -> dict:
    """The calibration rows' domain (:func:`scoreband.domain.fit_domain`), with the units
    of the prediction columns read on [0, 1] from their scale, so that a message names a
    range in the column's own units."""
    dom = fit_domain(inp.pred, inp.groups, names)
    if not spec.raw_predictions:
        ps = spec.pred_scale or spec.scale
        dom["units"] = {k: [float(ps.lo), float(ps.hi)] for k in ("median", "lo", "hi")
                        if k in dom["ranges"]}
    return dom


# ------------------------------------------------------------------ evaluate
#: the miscoverage levels of the calibration curve (nominal vs empirical coverage)
CURVE_ALPHAS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5)


@keywords_only(option_keys)
def evaluate(table: pd.DataFrame | str | Path, *, seeds: int = 10,
             cal_frac: float = 0.5, n_ratings: int | None = None, curve: bool = False,
             on_split: Callable[[int, int], None] | None = None, **keywords) -> dict:
    """Repeated calibration / test splits of ``table``: coverage, sharpness, UPS and tau-c
    before and after calibration (mean and std over ``seeds``), per group when the columns
    name groups, coverage by level of the target and of the prediction, and the theoretical
    coverage band. Skipped rows are listed under ``"skipped_rows"``.

    Parameters
    ----------
    table : a DataFrame or a path
    **keywords : the column and calibration options (``target=``, ``scale=``, ``median=``,
        ``method=``, ``alpha=`` ...: the fields of :class:`~scoreband.columns.ColumnSpec`
        and :class:`CalibrationConfig`)
    seeds, cal_frac : the number of random splits, the calibration share of each
    curve : also the calibration curve, ``"calibration_curve"``
        (:func:`calibration_curve`: coverage at each level of :data:`CURVE_ALPHAS`)
    on_split : ``on_split(done, total)`` after each split, the curve's splits counted too

    >>> df = read_table(example_table())
    >>> res = evaluate(df, ratings="ratings", scale=(1, 5), median="median",
    ...                pred_scale=(0, 1), method="split", seeds=2)
    >>> 0.85 < res["after"]["coverage"]["mean"] < 0.95
    True
    """
    spec, cfg = options_of("evaluate", keywords)
    df = _frame(table)
    inp, make = _evaluation_inputs(df, spec, cfg, n_ratings)
    total = seeds + (curve_splits(cfg.alpha, seeds) if curve else 0)
    res = _evaluate_inputs(inp, spec, cfg, make, seeds, cal_frac,
                           None if on_split is None else lambda k, n: on_split(k, total))
    if curve:
        res.calibration_curve = _curve(inp, spec, cfg, res.to_dict(), seeds, cal_frac,
                                       None if on_split is None else
                                       lambda k, n: on_split(seeds + k, total))
    return res.to_dict()


def _evaluation_inputs(df, spec: ColumnSpec, cfg: CalibrationConfig, n_ratings):
    if cfg.map not in (None, "none"):
        spec = replace(spec, raw_predictions=True)
    # the no-model band reads the targets alone
    inp = load_inputs(df, spec, n_ratings=n_ratings, require_median=cfg.method != "marginal")
    inp.pred.keys = frame_keys(df.iloc[inp.rows])  # randomised tie-breaking by row identity
    return inp, cfg.factory(spec.scale, spec.groups is not None)


def _evaluate_inputs(inp, spec, cfg, make, seeds, cal_frac, on_split) -> EvaluateResult:
    """The typed result of the evaluation protocol on ``inp``, with the scale, the skipped
    rows and the notes of the table it was read from."""
    from scoreband.evaluation import evaluate_result  # lazy: loads scipy

    res = evaluate_result(inp.pred, inp.y01, make, seeds=seeds, cal_frac=cal_frac,
                          groups=inp.groups, split_keys=inp.split_keys,
                          adjust_boundary=cfg.adjust_boundary, n_ratings=inp.n_ratings,
                          on_split=on_split)
    res.scale = spec.scale.to_dict()
    res.skipped_rows = [e.__dict__ for e in inp.errors]
    res.notes = list(inp.notes)
    return res


def curve_splits(alpha: float, seeds: int) -> int:
    """How many splits :func:`calibration_curve` runs besides the evaluated alpha's."""
    return len(set(CURVE_ALPHAS) - {alpha}) * min(seeds, 3)


@keywords_only(option_keys)
def calibration_curve(table: pd.DataFrame | str | Path, result: dict, *, seeds: int = 10,
                      cal_frac: float = 0.5, n_ratings: int | None = None,
                      on_split: Callable[[int, int], None] | None = None,
                      **keywords) -> list[dict]:
    """The calibration curve of an :func:`evaluate` ``result`` on ``table`` (the same
    options): the empirical coverage at each alpha of :data:`CURVE_ALPHAS`, at most 3
    splits each (the evaluated alpha from ``result``'s own splits), with the 95 %
    Clopper-Pearson interval on the distinct items tested, and the mean width.
    ``on_split(done, total)`` hears after each of its splits
    (:func:`curve_splits` in all)."""
    spec, cfg = options_of("calibration_curve", keywords)
    inp, _ = _evaluation_inputs(_frame(table), spec, cfg, n_ratings)
    return _curve(inp, spec, cfg, result, seeds, cal_frac, on_split)


def _curve(inp, spec, cfg, res, seeds, cal_frac, on_split) -> list[dict]:
    from scoreband.metrics import binomial_ci  # lazy: loads scipy

    k = min(seeds, 3)
    alphas = sorted(set(CURVE_ALPHAS) - {cfg.alpha})
    total = len(alphas) * k
    pts = []
    for i, a in enumerate(alphas):
        c = replace(cfg, alpha=a)
        r = _evaluate_inputs(inp, spec, c, c.factory(spec.scale, spec.groups is not None), k,
                             cal_frac, None if on_split is None else
                             lambda s, n, i=i: on_split(i * k + s, total))
        pts.append(_curve_point(a, r.to_dict(), binomial_ci))
    pts.append(_curve_point(cfg.alpha, res, binomial_ci))
    return sorted(pts, key=lambda p: p["alpha"])


def _curve_point(a: float, r: dict, ci) -> dict:
    cov, n = r["after"]["coverage"]["mean"], int(r.get("n_items_tested") or 0)
    return {"alpha": a, "nominal": 1 - a, "coverage": cov, "seeds": r["seeds"],
            "n_items": n, "ci": list(ci(round(cov * n), n)) if n else None,
            "width": r["after"]["sharpness_native"]["mean"]}


# ------------------------------------------------------------------ calibrate
@dataclass
class Calibration:
    """A calibrator fitted on a table, with what :func:`apply` needs to read new rows."""

    calibrator: Any
    inputs: dict  #: column names, boundary adjustment, annotator count ...
    errors: list[RowError] = field(default_factory=list)
    scorer_fingerprint: str | None = None

    def save(self, path) -> Path:
        """Write the calibrator as versioned JSON (what ``scoreband apply`` reads)."""
        return save_calibrator(path, self.calibrator, scorer_fingerprint=self.scorer_fingerprint,
                               inputs=self.inputs)

    def predict(self, table: pd.DataFrame | str | Path, **keywords) -> Applied:
        """Bands for every row of ``table``: :func:`apply` with this calibration (its
        keywords: ``median=`` ... overrides, ``scorer_id=``, ``n_ratings=``,
        ``on_warning=``)."""
        return apply(table, self, **keywords)


@keywords_only(option_keys)
def calibrate(table: pd.DataFrame | str | Path, *, n_ratings: int | None = None,
              scorer_id: str | None = None,
              on_warning: Callable[[str], None] | None = None, **keywords) -> Calibration:
    """Fit a calibrator on every usable row of ``table``; ``.save(path)`` writes it and
    ``.predict(new_table)`` bands new rows. The options as for :func:`evaluate`: keywords
    (the fields of ColumnSpec and CalibrationConfig).

    >>> df = read_table(example_table())
    >>> fit = calibrate(df.iloc[:1000], ratings="ratings", scale=(1, 5), median="median",
    ...                 lo="q05", hi="q95", pred_scale=(0, 1), method="crc")
    >>> banded = fit.predict(df.iloc[1000:]).table
    >>> bool((banded["band_lo"] <= banded["band_hi"]).all()), len(banded)
    (True, 1000)
    """
    spec, cfg = options_of("calibrate", keywords)
    df = _frame(table)
    if cfg.map not in (None, "none"):
        spec = replace(spec, raw_predictions=True)
    spec = spec.resolved(df.columns)  # saved with the column names, not the patterns
    inp = load_inputs(df, spec, n_ratings=n_ratings, require_median=cfg.method != "marginal")
    if cfg.adjust_boundary:
        check_on_grid(inp.y01, spec.scale, inp.n_ratings)
    cal = cfg.factory(spec.scale, spec.groups is not None)()
    if uses_row_draws(cal):
        inp.pred.keys = frame_keys(df.iloc[inp.rows])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal.fit(inp.pred, inp.y01, groups=inp.groups)
    fit_notes = list(dict.fromkeys(str(w.message) for w in caught))
    for w in fit_notes if on_warning is None else ():
        warnings.warn(w, stacklevel=2)
    notes = list(dict.fromkeys([*fit_notes, *inp.notes]))
    for w in notes if on_warning is not None else ():
        on_warning(w)
    names = {"median": spec.median, "lo": spec.lo, "hi": spec.hi,
             **{f"features[{j}]": c for j, c in enumerate(expand_columns(spec.features,
                                                                          df.columns))}}
    inputs = {"columns": spec.to_dict(), "adjust_boundary": cfg.adjust_boundary,
              # the range of every prediction input and the group labels, as read: apply
              # flags rows outside it and refuses a table mostly outside
              "domain": _domain(inp, spec, names),
              # one rater count for every item, or none (each row then keeps its own grid
              # at apply, from its ratings)
              **_rater_record(inp.n_ratings), "n_calibration": len(inp.pred),
              "skipped_rows": len(inp.errors)}
    if notes:  # what changed on the way (snapped targets, a change of representation)
        inputs["notes"] = notes
    return Calibration(cal, inputs, inp.errors, scorer_id or table_fingerprint(df))


def _rater_record(n_ratings) -> dict:
    """What a calibrator records of its items' rater counts: the count they all share, or
    that they varied."""
    r = np.unique(np.asarray(n_ratings, dtype=float))
    return ({"n_ratings": float(r[0]), "ratings_varied": False} if len(r) == 1
            else {"n_ratings": None, "ratings_varied": True})


def _load(calibrator, scorer_id):
    """``(calibrator, document)`` of a :class:`Calibration` or a saved file."""
    if isinstance(calibrator, Calibration):
        return calibrator.calibrator, {"inputs": calibrator.inputs}
    return load_calibrator(calibrator, scorer_fingerprint=scorer_id)


# ------------------------------------------------------------------ recalibrate
def recalibrate(calibrator: Calibration | str | Path, table: pd.DataFrame | str | Path, *,
                n_ratings: int | None = None,
                delta: float = 0.1, scorer_id: str | None = None,
                on_warning: Callable[[str], None] | None = None, **keywords) -> Calibration:
    """Keep ``calibrator``'s fitted model and redo only its conformal step on the labeled
    rows of ``table`` (a new domain's few labels); returns the new :class:`Calibration`
    (``.save(path)``), whose ``inputs["recalibration"]`` holds the guarantee for that many
    labels (:func:`scoreband.conformal.recalibrate.coverage_guarantee`).

    The prediction columns are those recorded at calibration; keywords give the target
    (``target=`` or ``ratings=``) when the new table names it otherwise, and may override
    ``median=`` / ``lo=`` / ``hi=``. Rows without a usable target
    are skipped and reported.
    """
    from scoreband.conformal.recalibrate import coverage_guarantee, min_labels  # lazy: loads scipy

    check_keywords("recalibrate", keywords, RECALIBRATE_KEYS)
    df = _frame(table)
    cal, doc = _load(calibrator, scorer_id or table_fingerprint(df))
    cal = copy.deepcopy(cal)  # a Calibration given in memory stays as it was
    inputs = dict(doc.get("inputs") or {})
    cols = dict(inputs.get("columns") or {})
    if not cols:
        raise InputError("the calibrator records no input columns; recalibrate only "
                         "calibrators written by `scoreband calibrate`")
    given = {k: v for k, v in keywords.items() if v is not None}
    if "target" in given or "ratings" in given:
        cols.update(target=None, ratings=None)
    cols.update(given, groups=None, split_by=None)
    spec = ColumnSpec.from_dict(cols)
    if not (spec.target or spec.ratings):
        raise InputError("give the new domain's human score: `target` (a column of mean "
                         "ratings) or `ratings`")
    missing = [c for c in [spec.median, spec.lo, spec.hi, *spec.features, *spec.embedding]
               if c and "*" not in c and c not in df.columns]
    if missing:
        raise InputError(f"the calibrator reads column(s) {', '.join(map(repr, missing))}, "
                         "which the labeled table does not have; score the new rows the same "
                         "way (or name the columns: `median`, `lo`, `hi`)")
    inp = load_inputs(df, spec, n_ratings=n_ratings)
    d = delta_of(cal)  # a training-conditional calibrator keeps its guarantee's kind
    m, need = len(inp.pred), min_labels(cal.alpha, d)
    if m < need:
        why = "" if d is None else (f" with its training-conditional guarantee (delta = {d:g}:"
                                    " (1 - alpha)^m <= delta)")
        raise InputError(f"{m} usable labeled row(s): recalibrating at alpha = {cal.alpha:g}"
                         f"{why} needs at least {need}; label more rows of the new domain")
    if inputs.get("adjust_boundary"):
        check_on_grid(inp.y01, spec.scale, inp.n_ratings)

    if uses_row_draws(cal):
        inp.pred.keys = frame_keys(df.iloc[inp.rows])
    roles = {c: r for r, c in (("median", spec.median), ("lo", spec.lo), ("hi", spec.hi)) if c}
    _, note = check_domain(inputs.get("domain"), inp.pred, "recalibrate",
                                  off_scale_rows(inp.errors, roles),
                                  n_calibration=inputs.get("n_calibration"))
    if note and on_warning is not None:
        on_warning(note)
    with warnings.catch_warnings(record=on_warning is not None) as caught:
        cal.conformalize(inp.pred, inp.y01)
    for w in dict.fromkeys([*(str(w.message) for w in caught or ()), *inp.notes]):
        if on_warning is not None:
            on_warning(w)
    guarantee = coverage_guarantee(m, cal.alpha, delta, calibrator_delta=d)
    new = {**inputs, **_rater_record(inp.n_ratings),
           "columns": {**inputs["columns"], "target": spec.target, "ratings": spec.ratings},
           "recalibration": {"n_labeled": m, "skipped_rows": len(inp.errors),
                             "guarantee": guarantee,
                             "from": str(calibrator) if isinstance(calibrator, (str, Path))
                             else "a Calibration"}}
    return Calibration(cal, new, inp.errors,
                       doc.get("scorer_fingerprint") if isinstance(doc, dict) else None)


# ------------------------------------------------------------------ apply
@dataclass
class Applied:
    """Every input row with its band columns (see :func:`band_columns`)."""

    table: Any
    band: Band
    errors: list[RowError]
    shift: dict | None = None  #: the shift test of a weighted calibrator


#: the column keywords of :func:`recalibrate` (the target and the recorded predictions) and
#: of :func:`apply` (the recorded predictions and the groups)
RECALIBRATE_KEYS = ("target", "ratings", "median", "lo", "hi")
APPLY_KEYS = ("median", "lo", "hi", "groups")


def _stage(calibrator, columns, scorer_id, n_ratings, on_warning) -> ApplyStage:
    pair = ((calibrator.calibrator, {"inputs": calibrator.inputs})
            if isinstance(calibrator, Calibration) else calibrator)
    return ApplyStage(pair, columns=columns, scorer_id=scorer_id, n_ratings=n_ratings,
                      on_warning=on_warning)


def apply(table: pd.DataFrame | str | Path, calibrator: Calibration | str | Path, *,
          scorer_id: str | None = None,
          n_ratings: int | None = None,
          on_warning: Callable[[str], None] | None = None, **keywords) -> Applied:
    """Add calibrated bands to every row of ``table``.

    ``calibrator``: a :class:`Calibration` or the path of a saved one. The prediction columns
    are those recorded at calibration; keywords override some (``median=``, ``lo=``,
    ``hi=``, ``groups=``). Rows that cannot be banded keep empty bands
    and the reason in band_error. ``calibration.predict(table)`` is the same call.
    For a table larger than memory see :func:`apply_file`. Both run the row engine's apply
    stage (:class:`scoreband.apply_stage.ApplyStage`).
    """
    check_keywords("apply", keywords, APPLY_KEYS)
    df = _frame(table)
    stage = _stage(calibrator, keywords, scorer_id, n_ratings, on_warning)
    run = run_rows(df, stage)
    if stage.banded == 0:
        raise InputError("no usable rows: " + "; ".join(str(e) for e in stage.errors[:5]))
    return Applied(run.table, stage.band, stage.errors, stage.shift)


@dataclass
class AppliedFile:
    """What :func:`apply_file` did: rows read, rows banded, the bad rows (all of them), the
    method, alpha and the shift test of a weighted calibrator."""

    rows: int
    banded: int
    errors: list[RowError]
    method: str
    alpha: float
    shift: dict | None = None

    @classmethod
    def of(cls, rows: int, stage: ApplyStage) -> AppliedFile:
        if rows and stage.banded == 0:
            raise InputError("no usable rows: " + "; ".join(str(e) for e in stage.errors[:5]))
        s = stage.summary()
        return cls(rows, stage.banded, stage.errors, s["method"], s["alpha"], s["shift"])


def apply_file(table: str | Path, calibrator: Calibration | str | Path, out: str | Path, *,
               scorer_id: str | None = None,
               n_ratings: int | None = None, chunk_rows: int = 100_000,
               on_warning: Callable[[str], None] | None = None,
               on_rows: Callable[[int], None] | None = None, **keywords) -> AppliedFile:
    """:func:`apply` for a CSV / TSV / JSONL / Parquet file of any size: read, banded and
    written ``chunk_rows`` rows at a time (Parquet row groups), so memory stays bounded; the
    output equals :func:`apply` on the whole table. ``on_rows(done)`` hears about progress.
    Weighted conformal fits its shift weights on all the rows it is given, so it is applied
    to the whole table at once. Column keywords as for :func:`apply`. The row job ``apply``
    (:func:`scoreband.jobs.run`), as ``scoreband apply``; the calibrator file is read once."""
    check_keywords("apply_file", keywords, APPLY_KEYS)
    res, stage = run("apply", table, out, options=apply_options(
        calibrator, scorer_id=scorer_id, n_ratings=n_ratings, **keywords),
        local={"on_warning": on_warning}, stream=True, chunk_rows=chunk_rows,
        on_rows=on_rows, provenance=False)
    return AppliedFile.of(res.rows, stage)


@keywords_only(lambda: APPLY_KEYS)
def apply_options(calibrator: Calibration | str | Path, *, scorer_id: str | None = None,
                  n_ratings: int | None = None, **keywords) -> dict:
    """The options of the row job ``apply`` (:func:`scoreband.apply_stage.apply_stage`): the
    calibrator read here, once (a file's scorer fingerprint checked against ``scorer_id``),
    and handed to the stage as ``(calibrator, document)`` with the file it came from, so
    neither the stage nor a Ray actor reads it again. Column keywords as for :func:`apply`
    (``median=``, ``lo=``, ``hi=``, ``groups=``)."""
    check_keywords("apply_options", keywords, APPLY_KEYS)
    if isinstance(calibrator, Calibration):
        pair, source = (calibrator.calibrator, {"inputs": calibrator.inputs}), None
    else:
        pair = load_calibrator(calibrator, scorer_fingerprint=scorer_id)
        source = str(calibrator)
    return {"calibrator": pair, "source": source, "columns": keywords,
            "scorer_id": scorer_id, "n_ratings": n_ratings}


# ------------------------------------------------------------------ systems
def systems(table: pd.DataFrame | str | Path, *, system_col: str, score: str | list[str],
            target: str, scale: str | tuple[float, float] | Scale,
            item_col: str | None = None, alpha: float = 0.05, method: str = "ppi++",
            plan: float | None = None, strict: bool = False, seed: int = 0,
            inclusion_prob: str | None = None, strata: str | None = None,
            design=None) -> SystemsResult:
    """Which system is better, and by how much in human terms: each system's mean human
    score with a ``1 - alpha`` Student-t interval from its few labeled rows and many scored
    ones, assuming the labeled rows are a random sample of each system's rows (PPI++;
    ``method`` ``ppi`` or ``classical`` for the labels alone; at least 5 labels per
    system), every pair's difference (paired on the items labeled for both when
    ``item_col`` is given and enough are, else unpaired, said per pair), Holm-adjusted
    p-values and simultaneous rank sets. ``table``: a DataFrame or a path; rows with an
    empty ``target`` are unlabeled; ``score``: one column name or several (combined in one
    cross-fitted map). ``inclusion_prob``: the column of each row's probability of having
    been labeled (from :func:`propose_labels`): the inverse-probability-weighted
    (self-normalised) PPI++ estimate; ``strata``: a column to estimate stratum by stratum
    and combine by size (stratified PPI++). ``design``: the label design
    :func:`propose_labels` wrote (a path or its loaded object): the labels found are checked
    against it, and labels held before the proposal count as a stratum labeled with
    probability 1.
    Returns a :class:`scoreband.system_level.study.SystemsResult` (``.doc``, ``.table()``,
    ``.write(out, html=None)``); the same as ``scoreband systems``.

    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"system": np.repeat(["a", "b"], 500), "item": np.tile(range(500), 2)})
    >>> df["human"] = np.clip(3 + 0.5 * (df.system == "b") + rng.normal(0, 0.5, 1000), 1, 5)
    >>> df["metric"] = df.human + rng.normal(0, 0.3, 1000)
    >>> df.loc[df.item >= 40, "human"] = np.nan                 # 40 labels per system
    >>> res = systems(df, system_col="system", score="metric", target="human", scale=(1, 5),
    ...               item_col="item")
    >>> [r["system"] for r in res.doc["ranking"]], res.doc["pairs"][0]["significant"]
    (['b', 'a'], True)
    """
    from scoreband.system_level.study import systems_study  # lazy: loads scipy

    return systems_study(_frame(table), system_col=system_col, scores=score, target=target,
                         scale=scale, item_col=item_col, alpha=alpha, method=method,
                         plan=plan, strict=strict, seed=seed, inclusion_prob=inclusion_prob,
                         strata=strata, design=design)


def propose_labels(table: pd.DataFrame | str | Path, *, system_col: str, n_labels: float,
                   score: str | list[str] = (), target: str | None = None, scale=None,
                   item_col: str | None = None, calibrator=None, strata: str | None = None,
                   mix: float = 0.5, seed: int = 0, alpha: float = 0.05,
                   plan: float | None = None):
    """Which rows to send to humans for :func:`systems`: ``n_labels`` expected new labels
    per system, each row (or item, with ``item_col``) drawn with a probability proportional
    to the metric's uncertainty there (``calibrator``'s band width, else a residual model
    on the rows already labeled, else uniform) mixed with uniform (``mix``) and capped.
    Returns a :class:`scoreband.system_level.propose.Proposal` whose ``table`` holds every input
    row and column plus ``inclusion_prob`` and ``propose_label``; label the proposed rows and
    pass ``inclusion_prob="inclusion_prob"`` to :func:`systems`. The same as ``scoreband
    systems --propose-labels N``."""
    from scoreband.system_level.propose import propose_labels as _propose  # lazy: scipy

    return _propose(_frame(table), system_col=system_col, n_labels=n_labels, scores=score,
                    target=target, scale=scale, item_col=item_col, calibrator=calibrator,
                    strata=strata, mix=mix, seed=seed, alpha=alpha, plan=plan)


def monitor(source, stream, **kw):
    """An anytime-valid monitor of a calibrator or a triage rule on newly labeled rows:
    :func:`scoreband.decisions.monitor.monitor` (the same as ``scoreband monitor``; imported
    here lazily, since the monitor runs the apply stage this module also drives)."""
    from scoreband.decisions.monitor import monitor as _monitor

    return _monitor(source, stream, **kw)


def __getattr__(name):
    import importlib

    if name in STUDIES:
        value = importlib.import_module(STUDIES[name])
    elif name in NAMES:
        value = getattr(importlib.import_module(NAMES[name]), name)
    else:
        raise AttributeError(f"module 'scoreband.api' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *NAMES, *STUDIES})
