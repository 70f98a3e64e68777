"""Files without tables: JSON (numpy-aware), atomic writes, content hashes.

Free of pandas, so the conformal core and calibrator files load fast.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from scoreband.errors import InputError

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text", "write_json",
           "to_jsonable", "file_sha256", "model_source"]


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; on success it is fsynced and renamed onto
    ``path``, on any error it is removed. A crash never leaves a half-written file.

    Every writer in scoreband (tables, JSON, weights, checkpoints) goes through this.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{str(path)!r} is a folder; give a file name to write (e.g. "
                         f"{str(path / 'out.csv')!r})")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; outputs follow the umask
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


def atomic_write_text(path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path, obj) -> None:
    """Write JSON atomically (NaN written as null)."""
    atomic_write_text(path, json.dumps(to_jsonable(obj), indent=2))


def to_jsonable(x):
    """Plain JSON types: numpy scalars/arrays unwrapped, NaN -> null, +/-inf -> "inf"/"-inf"."""
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return to_jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return None if math.isnan(f) else (str(f) if math.isinf(f) else f)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def file_sha256(path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def model_source(source: str, prefix: str = "hf:") -> str:
    """A model address for ``from_pretrained``: a hub id (``ORG/NAME``) or a local folder.

    Something that looks like a path (``/``, ``.``, ``~``, or more than one ``/``) must exist:
    otherwise transformers would spend minutes retrying the hub for it offline.
    """
    s = str(source)
    looks_local = s.startswith(("/", ".", "~")) or s.count("/") > 1 or "\\" in s
    if looks_local:
        p = Path(s).expanduser()
        if not p.exists():
            raise InputError(f"{prefix}{s}: no such folder (a hub id looks like ORG/NAME; a "
                             "local model is a folder written by save_pretrained)")
        return str(p)
    return s


SUMS_FILE = "SHA256SUMS"


def write_checksums(folder, names: list[str]) -> Path:
    """``folder/SHA256SUMS`` listing the SHA-256 of the named files (the format of
    ``sha256sum``, so ``sha256sum -c SHA256SUMS`` checks a folder by hand too)."""
    folder = Path(folder)
    lines = [f"{file_sha256(folder / n)}  {n}\n" for n in names if (folder / n).exists()]
    atomic_write_text(folder / SUMS_FILE, "".join(lines))
    return folder / SUMS_FILE


def verify_checksums(folder) -> None:
    """Refuse a folder whose files differ from its ``SHA256SUMS`` (an edited config, a
    replaced or damaged weights file), naming the file. A folder without the file (made
    by hand, or by an older scoreband) is not checked."""
    folder = Path(folder)
    sums = folder / SUMS_FILE
    if not sums.is_file():
        return
    for line in sums.read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        f = folder / name.strip()
        if not name.strip() or "/" in name or name.startswith("."):
            raise InputError(f"{sums}: malformed line {line[:80]!r}")
        if not f.is_file():
            raise InputError(f"model folder {str(folder)!r}: {name} is listed in {SUMS_FILE} "
                             "but missing; restore it or retrain the model")
        if file_sha256(f) != digest.strip():
            raise InputError(f"model folder {str(folder)!r}: {name} was changed after the "
                             f"model was written (its SHA-256 differs from {SUMS_FILE}); "
                             "restore the original file or retrain the model")
