"""What a row job reads from a table's cells: a cell's text (None when empty) and an image
path, looked up from the working directory, then from the table's folder. Shared by every
row stage and the image decoder, so every command reads cells the same way."""

from __future__ import annotations

import math

import pandas as pd

__all__ = ["cell_text"]


def cell_text(df: pd.DataFrame, col: str, i: int) -> str | None:
    """The cell as text, or None when it is empty (None, NaN or blank)."""
    v = df[col].iloc[i]
    if v is None or (isinstance(v, float) and math.isnan(v)) or not str(v).strip():
        return None
    return str(v)
