"""CSV and TSV: one format told apart by its separator (``,`` / tab). Read with pandas
behind the guards of :func:`scoreband.formats.common._check_header` (duplicated names refused, a bare
carriage return kept inside a cell); with ``text`` every cell is the text it is
(:data:`scoreband.tables.TEXT_CSV`); written with every text cell quoted when one holds a
carriage return, appended chunk by chunk."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from scoreband.formats.base import Sink, TableFormat
from scoreband.formats.common import TEXT_CSV, _check_header, _csv_quoting, _read_delimited

__all__ = ["Delimited", "CSV", "TSV"]


class _DelimitedSink(Sink):
    def write(self, df: pd.DataFrame) -> None:
        df.to_csv(self.path, sep=self.fmt.sep, index=False, mode="a" if self.rows else "w",
                  header=self.rows == 0, quoting=_csv_quoting(df))
        self.rows += len(df)


class Delimited(TableFormat):
    text = True
    streamable = True

    def __init__(self, name: str, sep: str, suffixes: tuple[str, ...], help: str):
        self.name, self.sep, self.suffixes, self.help = name, sep, suffixes, help

    def read(self, path: Path, columns=None, *, text: bool = False) -> pd.DataFrame:
        return _read_delimited(path, self.sep, columns, text)

    def chunks(self, path: Path, chunk_rows: int, columns=None, *,
               text: bool = True) -> Iterator[pd.DataFrame]:
        kw = _check_header(path, self.sep)
        reader = pd.read_csv(path, sep=self.sep, chunksize=chunk_rows, usecols=columns, **kw,
                             **(TEXT_CSV if text else {}))
        with reader:
            yield from reader

    def rows(self, path: Path, max_bytes: int = 2 << 30) -> int | None:
        """A pass of the csv module (quoted line breaks counted right)."""
        if path.stat().st_size > max_bytes:
            return None
        with open(path, encoding="utf-8-sig", newline="") as f:
            return max(0, sum(1 for _ in csv.reader(f, delimiter=self.sep)) - 1)

    def columns(self, path: Path) -> list[str] | None:
        return [str(c) for c in pd.read_csv(path, sep=self.sep, nrows=0,
                                            **_check_header(path, self.sep)).columns]

    def write(self, df: pd.DataFrame, path: Path) -> None:
        df.to_csv(path, sep=self.sep, index=False, quoting=_csv_quoting(df))

    def sink(self, path: Path) -> Sink:
        return _DelimitedSink(self, path)


CSV = Delimited("csv", ",", (".csv",), "comma-separated values")
TSV = Delimited("tsv", "\t", (".tsv",), "tab-separated values")
