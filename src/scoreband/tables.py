"""Table formats in and out: CSV, TSV, JSONL, JSON, Parquet and Hugging Face datasets
directories, read whole (:func:`read_table`) and written atomically (:func:`write_table`);
the chunked readers and writers are in :mod:`scoreband.engine.stream`. Which columns mean
what is :mod:`scoreband.columns`' concern."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from scoreband.errors import InputError
from scoreband.files import atomic_path, check_readable, to_jsonable

__all__ = ["read_table", "write_table", "table_columns", "jsonl_records", "read_jsonl",
           "check_unique_columns", "arrow_table", "SUPPORTED_FORMATS"]

SUPPORTED_FORMATS = (".csv", ".tsv", ".jsonl", ".ndjson", ".json", ".parquet", ".pq")


# --------------------------------------------------------------------------- reading
def read_table(path: str | Path, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Read a table by its extension; a directory is read as a Hugging Face ``datasets``
    directory (``save_to_disk`` output: ``*.arrow`` files) or a folder of Parquet files.
    ``columns``: only these (CSV / TSV / Parquet skip the others while reading; other
    formats are read whole and then cut).

    Raises :class:`InputError` for a missing file, an unknown format or an empty table.
    """
    p = check_readable(path, "table", folder_ok=True)
    try:
        if p.is_dir():
            df = _read_dir(p)
        else:
            suf = p.suffix.lower()
            if suf in (".csv", ".tsv"):
                df = _read_delimited(p, "," if suf == ".csv" else "\t", columns)
            elif suf in (".jsonl", ".ndjson"):
                df = read_jsonl(p)
            elif suf == ".json":
                df = pd.read_json(p, precise_float=True)
            elif suf in (".parquet", ".pq"):
                df = pd.read_parquet(p, columns=None if columns is None else list(columns))
            else:
                raise InputError(
                    f"cannot read {p.name!r}: unknown table format {suf!r}; use one of "
                    f"{', '.join(SUPPORTED_FORMATS)} or a Hugging Face datasets directory"
                )
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
    """The column names of a CSV / TSV / Parquet table, read from its header or schema
    alone; None for formats that need reading whole (JSON, JSONL, dataset folders)."""
    p = Path(path)
    suf = p.suffix.lower()
    try:
        if p.is_file() and suf in (".csv", ".tsv"):
            sep = "," if suf == ".csv" else "\t"
            return [str(c) for c in pd.read_csv(p, sep=sep, nrows=0,
                                                **_check_header(p, sep)).columns]
        if p.is_file() and suf in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            return list(pq.read_schema(p).names)
    except InputError:
        raise
    except Exception:  # noqa: BLE001 - read_table reports what is wrong with the file
        return None
    return None


def _check_header(p: Path, sep: str) -> dict:
    """Two guards pandas lacks, for CSV / TSV: duplicated column names are refused (pandas
    renames the second one and the first would be used silently), and a file whose lines end
    in a plain newline keeps a bare carriage return inside a cell as text (pandas would start
    a new row there). Returns the reader options that second guard needs."""
    import csv

    with open(p, newline="", encoding="utf-8", errors="replace") as f:
        head = f.read(1 << 20)
    header = next(csv.reader([head.split("\n", 1)[0].rstrip("\r")], delimiter=sep), [])
    check_unique_columns(header, p)
    return {"lineterminator": "\n"} if "\r" in head and "\r\n" not in head else {}


def jsonl_records(lines, path, first_line: int = 1) -> pd.DataFrame:
    """JSON Lines as a table, a line at a time: a line that is not a JSON object (torn by a
    crash, hand-edited) is reported (a warning naming the file and line) and skipped; the
    other rows are read. Numbers keep their full precision."""
    import json
    import warnings

    recs, bad = [], []
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            rec = None
        if not isinstance(rec, dict):
            bad.append(first_line + k)
            continue
        recs.append(rec)
    if bad:
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        warnings.warn(f"{path}: line(s) {', '.join(map(str, bad[:5]))}{more} are not JSON "
                      "objects; skipped", stacklevel=2)
    df = pd.DataFrame.from_records(recs)
    if recs:
        names = list(dict.fromkeys(k for r in recs for k in r))
        df = df.reindex(columns=names)
    return df


def read_jsonl(p: Path) -> pd.DataFrame:
    with open(p, encoding="utf-8") as f:
        return jsonl_records(f, p)


def check_unique_columns(columns, p) -> None:
    """Refuse a table with two columns of one name (every format: pandas would rename or
    keep both, and one of them would be used silently), naming them."""
    names = [str(c) for c in columns]
    dups = sorted({c for c in names if names.count(c) > 1})
    if dups:
        raise InputError(f"table {str(p)!r} has duplicated column names: "
                         f"{', '.join(map(repr, dups))}; rename them so each column is unique")


def arrow_table(df: pd.DataFrame):
    """``df`` as an Arrow table for Parquet. A text column that Arrow cannot type (integers
    beyond int64, mixed numbers and text) is written as text, exactly as it reads, instead
    of failing the whole write."""
    import pyarrow as pa

    try:
        return pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        pass
    fixed = df.copy()
    for c in fixed.columns:
        if fixed[c].dtype == object:
            try:
                pa.array(fixed[c], from_pandas=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                fixed[c] = fixed[c].map(lambda v: v if v is None or (isinstance(v, float)
                                                                     and v != v) else str(v))
    return pa.Table.from_pandas(fixed, preserve_index=False)


def _read_delimited(p: Path, sep: str, columns=None) -> pd.DataFrame:
    """CSV / TSV with the guards of :func:`_check_header`."""
    return pd.read_csv(p, sep=sep, keep_default_na=True, usecols=columns,
                       **_check_header(p, sep))


def _csv_quoting(df: pd.DataFrame) -> int:
    """Quote every text cell when one holds a carriage return (the csv module quotes only
    cells with the line terminator, so a bare CR would split the row when read back)."""
    import csv

    for c in df.columns:
        if pd.api.types.is_numeric_dtype(df[c]):
            continue
        if df[c].map(lambda v: isinstance(v, str) and "\r" in v).any():
            return csv.QUOTE_NONNUMERIC
    return csv.QUOTE_MINIMAL


def _write_json_records(df: pd.DataFrame, path, lines: bool, append: bool = False) -> None:
    """JSON / JSONL with full float precision (pandas rounds to 10 digits by default and to
    15 at most); NaN and missing values as null."""

    cols = [str(c) for c in df.columns]
    with open(path, "a" if append and lines else "w", encoding="utf-8") as f:
        if not lines:
            f.write("[")
        for i, row in enumerate(df.itertuples(index=False, name=None)):
            rec = json.dumps(to_jsonable(dict(zip(cols, row, strict=True))), allow_nan=False,
                             ensure_ascii=False, default=str)
            if lines:
                f.write(rec + "\n")
            else:
                f.write(("," if i else "") + rec)
        if not lines:
            f.write("]")


def _read_dir(p: Path) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrows = sorted(p.rglob("*.arrow"))
    if arrows:
        tables = []
        for f in arrows:
            with pa.memory_map(str(f)) as src:
                try:
                    tables.append(pa.ipc.open_stream(src).read_all())
                except pa.ArrowInvalid:
                    tables.append(pa.ipc.open_file(src).read_all())
        return pa.concat_tables(tables).to_pandas()
    parquets = sorted(p.rglob("*.parquet"))
    if parquets:
        return pd.concat([pq.read_table(f).to_pandas() for f in parquets], ignore_index=True)
    raise InputError(
        f"directory {str(p)!r} holds no *.arrow (Hugging Face datasets) or *.parquet files"
    )


# --------------------------------------------------------------------------- writing
def _write_parquet(df: pd.DataFrame, path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(arrow_table(df), path)


def write_table(df: pd.DataFrame, path) -> Path:
    """Write a table atomically in the format its extension names."""
    path = Path(path)
    suf = path.suffix.lower()
    writers = {
        ".csv": lambda t: df.to_csv(t, index=False, quoting=_csv_quoting(df)),
        ".tsv": lambda t: df.to_csv(t, sep="\t", index=False, quoting=_csv_quoting(df)),
        ".jsonl": lambda t: _write_json_records(df, t, lines=True),
        ".ndjson": lambda t: _write_json_records(df, t, lines=True),
        ".json": lambda t: _write_json_records(df, t, lines=False),
        ".parquet": lambda t: _write_parquet(df, t),
        ".pq": lambda t: _write_parquet(df, t),
    }
    if suf not in writers:
        raise InputError(f"cannot write {path.name!r}: unknown format {suf!r}; use one of "
                         f"{', '.join(SUPPORTED_FORMATS)}")
    with atomic_path(path) as tmp:
        writers[suf](tmp)
    return path
