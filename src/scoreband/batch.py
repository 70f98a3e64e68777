"""Row-by-row batch jobs (judging, round trips, scoring): table cells, image paths, the
resume journal and the progress bar, shared so every job behaves the same."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pandas as pd

from scoreband.files import check_output
from scoreband.progress import row_progress  # noqa: F401  (re-exported)

__all__ = ["cell_text", "resolve_path", "RowJournal", "row_progress", "row_key"]


def cell_text(df: pd.DataFrame, col: str, i: int) -> str | None:
    """The cell as text, or None when it is empty (None, NaN or blank)."""
    v = df[col].iloc[i]
    if v is None or (isinstance(v, float) and math.isnan(v)) or not str(v).strip():
        return None
    return str(v)


def resolve_path(value, base_dir=None) -> Path:
    """A relative path is looked up from the working directory, then from ``base_dir``
    (the table's folder)."""
    p = Path(str(value))
    try:
        exists = p.exists()
    except OSError:  # a name the file system cannot hold (too long ...): the reader reports it
        return p
    if not p.is_absolute() and not exists and base_dir is not None:
        p = Path(base_dir) / p
    return p


def row_key(*parts) -> str:
    """A journal key: SHA-256 over the parts (each as text, NUL-terminated), so a row is
    reused only when everything that made it is the same."""
    h = hashlib.sha256()
    for part in parts:
        h.update(str(part).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


class RowJournal:
    """Finished rows, one JSON object per line with a ``key``, appended and flushed as they
    finish. Reopened after an interruption, the rows it holds are reused; a line torn by a
    crash is ignored (that row is done again). ``path=None`` keeps nothing."""

    def __init__(self, path: Path | None):
        self.done: dict[str, dict] = {}
        self._f = None
        if path is None:
            return
        path = check_output(path, what="journal")
        torn = False
        if path.exists():
            data = path.read_bytes()
            torn = bool(data) and not data.endswith(b"\n")
            for line in data.decode("utf-8", "replace").splitlines():
                try:
                    rec = json.loads(line)
                    self.done[rec["key"]] = rec
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue
        self._f = open(path, "a", encoding="utf-8")
        if torn:  # a crash cut the last line: the next record starts on a line of its own
            self._f.write("\n")
            self._f.flush()

    @property
    def active(self) -> bool:
        """Whether finished rows are kept (a journal file is open)."""
        return self._f is not None

    def get(self, key: str) -> dict | None:
        return self.done.get(key)

    def add(self, rec: dict) -> None:
        if self._f is not None:
            self._f.write(json.dumps(rec) + "\n")
            self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self) -> RowJournal:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
