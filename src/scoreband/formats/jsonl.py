"""JSON Lines: one JSON object a line, read a line at a time (a line that is not an object is
reported and skipped: :func:`scoreband.tables.jsonl_records`), written with every value as it
was read (:class:`scoreband.tables.JsonNumber` keeps a number's literal), appended chunk by
chunk."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import pandas as pd

from scoreband.formats.base import Sink, TableFormat
from scoreband.formats.common import (
    _write_json_records,
    count_lines,
    jsonl_records,
    read_jsonl,
)

__all__ = ["JSONL", "JsonLines"]


class _JsonlSink(Sink):
    def write(self, df: pd.DataFrame) -> None:
        _write_json_records(df, self.path, lines=True, append=self.rows > 0)
        self.rows += len(df)


class JsonLines(TableFormat):
    name = "jsonl"
    help = "JSON Lines, one object a line"
    suffixes = (".jsonl", ".ndjson")
    text = True
    streamable = True

    def read(self, path: Path, columns=None, *, text: bool = False) -> pd.DataFrame:
        return read_jsonl(path, text=text)

    def chunks(self, path: Path, chunk_rows: int, columns=None, *,
               text: bool = True) -> Iterator[pd.DataFrame]:
        with open(path, encoding="utf-8-sig") as f:  # a byte order mark is not a row's
            line = 1
            while True:
                lines = list(islice(f, chunk_rows))
                if not lines:
                    return
                df = jsonl_records(lines, path, first_line=line, text=text)
                line += len(lines)
                if len(df):
                    yield df

    def rows(self, path: Path, max_bytes: int = 2 << 30) -> int | None:
        return count_lines(path, max_bytes)

    def write(self, df: pd.DataFrame, path: Path) -> None:
        _write_json_records(df, path, lines=True)

    def sink(self, path: Path) -> Sink:
        return _JsonlSink(self, path)


JSONL = JsonLines()
