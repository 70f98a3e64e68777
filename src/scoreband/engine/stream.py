"""Tables in chunks: read a chunk of rows at a time (CSV / TSV / JSONL / Parquet natively:
pandas' chunked readers, pyarrow's record batches; any other registered format read whole and
cut) and write the result as it comes (CSV appended, Parquet row groups), into a temporary
file renamed over the output at the end, so a crash never leaves a half-written table under
the output's name. What each format does is its object in :mod:`scoreband.formats`."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from scoreband.errors import InputError
from scoreband.files import (
    check_output,
    check_readable,
    output_errors,
    output_mode,
    record_written,
    remove_stale_temps,
    temp_path,
    track_temp,
    untrack_temp,
)
from scoreband.formats import resolve, suffixes

__all__ = ["iter_chunks", "ChunkWriter", "STREAMABLE", "TEXT_FORMATS", "as_text",
           "table_rows"]

#: formats read and written chunk by chunk (JSON arrays and dataset folders are read whole):
#: the suffixes of the registry's streamable formats
STREAMABLE = suffixes(streamable=True)

#: the text formats: a table written into one keeps its cells as they were read
TEXT_FORMATS = suffixes(text=True)


def as_text(out) -> bool:
    """Whether a row command writing ``out`` reads its input's cells as text (CSV / TSV)
    and JSON values as they are: so for a text output, which then holds every input cell
    byte for byte; a Parquet output keeps the types pandas infers, as columns of numbers
    are better stored as numbers there. The output's format is the registry's
    (:attr:`scoreband.formats.TableFormat.text`); False for a path it does not know."""
    try:
        return resolve(out, write=True)[0].text
    except InputError:
        return False


def iter_chunks(path, chunk_rows: int = 100_000, columns=None, *,
                text: bool = True) -> Iterator[pd.DataFrame]:
    """The table at ``path`` as DataFrames of at most ``chunk_rows`` rows (``columns``: only
    those, where the format can skip the others). A streamable format
    (:data:`STREAMABLE`) is read a chunk at a time; any other format the registry knows
    (a JSON array, an evaluation log) is read whole and cut.

    ``text`` (the row commands' reading): a CSV / TSV cell is kept as the text it is
    (``00017``, ``NA``, ``FALSE`` and an empty cell stay exactly that, so they are written
    back byte for byte) and a JSON Lines value as the JSON value it is (an integer column
    with nulls stays integers, a number keeps its literal); the columns a stage needs are
    parsed as numbers where it reads them (:mod:`scoreband.columns`). A UTF-8 byte order
    mark at the start of the file is skipped."""
    from scoreband.formats import split_address

    check_readable(split_address(path)[1], "table")
    fmt, p = resolve(path)
    try:
        yield from fmt.chunks(p, chunk_rows, columns, text=text)
    except InputError:
        raise
    except Exception as e:  # parser errors from pandas / pyarrow: name the file
        raise InputError(f"could not read table {str(p)!r}: {type(e).__name__}: {e}") from None


def table_rows(path, max_bytes: int = 2 << 30) -> int | None:
    """The number of rows of a table, for progress (:meth:`TableFormat.rows`: Parquet from
    its metadata, JSONL by its lines, CSV / TSV by a pass of the csv module, quoted line
    breaks counted right); None when unknown (a text table over ``max_bytes``, a format
    that must be read whole)."""
    try:
        fmt, p = resolve(path)
        return fmt.rows(p, max_bytes)
    except (OSError, ValueError, csv.Error, InputError):
        return None


class ChunkWriter:
    """Write DataFrames one after another as one table; ``close()`` renames the temporary
    file over ``path`` (``abort()`` removes it). Usable as a context manager."""

    def __init__(self, path):
        fmt, self.path = resolve(path, write=True)
        self.suffix = self.path.suffix.lower()
        if not fmt.streamable:
            raise InputError(f"cannot stream into {self.path.name!r}; streamable formats: "
                             f"{', '.join(STREAMABLE)}")
        self.format = fmt
        check_output(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(self.path)
        self.tmp = temp_path(self.path)
        track_temp(self.tmp)  # removed on SIGTERM / SIGINT / SIGHUP too
        # created now, with the umask (O_EXCL: never someone else's file)
        with output_errors(self.path, self.tmp):
            os.close(os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        self._sink = fmt.sink(self.tmp)
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
        with output_errors(self.path, self.tmp):
            self._sink.write(df)
        self.rows += len(df)

    def close(self) -> Path:
        with output_errors(self.path, self.tmp):
            self._sink.close()
        if self.columns is None:  # write() never called
            self.abort()
            raise InputError("nothing was written: the table has no rows")
        check_output(self.path)
        record_written(self.path)  # listed first: a concurrent run that sees it finds it
        with output_errors(self.path, self.tmp):
            os.chmod(self.tmp, output_mode(self.path))  # open()'s mode, not the temp's
            os.replace(self.tmp, self.path)
        untrack_temp(self.tmp)
        return self.path

    def abort(self) -> None:
        self._sink.abort()
        self.tmp.unlink(missing_ok=True)
        untrack_temp(self.tmp)

    def __enter__(self) -> ChunkWriter:
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            try:
                self.close()
            except BaseException:
                self.abort()  # a failed close leaves no temporary file
                raise
        else:
            self.abort()

