"""Check scoreband's BEiT-3 encoder against torchscale's reference implementation.

    python scripts/check_beit3_vs_torchscale.py [--torchscale-python /tmp/r2venv/bin/python]

torchscale cannot be installed beside scoreband (its timm==0.6.13 pulls a CUDA torchvision that
breaks a CPU torch), so it runs in a side environment:

    python -m venv /tmp/tsvenv && /tmp/tsvenv/bin/pip install torch==2.13.0 numpy && \
    /tmp/tsvenv/bin/pip install torchscale==0.3.0 fairscale==0.4.0 --no-deps

and its one timm use (drop-path, the identity at inference) is supplied by a stub. A tiny
random BEiT-3 in the official checkpoint layout is built here, both implementations run it on
the same image + caption batch (with padding), and the fused sequences are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

REFERENCE = r"""
import sys, types, json
import numpy as np, torch
timm = types.ModuleType("timm"); m = types.ModuleType("timm.models"); l = types.ModuleType("timm.models.layers")
l.drop_path = lambda x, drop_prob=0.0, training=False: x
timm.models = m; m.layers = l
sys.modules.update({"timm": timm, "timm.models": m, "timm.models.layers": l})
from torchscale.architecture.config import EncoderConfig
from torchscale.model.BEiT3 import BEiT3
cfg = json.loads(sys.argv[2])
args = EncoderConfig(img_size=cfg["img_size"], patch_size=cfg["patch_size"],
                     vocab_size=cfg["vocab_size"], multiway=True, layernorm_embedding=False,
                     normalize_output=True, no_output_layer=True,
                     encoder_embed_dim=cfg["dim"], encoder_attention_heads=cfg["heads"],
                     encoder_ffn_embed_dim=int(cfg["dim"] * cfg["mlp_ratio"]),
                     encoder_layers=cfg["depth"], max_source_positions=cfg["max_source_positions"],
                     dropout=0.0, drop_path_rate=0.0)
model = BEiT3(args).eval()
ck = torch.load(sys.argv[1] + "/tiny_beit3.pth", map_location="cpu", weights_only=True)["model"]
state = {k[6:]: v for k, v in ck.items() if k.startswith("beit3.")}
missing, unexpected = model.load_state_dict(state, strict=False)
d = np.load(sys.argv[3])
with torch.no_grad():
    out = model(textual_tokens=torch.from_numpy(d["ids"]), visual_tokens=torch.from_numpy(d["px"]),
                text_padding_position=torch.from_numpy(d["pad"]))["encoder_out"]
    img_only = model(visual_tokens=torch.from_numpy(d["px"]))["encoder_out"]
np.savez(sys.argv[4], fused=out.numpy(), img=img_only.numpy())
print("RESULT " + json.dumps({"missing": missing, "unexpected": unexpected}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torchscale-python", default=os.environ.get("TORCHSCALE_PYTHON",
                                                                  "/tmp/r2venv/bin/python"))
    a = ap.parse_args()
    from tiny_models import tiny_beit3

    from scoreband.backbones import load_backbone

    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        tiny_beit3(d / "m")
        bb = load_backbone(f"beit3:{d / 'm'}")
        rng = np.random.default_rng(0)
        ims = [Image.fromarray(rng.integers(0, 255, (40, 50, 3), dtype=np.uint8))
               for _ in range(3)]
        px = bb.preprocess(ims)
        tb, _, _ = bb.encode_text(["a red circle", "two blue stars above a square",
                                   "a simple picture"])
        with torch.no_grad():
            ours = bb.model(px, tb["ids"], tb["pad"]).numpy()
            ours_img = bb.model(px).numpy()
        np.savez(d / "in.npz", px=px.numpy(), ids=tb["ids"].numpy(), pad=tb["pad"].numpy())
        r = subprocess.run([a.torchscale_python, "-c", REFERENCE, str(d / "m"),
                            json.dumps(bb.cfg.to_dict()), str(d / "in.npz"), str(d / "out.npz")],
                           capture_output=True, text=True)
        line = next((x for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            sys.exit("torchscale run failed:\n" + r.stderr[-3000:])
        info = json.loads(line[7:])
        ref = np.load(d / "out.npz")
        keep = ~tb["pad"].numpy()
        vis = ours.shape[1] - keep.shape[1]
        mask = np.concatenate([np.ones((3, vis), bool), keep], axis=1)
        diff = np.abs(ours - ref["fused"])[mask].max()
        diff_img = np.abs(ours_img - ref["img"]).max()
        print(f"torchscale load: missing {info['missing']}, unexpected {info['unexpected']}")
        print(f"max |difference|, fused sequence (non-padding positions): {diff:.2e}")
        print(f"max |difference|, image-only sequence: {diff_img:.2e}")
        print(f"vision CLS (the representation): {np.abs(ours[:, 0] - ref['fused'][:, 0]).max():.2e}")
        sys.exit(0 if diff < 1e-4 and diff_img < 1e-4 else 1)


if __name__ == "__main__":
    main()
