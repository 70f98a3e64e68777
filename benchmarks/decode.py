"""Image decoding for the scorers: images/s on one core, in one run, for

* today: the path before issue 25 (PIL's full decode, then PIL's bicubic resize),
* draft: the first step of issue 25 (PIL's ``draft`` DCT scaling, then PIL's resize),
* fast: scoreband now (``images.load_image``: libjpeg-turbo's DCT scaling through
  simplejpeg, then torch's vectorised PIL-bicubic resize),
* floor: a bare libjpeg-turbo decode of the same files at full size (simplejpeg, no
  resize, no checks), and the bare decode at the reduced scale the fast path uses;

and how far the fast path's pixels and the bundled model's scores move from today's.

    python benchmarks/decode.py [--n 100] [--sizes 640x480,1600x1200] [--to 64,224]

The files are photo-like JPEGs (smooth gradients, shapes and noise; quality 90) written to a
temporary folder.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import simplejpeg
from PIL import Image, ImageDraw, ImageOps

import scoreband.images as images


def photo(rng, w: int, h: int) -> Image.Image:
    y, x = np.mgrid[0:h, 0:w] / max(w, h)
    base = np.stack([np.sin(3 * x + rng.uniform(0, 6)), np.cos(2 * y + rng.uniform(0, 6)),
                     np.sin(2 * (x + y))], -1) * 90 + 128
    im = Image.fromarray(np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8))
    d = ImageDraw.Draw(im)
    for _ in range(12):
        x0, y0 = rng.uniform(0, w), rng.uniform(0, h)
        r = rng.uniform(0.03, 0.2) * w
        d.ellipse([x0 - r, y0 - r, x0 + r, y0 + r], fill=tuple(int(v) for v in
                                                              rng.integers(0, 255, 3)))
    return im


def rate(paths, fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for p in paths:
            fn(p)
        best = min(best, time.perf_counter() - t)
    return len(paths) / best


def today(p, size):
    """The decode before issue 25: full decode, orientation, RGB, PIL bicubic."""
    with Image.open(p) as im:
        im.load()
        rgb = images.to_rgb(ImageOps.exif_transpose(im))
        return np.asarray(rgb.resize((size, size), Image.Resampling.BICUBIC))


def draft(p, size):
    """The first step of issue 25: PIL's draft (DCT scaling), then PIL bicubic."""
    with Image.open(p) as im:
        im.draft(None, (size, size))
        im.load()
        rgb = images.to_rgb(ImageOps.exif_transpose(im))
        return np.asarray(rgb.resize((size, size), Image.Resampling.BICUBIC))


def floor(p):
    simplejpeg.decode_jpeg(Path(p).read_bytes())


def scaled_floor(p, size):
    data = Path(p).read_bytes()
    with Image.open(p) as im:
        w, h = im.size
    simplejpeg.decode_jpeg(data, **images.dct_reduced_size(w, h, size))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--sizes", default="640x480,1600x1200")
    ap.add_argument("--to", default="64,224")
    a = ap.parse_args()
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    except (AttributeError, OSError):
        pass
    import torch

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    tmp = Path(tempfile.mkdtemp())
    print(f"{'file':>10s} {'to':>4s} {'today/s':>8s} {'draft/s':>8s} {'fast/s':>8s} "
          f"{'floor/s':>8s} {'scaled/s':>8s} {'fast/today':>10s} {'floor/fast':>10s} "
          f"{'max |px|':>8s} {'mean |px|':>9s}")
    for wh in a.sizes.split(","):
        w, h = map(int, wh.split("x"))
        paths = []
        for i in range(a.n):
            p = tmp / f"{wh}_{i}.jpg"
            photo(rng, w, h).save(p, quality=90)
            paths.append(p)
        for size in map(int, a.to.split(",")):
            t_today = rate(paths, lambda p, s=size: today(p, s))
            t_draft = rate(paths, lambda p, s=size: draft(p, s))
            t_fast = rate(paths, lambda p, s=size: images.load_image(p, s))
            t_floor = rate(paths, floor)
            t_scaled = rate(paths, lambda p, s=size: scaled_floor(p, s))
            ref = np.stack([today(p, size).astype(int) for p in paths[:20]])
            new = np.stack([images.load_image(p, size).astype(int) for p in paths[:20]])
            diff = np.abs(ref - new)
            print(f"{wh:>10s} {size:4d} {t_today:8.0f} {t_draft:8.0f} {t_fast:8.0f} "
                  f"{t_floor:8.0f} {t_scaled:8.0f} {t_fast / t_today:10.2f} "
                  f"{t_floor / t_fast:10.2f} {diff.max():8d} {diff.mean():9.2f}", flush=True)
    # PNG: lossless, so the same pixels; libpng through imagecodecs against PIL
    import imagecodecs

    paths = []
    for i in range(a.n):
        p = tmp / f"png_{i}.png"
        photo(rng, 640, 480).save(p)
        paths.append(p)
    t_today = rate(paths, lambda p: today(p, 224))
    t_fast = rate(paths, lambda p: images.load_image(p, 224))
    t_floor = rate(paths, lambda p: imagecodecs.png_decode(Path(p).read_bytes()))
    t_pil = rate(paths, lambda p: Image.open(p).load())
    same = all(np.array_equal(np.asarray(Image.open(p).convert("RGB")),
                              np.asarray(images.load_images([p, p], None)[0]))
               for p in paths[:10])
    print(f"PNG 640x480 -> 224: today {t_today:.0f}/s, now {t_fast:.0f}/s "
          f"({t_fast / t_today:.2f}x); bare decode: PIL {t_pil:.0f}/s, libpng {t_floor:.0f}/s "
          f"(floor/now {t_floor / t_fast:.2f}); full-size pixels identical to PIL's: {same}")
    # the bundled model's scores on 640x480 JPEGs, today's decode against the fast one
    from scoreband.scorers import load_scorer

    scorer = load_scorer("embedded:default")
    paths = sorted(tmp.glob("640x480_*.jpg"))[:64]
    caps = ["a red circle"] * len(paths)
    out = {}
    for fast in (False, True):
        load = images.load_image if fast else today
        imgs = np.stack([load(p, scorer.input_size) for p in paths])
        out[fast] = scorer.predict(imgs, caps).median
    d = np.abs(out[True] - out[False])
    print(f"bundled model, 64 JPEGs 640x480: |median fast - today| max {d.max():.4f}, "
          f"mean {d.mean():.4f} (on [0, 1])")


if __name__ == "__main__":
    main()
