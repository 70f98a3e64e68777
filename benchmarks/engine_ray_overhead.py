"""Ray's overhead on ``score``: the bundled model over a table of N world rows (default
100,000), run by the local row engine and by ``--engine ray`` with 1 and 2 actors, each as
a fresh ``scoreband score`` process on this machine; prints wall time, rows/s and Ray's
overhead over the local engine, and checks that the outputs agree (same rows, bands to 1e-6).
Then projects, from a measured per-pair GPU rate, the wall time and cost of 10^8 pairs on N
GPU nodes.

    python benchmarks/engine_ray_overhead.py [--rows 100000] [--dir /tmp/x]
        [--gpu-rate 5183] [--gpu-hour-usd 3.5] [--projection-only]

Writes nothing into the repository (tables and outputs go to --dir, a temp folder by default).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd


def make_table(d: Path, n: int) -> Path:
    """N rows over 1,000 world images, each caption made distinct by its row number."""
    subprocess.run([sys.executable, "-m", "scoreband.cli", "world", "--out", str(d), "--n",
                    "1000"], check=True, capture_output=True)
    df = pd.read_csv(d / "world.csv")
    reps = -(-n // len(df))
    big = pd.concat([df] * reps, ignore_index=True).head(n)
    big["caption"] = [c if i < len(df) else f"{c} {'.' * (1 + i // len(df) % 5)}"
                      for i, c in enumerate(big["caption"])]
    big["id"] = np.arange(n)
    big[["id", "image", "caption"]].to_parquet(d / "pairs.parquet")
    return d / "pairs.parquet"


def timed(args: list[str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "scoreband.cli", *args], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise SystemExit(r.stderr[-2000:])
    return time.perf_counter() - t0


def decode_rate(n: int = 300) -> float:
    """Images per second one CPU core decodes and resizes for BEiT-3 (a 640 x 480 JPEG, the
    size of an MS-COCO photo, to 224 x 224) through scoreband's decoder, measured here."""
    import io

    from PIL import Image

    from scoreband.images import load_image

    rng = np.random.default_rng(0)
    smooth = np.kron(rng.integers(0, 255, (60, 80, 3)), np.ones((8, 8, 1))).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(smooth).save(buf, format="JPEG", quality=90)
    data = buf.getvalue()
    load_image(data, 224)
    t0 = time.perf_counter()
    for _ in range(n):
        load_image(data, 224)
    return n / (time.perf_counter() - t0)


def projection(rate: float, usd_per_gpu_hour: float, decode: float,
               pairs: float = 1e8) -> list[str]:
    lines = [f"10^8 pairs at {rate:,.0f} pairs/s per GPU (BEiT-3 base, bf16, H200), "
             f"${usd_per_gpu_hour}/GPU-h; JPEG decode+resize {decode:,.0f} images/s per CPU "
             f"core here -> {rate / decode:.0f} cores per GPU to keep it fed:"]
    for nodes, gpus in ((1, 1), (1, 8), (4, 8), (16, 8)):
        g = nodes * gpus
        hours = pairs / (rate * g) / 3600
        lines.append(f"  {nodes:>2} node(s) x {gpus} GPU: {hours * 60:7.1f} min wall, "
                     f"{hours * g:5.1f} GPU-h, ~${hours * g * usd_per_gpu_hour:,.0f}, "
                     f"{g * rate / decode:,.0f} decode cores")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--gpu-rate", type=float, default=5183.0)
    ap.add_argument("--gpu-hour-usd", type=float, default=3.5)
    ap.add_argument("--projection-only", action="store_true")
    a = ap.parse_args()
    proj = projection(a.gpu_rate, a.gpu_hour_usd, decode_rate())
    if a.projection_only:
        raise SystemExit(print("\n".join(proj)))
    d = Path(a.dir or tempfile.mkdtemp(prefix="scoreband-ray-"))
    src = make_table(d, a.rows)
    runs = {"local": [], "ray, 1 actor": ["--engine", "ray", "--actors", "1"],
            "ray, 2 actors": ["--engine", "ray", "--actors", "2"]}
    wall = {}
    for name, extra in runs.items():
        out = d / f"out-{name.replace(', ', '-').replace(' ', '')}.parquet"
        wall[name] = timed(["score", str(src), "--out", str(out), *extra])
        print(f"{name:>14}: {wall[name]:7.1f} s, {a.rows / wall[name]:7.1f} rows/s, "
              f"overhead vs local {wall[name] / wall['local'] - 1:+.1%}", flush=True)
    outs = [pd.read_parquet(p) for p in sorted(d.glob("out-*.parquet"))]
    for o in outs[1:]:
        assert list(o["id"]) == list(outs[0]["id"])
        for c in ("band_lo", "band_median", "band_hi"):
            np.testing.assert_allclose(o[c], outs[0][c], atol=1e-6, equal_nan=True)
    print(f"outputs agree ({len(outs)} runs, {a.rows:,} rows, bands to 1e-6)")
    print("\n".join(proj))


if __name__ == "__main__":
    main()
