"""The standard table every benchmark loader writes (:data:`COLUMNS`) and what the loaders
share: a required file, a path kept inside the benchmark folder, images stored inside table
files written once as PNGs, the Hugging Face hub's split layout."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.datatypes import Scale
from scoreband.errors import InputError
from scoreband.files import atomic_path
from scoreband.images import decode_image
from scoreband.tables import read_table

__all__ = ["COLUMNS", "need_file", "standard_frame", "inside_root", "save_images",
           "split_files", "read_hf_split"]

COLUMNS = ["id", "image", "caption", "target", "target01", "n_ratings", "ratings",
           "references", "task", "split"]

def need_file(path: Path, what: str) -> Path:
    if not path.exists():
        raise InputError(f"missing {path.name} ({what}) under {str(path.parent)!r}")
    return path


def standard_frame(rows: dict, scale: Scale, split: str) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    for c in COLUMNS:
        if c not in df.columns:
            df[c] = "" if c in ("ratings", "references", "task") else np.nan
    df["target01"] = scale.to01(df["target"].to_numpy(float))
    df["split"] = split
    return df[COLUMNS]


def inside_root(root: Path, rel, where: str) -> str:
    """``root / rel`` for a path the benchmark's own files name, refused when it leaves the
    benchmark folder (an absolute path, ``..``, a symlink out): such a file would then be
    read, and by ``judge``, uploaded."""
    rel = str(rel)
    p = root / rel
    try:
        ok = not Path(rel).is_absolute() and p.resolve().is_relative_to(root.resolve())
    except (OSError, ValueError):
        ok = False
    if not ok:
        raise InputError(f"{where}: image path {rel[:120]!r} leaves the benchmark folder "
                         f"{str(root)!r}; paths in a benchmark's files must be relative and "
                         "inside it")
    return str(p)


def save_images(blobs, image_dir: Path, prefix: str) -> list[str]:
    """Write image bytes (or HF image structs) once as PNG files named by their content
    (a changed source never pairs new captions with old images); returns the paths."""
    image_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for i, b in enumerate(blobs):
        data = b.get("bytes") if isinstance(b, dict) else b
        if not isinstance(data, (bytes, bytearray)):
            raise InputError(f"{prefix} row {i}: the image column holds no bytes")
        f = image_dir / f"{prefix}-{hashlib.sha256(data).hexdigest()[:24]}.png"
        if not f.exists():
            try:
                im = decode_image(bytes(data))
            except ValueError as e:
                raise InputError(f"{prefix} row {i}: {e}") from None
            with atomic_path(f) as tmp:
                im.save(tmp, format="PNG")
        out.append(str(f))
    return out


def split_files(root: Path, split: str) -> list[Path]:
    """Parquet shards of a split in the Hugging Face hub layout (data/{split}-*.parquet) or
    a save_to_disk folder ({split}/*.arrow)."""
    files = sorted((root / "data").glob(f"{split}-*.parquet"))
    if files:
        return files
    d = root / split
    if d.is_dir() and (list(d.glob("*.arrow")) or list(d.glob("*.parquet"))):
        return [d]
    raise InputError(f"no {split} split under {str(root)!r}: expected data/{split}-*.parquet "
                     f"(the hub layout) or a save_to_disk folder {split}/ with .arrow files")


def read_hf_split(root: Path, split: str) -> pd.DataFrame:
    parts = [read_table(f) for f in split_files(root, split)]
    return pd.concat(parts, ignore_index=True)
