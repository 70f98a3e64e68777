"""Tables in and out: read whole (:func:`read_table`) and written atomically
(:func:`write_table`) in the format the path names, looked up in the format registry
(:mod:`scoreband.formats`: CSV, TSV, JSONL, JSON, Parquet, Hugging Face datasets folders and
the read-only evaluation logs); the chunked readers and writers are in
:mod:`scoreband.engine.stream`. This module also holds the helpers the formats share (text
CSV options, JSON values with their literal, Arrow tables). Which columns mean what is
:mod:`scoreband.columns`' concern."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from scoreband.errors import InputError
from scoreband.files import atomic_path, check_readable
from scoreband.formats.common import (  # noqa: F401  (the helpers the formats share)
    NA_TEXT,
    TEXT_CSV,
    JsonNumber,
    arrow_table,
    check_unique_columns,
    jsonl_records,
    read_jsonl,
)

__all__ = ["read_table", "write_table", "table_columns", "jsonl_records", "read_jsonl",  # noqa: F822
           "check_unique_columns", "arrow_table", "SUPPORTED_FORMATS", "JsonNumber",
           "TEXT_CSV", "NA_TEXT"]

# --------------------------------------------------------------------------- reading
def read_table(path: str | Path, columns: Sequence[str] | None = None, *,
               text: bool = False) -> pd.DataFrame:
    """Read a table by its extension; a directory is read as a Hugging Face ``datasets``
    directory (``save_to_disk`` output: ``*.arrow`` files) or a folder of Parquet files; a
    ``DatasetDict`` folder (several splits) is refused, naming them: give one split's
    folder. ``columns``: only these (CSV / TSV / Parquet skip the others while reading;
    other formats are read whole and then cut). ``text``: every CSV / TSV cell as the text
    it is and every JSON value as the JSON value it is (what the commands that write the
    table back do, so that it comes back as it went in; see
    :func:`scoreband.engine.stream.iter_chunks`). A UTF-8 byte order mark is skipped.

    Raises :class:`InputError` for a missing file, an unknown format or an empty table.
    """
    from scoreband.formats import resolve, split_address

    check_readable(split_address(path)[1], "table", folder_ok=True)
    fmt, p = resolve(path)
    try:
        df = fmt.read(p, columns, text=text)
    except InputError:
        raise
    except UnicodeDecodeError as e:
        raise InputError(f"could not read table {str(p)!r}: byte {e.start} is not UTF-8 "
                         "text; save the table as UTF-8") from None
    except Exception as e:  # parser errors from pandas/pyarrow: name the file
        raise InputError(f"could not read table {str(p)!r}: {type(e).__name__}: {e}") from None
    check_unique_columns(df.columns, p)
    if len(df) == 0:
        raise InputError(f"table {str(p)!r} has no rows")
    if columns is not None and list(df.columns) != list(columns):
        df = df[[c for c in columns if c in df.columns]]
    return df


def table_columns(path) -> list[str] | None:
    """The column names of a table read from its header or schema alone (CSV / TSV /
    Parquet: :meth:`scoreband.formats.TableFormat.columns`); None for formats that need
    reading whole (JSON, JSONL, dataset folders, logs) and for paths read_table refuses."""
    from scoreband.formats import resolve

    try:
        fmt, p = resolve(path)
    except InputError:  # read_table says what is wrong with the path
        return None
    try:
        return fmt.columns(p) if p.is_file() else None
    except InputError:
        raise
    except Exception:  # noqa: BLE001 - read_table reports what is wrong with the file
        return None


# --------------------------------------------------------------------------- writing
def write_table(df: pd.DataFrame, path) -> Path:
    """Write a table atomically in the format its extension (or a ``NAME:`` prefix) names;
    a read-only format (an evaluation log) is refused."""
    from scoreband.formats import resolve

    fmt, path = resolve(path, write=True)
    with atomic_path(path) as tmp:
        fmt.write(df, tmp)
    return path


def __getattr__(name: str):
    if name == "SUPPORTED_FORMATS":  # from the registry (imported late: it imports this module)
        from scoreband.formats import suffixes

        return suffixes(writable=True)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
