"""A saved calibrator's bands on a table's rows: the ``apply`` stage of the row engine.

:class:`ApplyStage` is a vectorized :class:`~scoreband.engine.rows.Stage`: the engine hands
it a whole chunk, it reads the prediction columns the calibrator was fitted with (every bad
cell a row error naming the row and column), bands the usable rows at once and returns the
band columns (:func:`band_columns`). So ``scoreband.apply`` (a table in memory),
``scoreband.api.apply_file`` (a file streamed chunk by chunk) and ``--engine ray`` (the stage
built in each actor) are one path through :func:`~scoreband.engine.rows.run_rows` /
:func:`~scoreband.engine.rows.run_file`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.columns import ColumnSpec, Inputs, load_inputs, parse_ratings
from scoreband.conformal import adjust_band, load_calibrator
from scoreband.conformal.base import needs_whole_table, uses_row_draws
from scoreband.conformal.persist import check_scorer
from scoreband.conformal.randomness import frame_keys
from scoreband.datatypes import Band
from scoreband.domain import check_domain, off_scale_rows, same_labels
from scoreband.engine.rows import Stage
from scoreband.errors import ERROR_COLUMN, InputError, RowError

__all__ = ["ApplyStage", "apply_stage", "band_columns", "band_values", "table_fingerprint",
           "ERROR_COLUMN", "BAND_COLUMNS", "bands", "Banded", "calibration_pair"]

# ERROR_COLUMN (the registry of every stage's error column) lives in scoreband.errors and
# is re-exported here, where it was first defined

#: the numeric band columns of every command that writes bands (apply, score): on the
#: target's scale, then their companions on [0, 1] (``_01``), one meaning per name
BAND_COLUMNS = ("band_lo", "band_median", "band_hi", "band_lo01", "band_median01",
                "band_hi01")


def band_values(band: Band) -> dict[str, np.ndarray]:
    """The :data:`BAND_COLUMNS` of a band, by name."""
    return {"band_lo": band.lo, "band_median": band.median, "band_hi": band.hi,
            "band_lo01": band.lo01, "band_median01": band.median01, "band_hi01": band.hi01}


def table_fingerprint(df) -> str | None:
    """The scorer fingerprint a scored table carries (one value in ``scorer_fingerprint``)."""
    if "scorer_fingerprint" in df.columns:
        vals = df["scorer_fingerprint"].dropna().astype(str).unique()
        if len(vals) == 1:
            return vals[0]
    return None


def band_columns(band: Band | None, inp: Inputs, n: int) -> dict[str, np.ndarray]:
    """The columns ``apply`` adds for ``n`` table rows of which ``inp.rows`` were banded:
    band_lo, band_median, band_hi (the target's scale), band_lo01, band_median01, band_hi01
    (on [0, 1]), band_flag
    (full_range and / or group_fallback, else the calibrator's note), band_sets (R2CCP's union of
    intervals), band_group, band_error."""
    out: dict[str, np.ndarray] = {}
    values = dict.fromkeys(BAND_COLUMNS) if band is None else band_values(band)
    for k, v in values.items():
        col = np.full(n, np.nan)
        if v is not None:
            col[inp.rows] = v
        out[k] = col
    flags = np.full(n, "", dtype=object)
    if band is not None:
        flags[inp.rows] = _flags(band)
    out["band_flag"] = flags
    if band is not None and band.sets01 is not None and all(v is not None
                                                            for v in band.sets01):
        sets = np.full(n, "", dtype=object)
        sc = band.scale
        sets[inp.rows] = [";".join(f"{sc.from01(a):.6g}..{sc.from01(b):.6g}" for a, b in v)
                          for v in band.sets01]
        out["band_sets"] = sets
    if band is not None and band.group is not None:
        g = np.full(n, "", dtype=object)
        g[inp.rows] = band.group
        out["band_group"] = g
    errs = np.full(n, "", dtype=object)
    for e in inp.errors:
        errs[e.position] = f"{e.column}: {e.reason}"
    out[ERROR_COLUMN["apply"]] = errs
    return out


def _flags(band: Band) -> list[str]:
    """Each row's ``band_flag``: ``full_range`` and / or ``group_fallback`` (a Mondrian group
    too small or unseen at calibration: the whole scale, or the pooled band), comma-joined;
    else the calibrator's note."""
    full = np.asarray(band.full_range, dtype=bool)
    fb = (np.zeros(len(full), dtype=bool) if band.fallback is None
          else np.asarray(band.fallback, dtype=bool))
    names = np.where(full & fb, "full_range,group_fallback",
                     np.where(full, "full_range", np.where(fb, "group_fallback", "")))
    return [f or (band.note or "") for f in names.tolist()]


class ApplyStage(Stage):
    """Bands of a fitted calibrator for a table's rows, a whole chunk at a time.

    ``calibrator``: ``(calibrator, document)`` as :func:`~scoreband.conformal.load_calibrator`
    returns them, or the path of a saved one; ``source`` names the file the pair came from
    (for provenance and messages). A document's scorer fingerprint is checked against
    ``scorer_id``, else against the first chunk's ``scorer_fingerprint`` column. ``columns``
    overrides the prediction columns recorded at calibration (``median``, ``lo``, ``hi``,
    ``groups``). The calibrator's warnings go to ``on_warning`` (each once) and are kept in
    ``warnings``. After the run: ``errors`` (every bad row, positions in the whole table),
    ``banded``, ``band`` (the last chunk's :class:`~scoreband.datatypes.Band`), ``method``,
    ``alpha`` and ``shift`` (a weighted calibrator's shift test) - :meth:`summary` has them
    as a dict.
    """

    label = "applying"
    error_column = ERROR_COLUMN["apply"]
    vectorized = True
    #: the columns every run adds (a table that has one already is refused before any
    #: chunk is computed); band_sets and band_group are added where a method makes them
    outputs = {**dict.fromkeys(BAND_COLUMNS, np.nan), "band_flag": ""}

    def __init__(self, calibrator, *, columns: dict | None = None,
                 scorer_id: str | None = None, n_ratings: int | None = None,
                 on_warning=None, source=None, base_dir=None):
        super().__init__(base_dir)
        if isinstance(calibrator, tuple):
            self.cal, self.doc = calibrator
            self.source = None if source is None else Path(source)
        else:
            self.source = Path(calibrator)
            self.cal, self.doc = load_calibrator(self.source)
        # one scorer check for a file and a pair alike (the table's column: at frame())
        check_scorer(self.doc, scorer_id, self.source or "the calibrator")
        self.recorded = dict(self.doc.get("inputs", {}))
        self.overrides = {k: v for k, v in (columns or {}).items() if v is not None}
        self.n_ratings = n_ratings
        self.on_warning = on_warning
        self.warnings: list[str] = []
        # weighted conformal fits its shift weights on all the rows it is given
        self.whole_table = needs_whole_table(self.cal)
        self.row_draws = uses_row_draws(self.cal)
        self.errors: list[RowError] = []
        self.banded = 0
        self.band: Band | None = None
        self.method: str | None = None
        self._checked = scorer_id is not None

    @property
    def calibrator(self) -> Path | None:
        """The calibrator file (for the output's provenance)."""
        return self.source

    @property
    def alpha(self) -> float:
        return self.cal.alpha

    @property
    def shift(self) -> dict | None:
        return getattr(self.cal, "last_shift_", None)

    def _spec(self, df: pd.DataFrame) -> ColumnSpec:
        cols = dict(self.recorded.get("columns") or {})
        if not cols:
            raise InputError("the calibrator records no input columns; recalibrate it with "
                             "`scoreband calibrate` (or scoreband.api.calibrate)")
        for key in ("median", "lo", "hi", "groups", "features", "embedding"):
            want = cols.get(key)
            names = want if isinstance(want, list) else [want] if want else []
            missing = [c for c in names if c not in df.columns]
            if key not in self.overrides and missing:  # the calibrator named it, not the user
                raise InputError(
                    f"the calibrator was fitted with `{key}` = "
                    f"{', '.join(map(repr, missing))}, which this table lacks; name this "
                    f"table's column with `{key}` COL, or add the column (available: "
                    f"{', '.join(map(str, list(df.columns)[:30]))})")
        cols.update(self.overrides)
        return ColumnSpec.from_dict({**cols, "target": None, "ratings": None,
                                     "split_by": None})

    def frame(self, df: pd.DataFrame) -> dict[str, np.ndarray]:
        if not self._checked:  # refuses another scorer's table
            check_scorer(self.doc, table_fingerprint(df), self.source or "the calibrator")
            self._checked = True
        inp = load_inputs(df, self._spec(df), require_target=False, row_offset=self.offset,
                          allow_none=True,  # the no-model band reads no prediction
                          require_median=getattr(self.cal, "method", "") != "marginal")
        self.errors.extend(replace(e, position=e.position + self.offset) for e in inp.errors)
        if len(inp.rows) == 0:  # a chunk of bad rows only: their reasons, no band
            return band_columns(None, inp, len(df))
        if self.row_draws:  # randomised tie-breaking: each row's draw from its own cells
            inp.pred.keys = frame_keys(df.iloc[inp.rows])
        domain = self.recorded.get("domain")
        ood, note = check_domain(domain, inp.pred, "apply",
                                 off_scale_rows(inp.errors, self._roles(df)),
                                 n_calibration=self.recorded.get("n_calibration"))
        groups = same_labels(inp.groups, (domain or {}).get("groups"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            band = self.cal.predict(inp.pred, groups=groups)
        for w in dict.fromkeys([*(str(w.message) for w in caught), *([note] if note else [])]):
            self._warn(w)
        if self.recorded.get("adjust_boundary"):
            counts = self._rater_counts(df, inp)
            if counts is not None:
                band = adjust_band(band, counts)
        self.band, self.banded = band, self.banded + len(inp.rows)
        self.method = self.method or band.method
        out = band_columns(band, inp, len(df))
        if ood.any():
            flags = out["band_flag"]
            at = inp.rows[ood]
            flags[at] = [f"{f},out_of_domain" if f else "out_of_domain" for f in flags[at]]
        return out

    def _roles(self, df: pd.DataFrame) -> dict[str, str]:
        """The prediction inputs' columns in this table, by role (as domain.fit_domain)."""
        spec = self._spec(df)
        return {c: role for role, c in (("median", spec.median), ("lo", spec.lo),
                                        ("hi", spec.hi)) if c}

    def _warn(self, message: str) -> None:
        """Say a warning once per run (to ``on_warning``, and in ``warnings``)."""
        if message not in self.warnings:
            self.warnings.append(message)
            if self.on_warning is not None:
                self.on_warning(message)

    def _rater_counts(self, df: pd.DataFrame, inp: Inputs) -> np.ndarray | None:
        """Each banded row's own rater count, for snapping its band onto its own grid: the
        ``n_ratings`` given, else the row's ratings (the ratings column the calibrator was
        fitted with, where this table has it; a row without readable ratings is not
        snapped), else the one count every calibration item had. None (no snapping, said
        once) where the calibration items' counts varied and this table gives none: a grid
        taken from another item (the median count) leaves bands between an item's own
        achievable means (coverage 0.86 at 0.90)."""
        n = len(inp.rows)
        if self.n_ratings:
            return np.full(n, float(self.n_ratings))
        cols = self.recorded.get("columns") or {}
        col = cols.get("ratings")
        if col and col in df.columns:
            sep = cols.get("ratings_sep") or ";"
            out = np.zeros(n)
            for i, cell in enumerate(df[col].iloc[inp.rows].tolist()):
                try:
                    out[i] = len(parse_ratings(cell, sep))
                except ValueError:
                    pass  # no ratings in this row: its band is not snapped
            return out
        r = self.recorded.get("n_ratings")
        if r is not None and not self.recorded.get("ratings_varied") and float(r).is_integer():
            return np.full(n, float(r))
        self._warn("boundary adjustment skipped: the calibration items had different rater "
                   "counts and this table gives none per row (its ratings column, or "
                   "`n_ratings`), so no row's achievable targets are known")
        return None

    def components(self) -> dict:
        """What the output's provenance records of this stage."""
        return {"calibrator_method": self.method or self.cal.method}

    def summary(self) -> dict:
        return {"method": self.method or self.cal.method, "alpha": self.alpha,
                "banded": self.banded, "shift": self.shift}


def apply_stage(calibrator, columns: dict | None = None, scorer_id: str | None = None,
                n_ratings=None, on_warning=None, base_dir=None, source=None) -> ApplyStage:
    """The stage of the row job ``apply`` (how the API, the CLI and a Ray actor build it):
    ``calibrator`` the ``(calibrator, document)`` pair already read from the file ``source``
    (``scoreband.api.apply_options`` reads it once; a Ray actor gets the pair itself), or
    the path of a calibrator file, read here."""
    return ApplyStage(calibrator, columns=columns, scorer_id=scorer_id, n_ratings=n_ratings,
                      on_warning=on_warning, source=source, base_dir=base_dir)


def calibration_pair(calibration) -> tuple:
    """``(calibrator, document)`` of a calibration given in any of its forms: a calibrator
    file's path (read once), such a pair, or a fitted :class:`scoreband.api.Calibration`
    (anything with ``calibrator`` and ``inputs``: its document built in memory, as its file
    would hold it; nothing is written to disk)."""
    from scoreband.conformal.persist import calibrator_document

    if isinstance(calibration, tuple) and len(calibration) == 2:
        return calibration
    if hasattr(calibration, "calibrator") and hasattr(calibration, "inputs"):
        return calibration.calibrator, calibrator_document(
            calibration.calibrator, inputs=calibration.inputs,
            scorer_fingerprint=getattr(calibration, "scorer_fingerprint", None))
    return load_calibrator(calibration)


@dataclass
class Banded:
    """:func:`bands` of a table: every row with its band columns (``table``), the
    :class:`~scoreband.datatypes.Band` of the banded rows, the row ``errors`` and the
    ``stage`` that made them (its ``warnings``, ``shift``, ``summary()``)."""

    table: pd.DataFrame
    band: Band | None
    errors: list[RowError]
    stage: ApplyStage

    def widths01(self) -> np.ndarray:
        """Each row's band width on [0, 1] (NaN where a row got no band)."""
        return (self.table["band_hi01"].to_numpy(float)
                - self.table["band_lo01"].to_numpy(float))


def bands(table: pd.DataFrame, calibration, *, columns: dict | None = None,
          scorer_id: str | None = None, n_ratings: int | None = None,
          on_warning=None, offset: int = 0) -> Banded:
    """The bands of ``calibration`` (a file, a ``(calibrator, document)`` pair or a
    Calibration: :func:`calibration_pair`) for every row of ``table``, in memory: the apply
    stage on the row engine, the one way ``scoreband.apply``, triage's band-width
    uncertainty and the label proposals get bands (``columns``: prediction-column
    overrides, as :class:`ApplyStage` takes them; ``offset``: ``table`` is a chunk whose
    first row is row ``offset`` of the whole table, as the row errors say)."""
    from scoreband.engine.rows import run_rows

    stage = ApplyStage(calibration_pair(calibration), columns=columns, scorer_id=scorer_id,
                       n_ratings=n_ratings, on_warning=on_warning)
    run = run_rows(table.reset_index(drop=True), stage, offset=offset)
    return Banded(run.table, stage.band, list(stage.errors), stage)
