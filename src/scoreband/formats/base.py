"""What a table format is: :class:`TableFormat` (read whole, read in chunks, count rows,
list columns, write whole, write in chunks, whether it is a text format) and
:class:`ReadOnlyFormat` for files made by other tools (evaluation logs), which scoreband
reads and never writes. Kept apart from the registry (:mod:`scoreband.formats`) so that the
format modules import it without a cycle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from scoreband.errors import InputError

__all__ = ["TableFormat", "ReadOnlyFormat", "Sink"]



#: the registry's lookup of a suffix's plain table format (``scoreband.formats.plain_format``),
#: registered by the registry when it loads: this module sits below the registry and never
#: imports it (no import cycle)
PLAIN_LOOKUP: list = []

class Sink:
    """A table written chunk after chunk into one (temporary) file: ``write(df)`` then
    ``close()``; ``abort()`` closes without finishing (the caller removes the file)."""

    def __init__(self, fmt: TableFormat, path: Path):
        self.fmt, self.path, self.rows = fmt, Path(path), 0

    def write(self, df: pd.DataFrame) -> None:  # pragma: no cover - every format overrides
        raise NotImplementedError

    def close(self) -> None:
        pass

    def abort(self) -> None:
        self.close()


class TableFormat:
    """One table format. Subclasses set the class attributes and implement :meth:`read`;
    the other methods have defaults that hold for any format (chunks cut from the whole
    table, no row count, no header-only column list, no chunked writing)."""

    #: the name a user writes before a path (``csv:table.txt``) and the errors show
    name: str = ""
    #: one line for listings
    help: str = ""
    #: the file suffixes (lower case, with the dot) that name this format
    suffixes: tuple[str, ...] = ()
    #: a text format: a table written into one keeps its cells as they were read
    #: (``text=True`` reading, see :func:`scoreband.tables.read_table`)
    text: bool = False
    #: read and written chunk by chunk (the others are read whole, then cut)
    streamable: bool = False
    #: a folder rather than a file
    folder: bool = False
    #: scoreband may write it
    writable: bool = True
    #: this format shares a suffix with others and claims a file by its content
    #: (:meth:`sniff`); the format without it is the suffix's default
    sniffs: bool = False

    def __repr__(self) -> str:
        return f"<table format {self.name}>"

    # ------------------------------------------------------------------ reading
    def read(self, path: Path, columns=None, *, text: bool = False) -> pd.DataFrame:
        raise NotImplementedError

    def chunks(self, path: Path, chunk_rows: int, columns=None, *,
               text: bool = True) -> Iterator[pd.DataFrame]:
        """The table in DataFrames of at most ``chunk_rows`` rows; by default the whole
        table read once and cut (formats that can do better override it)."""
        df = self.read(path, columns, text=text)
        for start in range(0, len(df), max(1, int(chunk_rows))):
            yield df.iloc[start:start + chunk_rows].reset_index(drop=True)

    def rows(self, path: Path, max_bytes: int = 2 << 30) -> int | None:
        """The number of rows, for progress, without reading the table (None: unknown)."""
        return None

    def columns(self, path: Path) -> list[str] | None:
        """The column names from a header or schema alone (None: the table must be read)."""
        return None

    def configure(self, options: str) -> TableFormat:
        """This format with the options of a ``NAME@OPTIONS:PATH`` address."""
        raise InputError(f"the {self.name} format takes no options (got {self.name}@{options}:"
                         f"...); write {self.name}:PATH")

    def sniff(self, path: Path, head: str) -> bool:
        """Whether a file of a shared suffix is this format (``head``: its first bytes)."""
        return False

    # ------------------------------------------------------------------ writing
    def write(self, df: pd.DataFrame, path: Path) -> None:
        """Write ``df`` into ``path`` (a temporary file the caller renames)."""
        self.refuse_write(path)

    def sink(self, path: Path) -> Sink:
        """A :class:`Sink` writing chunk after chunk into ``path``."""
        if not self.writable:
            self.refuse_write(path)
        raise InputError(f"cannot stream into {Path(path).name!r}: the {self.name} format is "
                         "written whole")

    def refuse_write(self, path) -> None:
        raise InputError(f"cannot write {Path(path).name!r} as {self.name}: scoreband does "
                         "not write this format")


class ReadOnlyFormat(TableFormat):
    """A file another tool wrote (an evaluation log, a batch of answers): read into one row
    per item, never written, never modified. It shares its suffix with a plain table format
    and claims a file by the log's real structure (:meth:`sniff`); its "is this a log?"
    messages say how to read the file as a plain table instead (:meth:`not_this`)."""

    writable = False
    sniffs = True
    #: keys (top-level, or of a first record) that make a plain table look like this format
    #: at a glance: a table read plainly that has them all is told how to force this one
    markers: frozenset = frozenset()

    def refuse_write(self, path) -> None:
        raise InputError(
            f"cannot write {Path(path).name!r} as {self.name}: {self.help} files are read "
            "only (scoreband reads them where they are and never writes or changes one); "
            "write the output as .csv, .tsv, .jsonl, .json or .parquet")

    def plain_address(self, path) -> str:
        """``PLAIN:PATH``: ``path`` addressed as the plain table format of its suffix (a
        suffix without one, ``.eval``: examples)."""
        plain = PLAIN_LOOKUP[0](Path(path)) if PLAIN_LOOKUP else None
        return f"{plain.name}:{path}" if plain else f"e.g. csv:{path} or tsv:{path}"

    def not_this(self, path, why: str) -> InputError:
        """The error for a file read as this format that is not one: ``why``, and how to
        read the file as a plain table."""
        return InputError(f"{str(path)!r} was read as {self.help} ({why}); if it is a plain "
                          f"table, name its format: {self.plain_address(path)}")

    def unread(self, path, keys: dict) -> None:
        """Warn that the file's records hold keys this format does not read (``keys``: key ->
        the first line holding it): they would vanish silently otherwise."""
        import warnings

        shown = ", ".join(f"{k!r} (line {n})" for k, n in list(keys.items())[:8])
        warnings.warn(f"{str(path)!r} was read as {self.help}; its keys {shown} are not part "
                      f"of that format and are not read: to read the file as a plain table "
                      f"with every column, write {self.plain_address(path)}", stacklevel=3)
