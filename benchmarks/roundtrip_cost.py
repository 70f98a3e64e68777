"""Seconds per item of the round-trip metric, by stage: generation, encoding, similarity.

    python benchmarks/roundtrip_cost.py [--items 50] [--n-gen 4]

Two set-ups, measured in this one run: the embedded renderer + embedded encoder, and a tiny
Stable Diffusion pipeline (built here, 2 steps at 32x32) + a tiny CLIP vision tower. The tiny
models' absolute numbers say nothing about a real SD model; they show where the time of the
pipeline goes and that the stages are measured the same way.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from scoreband.roundtrip.encoders import cosine, make_encoder  # noqa: E402
from scoreband.roundtrip.generators import make_generator  # noqa: E402
from scoreband.world import make_dataset  # noqa: E402


def stages(gen, enc, images, captions, n_gen):
    t_gen = t_enc = t_sim = 0.0
    for im, cap in zip(images, captions, strict=True):
        t = time.perf_counter()
        gens = [gen.generate(cap, j) for j in range(n_gen)]
        t_gen += time.perf_counter() - t
        t = time.perf_counter()
        emb = enc.embed([im] + gens)
        t_enc += time.perf_counter() - t
        t = time.perf_counter()
        cosine(np.repeat(emb[:1], n_gen, 0), emb[1:]).mean()
        t_sim += time.perf_counter() - t
    n = len(images)
    return t_gen / n, t_enc / n, t_sim / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=50)
    ap.add_argument("--n-gen", type=int, default=4)
    a = ap.parse_args()
    ds = make_dataset(a.items, 3)
    images = [Image.fromarray(x) for x in ds.images]
    print(f"{a.items} items, {a.n_gen} generations each; seconds per item")
    print(f"{'set-up':44s} {'generation':>11s} {'encoding':>10s} {'similarity':>11s}")
    gen, enc = make_generator("embedded:renderer"), make_encoder("embedded:default")
    g, e, s = stages(gen, enc, images, ds.captions, a.n_gen)
    print(f"{'embedded:renderer + embedded:default':44s} {g:11.5f} {e:10.5f} {s:11.6f}")
    from tiny_models import tiny_clip, tiny_stable_diffusion

    with tempfile.TemporaryDirectory() as d:
        sd = tiny_stable_diffusion(Path(d) / "sd")
        clip = tiny_clip(Path(d) / "clip")
        gen = make_generator(f"diffusers:{sd}", steps=2, size=32)
        enc = make_encoder(f"hf:{clip}")
        g, e, s = stages(gen, enc, images, ds.captions, a.n_gen)
        print(f"{'tiny SD (2 steps, 32 px) + tiny CLIP vision':44s} {g:11.5f} {e:10.5f} "
              f"{s:11.6f}")


if __name__ == "__main__":
    main()
