"""The round-trip score of a table: caption -> n generations -> encoder -> cosine.

For each (image, caption) row: ``n_gen`` generations with seeds ``seed, seed + 1, ...``;
``roundtrip_score`` = mean cosine similarity between the original image's embedding and each
generation's, ``roundtrip_spread`` = their standard deviation (population), ``roundtrip_error``
= why a row could not be scored (it keeps NaN: a failure is never a score). Every row is kept.

Resume: finished rows are appended (flushed) to a journal; a rerun with the same generator,
encoder, seeds and inputs reuses them. Generated images can be kept (``keep_dir``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from scoreband.engine.cells import cell_text
from scoreband.engine.journal import row_key
from scoreband.engine.rows import Stage, run_rows
from scoreband.errors import ERROR_COLUMN, InputError
from scoreband.files import atomic_path, resolve_path
from scoreband.images import decode_image, image_digest
from scoreband.roundtrip.encoders import cosine, make_encoder
from scoreband.roundtrip.generators import GenerationError, make_generator

__all__ = ["roundtrip_scores", "roundtrip_table", "RoundTripStage", "roundtrip_stage"]


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


class RoundTripStage(Stage):
    """The round trip on the row engine, one row at a time (n generations each)."""

    error_column = ERROR_COLUMN["roundtrip"]
    batch_size = 1
    outputs = {"roundtrip_score": np.nan, "roundtrip_spread": np.nan,
               ERROR_COLUMN["roundtrip"]: ""}
    averaged = ("roundtrip_score",)

    def __init__(self, generator, encoder, *, n_gen: int = 4, seed: int = 0,
                 image_col: str = "image", text_col: str = "caption", base_dir=None,
                 keep_dir: Path | None = None):
        super().__init__(base_dir)
        if n_gen < 1:
            raise InputError(f"`n_gen` must be >= 1, got {n_gen}")
        self.gen, self.enc, self.n_gen, self.seed = generator, encoder, n_gen, seed
        self.image_col, self.text_col, self.keep_dir = image_col, text_col, keep_dir
        self.inputs = {"image_col": image_col, "text_col": text_col}
        self.label = f"round trip via {generator.name}"
        self._setup = json.dumps({"generator": generator.describe(),
                                  "encoder": encoder.describe(), "n_gen": n_gen,
                                  "seed": seed}, sort_keys=True)
        if keep_dir is not None:
            self.outputs = {**self.outputs, "roundtrip_images": ""}
            Path(keep_dir).mkdir(parents=True, exist_ok=True)

    def _cells(self, df, i):
        img, caption = cell_text(df, self.image_col, i), cell_text(df, self.text_col, i)
        return img, caption, resolve_path(img, self.base_dir) if img is not None else None

    def key(self, df, i):
        _, caption, p = self._cells(df, i)
        return row_key(self._setup, caption, image_digest(p))

    def process(self, df, positions):
        return [self._row(self.offset + i, *self._cells(df, i)) for i in positions]

    def _row(self, i, img_path, caption, p) -> dict:
        rec = {"error": ""}
        try:
            if caption is None:
                raise GenerationError(f"{self.text_col}: empty caption")
            try:
                image = decode_image(p if p is not None else img_path)
            except ValueError as e:
                raise GenerationError(f"{self.image_col}: {e}") from None
            gens = [self.gen.generate(caption, self.seed + j) for j in range(self.n_gen)]
            emb = self.enc.embed([image] + gens)
            sims = cosine(np.repeat(emb[:1], self.n_gen, axis=0), emb[1:])
            if not np.isfinite(sims).all():
                raise GenerationError("non-finite similarity (a blank generation?)")
            rec.update(roundtrip_score=float(sims.mean()), roundtrip_spread=float(sims.std()))
            if self.keep_dir is not None:
                names = []
                for j, g in enumerate(gens):
                    f = Path(self.keep_dir) / f"row{i:06d}_seed{self.seed + j}.png"
                    with atomic_path(f) as tmp:
                        g.save(tmp, format="PNG")
                    names.append(str(f))
                rec["roundtrip_images"] = ";".join(names)
        except GenerationError as e:
            rec["error"] = str(e)
        return rec

    def constants(self):
        return {"roundtrip_seeds": ";".join(str(self.seed + j) for j in range(self.n_gen)),
                "roundtrip_generator": self.gen.name, "roundtrip_encoder": self.enc.name}

    def components(self):
        return {"generator": self.gen.describe(), "encoder": self.enc.describe()}


def roundtrip_stage(generator: dict, encoder: dict, **kw) -> RoundTripStage:
    """A :class:`RoundTripStage` built from plain values (what a Ray actor receives):
    ``generator`` / ``encoder`` hold ``spec`` and the command's options, offered to
    ``make_generator`` / ``make_encoder`` (each entry takes those it knows)."""
    gen = make_generator(generator["spec"], offered={k: v for k, v in generator.items()
                                                     if k != "spec"})
    enc = make_encoder(encoder["spec"], offered={k: v for k, v in encoder.items()
                                                 if k != "spec"})
    return RoundTripStage(gen, enc, **kw)


def roundtrip_table(df: pd.DataFrame, generator, encoder, *, n_gen: int = 4, seed: int = 0,
                    image_col: str = "image", text_col: str = "caption", base_dir=None,
                    keep_dir: Path | None = None, journal: Path | None = None,
                    progress=None) -> tuple[pd.DataFrame, int]:
    """Score every row (see the module docstring); returns ``(table, failed rows)``."""
    stage = RoundTripStage(generator, encoder, n_gen=n_gen, seed=seed, image_col=image_col,
                           text_col=text_col, base_dir=base_dir, keep_dir=keep_dir)
    run = run_rows(df, stage, journal=journal, progress=progress)
    run.table.attrs["reused_rows"] = run.reused
    return run.table, len(run.failures)
