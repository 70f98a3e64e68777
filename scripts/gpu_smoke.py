"""Smoke-run the device paths (``--device cuda``, ``--dtype bfloat16``) of every command that
takes them, on the tiny real models of the tests. Run where a GPU is:

    PYTHONPATH=src:tests python scripts/gpu_smoke.py [--device cuda] [--out DIR]

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

    def step(name, fn):
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
        llava=tm.tiny_llava(d / "llava")))
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
        cli(["judge", str(d / "test" / "world.csv"), "--judge", f"hf:{models['llava']}",
             "--max-new-tokens", "4", "--device", dev, "--dtype", "bfloat16",
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
    print(f"{len(failed)} step(s) failed: {failed}" if failed else "all steps passed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
