"""VICR: ``{split}.csv`` (image, caption, ratings ';'-separated 1-5 or rating) and ``images/``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.datasets.common import inside_root, need_file, standard_frame
from scoreband.datatypes import Scale
from scoreband.errors import InputError

__all__ = ["load_vicr"]


def load_vicr(root: Path, split: str, image_dir: Path) -> pd.DataFrame:
    f = need_file(root / f"{split}.csv", f"VICR {split} split")
    df = pd.read_csv(f)
    need = {"image", "caption"}
    if not need <= set(df.columns) or not ({"ratings"} & set(df.columns) or
                                           {"rating"} & set(df.columns)):
        raise InputError(f"{f.name}: expected columns image, caption and ratings (';'-separated "
                         f"1-5) or rating; have {', '.join(df.columns)}")
    rows = {"id": [f"vicr-{split}-{i}" for i in range(len(df))],
            "image": [inside_root(root, Path("images") / str(p), f"{f.name} row {i + 1}")
                      for i, p in enumerate(df["image"])],
            "caption": df["caption"].astype(str)}
    if "ratings" in df.columns:
        r = [[float(x) for x in str(c).split(";") if x.strip()] for c in df["ratings"]]
        rows.update(target=[np.mean(x) for x in r], n_ratings=[len(x) for x in r],
                    ratings=[";".join(f"{v:g}" for v in x) for x in r])
    else:
        rows.update(target=df["rating"], n_ratings=df.get("n_ratings", np.nan))
    return standard_frame(rows, Scale(1, 5), split)
