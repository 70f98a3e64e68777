"""The round-trip score of a table: caption -> n generations -> encoder -> cosine.

For each (image, caption) row: ``n_gen`` generations with seeds ``seed, seed + 1, ...``;
``roundtrip_score`` = mean cosine similarity between the original image's embedding and each
generation's, ``roundtrip_spread`` = their standard deviation (population), ``roundtrip_error``
= why a row could not be scored (it keeps NaN: a failure is never a score). Every row is kept.

Resume: finished rows are appended (flushed) to a journal; a rerun with the same generator,
encoder, seeds and inputs reuses them. Generated images can be kept (``keep_dir``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from scoreband.batch import RowJournal, cell_text, resolve_path, row_progress
from scoreband.errors import InputError
from scoreband.roundtrip.encoders import cosine
from scoreband.roundtrip.generators import GenerationError

__all__ = ["roundtrip_scores", "roundtrip_table"]


def roundtrip_scores(images: list[Image.Image], captions: list[str], generator, encoder, *,
                     n_gen: int = 4, seed: int = 0):
    """Scores of in-memory pairs (no table, no journal): ``(score, spread, sims)``, where
    ``sims`` is ``(n, n_gen)``. Raises GenerationError for a caption that fails."""
    orig = encoder.embed(images)
    sims = np.empty((len(images), n_gen), dtype=np.float32)
    for j in range(n_gen):
        gen = [generator.generate(c, seed + j) for c in captions]
        sims[:, j] = cosine(orig, encoder.embed(gen))
    return sims.mean(1), sims.std(1), sims


def roundtrip_table(df: pd.DataFrame, generator, encoder, *, n_gen: int = 4, seed: int = 0,
                    image_col: str = "image", text_col: str = "caption", base_dir=None,
                    keep_dir: Path | None = None, journal: Path | None = None,
                    progress=None) -> tuple[pd.DataFrame, int]:
    """Score every row (see the module docstring); returns ``(table, failed rows)``."""
    from scoreband.images import load_image

    if n_gen < 1:
        raise InputError(f"`n_gen` must be >= 1, got {n_gen}")
    for flag, col in (("`image_col`", image_col), ("`text_col`", text_col)):
        if col not in df.columns:
            raise InputError(f"{flag} column {col!r} is not in the table; available: "
                             f"{', '.join(map(str, df.columns))}")
    n = len(df)
    score = np.full(n, np.nan)
    spread = np.full(n, np.nan)
    errors = np.full(n, "", dtype=object)
    kept = np.full(n, "", dtype=object)
    setup = json.dumps({"generator": generator.describe(), "encoder": encoder.describe(),
                        "n_gen": n_gen, "seed": seed}, sort_keys=True)
    if keep_dir is not None:
        Path(keep_dir).mkdir(parents=True, exist_ok=True)
    reused = 0
    with RowJournal(journal) as jr, row_progress(progress, f"round trip via {generator.name}",
                                                 n) as update:
        for i in range(n):
            img_path, caption = cell_text(df, image_col, i), cell_text(df, text_col, i)
            p = resolve_path(img_path, base_dir) if img_path is not None else None
            h = hashlib.sha256(setup.encode())
            h.update(str(caption).encode())
            if p is not None and p.is_file():
                h.update(hashlib.sha256(p.read_bytes()).digest())
            key = h.hexdigest()
            rec = jr.get(key)
            if rec is None:
                rec = {"key": key, "score": None, "spread": None, "error": "", "kept": ""}
                try:
                    if caption is None:
                        raise GenerationError(f"{text_col}: empty caption")
                    try:
                        arr = load_image(p if p is not None else img_path, None)
                    except ValueError as e:
                        raise GenerationError(f"{image_col}: {e}") from None
                    gens = [generator.generate(caption, seed + j) for j in range(n_gen)]
                    emb = encoder.embed([Image.fromarray(arr)] + gens)
                    sims = cosine(np.repeat(emb[:1], n_gen, axis=0), emb[1:])
                    if not np.isfinite(sims).all():
                        raise GenerationError("non-finite similarity (a blank generation?)")
                    rec.update(score=float(sims.mean()), spread=float(sims.std()))
                    if keep_dir is not None:
                        names = []
                        for j, g in enumerate(gens):
                            f = Path(keep_dir) / f"row{i:06d}_seed{seed + j}.png"
                            g.save(f)
                            names.append(str(f))
                        rec["kept"] = ";".join(names)
                except GenerationError as e:
                    rec["error"] = str(e)
                jr.add(rec)
            else:
                reused += 1
            if rec["score"] is not None:
                score[i], spread[i] = rec["score"], rec["spread"]
            errors[i], kept[i] = rec["error"], rec.get("kept", "")
            update(i + 1)
    out = df.copy()
    out["roundtrip_score"] = score
    out["roundtrip_spread"] = spread
    out["roundtrip_error"] = errors
    out["roundtrip_seeds"] = ";".join(str(seed + j) for j in range(n_gen))
    out["roundtrip_generator"] = generator.name
    out["roundtrip_encoder"] = encoder.name
    if keep_dir is not None:
        out["roundtrip_images"] = kept
    out.attrs["reused_rows"] = reused
    return out, int((errors != "").sum())
