"""Column mapping and row validation: the one way from a table to arrays.

The pattern, one per task: a small frozen dataclass of per-row arrays (bad rows listed in
``errors``: position -> :class:`RowError` naming row, column and fix; never silently dropped)
built by ONE function from a table and the task's column keywords (the API's names); a
missing column raises. The conformal methods' is :func:`load_inputs` (:class:`ColumnSpec`),
the system-level study's and label proposal's :func:`systems_inputs`. Triage and pairwise add
theirs beside them (``triage_inputs(df, *, score, target, groups)`` -> ``TriageInputs``),
each column read by the cell readers here (:func:`numeric_column`, :func:`label_column`,
:func:`text_column`), never by ``df[col]`` in the task's module.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace

import numpy as np
import pandas as pd

from scoreband.datatypes import Predictions, Scale
from scoreband.errors import InputError, RowError, check_known_keys
from scoreband.grid import snap_to_grid
from scoreband.tables import NA_TEXT, table_columns

__all__ = ["ColumnSpec", "Inputs", "RowIds", "load_inputs", "parse_ratings",
           "expand_columns", "needed_columns", "column_fields", "shared_option_fields",
           "SystemsInputs", "systems_inputs", "numeric_column", "label_column", "text_column",
           "cell_text"]


def needed_columns(path, spec: dict, extra: Sequence[str | None] = ()) -> list[str] | None:
    """The columns of the table at ``path`` that a column ``spec`` (target, ratings, median,
    lo, hi, features, embedding, groups, id_col ...) and ``extra`` names use, in table
    order, plus ``scorer_fingerprint`` when present; None (read everything) when the
    header cannot be read alone or a name is not in it (the full read then reports it)."""
    header = table_columns(path)
    try:
        names = {n for n in [spec.get(k) for k in ("target", "ratings", "median", "lo", "hi",
                                                   "groups", "id_col", "split_by")]
                 + list(extra) + expand_columns(spec.get("features") or (), header or ())
                 + expand_columns(spec.get("embedding") or (), header or ()) if n}
    except InputError:
        return None
    if header is None or not names <= set(header):
        return None
    return [c for c in header if c in names | {"scorer_fingerprint"}]


@dataclass
class ColumnSpec:
    """How a table's columns map onto predictions and targets: the column keywords of
    ``scoreband.evaluate`` / ``calibrate`` (``apply`` takes some of them as overrides).

    Parameters
    ----------
    scale : Scale, ``"A,B"`` or ``(A, B)`` - required
        Native scale of the target, e.g. ``(1, 5)``; integer ends mean integer ratings.
    target : str, default None
        Column of the human target (a mean rating). Give it or ``ratings``.
    ratings : str, default None
        Column of one item's annotator ratings, separated by ``ratings_sep``; the target is
        their mean and their count gives the achievable grid.
    median : str, default None
        Column of the point prediction (split conformal, CRC, ``fitted``).
    lo, hi : str, default None
        Columns of an uncalibrated 90 % interval (CRC); both or neither.
    features : list of str or str, default ()
        Columns (or glob patterns, e.g. ``"logp_*"``; a string is split on commas) the
        learned methods read: ``fitted``, CQR, CHR, R2CCP, ``auto``.
    embedding : list of str or str, default ()
        Columns of an embedding, for the cluster rules and weighted conformal.
    groups : str, default None
        Column of group / task labels (Mondrian bands, per-group metrics).
    split_by : str, default None
        Rows sharing this column's value stay on one side of every split.
    id_col : str, default None
        Column naming each row in error reports (else the row number).
    pred_scale : Scale, ``"A,B"`` or ``(A, B)``, default None
        Scale of the prediction columns when it is not the target's (a quantile head writes
        ``(0, 1)``). A prediction outside it is a row error, never a silent zero-width band.
    ratings_sep : str, default ``";"``
        Separator of the ``ratings`` cells.
    raw_predictions : bool, default False
        Read the prediction columns as they are, without the ``pred_scale`` check (set by
        the ``map`` option: a monotone map takes a metric on any scale).

    :meth:`resolved` replaces the feature and embedding patterns with the names they
    matched. A key that is none of these is an error naming the valid ones.
    """

    # The one definition of the column fields: schemas.ColumnsDoc and the CLI's shared column
    # options (cli._options.COLUMN_KEYS) are generated from them (tests/test_schemas_agree.py).
    # ``metadata["shared_option"]`` False: not one of evaluate's / calibrate's shared options.
    scale: Scale
    target: str | None = None
    ratings: str | None = None
    median: str | None = None
    lo: str | None = None
    hi: str | None = None
    features: Sequence[str] = ()
    embedding: Sequence[str] = ()
    groups: str | None = None
    split_by: str | None = field(default=None, metadata={"shared_option": False})
    id_col: str | None = None
    pred_scale: Scale | None = None
    ratings_sep: str = field(default=";", metadata={"shared_option": False})
    raw_predictions: bool = field(default=False, metadata={"shared_option": False})

    def __post_init__(self) -> None:
        self.features = _name_list(self.features)
        self.embedding = _name_list(self.embedding)

    @classmethod
    def of(cls, value=None, /, **keywords) -> ColumnSpec:
        """A ColumnSpec from this class, a dict of its fields or keywords (``scale`` a
        :class:`~scoreband.datatypes.Scale`, ``"A,B"`` or ``(A, B)``; keywords override the
        dict's keys); an unknown key is an ``InputError`` naming the valid ones.

        >>> ColumnSpec.of({"target": "human"}, scale="1,5", median="score").median
        'score'
        """
        if isinstance(value, cls) and not keywords:
            return value
        d = value.to_dict() if isinstance(value, cls) else dict(value or {})
        d.update(keywords)
        check_known_keys(d, column_fields(cls), "column key")
        if d.get("scale") is None:
            raise InputError("give the target's `scale`, e.g. '1,5' or (1, 5)")
        for name in scale_fields(cls):
            v = d.get(name)
            if v is not None and not isinstance(v, Scale):
                d[name] = (Scale.from_dict(v) if isinstance(v, dict) else
                           Scale.parse(v) if name == "scale" else
                           Scale.parse(v, integer=False, name=name))
        return cls(**d)

    def resolved(self, columns) -> ColumnSpec:
        """A copy whose feature and embedding patterns are the column names they match in
        ``columns`` (in table order), so a saved spec names exactly the columns used."""
        return replace(self, features=expand_columns(self.features, columns),
                       embedding=expand_columns(self.embedding, columns))

    def to_dict(self) -> dict:
        """Every field as plain JSON values (a scale as its dict, name lists as lists), in
        field order: what a saved calibrator records (``inputs.columns``)."""
        lists, v = list_fields(type(self)), self.__dict__
        return {k: (v[k].to_dict() if isinstance(v[k], Scale) else
                    list(v[k]) if k in lists else v[k]) for k in column_fields(type(self))}

    @classmethod
    def from_dict(cls, d: dict) -> ColumnSpec:
        scales = scale_fields(cls)
        return cls(**{k: Scale.from_dict(v) if k in scales and v is not None else v
                      for k, v in d.items()})


def column_fields(spec: type = ColumnSpec) -> tuple[str, ...]:
    """The names of :class:`ColumnSpec`'s fields, in order (the one source of the keys)."""
    return tuple(f.name for f in fields(spec))


def shared_option_fields(spec: type = ColumnSpec) -> tuple[str, ...]:
    """The fields evaluate and calibrate take as shared CLI options (``shared_option``)."""
    return tuple(f.name for f in fields(spec) if f.metadata.get("shared_option", True))


def scale_fields(spec: type = ColumnSpec) -> tuple[str, ...]:
    """The fields holding a scale (from the annotations: a new one needs no second list)."""
    return tuple(f.name for f in fields(spec) if "Scale" in str(f.type))


def list_fields(spec: type = ColumnSpec) -> tuple[str, ...]:
    """The fields holding a list of column names."""
    return tuple(f.name for f in fields(spec) if "Sequence" in str(f.type))


def _name_list(v) -> list[str]:
    return ([] if v is None else [p.strip() for p in v.split(",") if p.strip()]
            if isinstance(v, str) else [str(x) for x in v])


@dataclass
class Inputs:
    """Validated inputs: predictions and targets for the good rows, errors for the bad."""

    pred: Predictions
    y01: np.ndarray | None
    rows: np.ndarray  # positions (0-based) of the kept rows in the original table
    row_ids: Sequence[str]  #: the kept rows' names in reports (RowIds: named on demand)
    groups: np.ndarray | None
    split_keys: np.ndarray | None
    n_ratings: np.ndarray
    errors: list[RowError] = field(default_factory=list)
    #: what was done on the way (rounded targets snapped onto the grid): printed and saved
    notes: list[str] = field(default_factory=list)


def expand_columns(patterns: Sequence[str] | str | None, columns) -> list[str]:
    """Expand a comma list of names or glob patterns (``logp_*``) against ``columns``."""
    if not patterns:
        return []
    out: list[str] = []
    for pat in _name_list(patterns):
        if any(ch in pat for ch in "*?["):
            hits = [c for c in columns if fnmatch.fnmatchcase(str(c), pat)]
            if not hits:
                raise InputError(f"no column matches {pat!r}; available: {_avail(columns)}")
            out.extend(hits)
        else:
            out.append(pat)
    return out


def _avail(columns) -> str:
    cols = [str(c) for c in columns]
    return ", ".join(cols[:30]) + (f" ... ({len(cols)} in all)" if len(cols) > 30 else "")


def require_columns(df: pd.DataFrame, names: list[tuple[str, str]]) -> None:
    for flag, col in names:
        if col is not None and col not in df.columns:
            raise InputError(f"{flag} column {col!r} is not in the table; available: "
                             f"{_avail(df.columns)}")


def parse_ratings(cell, sep: str = ";") -> list[float]:
    """Parse one cell of annotator ratings: ``"4;5;3"``, a list, or a single number."""
    if isinstance(cell, (list, tuple, np.ndarray)):
        vals = list(cell)
    elif isinstance(cell, (int, float, np.integer, np.floating)):
        vals = [] if isinstance(cell, float) and math.isnan(cell) else [cell]
    elif isinstance(cell, str):
        vals = [p.strip() for p in cell.strip().strip("[]").replace(",", sep).split(sep)
                if p.strip()]
    elif cell is None:
        vals = []
    else:
        raise ValueError(f"cannot read ratings from {type(cell).__name__}")
    out = []
    for v in vals:
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            raise ValueError(f"rating {v!r} is not a number") from None
        if not math.isfinite(out[-1]):
            raise ValueError(f"rating {v!r} is not finite")
    if not out:
        raise ValueError("no ratings (empty cell)")
    return out


def row_error(i: int, row_id: str, column: str, reason: str) -> RowError:
    return RowError(row_id, column, reason, position=int(i))


_BOOL_TEXT = frozenset({"true", "false"})  #: the words of a boolean column read as text


def _is_text(raw: pd.Series) -> bool:
    return raw.dtype == object or isinstance(raw.dtype, pd.StringDtype)


def _as_floats(raw: pd.Series) -> np.ndarray:
    """A column as floats, NaN where a cell is not a number: a column read as text parsed in
    one pass where every cell is a number, else cell by cell."""
    if _is_text(raw):
        try:
            return raw.astype(float).to_numpy(dtype=float)
        except (TypeError, ValueError):
            pass
    return pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)


def _missing(raw: pd.Series) -> np.ndarray:
    """Empty cells: NaN / None, and in a column read as text an empty cell or a spelling of
    a missing value (``NA``, ``nan``, ``null`` ...: :data:`scoreband.tables.NA_TEXT`)."""
    isna = raw.isna().to_numpy(dtype=bool)
    if _is_text(raw):
        isna = isna | raw.isin(NA_TEXT).to_numpy(dtype=bool)
    return isna


def _is_boolean(raw: pd.Series) -> bool:
    """A column of True/False values (booleans, or their words read as text)."""
    if pd.api.types.is_bool_dtype(raw):
        return True
    if not _is_text(raw):
        return False
    vals = raw[~_missing(raw)]
    return bool(len(vals)) and bool(vals.map(lambda v: isinstance(v, (bool, np.bool_)) or (
        isinstance(v, str) and v.strip().lower() in _BOOL_TEXT)).all())


def numeric_column(df: pd.DataFrame, col: str, errors: dict, ids: list[str]) -> np.ndarray:
    """Column as floats; non-numeric, missing and infinite cells become row errors. A column
    of booleans is refused (True/False would silently read as ratings 1/0). A column read
    as text is parsed here (its cells stay text in the output table)."""
    raw = df[col]
    num = None if pd.api.types.is_bool_dtype(raw) else _as_floats(raw)
    # a text column of numbers parses whole; booleans are looked for only otherwise (or
    # where the first cell is one: Python booleans in a JSON column parse as 1.0 / 0.0)
    if num is None or ((np.isnan(num).any() or (len(raw) and isinstance(
            raw.iloc[0], (bool, np.bool_)))) and _is_boolean(raw)):
        raise InputError(f"column {col!r} holds True/False values, not numbers; give a "
                         "numeric column (a boolean is not a rating or a score)")
    if np.isfinite(num).all():
        return num
    isna = _missing(raw)
    for i in np.flatnonzero(~np.isfinite(num)):
        errors.setdefault(i, row_error(i, ids[i], col, (
            "missing value (empty cell); fill it or drop the row" if isna[i] else
            f"not a number: {raw.iloc[i]!r}" if np.isnan(num[i]) else
            f"infinite value ({num[i]:g}); replace it with a finite number (for a score "
            "token missing from a top-k list: a floor log-prob)")))
    return num


def _check_spec(df: pd.DataFrame, spec: ColumnSpec, features, embedding, *,
                require_target: bool, require_median: bool) -> None:
    """Structural problems of the column choice: raised before any row is read."""
    if len(df) == 0:
        raise InputError("the table has no rows")
    if require_target and not (spec.target or spec.ratings):
        raise InputError("give the human target: `target` (a column of mean ratings) or `ratings`")
    if spec.target and spec.ratings:
        raise InputError("give either `target` or `ratings`, not both")
    if require_median and not spec.median and not features:
        raise InputError("give the scorer's point prediction: `median` (or `features` for "
                         "a learned calibrator)")
    require_columns(df, [("`target`", spec.target), ("`ratings`", spec.ratings),
                        ("`median`", spec.median), ("`lo`", spec.lo), ("`hi`", spec.hi),
                        ("`groups`", spec.groups), ("`split_by`", spec.split_by),
                        ("`id_col`", spec.id_col)]
                   + [("`features`", c) for c in features]
                   + [("`embedding`", c) for c in embedding])
    if (spec.lo is None) != (spec.hi is None):
        raise InputError("give both `lo` and `hi` (the uncalibrated 90 % interval), or neither")


class RowIds(Sequence):
    """How rows are named in error reports: the id column, else 1-based numbers (after
    ``offset`` rows) with any ``id`` column beside; named only when asked (``take``: a view)."""

    def __init__(self, df: pd.DataFrame, id_col: str | None, offset: int = 0, positions=None):
        self._col = df[id_col] if id_col else df["id"] if "id" in df.columns else None
        self._own, self._offset, self._n = bool(id_col), offset, len(df)
        self._pos = None if positions is None else np.asarray(positions, dtype=int)

    def __len__(self) -> int:
        return self._n if self._pos is None else len(self._pos)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = int(i if self._pos is None else self._pos[i])
        v = None if self._col is None else self._col.iloc[i]  # an empty id: the row number
        if v is None or (isinstance(v, float) and v != v) or not str(v).strip():
            return str(self._offset + i + 1) + ("" if self._col is None else " (id empty)")
        return str(v) if self._own else f"{self._offset + i + 1} (id={v})"

    def take(self, positions) -> RowIds:
        view, pos = RowIds.__new__(RowIds), np.asarray(positions, dtype=int)
        view.__dict__.update(self.__dict__)
        view._pos = pos if self._pos is None else self._pos[pos]
        return view


row_ids = RowIds  #: ``row_ids(df, id_col, offset=0)``: how the rows are named


def _targets(df, spec: ColumnSpec, errors: dict, ids, n_ratings, notes=None) -> tuple:
    """Native-scale targets (mean of the ratings, or the target column) and the annotator
    count per row; bad cells become row errors."""
    n, scale = len(df), spec.scale
    if n_ratings is not None and (n_ratings < 1 or spec.ratings):
        raise InputError("`n_ratings` must be >= 1 and is only used with `target` "
                         "(`ratings` gives the count per row)")
    nr = np.full(n, float(n_ratings or 1))
    if spec.ratings:
        y = np.full(n, np.nan)
        for i, cell in enumerate(df[spec.ratings].tolist()):
            try:
                r = parse_ratings(cell, spec.ratings_sep)
            except ValueError as e:
                errors.setdefault(i, row_error(i, ids[i], spec.ratings, str(e)))
                continue
            bad = [v for v in r if v < scale.lo or v > scale.hi]
            why = (f"rating {bad[0]:g} outside the scale [{scale.lo:g}, {scale.hi:g}]; check "
                   "`scale`" if bad else "non-integer rating on an integer scale"
                   if scale.integer and any(v != int(v) for v in r) else None)
            if why:
                errors.setdefault(i, row_error(i, ids[i], spec.ratings, why))
            else:
                y[i], nr[i] = float(np.mean(r)), len(r)
        return y, nr
    if not spec.target:
        return None, nr
    y = numeric_column(df, spec.target, errors, ids)
    _off_scale(y, scale, spec.target, errors, ids, "; check `scale`")
    if n_ratings is not None and scale.integer:
        y = _snap(y, scale, nr, spec.target, ids, errors, notes)
    return y, nr


def _snap(y, scale, nr, col, ids, errors: dict, notes: list) -> np.ndarray:
    """Targets stored rounded onto the achievable means of ``nr`` ratings (``snap_to_grid``);
    one that fits no grid point, or two, is an error naming the row and the nearest ones."""
    usable = np.isfinite(y) & ~np.isin(np.arange(len(y)), list(errors))
    snapped, moved, bad = snap_to_grid(np.where(usable, y, scale.lo), scale, nr)
    bad = {i: why for i, why in bad.items() if usable[i]}
    if bad:
        i = min(bad)
        more = f" ({len(bad)} targets in all)" if len(bad) > 1 else ""
        raise InputError(f"row {ids[i]}, column {col!r}: {bad[i]}{more}")
    n = int((moved & usable).sum())
    if n:
        notes.append(f"{n} target(s) in {col!r} were stored rounded and were read as the "
                     f"achievable mean of {int(np.median(nr))} rating(s) they round "
                     "(e.g. 1.33 as 4/3)")
    return np.where(usable, snapped, y)


def _prediction(df, col, spec: ColumnSpec, errors: dict, ids):
    """A prediction column on [0, 1] (from ``pred_scale``); values outside it are row
    errors, never a silent zero-width band (unless ``raw_predictions``)."""
    if col is None:
        return None
    v = numeric_column(df, col, errors, ids)
    if spec.raw_predictions:
        return v
    pscale = spec.pred_scale or spec.scale
    out = np.isfinite(v) & ((v < pscale.lo - 1e-9 * pscale.width) |
                            (v > pscale.hi + 1e-9 * pscale.width))
    for i in np.flatnonzero(out):
        errors.setdefault(i, row_error(
            i, ids[i], col, f"prediction {v[i]:g} outside the prediction scale "
            f"[{pscale.lo:g}, {pscale.hi:g}]; give the scale the scorer writes "
            "(`pred_scale` A,B) or map a raw metric onto the target (`map` isotonic)"))
    return pscale.to01(v)


def text_column(df, col, errors: dict, ids, missing: str = "missing group label"):
    """A column of names (group, system, item, stratum) as text (None without ``col``); an
    empty cell is a row error saying ``missing``."""
    if not col:
        return None
    for i in np.flatnonzero(_missing(df[col])):
        errors.setdefault(i, row_error(i, ids[i], col, missing))
    return df[col].astype(str).to_numpy()


def cell_text(v) -> str:
    """A cell as a message shows it: a number as written (``7.5``, not ``np.float64(7.5)``),
    text quoted."""
    number = isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))
    return f"{float(v):g}" if number else repr(v)


def label_column(df, col, errors: dict, ids, scale: Scale) -> np.ndarray:
    """A human score column where an empty cell is an unlabeled row (NaN), not an error; a
    cell that is not a number, or lies off ``scale``, is a row error naming the fix."""
    raw = df[col]
    y = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float, copy=True)
    empty = raw.isna().to_numpy() | raw.astype(str).str.strip().eq("").to_numpy()
    for i in np.flatnonzero(~empty & ~np.isfinite(y)):
        errors.setdefault(i, row_error(i, ids[i], col, f"target {raw.iloc[i]!r} is not a "
                                        "number (leave the cell empty for an unlabeled row)"))
    _off_scale(np.where(empty, np.nan, y), scale, col, errors, ids, " (`scale`)")
    y[empty] = np.nan
    return y


def _off_scale(y, scale: Scale, col, errors: dict, ids, fix: str) -> None:
    for i in np.flatnonzero(np.isfinite(y) & ((y < scale.lo - 1e-9) | (y > scale.hi + 1e-9))):
        errors.setdefault(i, row_error(i, ids[i], col, f"target {y[i]:g} outside the scale "
                                        f"[{scale.lo:g}, {scale.hi:g}]{fix}"))


def load_inputs(df: pd.DataFrame, spec: ColumnSpec, *, require_target: bool = True,
                require_median: bool = True, n_ratings: int | None = None,
                row_offset: int = 0, allow_none: bool = False) -> Inputs:
    """Validate a table against ``spec`` and build normalised predictions and targets.

    Every problem is a :class:`RowError` (row id, column, reason); those rows are left out
    of ``Inputs.pred`` and listed in ``Inputs.errors``. Structural problems (unknown columns,
    no good rows at all) raise :class:`InputError`; ``allow_none`` returns an empty
    ``Inputs`` instead (a streamed chunk may hold only bad rows). ``row_offset``: rows
    before this chunk, for row numbers in the reports."""
    features = expand_columns(spec.features, df.columns)
    embedding = expand_columns(spec.embedding, df.columns)
    _check_spec(df, spec, features, embedding, require_target=require_target,
                require_median=require_median)
    n, ids, errors, notes = len(df), row_ids(df, spec.id_col, row_offset), {}, []
    y, nr = _targets(df, spec, errors, ids, n_ratings, notes)
    median = _prediction(df, spec.median, spec, errors, ids)
    lo, hi = (_prediction(df, c, spec, errors, ids) for c in (spec.lo, spec.hi))
    if lo is not None:
        for i in np.flatnonzero(np.isfinite(lo) & np.isfinite(hi) & (lo > hi + 1e-12)):
            errors.setdefault(i, row_error(i, ids[i], spec.lo,
                                          f"lo ({df[spec.lo].iloc[i]}) > hi "
                                          f"({df[spec.hi].iloc[i]}); swap or fix the interval"))
    feats, emb = (np.column_stack([numeric_column(df, c, errors, ids) for c in cols])
                  if cols else None for cols in (features, embedding))
    groups = text_column(df, spec.groups, errors, ids)
    split_keys = df[spec.split_by].astype(str).to_numpy() if spec.split_by else None
    keep = np.setdiff1d(np.arange(n), np.array(list(errors), dtype=int))
    if len(keep) == 0 and not allow_none:
        raise InputError("no usable rows: " + "; ".join(str(e) for e in list(
            errors.values())[:5]))
    if median is None and (feats is not None or not require_median):
        # learned calibrators predict their own point; target-only loads have none
        median = np.full(n, np.nan)

    def take(a):
        return None if a is None else a[keep]
    pred = Predictions(median=median[keep], lo=take(lo), hi=take(hi), features=take(feats),
                       embedding=take(emb), n_ratings=nr[keep])
    return Inputs(pred=pred, y01=None if y is None else spec.scale.to01(y[keep]), rows=keep,
                  row_ids=ids.take(keep), groups=take(groups),
                  split_keys=take(split_keys), n_ratings=nr[keep],
                  errors=[errors[i] for i in sorted(errors)], notes=notes)


@dataclass(frozen=True)
class SystemsInputs:
    """A system-level table's rows (``systems``, ``--propose-labels``), one entry per row:
    ``system``, the ``scores`` matrix, the ``target`` (native scale, NaN: unlabeled), where
    given ``items``, ``inclusion_prob``, ``strata`` and ``proposed`` (a proposal's
    ``propose_label``); ``errors``: position -> each bad row's first :class:`RowError`."""

    system: np.ndarray
    scores: np.ndarray
    target: np.ndarray
    ids: RowIds
    items: np.ndarray | None = None
    inclusion_prob: np.ndarray | None = None
    strata: np.ndarray | None = None
    proposed: np.ndarray | None = None
    errors: dict = field(default_factory=dict)

    def take(self, keep) -> SystemsInputs:
        """The rows at positions ``keep`` (``ids`` and ``errors`` as they were)."""
        return replace(self, **{k: None if getattr(self, k) is None else getattr(self, k)[keep]
                                for k in ("system", "scores", "target", "items",
                                          "inclusion_prob", "strata", "proposed")})


def systems_inputs(df: pd.DataFrame, *, system_col: str, scores: Sequence[str],
                   target: str | None, scale: Scale, item_col: str | None = None,
                   inclusion_prob: str | None = None,
                   strata: str | None = None) -> SystemsInputs:
    """A system-level table read (columns checked present by the caller; no ``target``: no
    labels yet). Row errors: an empty system / item / stratum cell, a score or label not a
    number, a label off ``scale``, an item repeated for a system, a labeled row without a
    probability in (0, 1]; a probability above 1 raises."""
    ids, errors = row_ids(df, None), {}
    system = text_column(df, system_col, errors, ids, "no system name (empty cell)")
    X = (np.column_stack([numeric_column(df, c, errors, ids) for c in scores]) if len(scores)
         else np.zeros((len(df), 0)))
    y = (np.full(len(df), np.nan) if target is None else
         label_column(df, target, errors, ids, scale))
    items = text_column(df, item_col, errors, ids, "no item id (empty cell)")
    seen: dict[tuple, int] = {}
    for i in range(len(df)) if items is not None else ():
        first = seen.setdefault((system[i], items[i]), i) if i not in errors else i
        if first != i:
            errors[i] = row_error(i, ids[i], item_col, f"item {items[i]!r} appears again for "
                                  f"system {system[i]!r} (first at row {ids[first]}): each "
                                  "system scores an item once")
    pi = (None if inclusion_prob is None else
          _probabilities(df, inclusion_prob, np.isfinite(y), errors, ids))
    st = text_column(df, strata, errors, ids, "no stratum (empty cell)")
    drawn = df.get("propose_label")  # a proposal's draw, where the table has it
    drawn = None if drawn is None else drawn.astype(str).str.strip().str.lower().isin(
        ["true", "1", "1.0"]).to_numpy()
    return SystemsInputs(system, X, y, ids, items, pi, st, drawn, errors)


def _probabilities(df, col, labeled, errors: dict, ids) -> np.ndarray:
    """Each row's probability of being labeled (NaN where empty); one above 1 raises."""
    raw = df[col]
    pi = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float, copy=True)
    if len(over := np.flatnonzero(np.isfinite(pi) & (pi > 1 + 1e-12))):
        pct = bool(np.nanmax(pi) <= 100 and np.nanmin(pi[np.isfinite(pi)]) >= 0)
        raise InputError(
            f"`inclusion_prob` column {col!r} (--inclusion-prob) holds {len(over)} value(s) "
            f"above 1 (row {ids[over[0]]}: {cell_text(raw.iloc[over[0]])}): each row's "
            "probability of being labeled lies in (0, 1]" + (
                "; these look like percentages: divide the column by 100" if pct else
                "; give probabilities, not weights or counts"))
    for i in np.flatnonzero(labeled & ~((pi > 0) & (pi <= 1))):
        errors.setdefault(i, row_error(
            i, ids[i], col, f"a labeled row needs the probability it had of being labeled, "
            f"in (0, 1]; got {cell_text(raw.iloc[i])} (the `inclusion_prob` column that "
            "`propose_labels` wrote)"))
    return pi
