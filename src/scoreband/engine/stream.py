"""Tables in chunks: read CSV / TSV / JSONL / Parquet a chunk of rows at a time (pandas'
chunked readers, pyarrow's record batches) and write the result as it comes (CSV appended,
Parquet row groups), into a temporary file renamed over the output at the end, so a crash
never leaves a half-written table under the output's name."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from scoreband.errors import InputError
from scoreband.files import (
    check_output,
    check_readable,
    record_written,
    remove_stale_temps,
    temp_path,
    track_temp,
    untrack_temp,
)
from scoreband.tables import (
    TEXT_CSV,
    _check_header,
    _csv_quoting,
    _write_json_records,
    arrow_table,
    check_unique_columns,
    jsonl_records,
)

__all__ = ["iter_chunks", "ChunkWriter", "STREAMABLE", "TEXT_FORMATS", "as_text",
           "table_rows"]

#: formats read and written chunk by chunk (JSON arrays and dataset folders are read whole)
STREAMABLE = (".csv", ".tsv", ".jsonl", ".ndjson", ".parquet", ".pq")

#: the text formats: a table written into one keeps its cells as they were read
TEXT_FORMATS = (".csv", ".tsv", ".jsonl", ".ndjson", ".json")


def as_text(out) -> bool:
    """Whether a row command writing ``out`` reads its input's cells as text (CSV / TSV)
    and JSON values as they are: so for a text output, which then holds every input cell
    byte for byte; a Parquet output keeps the types pandas infers, as columns of numbers
    are better stored as numbers there."""
    return Path(out).suffix.lower() in TEXT_FORMATS


def iter_chunks(path, chunk_rows: int = 100_000, columns=None, *,
                text: bool = True) -> Iterator[pd.DataFrame]:
    """The table at ``path`` as DataFrames of at most ``chunk_rows`` rows (``columns``: only
    those, where the format can skip the others).

    ``text`` (the row commands' reading): a CSV / TSV cell is kept as the text it is
    (``00017``, ``NA``, ``FALSE`` and an empty cell stay exactly that, so they are written
    back byte for byte) and a JSON Lines value as the JSON value it is (an integer column
    with nulls stays integers, a number keeps its literal); the columns a stage needs are
    parsed as numbers where it reads them (:mod:`scoreband.columns`). A UTF-8 byte order
    mark at the start of the file is skipped."""
    p = check_readable(path, "table")
    suf = p.suffix.lower()
    if suf not in STREAMABLE:
        raise InputError(f"cannot stream {p.name!r}; streamable formats: {', '.join(STREAMABLE)}")
    try:
        if suf in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            # pre_buffer off: with it, pyarrow's reads run ahead of the consumer and the
            # peak memory grows with the file (400 MB at 10^7 rows against 130 MB without)
            f = pq.ParquetFile(p, pre_buffer=False)
            check_unique_columns(f.schema_arrow.names, p)
            for batch in f.iter_batches(batch_size=chunk_rows, columns=columns):
                yield batch.to_pandas()
            return
        if suf in (".jsonl", ".ndjson"):
            yield from _jsonl_chunks(p, chunk_rows, text)
            return
        sep = "," if suf == ".csv" else "\t"
        kw = _check_header(p, sep)
        reader = pd.read_csv(p, sep=sep, chunksize=chunk_rows, usecols=columns, **kw,
                             **(TEXT_CSV if text else {}))
        with reader:
            yield from reader
    except InputError:
        raise
    except Exception as e:  # parser errors from pandas / pyarrow: name the file
        raise InputError(f"could not read table {str(p)!r}: {type(e).__name__}: {e}") from None


def _jsonl_chunks(p: Path, chunk_rows: int, text: bool = True) -> Iterator[pd.DataFrame]:
    """JSON Lines ``chunk_rows`` lines at a time (scoreband.tables.jsonl_records: a line that is
    not a JSON object is reported and skipped; a byte order mark is skipped)."""
    from itertools import islice

    with open(p, encoding="utf-8-sig") as f:
        line = 1
        while True:
            lines = list(islice(f, chunk_rows))
            if not lines:
                return
            df = jsonl_records(lines, p, first_line=line, text=text)
            line += len(lines)
            if len(df):
                yield df


def table_rows(path, max_bytes: int = 2 << 30) -> int | None:
    """The number of rows of a streamable table, for progress: Parquet from its metadata,
    JSONL by its lines, CSV / TSV by a pass of the csv module (quoted line breaks counted
    right); None when unknown (a text table over ``max_bytes``)."""
    import csv

    p = Path(path)
    suf = p.suffix.lower()
    try:
        if suf in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            return int(pq.ParquetFile(p).metadata.num_rows)
        if p.stat().st_size > max_bytes:
            return None
        with open(p, encoding="utf-8-sig", newline="") as f:
            if suf in (".jsonl", ".ndjson"):
                return sum(1 for line in f if line.strip())
            if suf in (".csv", ".tsv"):
                return max(0, sum(1 for _ in csv.reader(f, delimiter="," if suf == ".csv"
                                                        else "\t")) - 1)
    except (OSError, ValueError, csv.Error):
        return None
    return None


class ChunkWriter:
    """Write DataFrames one after another as one table; ``close()`` renames the temporary
    file over ``path`` (``abort()`` removes it). Usable as a context manager."""

    def __init__(self, path):
        self.path = Path(path)
        self.suffix = self.path.suffix.lower()
        if self.suffix not in STREAMABLE:
            raise InputError(f"cannot stream into {self.path.name!r}; streamable formats: "
                             f"{', '.join(STREAMABLE)}")
        check_output(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(self.path)
        self.tmp = temp_path(self.path)
        track_temp(self.tmp)  # removed on SIGTERM / SIGINT / SIGHUP too
        # created now, with the umask (O_EXCL: never someone else's file)
        os.close(os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        self._parquet = None
        self.rows = 0
        self.columns: list | None = None

    def write(self, df: pd.DataFrame) -> None:
        if self.columns is None:
            self.columns = list(df.columns)
        elif list(df.columns) != self.columns:  # e.g. a chunk of bad rows only: no band_group
            extra = [c for c in df.columns if c not in self.columns]
            if extra:
                raise InputError(f"chunk {self.rows}+ adds columns {extra} the first chunk "
                                 "did not have")
            df = df.reindex(columns=self.columns, fill_value="")
        if self.suffix in (".parquet", ".pq"):
            self._write_parquet(arrow_table(df))
        elif self.suffix in (".jsonl", ".ndjson"):
            _write_json_records(df, self.tmp, lines=True, append=self.rows > 0)
        else:
            df.to_csv(self.tmp, sep="," if self.suffix == ".csv" else "\t", index=False,
                      mode="a" if self.rows else "w", header=self.rows == 0,
                      quoting=_csv_quoting(df))
        self.rows += len(df)

    def _write_parquet(self, table) -> None:
        """One schema for the whole file: a chunk whose types differ from the file's so far
        (a column empty in the first chunk and text later, integers then floats) widens
        the schema, and the row groups already written are rewritten in it (rare: only
        when a type changes)."""
        import pyarrow.parquet as pq

        if self._parquet is None:
            self._parquet = pq.ParquetWriter(self.tmp, table.schema)
            self._schema = table.schema
        if not table.schema.equals(self._schema):
            unified = _unify(self._schema, table.schema)
            if not unified.equals(self._schema):
                self._parquet.close()
                done = pq.read_table(self.tmp)
                self._parquet = pq.ParquetWriter(self.tmp, unified)
                self._parquet.write_table(_cast(done, unified))
                self._schema = unified
            table = _cast(table, self._schema)
        self._parquet.write_table(table)

    def close(self) -> Path:
        if self._parquet is not None:
            self._parquet.close()
            self._parquet = None
        if self.columns is None:  # write() never called
            self.abort()
            raise InputError("nothing was written: the table has no rows")
        check_output(self.path)
        record_written(self.path)  # listed first: a concurrent run that sees it finds it
        os.replace(self.tmp, self.path)
        untrack_temp(self.tmp)
        return self.path

    def abort(self) -> None:
        if self._parquet is not None:
            self._parquet.close()
            self._parquet = None
        self.tmp.unlink(missing_ok=True)
        untrack_temp(self.tmp)

    def __enter__(self) -> ChunkWriter:
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _unify(a, b):
    """The schema both chunks fit: Arrow's permissive promotion (null -> any type, int ->
    float ...); a column whose types cannot be reconciled becomes text."""
    import pyarrow as pa

    fields = []
    for f in a:
        g = b.field(f.name) if f.name in b.names else f
        if f.type == g.type:
            fields.append(f)
            continue
        try:
            fields.append(pa.unify_schemas([pa.schema([f]), pa.schema([g])],
                                           promote_options="permissive").field(0))
        except (pa.ArrowInvalid, pa.ArrowTypeError, NotImplementedError):
            fields.append(pa.field(f.name, pa.string()))
    return pa.schema(fields)


def _cast(table, schema):
    """``table`` in ``schema``, columns that do not cast written as text."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = []
    for f in schema:
        col = table.column(f.name)
        try:
            cols.append(col.cast(f.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            cols.append(pc.cast(col, pa.string()).cast(f.type))
    return pa.table(cols, schema=schema)

