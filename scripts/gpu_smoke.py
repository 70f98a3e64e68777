"""Smoke-run the device paths (``--device cuda``, ``--dtype bfloat16``) of every command that
takes them, on the tiny real models of the tests. Run where a GPU is:

    PYTHONPATH=src:tests python scripts/gpu_smoke.py [--device cuda] [--out DIR] [--only ...]

Each step prints its exit code and a number or two; the script exits non-zero if any failed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default="", help="comma-separated parts of the step names to "
                    "run (default: every step)")
    a = ap.parse_args()
    import numpy as np
    import pandas as pd
    import tiny_models as tm
    import torch
    from typer.testing import CliRunner

    from scoreband.cli import app

    run = CliRunner().invoke
    d = Path(a.out or tempfile.mkdtemp())
    d.mkdir(parents=True, exist_ok=True)
    dev = a.device
    failed = []

    def step(name, fn, always=False):
        if not always and a.only and not any(k.strip() and k.strip() in name
                                             for k in a.only.split(",")):
            return
        t = time.perf_counter()
        try:
            msg = fn()
            print(f"[ok]   {name} ({time.perf_counter() - t:.1f} s) {msg or ''}", flush=True)
        except Exception:  # a smoke script reports every failure and carries on
            failed.append(name)
            print(f"[FAIL] {name}\n{traceback.format_exc()}", flush=True)

    def cli(args):
        r = run(app, args)
        if r.exit_code != 0:
            raise RuntimeError(f"exit {r.exit_code}: {r.output[-1500:]}\n{r.exception!r}")
        return r.output

    models = {}
    step("build tiny models", lambda: models.update(
        clip=tm.tiny_clip(d / "clip"), beit3=tm.tiny_beit3(d / "beit3"),
        llava=tm.tiny_llava(d / "llava")), always=True)
    for name, n, seed in (("train", 120, 1), ("val", 60, 2), ("test", 20, 3)):
        cli(["world", "--out", str(d / name), "--n", str(n), "--seed", str(seed)])

    def cpu_vs_device():
        from scoreband.backbones import load_backbone
        from scoreband.scorers.pairs import LazyImages

        df = pd.read_csv(d / "test" / "world.csv")
        ims = LazyImages([d / "test" / p for p in df["image"]])[0:4]
        out = []
        for spec in (f"beit3:{models['beit3']}", f"hf:{models['clip']}"):
            reps = {}
            for device, dtype in (("cpu", "float32"), (dev, "float32"), (dev, "bfloat16")):
                bb = load_backbone(spec, device=device, dtype=dtype)
                with torch.inference_mode():
                    reps[(device, dtype)] = bb.represent(
                        bb.preprocess(ims), bb.encode_text(list(df["caption"][:4]))[0]).cpu()
            ref = reps[("cpu", "float32")]
            out.append(f"{spec.split(':')[0]}: fp32 |d| {float((reps[(dev, 'float32')] - ref).abs().max()):.1e}, "
                       f"bf16 |d| {float((reps[(dev, 'bfloat16')] - ref).abs().max()):.1e}")
        return "; ".join(out)

    step("representations: cpu vs device", cpu_vs_device)
    for spec, extra in ((f"hf:{models['clip']}", []), (f"beit3:{models['beit3']}", ["--fine-tune"])):
        tag = spec.split(":")[0] + ("-ft" if extra else "")

        def train_and_score(spec=spec, extra=extra, tag=tag):
            cli(["train", str(d / "train" / "world.csv"), "--backbone", spec, "--ratings",
                 "ratings", "--scale", "1,5", "--val", str(d / "val" / "world.csv"),
                 "--epochs", "2", "--head-epochs", "3", "--device", dev, "--dtype", "bfloat16",
                 "--out", str(d / f"m-{tag}"), *extra])
            cli(["score", str(d / "test" / "world.csv"), "--model", str(d / f"m-{tag}"),
                 "--device", dev, "--out", str(d / f"s-{tag}.csv")])
            s = pd.read_csv(d / f"s-{tag}.csv")
            return (f"{s['band_median'].notna().sum()} rows banded, mean width "
                    f"{(s['band_hi'] - s['band_lo']).mean():.3f}")
        step(f"train + score {tag} (bf16)", train_and_score)

    def clip_s():
        cli(["score", str(d / "test" / "world.csv"), "--backbone", f"hf:{models['clip']}",
             "--scorer", "clip-s", "--device", dev, "--dtype", "bfloat16",
             "--out", str(d / "clips.csv")])
        return f"mean CLIP-S {pd.read_csv(d / 'clips.csv')['clip_s'].mean():.3f}"

    step("CLIP-S (bf16)", clip_s)

    def judge():
        (d / "judge_knobs.json").write_text('{"max_new_tokens": 4}')
        cli(["judge", str(d / "test" / "world.csv"), "--judge", f"hf:{models['llava']}",
             "--config", str(d / "judge_knobs.json"), "--device", dev, "--dtype", "bfloat16",
             "--out", str(d / "judged.csv")])
        j = pd.read_csv(d / "judged.csv", keep_default_na=False)
        lp = j[[f"logp_{k}" for k in range(1, 6)]].to_numpy(float)
        return (f"{(j['judge_error'] == '').sum()} rows judged, prob sums "
                f"{np.exp(lp).sum(1).min():.4f}-{np.exp(lp).sum(1).max():.4f}")

    step("judge: local VLM (bf16)", judge)

    def roundtrip():
        try:
            import diffusers  # noqa: F401
        except ImportError:
            return "skipped: diffusers not installed here"
        sd = tm.tiny_stable_diffusion(d / "sd")
        cli(["roundtrip", str(d / "test" / "world.csv"), "--generator", f"diffusers:{sd}",
             "--encoder", f"hf:{models['clip']}", "--steps", "2", "--size", "32",
             "--n-gen", "2", "--device", dev, "--out", str(d / "rt.csv")])
        r = pd.read_csv(d / "rt.csv")
        return f"{r['roundtrip_score'].notna().sum()} rows, mean {r['roundtrip_score'].mean():.3f}"

    step("roundtrip: diffusers + CLIP on the device", roundtrip)

    # issue 25: the decoder on this machine's CPUs, and BEiT-3 base on the device fed by it
    import os

    from PIL import Image, ImageDraw

    import scoreband.images as images

    rng = np.random.default_rng(0)
    jpgs = []
    for i in range(256):
        y, x = np.mgrid[0:480, 0:640] / 640
        base = np.stack([np.sin(3 * x + i), np.cos(2 * y + i), np.sin(2 * (x + y))], -1)
        im = Image.fromarray(np.clip(base * 90 + 128 + rng.normal(0, 12, base.shape), 0,
                                     255).astype(np.uint8))
        ImageDraw.Draw(im).ellipse([100, 80, 300, 260], fill=(200, 40, 40))
        jpgs.append(d / f"photo{i}.jpg")
        im.save(jpgs[-1], quality=90)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

    def decode_rate():
        images.load_images(jpgs[:32], 224)
        t = time.perf_counter()
        images.load_images(jpgs, 224)
        r = len(jpgs) / (time.perf_counter() - t)
        return f"JPEG 640x480 -> 224: {r:,.0f} images/s on {cores} cores, {r / cores:,.0f} per core"

    step("decode rate on this machine's CPUs", decode_rate)

    def beit3_fed():
        from scoreband.backbones.beit3 import CONFIGS, BEiT3, BEiT3Config, beit3_transform

        torch.manual_seed(0)
        cfg = BEiT3Config(**CONFIGS["base"])
        model = BEiT3(cfg).to(dev, torch.bfloat16).eval()
        batch = 128 if dev == "cuda" else 4
        ids = torch.randint(3, 60000, (batch, 64), device=dev)
        pad = torch.zeros(batch, 64, dtype=torch.bool, device=dev)

        def run_model(px):
            with torch.inference_mode():
                model(px.to(dev, torch.bfloat16, non_blocking=True), ids, pad)
            if dev == "cuda":
                torch.cuda.synchronize()

        px = torch.randn(batch, 3, 224, 224)
        run_model(px)
        t = time.perf_counter()
        for _ in range(4):
            run_model(px)
        alone = 4 * batch / (time.perf_counter() - t)
        files = (jpgs * (4 * batch // len(jpgs) + 1))[:4 * batch]
        t = time.perf_counter()
        for s in range(0, len(files), batch):  # decode (threads) -> transform -> model
            ims = images.load_images(files[s:s + batch], None, min_edge=cfg.img_size)
            run_model(beit3_transform(ims, cfg.img_size))
        fed = len(files) / (time.perf_counter() - t)
        return (f"BEiT-3 base bf16, batch {batch}: model alone {alone:,.0f} pairs/s, fed by "
                f"the decoder from 640x480 JPEGs {fed:,.0f} pairs/s ({fed / alone:.0%})")

    step("BEiT-3 base fed by the decoder", beit3_fed)
    print(f"{len(failed)} step(s) failed: {failed}" if failed else "all steps passed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
