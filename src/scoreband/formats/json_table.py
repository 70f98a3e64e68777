"""A ``.json`` table: an array of records (as scoreband writes it), or any other layout pandas
reads (``{column: {row: value}}`` ...); read and written whole."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from scoreband.formats.base import TableFormat
from scoreband.formats.common import _read_json_table, _write_json_records

__all__ = ["JSON"]


class JsonTable(TableFormat):
    name = "json"
    help = "a JSON array of records"
    suffixes = (".json",)
    text = True

    def read(self, path: Path, columns=None, *, text: bool = False) -> pd.DataFrame:
        return _read_json_table(path, text)

    def write(self, df: pd.DataFrame, path: Path) -> None:
        _write_json_records(df, path, lines=False)


JSON = JsonTable()
