"""Polaris and Nebula: the hub layout ``data/{split}-*.parquet`` or a save_to_disk folder
``{split}/`` (refs, cand, img, human_score), images stored in the table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from scoreband.datasets.common import read_hf_split, save_images, standard_frame
from scoreband.datatypes import Scale
from scoreband.errors import InputError

__all__ = ["polaris_like"]


def polaris_like(name: str):
    def load(root: Path, split: str, image_dir: Path) -> pd.DataFrame:
        df = read_hf_split(root, split)
        for c in ("cand", "img", "human_score"):
            if c not in df.columns:
                raise InputError(f"{name} {split}: column {c!r} missing (have "
                                 f"{', '.join(df.columns)})")
        imgs = save_images(df["img"].tolist(), image_dir, f"{name}-{split}")
        refs = [";".join(map(str, r)) if r is not None else "" for r in df.get(
            "refs", pd.Series([None] * len(df)))]
        return standard_frame({"id": [f"{name}-{split}-{i}" for i in range(len(df))],
                               "image": imgs, "caption": df["cand"].astype(str),
                               "target": df["human_score"], "references": refs},
                              Scale(0, 1), split)
    return load
