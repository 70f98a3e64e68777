"""Parquet: read with pyarrow (only the columns asked for), in record batches, its row count
from the metadata; written in row groups under one schema that widens when a later chunk's
types differ (:class:`_ParquetSink`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from scoreband.formats.base import Sink, TableFormat
from scoreband.formats.common import arrow_table, check_unique_columns

__all__ = ["PARQUET", "unify_schemas", "cast_table"]


class _ParquetSink(Sink):
    """One schema for the whole file: a chunk whose types differ from the file's so far
    (a column empty in the first chunk and text later, integers then floats) widens
    the schema, and the row groups already written are rewritten in it (rare: only
    when a type changes)."""

    def __init__(self, fmt, path):
        super().__init__(fmt, path)
        self._writer = None
        self._schema = None

    def write(self, df: pd.DataFrame) -> None:
        import pyarrow.parquet as pq

        table = arrow_table(df)
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, table.schema)
            self._schema = table.schema
        if not table.schema.equals(self._schema):
            unified = unify_schemas(self._schema, table.schema)
            if not unified.equals(self._schema):
                self._writer.close()
                done = pq.read_table(self.path)
                self._writer = pq.ParquetWriter(self.path, unified)
                self._writer.write_table(cast_table(done, unified))
                self._schema = unified
            table = cast_table(table, self._schema)
        self._writer.write_table(table)
        self.rows += len(df)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class Parquet(TableFormat):
    name = "parquet"
    help = "Apache Parquet"
    suffixes = (".parquet", ".pq")
    streamable = True

    def read(self, path: Path, columns=None, *, text: bool = False) -> pd.DataFrame:
        return pd.read_parquet(path, columns=None if columns is None else list(columns))

    def chunks(self, path: Path, chunk_rows: int, columns=None, *,
               text: bool = True) -> Iterator[pd.DataFrame]:
        import pyarrow.parquet as pq

        # pre_buffer off: with it, pyarrow's reads run ahead of the consumer and the
        # peak memory grows with the file (400 MB at 10^7 rows against 130 MB without)
        f = pq.ParquetFile(path, pre_buffer=False)
        check_unique_columns(f.schema_arrow.names, path)
        for batch in f.iter_batches(batch_size=chunk_rows, columns=columns):
            yield batch.to_pandas()

    def rows(self, path: Path, max_bytes: int = 2 << 30) -> int | None:
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)

    def columns(self, path: Path) -> list[str] | None:
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)

    def write(self, df: pd.DataFrame, path: Path) -> None:
        import pyarrow.parquet as pq

        pq.write_table(arrow_table(df), path)

    def sink(self, path: Path) -> Sink:
        return _ParquetSink(self, path)


def unify_schemas(a, b):
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


def cast_table(table, schema):
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


PARQUET = Parquet()
