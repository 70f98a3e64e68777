"""Provenance records: what produced an output table or report.

Every command that writes a table also writes ``OUT.provenance.json`` beside it: the
components (backbone / judge / generator / encoder / calibrator, each with its own
``describe()``: weights hash, preprocessing, precision), the command line, the package
versions and the time. A calibrator file is recorded by its sha256.
"""

from __future__ import annotations

import hashlib
import platform
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from scoreband.checksums import file_sha256
from scoreband.json_io import write_json

__all__ = ["provenance", "write_provenance", "file_sha256", "package_versions",
           "weights_fingerprint", "plain_settings"]

_PACKAGES = ("scoreband", "numpy", "scipy", "scikit-learn", "pandas", "torch", "transformers",
             "diffusers", "tokenizers", "sentencepiece", "open_clip_torch", "pycocoevalcap")


def weights_fingerprint(source) -> str:
    """First 16 hex digits of a sha256 over a model's weights: every ``*.safetensors`` /
    ``*.bin`` file of a folder (sorted), or the file itself; a hub id (nothing local) is
    fingerprinted by its name."""
    p = Path(str(source))
    h = hashlib.sha256()
    files = (sorted(p.glob("*.safetensors")) + sorted(p.glob("*.bin")) if p.is_dir()
             else [p] if p.is_file() else [])
    for f in files:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    if not files:
        h.update(str(source).encode())
    return h.hexdigest()[:16]


def plain_settings(v):
    """Processor settings (SizeDict, enums ...) as JSON values."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if hasattr(v, "items"):
        return {str(k): plain_settings(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [plain_settings(x) for x in v]
    if hasattr(v, "value"):
        return plain_settings(v.value)
    try:
        return {k: plain_settings(x) for k, x in vars(v).items() if x is not None}
    except TypeError:
        return str(v)


def package_versions() -> dict:
    """Installed versions of the packages that can change a result (None: not installed)."""
    out = {}
    for p in _PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = None
    return out


def provenance(components: dict | None = None, *, files: dict | None = None) -> dict:
    """A provenance record; ``files`` maps a role (e.g. "calibrator") to a path to hash."""
    return {
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": [_redact(a) for a in sys.argv],  # no credentials from a URL or a key
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": package_versions(),
        "components": components or {},
        "files": {k: {"path": str(v), "sha256": file_sha256(v)}
                  for k, v in (files or {}).items() if v is not None and Path(v).is_file()},
    }


def write_provenance(out_path, components: dict | None = None, *,
                     files: dict | None = None) -> Path:
    """Write ``OUT.provenance.json`` beside ``out_path`` (atomically); returns its path."""
    p = Path(str(out_path) + ".provenance.json")
    write_json(p, provenance(components, files=files))
    return p


def _redact(text: str) -> str:
    from scoreband.http import redact  # lazy: httpx is not needed to record a command

    return redact(text)
