"""The row engine behind ``score``, ``judge``, ``roundtrip`` and ``apply``: one loop for every
row-wise job. A job is a :class:`Stage` (what one batch of rows becomes; a vectorized stage
such as ``apply`` computes a whole chunk's columns at once); the engine brings the rest:
batches, per-row errors (a row that fails keeps empty outputs and the reason, the batch goes
on), the resume journal (every finished row appended and flushed under a key made of
everything that produced it, reused after a crash: exact after kill -9), progress, and the
output table - whole (:func:`run_rows`) or streamed chunk by chunk into a file written
atomically (:func:`run_file`). The Ray engine runs the same stages in its actors.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.columns import require_columns
from scoreband.engine.journal import RowJournal, discard_journal
from scoreband.engine.stream import ChunkWriter, as_text, iter_chunks, table_rows
from scoreband.errors import InputError
from scoreband.progress import row_progress

__all__ = ["Stage", "RowRun", "run_rows", "run_file", "check_columns", "build_stage",
           "check_added_columns"]


def build_stage(factory: str, kw: dict) -> Stage:
    """The stage ``factory(**kw)``, ``factory`` named as "module:function" (so a Ray actor
    can build it from plain values)."""
    mod, fn = factory.split(":")
    return getattr(importlib.import_module(mod), fn)(**kw)


def check_columns(df: pd.DataFrame, needed: dict[str, str]) -> None:
    """Every ``{parameter: column}`` must be in the table (the error names both)."""
    require_columns(df, [(f"`{param}`", col) for param, col in needed.items()])


def check_added_columns(columns, added) -> None:
    """Refuse a table that already has a column the stage adds (``band_lo``,
    ``band_error`` ...): every input column is kept as it is, so it is never overwritten;
    the message names the columns and the fix. The same rule for every command (apply,
    score, judge, roundtrip)."""
    have = {str(c) for c in columns}
    clash = [str(c) for c in dict.fromkeys(added) if str(c) in have]
    if clash:
        names = ", ".join(map(repr, clash))
        raise InputError(
            f"the table already has the column{'s' if len(clash) > 1 else ''} {names}, "
            f"which this command adds; scoreband keeps every input column as it is and "
            f"never overwrites one: rename {'them' if len(clash) > 1 else 'it'} in the "
            f"table (e.g. {clash[0]!r} -> {'my_' + clash[0]!r}) or drop "
            f"{'them' if len(clash) > 1 else 'it'}, then run again")


class Stage:
    """One row-wise job. Subclasses set ``outputs`` (column -> value of a row without one)
    and implement :meth:`key` and :meth:`process`; the engine does the rest.

    A record is a JSON-able dict with the row's output values and ``error`` ("" when the
    row succeeded); records are what the journal keeps.
    """

    #: progress text
    label = "processing"
    #: the output column that holds why a row failed
    error_column = "error"
    #: rows handed to :meth:`process` at once
    batch_size = 64
    #: output column -> value for a row that has none (a failed row); the error column may
    #: be listed to place it among them (else it comes last)
    outputs: dict[str, object] = {}
    #: columns whose set rows are counted in :attr:`RowRun.counts` (truncated, out of domain)
    flags: tuple[str, ...] = ()
    #: numeric output columns whose mean over the rows that have one is in :attr:`RowRun.means`
    averaged: tuple[str, ...] = ()
    #: {parameter name: column} the input table must have
    inputs: dict[str, str] = {}
    #: a stage that computes a whole chunk's columns at once (:meth:`frame`) rather than
    #: records row by row (:meth:`process`); it keeps no journal: a chunk is recomputed in
    #: less time than its records would take to journal (``apply``: ~10^6 rows/s)
    vectorized = False
    #: the stage needs every row at once (weighted conformal fits on all its rows): a file
    #: is then read as one chunk
    whole_table = False

    def __init__(self, base_dir=None):
        self.base_dir = base_dir
        self.offset = 0  # position of the current chunk's first row in the whole table

    def constants(self) -> dict[str, object]:
        """Columns with one value for every row (model name, fingerprint ...)."""
        return {}

    def added_columns(self) -> list[str]:
        """The columns the stage is known to add before it runs (its ``outputs``, its error
        column and its constants); columns derived from the records are checked when they
        are made."""
        return [*self.outputs, self.error_column, *self.constants()]

    def key(self, df: pd.DataFrame, i: int) -> str:
        """The journal key of row ``i``: a hash of everything that makes its record."""
        raise NotImplementedError

    def process(self, df: pd.DataFrame, positions: list[int]) -> list[dict]:
        """Records of the rows at ``positions`` (in that order); a row that fails gets a
        record with ``error`` set, never an exception."""
        raise NotImplementedError

    def frame(self, df: pd.DataFrame) -> dict[str, np.ndarray]:
        """A vectorized stage's output columns for every row of ``df`` (the chunk's first
        row is row ``self.offset`` of the table); a bad row gets its reason in the error
        column, never an exception."""
        raise NotImplementedError

    def columns(self, records: list[dict]) -> dict[str, np.ndarray]:
        """The output columns from the records of a table's rows (override to derive
        columns that need more than one value per record)."""
        out = {}
        for col, fill in {**self.outputs, self.error_column: ""}.items():
            src = "error" if col == self.error_column else col
            vals = [fill if r.get(src) is None else r[src] for r in records]
            out[col] = np.array(vals, dtype=object if isinstance(fill, str) else None)
        return out

    def summary(self) -> dict:
        """What the stage learned over the whole run (e.g. a shift alarm)."""
        return {}


@dataclass
class RowRun:
    """What a run did: ``table`` (None when streamed into a file), ``rows``, ``failures``
    (position -> reason), ``reused`` (rows taken from the journal), ``counts`` (column ->
    rows where it is set, for the stage's flag columns) and the stage's ``summary``."""

    table: pd.DataFrame | None
    rows: int
    failures: dict[int, str]
    reused: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    _sums: dict = field(default_factory=dict, repr=False)

    @property
    def means(self) -> dict[str, float]:
        """Column -> mean over the rows that have a value (the stage's ``averaged``)."""
        return {c: s / k for c, (s, k) in self._sums.items() if k}


def _json_safe(rec: dict) -> dict:
    """Plain Python values (numpy scalars unwrapped), NaN / inf as None."""
    out = {}
    for k, v in rec.items():
        if isinstance(v, np.generic):
            v = v.item()
        out[k] = None if isinstance(v, float) and not math.isfinite(v) else v
    return out


_FATAL = (KeyboardInterrupt, SystemExit, MemoryError)


def _process(stage: Stage, df: pd.DataFrame, positions: list[int]) -> list[dict]:
    """The stage's records for ``positions``. A stage reports a bad row in its record; if
    a batch raises instead (an answer, a file or a value nobody foresaw), its rows are done
    one at a time and a row that still raises gets the exception as its error: one row
    never ends the run."""
    try:
        return stage.process(df, positions)
    except _FATAL:
        raise
    except Exception as e:
        if len(positions) == 1:
            msg = " ".join(str(e).split())[:300]
            return [{"error": f"unexpected {type(e).__name__}: {msg}"}]
    return [_process(stage, df, [i])[0] for i in positions]


def _records(df: pd.DataFrame, stage: Stage, jr: RowJournal, update,
             offset: int = 0) -> tuple[list[dict], int]:
    """The record of every row of ``df``: from the journal where it holds one, else
    processed (a batch at a time) and journaled."""
    n = len(df)
    records: list[dict | None] = [None] * n
    reused = 0
    for s in range(0, n, stage.batch_size):
        e = min(n, s + stage.batch_size)
        # keys only where a journal keeps them (a key hashes the row's image file)
        keys = {i: stage.key(df, i) if jr.active else "" for i in range(s, e)}
        todo = []
        for i, k in keys.items():
            rec = jr.get(k) if k else None
            if rec is None:
                todo.append(i)
            else:
                records[i] = rec
                reused += 1
        if todo:
            for i, rec in zip(todo, _process(stage, df, todo), strict=True):
                rec = _json_safe({**rec, "key": keys[i]})
                jr.add(rec)
                records[i] = rec
        update(offset + e)
    return records, reused  # type: ignore[return-value]


def _assemble(df: pd.DataFrame, stage: Stage, columns: dict[str, np.ndarray]) -> pd.DataFrame:
    """Every input row and column, the stage's columns added (an input column with one of
    their names is refused: :func:`check_added_columns`)."""
    add = {**columns, **{c: np.full(len(df), v, dtype=object if isinstance(v, str) else None)
                         for c, v in stage.constants().items()}}
    check_added_columns(df.columns, add)
    # one concatenation rather than a copy and a column insertion per column
    return pd.concat([df, pd.DataFrame(add, index=df.index)], axis=1)


def _chunk(df: pd.DataFrame, stage: Stage, jr: RowJournal, update,
           offset: int = 0) -> tuple[pd.DataFrame, int]:
    """One chunk through the stage: (its output table, rows reused from the journal)."""
    stage.offset = offset
    if stage.vectorized:
        cols = stage.frame(df.reset_index(drop=True))
        update(offset + len(df))
        return _assemble(df, stage, cols), 0
    records, reused = _records(df.reset_index(drop=True), stage, jr, update, offset)
    return _assemble(df, stage, stage.columns(records)), reused


def _tally(table: pd.DataFrame, stage: Stage, offset: int, run: RowRun) -> None:
    errs = table[stage.error_column].to_numpy()
    run.failures.update((offset + int(i), str(errs[i])) for i in np.flatnonzero(errs != ""))
    for col in stage.flags:
        if col in table:
            v = table[col].to_numpy()
            hit = (v != "") if v.dtype == object else v.astype(bool)
            run.counts[col] = run.counts.get(col, 0) + int(hit.sum())
    for col in stage.averaged:
        v = pd.to_numeric(table[col], errors="coerce").to_numpy(dtype=float)
        ok = np.isfinite(v)
        s, k = run._sums.get(col, (0.0, 0))
        run._sums[col] = (s + float(v[ok].sum()), k + int(ok.sum()))


def run_rows(df: pd.DataFrame, stage: Stage, *, journal: Path | None = None,
             progress=None, summarize: bool = True, offset: int = 0) -> RowRun:
    """Run ``stage`` over every row of ``df``; the output table is ``run.table`` (every input
    row and column kept, the stage's columns added). ``summarize=False`` skips the stage's
    run summary (a Ray actor runs one batch at a time: the summary is the driver's);
    ``offset``: ``df`` is a chunk whose first row is row ``offset`` of a larger table (its
    row errors name the rows of that table)."""
    check_columns(df, stage.inputs)
    check_added_columns(df.columns, stage.added_columns())
    with RowJournal(None if stage.vectorized else journal) as jr, \
            row_progress(progress, stage.label, len(df)) as update:
        table, reused = _chunk(df, stage, jr, update, offset)
    run = RowRun(table, len(df), {}, reused)
    _tally(table, stage, offset, run)
    if summarize:
        run.summary = stage.summary()
    return run


def run_file(table, stage: Stage, out, *, journal: Path | None = None, progress=None,
             chunk_rows: int = 10_000, on_chunk: Callable[[pd.DataFrame], None] | None = None,
             on_rows: Callable[[int], None] | None = None) -> RowRun:
    """Run ``stage`` over a CSV / TSV / JSONL / Parquet file ``chunk_rows`` rows at a time,
    writing each chunk's output as it is done (into a temporary file renamed over ``out``
    at the end), so memory stays bounded whatever the table's size. The output equals
    :func:`run_rows` on the whole table written to ``out``. ``on_rows(done)`` hears about
    progress beside ``progress`` (a console). Into a text format (CSV / TSV / JSONL) the
    input's cells are read as text and written back as they were
    (:func:`scoreband.engine.stream.iter_chunks`)."""
    total = table_rows(table)
    run = RowRun(None, 0, {})
    if stage.vectorized:
        journal = None
    if stage.whole_table:
        chunk_rows = 1 << 62
    with RowJournal(journal) as jr, row_progress(progress, stage.label, total or 0) as shown, \
            ChunkWriter(out) as w:
        def update(done: int) -> None:
            shown(done)
            if on_rows is not None:
                on_rows(done)

        for chunk in iter_chunks(table, chunk_rows, text=as_text(out)):
            if run.rows == 0:
                check_columns(chunk, stage.inputs)
                check_added_columns(chunk.columns, stage.added_columns())
            res, reused = _chunk(chunk.reset_index(drop=True), stage, jr, update, run.rows)
            _tally(res, stage, run.rows, run)
            if on_chunk is not None:
                on_chunk(res)
            w.write(res)
            run.rows += len(chunk)
            run.reused += reused
        if run.rows == 0:
            raise InputError(f"table {str(table)!r} has no rows")
    discard_journal(journal)  # the output is complete
    run.summary = stage.summary()
    return run
