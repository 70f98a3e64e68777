"""What a row job reads from a table's cells: a cell's text (None when empty) and an image
path, looked up from the working directory, then from the table's folder. Shared by every
row stage and the image decoder, so every command reads cells the same way."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

__all__ = ["cell_text", "resolve_path"]


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
