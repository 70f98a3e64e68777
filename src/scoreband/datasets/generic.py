"""Any table with a column mapping, into the standard table
(:data:`~scoreband.datasets.common.COLUMNS`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from scoreband.datasets.common import standard_frame
from scoreband.datatypes import Scale
from scoreband.errors import InputError
from scoreband.tables import read_table

__all__ = ["load_generic"]


def load_generic(table, *, image_col: str, text_col: str, scale: Scale,
                 target: str | None = None, ratings: str | None = None,
                 task_col: str | None = None, references: str | None = None,
                 n_ratings: int | None = None, split: str = "") -> pd.DataFrame:
    """Any table with a column mapping, into the standard table."""
    df = read_table(table)
    missing = [c for c in (image_col, text_col, target, ratings, task_col, references)
               if c and c not in df.columns]
    if missing:
        raise InputError(f"columns {missing} are not in the table; available: "
                         f"{', '.join(map(str, df.columns))}")
    if bool(target) == bool(ratings):
        raise InputError("give exactly one of target= (mean rating) and ratings= (';'-separated)")
    rows = {"id": df["id"].astype(str) if "id" in df else [str(i) for i in range(len(df))],
            "image": df[image_col].astype(str), "caption": df[text_col].astype(str)}
    if ratings:
        r = [[float(x) for x in str(c).split(";") if x.strip()] for c in df[ratings]]
        rows.update(target=[np.mean(x) if x else np.nan for x in r],
                    n_ratings=[len(x) for x in r],
                    ratings=[";".join(f"{v:g}" for v in x) for x in r])
    else:
        rows.update(target=df[target].astype(float),
                    n_ratings=n_ratings if n_ratings else np.nan)
    if task_col:
        rows["task"] = df[task_col].astype(str)
    if references:
        rows["references"] = df[references].fillna("").astype(str)
    return standard_frame(rows, scale, split)
