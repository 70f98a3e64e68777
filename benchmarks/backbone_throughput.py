"""BEiT-3-base throughput (random weights) against the matmul rate of the same device.

    python benchmarks/backbone_throughput.py [--device cuda] [--dtype bfloat16] [--batch 128]

Builds a BEiT-3 base encoder (768 wide, 12 layers, 12 heads, 224 px, 64 text tokens) with
random weights, runs image + caption pairs through it (inference mode) and reports pairs/s,
the achieved FLOP rate (matmuls + attention) and its share of a large square matmul's rate
measured in this same run, in the same dtype. Target (issue 4, on a GPU): bf16, batch 128.
On a CPU the default batch is 8 (a batch of 128 takes minutes there).
"""

from __future__ import annotations

import argparse
import time

import torch

from scoreband.backbones.beit3 import CONFIGS, BEiT3, BEiT3Config


def flops_per_pair(cfg: BEiT3Config, text_len: int = 64) -> float:
    t = cfg.grid ** 2 + 1 + text_len
    d, h = cfg.dim, int(cfg.dim * cfg.mlp_ratio)
    per_layer = 2 * t * (4 * d * d + 2 * d * h) + 2 * 2 * t * t * d
    return cfg.depth * per_layer + 2 * (cfg.grid ** 2) * 3 * cfg.patch_size ** 2 * d


def best_of(fn, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        ts.append(time.perf_counter() - t)
    return min(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the encoder (fuses the LayerNorm / GELU / residual "
                         "element-wise work that dominates at bf16)")
    a = ap.parse_args()
    dev, dt = a.device, getattr(torch, a.dtype)
    batch = a.batch or (128 if dev == "cuda" else 8)
    torch.manual_seed(0)
    cfg = BEiT3Config(**CONFIGS["base"])
    model = BEiT3(cfg).to(dev, dt).eval()
    if a.compile:
        model = torch.compile(model)
    px = torch.randn(batch, 3, 224, 224, device=dev, dtype=dt)
    ids = torch.randint(3, 60000, (batch, 64), device=dev)
    pad = torch.zeros(batch, 64, dtype=torch.bool, device=dev)
    pad[:, 40:] = True
    with torch.inference_mode():
        model(px, ids, pad)  # warm-up (and compilation)
        sec = best_of(lambda: model(px, ids, pad), a.reps)
        n = 8192 if dev == "cuda" else 1024
        x = torch.randn(n, n, device=dev, dtype=dt)
        mm = best_of(lambda: x @ x, a.reps + 2)
    pairs = batch / sec
    rate = pairs * flops_per_pair(cfg)
    mm_rate = 2 * n ** 3 / mm
    print(f"device {dev}, dtype {a.dtype}, batch {batch}, threads {torch.get_num_threads()}"
          + (", torch.compile" if a.compile else ""))
    print(f"BEiT-3 base: {pairs:,.1f} pairs/s, {rate / 1e9:,.1f} GFLOP/s achieved "
          f"({flops_per_pair(cfg) / 1e9:.1f} GFLOP per pair)")
    print(f"{n}^2 matmul: {mm_rate / 1e9:,.1f} GFLOP/s -> {100 * rate / mm_rate:.0f}% of it")


if __name__ == "__main__":
    main()
