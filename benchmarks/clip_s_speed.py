"""CLIP-S pairs/s on a tiny CLIP (224 px, small towers: the model costs little, so decoding
and preprocessing decide), in one run: a plain transformers loop (PIL, the CLIPProcessor,
get_image_features / get_text_features, torchmetrics' formula), scoreband's path as it
was (images decoded by PIL one after another at full size, the processor's own loop) and as
it is (decoded in threads, JPEGs DCT-reduced towards the 224 px CLIP needs, plain PNGs by
libpng, CLIP's preprocessing run here in threads), with the largest score difference.

    python benchmarks/clip_s_speed.py [--n 200] [--format png|jpg]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from tiny_models import tiny_clip  # noqa: E402

import scoreband.backbones.dual as dual  # noqa: E402
import scoreband.images as images  # noqa: E402
from scoreband.scorers.stages import score_any  # noqa: E402


def plain(model_dir, df) -> np.ndarray:
    from transformers import AutoModel, AutoProcessor

    proc = AutoProcessor.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    out = []
    with torch.inference_mode():
        for s in range(0, len(df), 64):
            part = df.iloc[s:s + 64]
            ims = [Image.open(p).convert("RGB") for p in part["image"]]
            px = proc.image_processor(images=ims, return_tensors="pt")["pixel_values"]
            tx = proc.tokenizer(list(part["caption"]), padding="max_length", truncation=True,
                                max_length=model.config.text_config.max_position_embeddings,
                                return_tensors="pt")
            ei = model.get_image_features(pixel_values=px)
            et = model.get_text_features(**tx)
            ei = ei if isinstance(ei, torch.Tensor) else ei.pooler_output
            et = et if isinstance(et, torch.Tensor) else et.pooler_output
            cos = torch.nn.functional.cosine_similarity(ei, et)
            out.append(2.5 * torch.clamp(cos, min=0))
    return torch.cat(out).numpy()


def timed(fn, reps: int = 3):
    best, res = float("inf"), None
    for _ in range(reps):
        t = time.perf_counter()
        res = fn()
        best = min(best, time.perf_counter() - t)
    return best, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--format", default="png", choices=["png", "jpg"])
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="scoreband-clips-"))
    model = tiny_clip(d / "clip", image_size=224)
    rng = np.random.default_rng(0)
    rows = []
    for i in range(a.n):
        f = d / f"im{i}.{a.format}"
        base = rng.integers(0, 255, (60, 80, 3)).astype(np.uint8)  # photo-like: smooth
        Image.fromarray(base).resize((640, 480), Image.BICUBIC).save(f, quality=90)
        rows.append({"image": str(f), "caption": f"a photo of thing number {i} on a table"})
    df = pd.DataFrame(rows)
    spec = f"hf:{model}"

    def ours():
        return score_any(df, scorer="clip-s", backbone=spec)["table"]["clip_s"].to_numpy()

    t_plain, ref = timed(lambda: plain(model, df))
    switches = ("PARALLEL", "DCT_SCALING", "FAST_PNG")
    for name in switches:
        setattr(images, name, False)
    dual.FAST_CLIP = False
    t_old, old = timed(ours)
    for name in switches:
        setattr(images, name, True)
    dual.FAST_CLIP = True
    t_new, new = timed(ours)
    print(f"{a.n} {a.format} pairs, 640x480, tiny CLIP at 224 px, {torch.get_num_threads()} "
          "threads")
    for name, t in (("plain transformers loop", t_plain), ("scoreband before", t_old),
                    ("scoreband now", t_new)):
        print(f"  {name:<24} {a.n / t:8.1f} pairs/s")
    print(f"  now / before: {t_old / t_new:.2f}x; now / plain loop: {t_plain / t_new:.2f}x")
    print(f"  largest |score difference|: now vs before {np.max(np.abs(new - old)):.2e}, "
          f"now vs plain loop {np.max(np.abs(new - ref)):.2e}")


if __name__ == "__main__":
    main()
