"""Tables and columns in one place for users: the table formats (:mod:`scoreband.tables`),
the column mapping and row validation (:mod:`scoreband.columns`) and the atomic writers
(:mod:`scoreband.files`). The library's own modules import from those three."""

from scoreband.columns import (
    ColumnSpec,
    Inputs,
    RowIds,
    expand_columns,
    load_inputs,
    needed_columns,
    parse_ratings,
)
from scoreband.files import atomic_path, atomic_write_bytes, atomic_write_text, write_json
from scoreband.tables import SUPPORTED_FORMATS, read_table, table_columns, write_table

__all__ = ["read_table", "write_table", "table_columns", "SUPPORTED_FORMATS", "ColumnSpec",
           "Inputs", "RowIds", "load_inputs", "parse_ratings", "expand_columns",
           "needed_columns", "atomic_write_text", "atomic_write_bytes", "atomic_path",
           "write_json"]
