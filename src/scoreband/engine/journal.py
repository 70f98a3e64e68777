"""The row engine's resume journal: finished rows appended and flushed as they finish,
under a key made of everything that produced them (:func:`row_key`), reused after a crash."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from scoreband.errors import InputError
from scoreband.files import check_output, record_written, remove_output

__all__ = ["RowJournal", "row_key", "discard_journal"]


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
    crash is ignored (that row is done again). ``path=None`` keeps nothing. The file is
    created when the first row is finished, not before: a command refused before any row
    is done (a missing column, a bad option found on the first chunk) leaves no journal."""

    def __init__(self, path: Path | None):
        self.done: dict[str, dict] = {}
        self._f = None
        self._path = None if path is None else check_output(path, what="journal")
        self._torn = False
        if self._path is not None and self._path.exists():
            data = self._path.read_bytes()
            self._torn = bool(data) and not data.endswith(b"\n")
            self.done = _records(data, self._path)

    @property
    def active(self) -> bool:
        """Whether finished rows are kept (the journal has a path)."""
        return self._path is not None

    def get(self, key: str) -> dict | None:
        return self.done.get(key)

    def add(self, rec: dict) -> None:
        if self._path is None:
            return
        if self._f is None:
            self._open()
        self._f.write(json.dumps(rec) + "\n")
        self._f.flush()

    def _open(self) -> None:
        """Open (create) the file for appending, through the output policy again (the path
        may have changed since the run began)."""
        check_output(self._path, what="journal")
        self._f = open(self._path, "a", encoding="utf-8")
        record_written(self._path)
        if self._torn:  # a crash cut the last line: the next record starts on a line of its own
            self._f.write("\n")
            self._torn = False

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self) -> RowJournal:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _records(data: bytes, path: Path) -> dict[str, dict]:
    """The records of a journal's bytes by key. Every line of a journal scoreband wrote is a
    record (a JSON object with a ``key``) or one torn by a crash (the start of a JSON
    object that does not parse; a resumed run goes on on the next line). A file with any
    other line is not a journal: refused, so that it is never appended to or deleted."""
    done: dict[str, dict] = {}
    for k, line in enumerate(data.decode("utf-8", "replace").splitlines()):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            if line.startswith('{"'):
                continue  # torn by a crash: that row is done again
            rec = None
        if not isinstance(rec, dict) or "key" not in rec:
            raise InputError(
                f"journal {str(path)!r} exists and is not a scoreband journal (line "
                f"{k + 1} is not a journaled row); scoreband keeps a run's finished "
                "rows there and deletes it at the end, so it never uses a file of "
                "yours: move it away or choose another output path")
        done[str(rec["key"])] = rec
    return done


def discard_journal(path: Path | None) -> bool:
    """Remove a finished run's journal through the output policy (never an input of the
    command, never a file that is not a scoreband journal); returns whether it was."""
    if path is None:
        return False
    path = Path(path)
    try:
        data = path.read_bytes()
        _records(data, path)
    except (OSError, InputError):
        return False
    return remove_output(path, mine=True)
