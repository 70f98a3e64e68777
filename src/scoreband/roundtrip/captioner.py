"""The captioning model under test (the round trip's first module): a local transformers
image-to-text model (BLIP-style, or any ``AutoModelForImageTextToText``) captions the images,
and the round-trip metric then scores those captions."""

from __future__ import annotations

import math

import pandas as pd
from PIL import Image

from scoreband.errors import InputError
from scoreband.images import load_image
from scoreband.model_sources import model_source

__all__ = ["HFCaptioner", "caption_table"]


class HFCaptioner:
    """``hf:PATH_OR_ID``: greedy captions, ``max_new_tokens`` long, optional text prompt."""

    def __init__(self, source: str, *, max_new_tokens: int = 30, prompt: str | None = None,
                 device: str = "cpu"):
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.name = f"hf:{source}"
        self.max_new_tokens, self.prompt, self.device = max_new_tokens, prompt, device
        try:
            source = model_source(source)
            self.processor = AutoProcessor.from_pretrained(source)
            self.model = AutoModelForImageTextToText.from_pretrained(source).to(device).eval()
        except (OSError, ValueError) as e:
            raise InputError(f"could not load the captioner {source!r}: {e}. Fix: pass a "
                             "directory saved with save_pretrained (model + processor) or a "
                             "hub id with internet") from None

    def describe(self) -> dict:
        return {"captioner": self.name, "max_new_tokens": self.max_new_tokens,
                "prompt": self.prompt}

    def caption(self, images: list[Image.Image]) -> list[str]:
        import torch

        kw = {"text": [self.prompt] * len(images)} if self.prompt else {}
        inputs = self.processor(images=[im.convert("RGB") for im in images],
                                return_tensors="pt", **kw).to(self.device)
        with torch.inference_mode():
            out = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens,
                                      do_sample=False)
        if self.prompt and not self.model.config.is_encoder_decoder and \
                out.shape[1] > inputs["input_ids"].shape[1]:
            out = out[:, inputs["input_ids"].shape[1]:]
        return [t.strip() for t in self.processor.batch_decode(out, skip_special_tokens=True)]


def caption_table(df: pd.DataFrame, captioner: HFCaptioner, *, image_col: str = "image",
                  out_col: str = "generated_caption", base_dir=None,
                  batch_size: int = 8) -> pd.DataFrame:
    """Add ``out_col`` (empty where the image cannot be read; the round trip then reports the
    row as failed)."""
    caps = [""] * len(df)
    batch: list[tuple[int, Image.Image]] = []

    def flush():
        if batch:
            for (i, _), c in zip(batch, captioner.caption([im for _, im in batch]),
                                 strict=True):
                caps[i] = c
            batch.clear()

    for i, v in enumerate(df[image_col].tolist()):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        try:
            batch.append((i, Image.fromarray(load_image(v, None, base_dir))))
        except ValueError:
            continue
        if len(batch) >= batch_size:
            flush()
    flush()
    out = df.copy()
    out[out_col] = caps
    out["captioner"] = captioner.name
    return out


def caption_with(spec: str, df: pd.DataFrame, *, image_col: str = "image", base_dir=None,
                 device: str = "cpu") -> tuple[pd.DataFrame, str, dict]:
    """Caption every image with the model under test (``hf:PATH_OR_ID``); returns the table
    with a ``generated_caption`` column, that column's name and the captioner's provenance."""
    if not spec.startswith("hf:") or not spec[3:]:
        raise InputError(f"`captioner` {spec!r}: use hf:PATH_OR_ID")
    cap = HFCaptioner(spec[3:], device=device)
    return (caption_table(df, cap, image_col=image_col, base_dir=base_dir),
            "generated_caption", cap.describe())
