"""Model sources: where a ``hf:`` address (a hub id or a local folder) points, checked
before ``from_pretrained`` would spend minutes retrying the hub for a missing folder."""

from __future__ import annotations

from pathlib import Path

from scoreband.errors import InputError

__all__ = ["model_source"]


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
