"""Content hashes: the SHA-256 of a file, and a folder's ``SHA256SUMS`` (written with a
trained model, checked before it is loaded)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from scoreband.errors import InputError
from scoreband.files import atomic_write_text

__all__ = ["file_sha256", "SUMS_FILE", "write_checksums", "verify_checksums"]


def file_sha256(path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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
