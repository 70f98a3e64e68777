"""Composite: ``composite.csv`` (the AMT release converted to one table) and ``images/``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.datasets.common import inside_root, need_file, standard_frame
from scoreband.datatypes import Scale
from scoreband.errors import InputError

__all__ = ["load_composite"]


def load_composite(root: Path, split: str, image_dir: Path) -> pd.DataFrame:
    f = need_file(root / "composite.csv", "the Composite ratings")
    df = pd.read_csv(f)
    need = {"image", "caption", "ratings"}
    if not need <= set(df.columns):
        raise InputError(f"composite.csv: expected columns image, caption, ratings (';'-"
                         f"separated 1-5), optional source and references; have "
                         f"{', '.join(df.columns)}")
    r = [[float(x) for x in str(c).split(";") if x.strip()] for c in df["ratings"]]
    rows = {"id": [f"composite-{i}" for i in range(len(df))],
            "image": [inside_root(root, Path("images") / str(p), f"{f.name} row {i + 1}")
                      for i, p in enumerate(df["image"])],
            "caption": df["caption"].astype(str), "target": [np.mean(x) for x in r],
            "n_ratings": [len(x) for x in r],
            "ratings": [";".join(f"{v:g}" for v in x) for x in r],
            "references": df["references"].fillna("") if "references" in df else "",
            "task": df["source"].astype(str) if "source" in df else ""}
    return standard_frame(rows, Scale(1, 5), "test")
