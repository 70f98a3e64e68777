"""The helpers the table formats share (text CSV options, JSON values with their
literal, Arrow tables, folder readers): here so that every format module and
:mod:`scoreband.tables` use one copy, and no format imports :mod:`scoreband.tables` (which
looks formats up)."""

from __future__ import annotations

import csv
import json
import re
import warnings
from io import StringIO
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.errors import InputError
from scoreband.json_io import to_jsonable

#: pandas' CSV options that keep every cell as the text it is: ``00017`` stays ``00017``,
#: ``NA`` / ``nan`` / ``FALSE`` stay those words, an empty cell stays empty
TEXT_CSV = {"dtype": str, "keep_default_na": False, "na_filter": False}

#: the spellings of a missing value in a text cell (pandas' defaults): a column read as
#: numbers treats them as empty (:mod:`scoreband.columns`); passed through, they are kept
NA_TEXT = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan",
                     "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a",
                     "nan", "null"})


class JsonNumber(float):
    """A JSON number read from a table, with its literal (``1.50``, ``1e5``): a float to
    every computation, written back exactly as it was read."""

    __slots__ = ("text",)

    def __new__(cls, text: str):
        obj = super().__new__(cls, text)
        obj.text = text
        return obj

    def __reduce__(self):  # pickled (Ray) with its literal
        return (JsonNumber, (self.text,))


def _check_header(p: Path, sep: str) -> dict:
    """Two guards pandas lacks, for CSV / TSV: duplicated column names are refused (pandas
    renames the second one and the first would be used silently), and a file whose lines end
    in a plain newline keeps a bare carriage return inside a cell as text (pandas would start
    a new row there). Returns the reader options that second guard needs."""
    with open(p, newline="", encoding="utf-8", errors="replace") as f:
        head = f.read(1 << 20)
    header = next(csv.reader([head.split("\n", 1)[0].rstrip("\r")], delimiter=sep), [])
    check_unique_columns(header, p)
    return {"lineterminator": "\n"} if "\r" in head and "\r\n" not in head else {}


def jsonl_records(lines, path, first_line: int = 1, *, text: bool = False) -> pd.DataFrame:
    """JSON Lines as a table, a line at a time: a line that is not a JSON object (torn by a
    crash, hand-edited) is reported (a warning naming the file and line) and skipped; the
    other rows are read. Numbers keep their full precision. ``text``: every column keeps
    its JSON values as they are (no type inference: integers with nulls stay integers,
    numbers keep their literal, :class:`JsonNumber`)."""
    decode = json.JSONDecoder(parse_float=JsonNumber).decode if text else json.loads
    recs, bad = [], []
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = decode(line)
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
    if text:
        return _object_frame(recs)
    df = pd.DataFrame.from_records(recs)
    if recs:
        names = list(dict.fromkeys(k for r in recs for k in r))
        df = df.reindex(columns=names)
    return df


def _object_frame(recs: list[dict]) -> pd.DataFrame:
    """Records as a table of object columns holding each value as parsed (a key a record
    lacks is None)."""
    names = list(dict.fromkeys(k for r in recs for k in r))
    cols = {}
    for c in names:
        a = np.empty(len(recs), dtype=object)
        a[:] = [r.get(c) for r in recs]
        cols[c] = a
    return pd.DataFrame(cols, index=pd.RangeIndex(len(recs)), columns=names)


def count_lines(p: Path, max_bytes: int = 2 << 30) -> int | None:
    """The non-blank lines of a one-record-a-line file (a JSON Lines table, a harness's
    samples, a batch of answers), for progress; None above ``max_bytes``."""
    if p.stat().st_size > max_bytes:
        return None
    with open(p, encoding="utf-8-sig", newline="") as f:
        return sum(1 for line in f if line.strip())


def read_jsonl(p: Path, *, text: bool = False) -> pd.DataFrame:
    with open(p, encoding="utf-8-sig") as f:  # a byte order mark is not the first row's
        return jsonl_records(f, p, text=text)


def _read_json_table(p: Path, text: bool) -> pd.DataFrame:
    """A ``.json`` table: an array of records (as scoreband writes it) read value by value
    (``text``: :func:`_object_frame`, numbers with their literal); any other layout
    pandas reads (``{column: {row: value}}`` ...) through pandas."""
    raw = p.read_text(encoding="utf-8-sig")
    if text:
        doc = json.JSONDecoder(parse_float=JsonNumber).decode(raw)
        if isinstance(doc, list) and all(isinstance(r, dict) for r in doc):
            return _object_frame(doc)
    return pd.read_json(StringIO(raw), precise_float=True)


class Cut(str):
    """A JSON value that starts in a file's sniffed head but ends beyond it: its first
    character (``{``, ``[``, ``"`` ...), so a sniffer can tell an object from a list."""


_WS = re.compile(r"\s*")


def top_level(head: str) -> dict | None:
    """The top-level keys of the JSON object a file's first bytes start, in order, each with
    its value where the head holds it whole and a :class:`Cut` where it runs past the head
    (so a sniffer decides by a log's real structure - ``"version": 2`` beside an ``"eval"``
    object - however long the file). None when the head does not start a JSON object."""
    s = head.lstrip("\ufeff \t\r\n")
    if not s.startswith("{"):
        return None
    dec, out, i = json.JSONDecoder(), {}, 1
    while True:
        i = _WS.match(s, i).end()
        if i >= len(s) or s[i] == "}":
            return out
        if s[i] == ",":
            i += 1
            continue
        try:
            key, i = dec.raw_decode(s, i)
        except ValueError:
            return out
        i = _WS.match(s, i).end()
        if not isinstance(key, str) or (i < len(s) and s[i] != ":"):
            return None  # not a JSON object
        i = _WS.match(s, i + 1).end()
        if i >= len(s):
            return out
        try:
            out[key], i = dec.raw_decode(s, i)
        except (ValueError, RecursionError):
            out[key] = Cut(s[i])
            return out


def json_lines(head: str, most: int = 20) -> list:
    """The first (at most ``most``) non-blank lines of a JSON Lines head, parsed (a line
    that is not JSON is None; a last line that does not parse is left out: the head may
    cut it)."""
    lines = [ln for ln in head.splitlines() if ln.strip()][:most]
    out = []
    for k, line in enumerate(lines):
        try:
            out.append(json.loads(line))
        except (ValueError, RecursionError):
            if k < len(lines) - 1:
                out.append(None)
    return out


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


def _read_delimited(p: Path, sep: str, columns=None, text: bool = False) -> pd.DataFrame:
    """CSV / TSV with the guards of :func:`_check_header` (``text``: :data:`TEXT_CSV`)."""
    opts = TEXT_CSV if text else {"keep_default_na": True}
    return pd.read_csv(p, sep=sep, usecols=columns, **opts, **_check_header(p, sep))


def _csv_quoting(df: pd.DataFrame) -> int:
    """Quote every text cell when one holds a carriage return (the csv module quotes only
    cells with the line terminator, so a bare CR would split the row when read back)."""
    for c in df.columns:
        col = df[c]
        if col.dtype != object and not isinstance(col.dtype, pd.StringDtype):
            continue
        try:  # vectorized; a column of mixed values falls back to a cell-by-cell test
            hit = col.str.contains("\r", regex=False).fillna(False).to_numpy(dtype=bool).any()
        except (AttributeError, TypeError, ValueError):
            hit = col.map(lambda v: isinstance(v, str) and "\r" in v).any()
        if hit:
            return csv.QUOTE_NONNUMERIC
    return csv.QUOTE_MINIMAL


def _json_value(v) -> str:
    """One value as JSON text: a :class:`JsonNumber` as its literal, strings unescaped
    beyond what JSON needs, NaN / missing as null, numpy scalars unwrapped."""
    t = type(v)
    if t is str:
        return json.dumps(v, ensure_ascii=False)
    if t is JsonNumber:
        return v.text
    if v is None or v is pd.NA or v is pd.NaT:
        return "null"
    if t is bool or t is np.bool_:
        return "true" if v else "false"
    if t is int or isinstance(v, np.integer):
        return str(int(v))
    return json.dumps(to_jsonable(v), allow_nan=False, ensure_ascii=False, default=str)


def _json_column(values: np.ndarray) -> list[str]:
    if values.dtype.kind == "f":  # a computed column: repr, NaN as null, +/-inf as text
        return [("null" if x != x else f'"{x}"' if x in (np.inf, -np.inf) else repr(x))
                for x in values.tolist()]
    if values.dtype.kind in "iu":
        return [str(x) for x in values.tolist()]
    if values.dtype.kind == "b":
        return ["true" if x else "false" for x in values.tolist()]
    return [_json_value(x) for x in values]


def _write_json_records(df: pd.DataFrame, path, lines: bool, append: bool = False) -> None:
    """JSON / JSONL with full float precision (pandas rounds to 10 digits by default and to
    15 at most); NaN and missing values as null; a value read from JSON is written as it
    was read (:class:`JsonNumber` keeps a number's literal). Encoded a column at a time."""
    keys = [json.dumps(str(c), ensure_ascii=False) + ": " for c in df.columns]
    cols = [_json_column(df.iloc[:, j].to_numpy()) for j in range(df.shape[1])]
    with open(path, "a" if append and lines else "w", encoding="utf-8") as f:
        if not lines:
            f.write("[")
        for i, row in enumerate(zip(*cols, strict=True) if cols else [()] * len(df)):
            rec = "{" + ", ".join(k + v for k, v in zip(keys, row, strict=True)) + "}"
            if lines:
                f.write(rec + "\n")
            else:
                f.write(("," if i else "") + rec)
        if not lines:
            f.write("]")


def _splits(p: Path) -> list[str]:
    """The splits of a Hugging Face ``DatasetDict`` folder with more than one (named by
    ``dataset_dict.json``, or several sub-folders each holding a saved dataset), else []."""
    names: list[str] = []
    try:
        doc = json.loads((p / "dataset_dict.json").read_text(encoding="utf-8"))
        names = [str(s) for s in doc.get("splits", [])] if isinstance(doc, dict) else []
    except (OSError, ValueError):
        pass
    if not names:
        names = sorted(d.name for d in p.iterdir() if d.is_dir()
                       and ((d / "dataset_info.json").is_file() or (d / "state.json").is_file())
                       and any(d.glob("*.arrow")))
    return names if len(names) > 1 else []  # one split: nothing is pooled


def _read_dir(p: Path) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    splits = _splits(p)
    if splits:
        raise InputError(
            f"{str(p)!r} is a Hugging Face DatasetDict with the splits "
            f"{', '.join(splits)}; scoreband reads one split at a time (pooling them would "
            f"mix train and test rows): give that split's folder, e.g. "
            f"{str(p / splits[0])!r}")
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
