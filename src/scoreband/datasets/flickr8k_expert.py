"""Flickr8K-Expert: ``ExpertAnnotations.txt``, ``Flickr8k.token.txt`` and the image folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.datasets.common import inside_root, need_file, standard_frame
from scoreband.datatypes import Scale
from scoreband.errors import InputError

__all__ = ["load_flickr8k_expert"]


def load_flickr8k_expert(root: Path, split: str, image_dir: Path) -> pd.DataFrame:
    ann = need_file(root / "ExpertAnnotations.txt", "the expert judgments")
    tok = need_file(root / "Flickr8k.token.txt", "the captions")
    img_dir = next((root / d for d in ("Flicker8k_Dataset", "Flickr8k_Dataset", "images")
                    if (root / d).is_dir()), None)
    if img_dir is None:
        raise InputError(f"missing the image folder Flicker8k_Dataset/ under {str(root)!r}")
    caps: dict[str, str] = {}
    by_image: dict[str, list[str]] = {}
    for line in tok.read_text(encoding="utf-8").splitlines():
        if "\t" not in line:
            continue
        cid, text = line.split("\t", 1)
        caps[cid] = text.strip()
        by_image.setdefault(cid.split("#")[0], []).append(cid)
    rows: dict = {k: [] for k in ("id", "image", "caption", "target", "n_ratings", "ratings",
                                  "references")}
    for n, line in enumerate(ann.read_text().splitlines()):
        parts = line.split()
        if len(parts) != 5:
            raise InputError(f"ExpertAnnotations.txt line {n + 1}: expected image id, caption id "
                             f"and 3 expert scores, got {len(parts)} fields")
        img, cid, *scores = parts
        if cid not in caps:
            raise InputError(f"ExpertAnnotations.txt line {n + 1}: caption {cid} is not in "
                             "Flickr8k.token.txt")
        r = [int(s) for s in scores]
        rows["id"].append(f"{img}|{cid}")
        rows["image"].append(inside_root(img_dir, img,
                                         f"ExpertAnnotations.txt line {n + 1}"))
        rows["caption"].append(caps[cid])
        rows["target"].append(float(np.mean(r)))
        rows["n_ratings"].append(3)
        rows["ratings"].append(";".join(map(str, r)))
        # references: the image's own captions, without the rated one
        rows["references"].append(";".join(caps[c] for c in by_image.get(img, []) if c != cid))
    return standard_frame(rows, Scale(1, 4), "test")
