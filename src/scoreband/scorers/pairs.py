"""(image, caption, target) rows of a user's table, validated, with images loaded lazily."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from scoreband.columns import ColumnSpec, load_inputs
from scoreband.engine.cells import cell_text
from scoreband.errors import InputError, RowError
from scoreband.files import resolve_path
from scoreband.images import load_image

__all__ = ["LazyImages", "load_pairs", "take_rows"]


class LazyImages(Sequence):
    """Image files opened only when indexed (a list of PIL images for a slice or a list of
    positions), so a large table is never held in memory at once."""

    def __init__(self, paths: list[Path]):
        self.paths = list(paths)

    def __len__(self) -> int:
        return len(self.paths)

    def _open(self, p) -> Image.Image:
        return Image.fromarray(load_image(p, None))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._open(p) for p in self.paths[i]]
        if isinstance(i, (list, tuple, np.ndarray)):
            return [self._open(self.paths[int(j)]) for j in i]
        return self._open(self.paths[i])

    def take(self, idx) -> LazyImages:
        return LazyImages([self.paths[int(j)] for j in idx])


def load_pairs(df: pd.DataFrame, *, scale, image_col: str = "image", text_col: str = "caption",
               target: str | None = None, ratings: str | None = None,
               n_ratings: int | None = None, base_dir=None,
               check_images: bool = True) -> tuple[dict, list[RowError]]:
    """Validate rows (target on the scale, image readable, caption not empty) and return
    ``({"images", "texts", "y01", "image_ids", "scale", "n_ratings", "rows"}, errors)``."""
    for flag, col in (("`image_col`", image_col), ("`text_col`", text_col)):
        if col not in df.columns:
            raise InputError(f"{flag} column {col!r} is not in the table; available: "
                             f"{', '.join(map(str, df.columns))}")
    inp = load_inputs(df, ColumnSpec(scale=scale, target=target, ratings=ratings),
                      require_median=False, n_ratings=n_ratings)
    errors = list(inp.errors)
    keep, paths, texts, pos = [], [], [], []
    for j, i in enumerate(inp.rows):
        rid = inp.row_ids[j]
        t = cell_text(df, text_col, int(i))
        if t is None:
            errors.append(RowError(rid, text_col, "empty caption", int(i)))
            continue
        p = resolve_path(df[image_col].iloc[i], base_dir)
        if check_images:
            try:
                load_image(p, 8)
            except ValueError as e:
                errors.append(RowError(rid, image_col, str(e), int(i)))
                continue
        keep.append(j)
        paths.append(p)
        texts.append(t)
        pos.append(int(i))
    if not keep:
        raise InputError("no usable rows: " + "; ".join(str(e) for e in errors[:5]))
    keep = np.asarray(keep)
    data = {"images": LazyImages(paths), "texts": texts, "y01": inp.y01[keep],
            "image_ids": [str(p) for p in paths], "scale": scale,
            "n_ratings": inp.n_ratings[keep], "rows": np.asarray(pos)}
    errors.sort(key=lambda e: e.position if e.position is not None else -1)
    return data, errors


def take_rows(data: dict, idx) -> dict:
    """The rows ``idx`` of a ``load_pairs`` dict: images, lists and arrays are subset,
    per-table values (the scale, a single annotator count) are kept."""
    def one(v):
        if hasattr(v, "take"):  # LazyImages and numpy arrays
            return v.take(idx)
        if isinstance(v, list):
            return [v[i] for i in idx]
        return v

    return {k: one(v) for k, v in data.items()}
