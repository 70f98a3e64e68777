"""EvalMuse-40K: ``{split}_list.json`` (prompt, img_path, total_score, type) and the images."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.datasets.common import inside_root, need_file, standard_frame
from scoreband.datatypes import Scale
from scoreband.errors import InputError
from scoreband.json_io import read_json

__all__ = ["load_evalmuse"]


def load_evalmuse(root: Path, split: str, image_dir: Path) -> pd.DataFrame:
    f = need_file(root / f"{split}_list.json", f"EvalMuse-40K {split} annotations")
    items = read_json(f, what="annotations")
    rows: dict = {k: [] for k in ("id", "image", "caption", "target", "n_ratings", "ratings",
                                  "task")}
    for i, it in enumerate(items):
        try:
            s = it["total_score"]
            prompt, img = it["prompt"], it["img_path"]
        except KeyError as e:
            raise InputError(f"{f.name} item {i}: field {e} missing (expected prompt, img_path, "
                             "total_score)") from None
        # total_score: the annotators' 1-5 scores (a list) or their mean; to [0, 1]
        vals = [float(v) for v in (s if isinstance(s, list) else [s]) if v is not None]
        rows["id"].append(str(it.get("prompt_id", f"evalmuse-{split}-{i}")))
        rows["image"].append(inside_root(root, img,
                                         f"{f.name} item {len(rows['image']) + 1}"))
        rows["caption"].append(str(prompt))
        rows["target"].append((np.mean(vals) - 1) / 4 if vals else np.nan)
        rows["n_ratings"].append(len(vals) if isinstance(s, list) else np.nan)
        rows["ratings"].append(";".join(f"{(v - 1) / 4:g}" for v in vals)
                               if isinstance(s, list) else "")
        rows["task"].append(str(it.get("type", "")))
    return standard_frame(rows, Scale(0, 1), split)
