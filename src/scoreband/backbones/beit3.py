"""BEiT-3 (microsoft/unilm) as a backbone: the multiway transformer, the official checkpoint
layout, the XLM-R SentencePiece tokenizer and the eval transform.

Written here rather than imported from torchscale: torchscale 0.3.0 requires ``timm==0.6.13``,
which pulls a PyPI torchvision built against CUDA that breaks imports (transformers' CLIP
included) next to a CPU torch. The encoder below reproduces torchscale's BEiT-3 forward pass
(pre-LayerNorm blocks with sub-LN, multiway A = vision / B = text experts split at the vision
length, Fairseq-style positions starting at 2, no embedding scale (torchscale's default
``no_scale_embedding=True``), exact GELU, output LayerNorm) with the same parameter names, so an
official ``.pth`` loads with every encoder weight accounted for.

Official key layout (under ``model`` or ``module``, prefix ``beit3.``)::

    beit3.text_embed.weight                               (vocab, D)
    beit3.vision_embed.proj.{weight,bias}                 Conv2d(3, D, patch, patch)
    beit3.vision_embed.cls_token / mask_token             (1, 1, D)
    beit3.encoder.embed_positions.A.weight                (patches + 1 + 2, D)  vision
    beit3.encoder.embed_positions.B.weight                (max_source_positions, D)  text
    beit3.encoder.layers.N.self_attn.{q,k,v,out}_proj.{A,B}.{weight,bias}
    beit3.encoder.layers.N.self_attn.inner_attn_ln.{A,B}.{weight,bias}
    beit3.encoder.layers.N.self_attn_layer_norm.{A,B}.{weight,bias}
    beit3.encoder.layers.N.ffn.{A,B}.{fc1,fc2,ffn_layernorm}.{weight,bias}
    beit3.encoder.layers.N.final_layer_norm.{A,B}.{weight,bias}
    beit3.encoder.layer_norm.{A,B}.{weight,bias}

Task heads of fine-tuned checkpoints (``head.*``, ``vision_head.*`` ...) are ignored.
The joint representation is the vision CLS token of the fused sequence (after the output
norm), as in BEiT-3's retrieval / VQA heads.
"""

from __future__ import annotations

import hashlib
import math
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import nn

from scoreband.errors import InputError
from scoreband.json_io import read_json
from scoreband.provenance import weights_fingerprint

__all__ = ["BEiT3Config", "BEiT3", "BEiT3Tokenizer", "BEiT3Backbone", "load_beit3_state",
           "interpolate_vision_positions", "beit3_transform", "CONFIGS"]

#: the published sizes; vocab 64010 (XLM-R SentencePiece of BEiT-3), 1024 text positions
CONFIGS = {
    "base": dict(dim=768, depth=12, heads=12, mlp_ratio=4.0),
    "large": dict(dim=1024, depth=24, heads=16, mlp_ratio=4.0),
}


@dataclass
class BEiT3Config:
    dim: int = 768
    depth: int = 12
    heads: int = 12
    mlp_ratio: float = 4.0
    img_size: int = 224
    patch_size: int = 16
    vocab_size: int = 64010
    max_source_positions: int = 1024
    layernorm_eps: float = 1e-5
    dropout: float = 0.0

    @property
    def grid(self) -> int:
        return self.img_size // self.patch_size

    def to_dict(self) -> dict:
        return asdict(self)


class _Multiway(nn.Module):
    """Two copies of a module: A for the vision stream, B for the text stream.

    The streams are kept as two separate, contiguous, sequence-first tensors ``(L, n, D)``
    rather than one sequence cut at the split position: every expert then reads and writes
    contiguous memory (cutting a batch-first sequence gave strided views that each Linear and
    LayerNorm had to copy; those copies took about a third of the bf16 time on an H200).
    """

    def __init__(self, make):
        super().__init__()
        self.A, self.B = make(), make()

    def forward(self, xv, xt):
        return (None if xv is None else self.A(xv)), (None if xt is None else self.B(xt))


class _FFN(nn.Module):
    def __init__(self, dim: int, hidden: int, eps: float):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.ffn_layernorm = nn.LayerNorm(hidden, eps=eps)  # sub-LN
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        # torchscale computes GELU as gelu(x.float()).type_as(x); PyTorch's bf16/fp16 GELU
        # kernel computes in float32 and rounds once, which is the same number
        return self.fc2(self.ffn_layernorm(nn.functional.gelu(self.fc1(x))))


def _cat(a, b):
    if a is None:
        return b
    return a if b is None else torch.cat([a, b], dim=0)


class _Attention(nn.Module):
    def __init__(self, cfg: BEiT3Config):
        super().__init__()
        d, eps = cfg.dim, cfg.layernorm_eps
        self.heads = cfg.heads
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(self, name, _Multiway(lambda: nn.Linear(d, d)))
        self.inner_attn_ln = _Multiway(lambda: nn.LayerNorm(d, eps=eps))

    def forward(self, xv, xt, mask: torch.Tensor | None):
        lv = 0 if xv is None else xv.shape[0]
        q, k, v = (_cat(*p(xv, xt)) for p in (self.q_proj, self.k_proj, self.v_proj))
        t, b, d = q.shape
        h = self.heads

        def heads(z):  # (L, n, D) -> (n, H, L, d/H) as a view
            return z.view(t, b, h, d // h).permute(1, 2, 0, 3)

        # scaled_dot_product_attention's default scale is head_dim ** -0.5, torchscale's too
        a = nn.functional.scaled_dot_product_attention(heads(q), heads(k), heads(v),
                                                       attn_mask=mask)
        a = a.permute(2, 0, 1, 3).reshape(t, b, d)
        av, at = (a[:lv] if lv else None), (a[lv:] if lv < t else None)
        return self.out_proj(*self.inner_attn_ln(av, at))


class _Layer(nn.Module):
    def __init__(self, cfg: BEiT3Config):
        super().__init__()
        d, eps = cfg.dim, cfg.layernorm_eps
        self.self_attn = _Attention(cfg)
        self.self_attn_layer_norm = _Multiway(lambda: nn.LayerNorm(d, eps=eps))
        self.ffn = _Multiway(lambda: _FFN(d, int(d * cfg.mlp_ratio), eps))
        self.final_layer_norm = _Multiway(lambda: nn.LayerNorm(d, eps=eps))
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, xv, xt, mask):
        av, at = self.self_attn(*self.self_attn_layer_norm(xv, xt), mask)
        xv = None if xv is None else xv + self.drop(av)
        xt = None if xt is None else xt + self.drop(at)
        fv, ft = self.ffn(*self.final_layer_norm(xv, xt))
        return (None if xv is None else xv + self.drop(fv),
                None if xt is None else xt + self.drop(ft))


class _Positions(nn.Module):
    """Fairseq-style learned positions: position i of a sequence uses row i + 2."""

    def __init__(self, n: int, d: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n, d))

    def forward(self, length: int) -> torch.Tensor:
        if length + 2 > self.weight.shape[0]:
            raise InputError(f"sequence of {length} tokens exceeds the {self.weight.shape[0] - 2}"
                             " learned positions")
        return self.weight[2:length + 2]


class _VisionEmbed(nn.Module):
    def __init__(self, cfg: BEiT3Config):
        super().__init__()
        self.proj = nn.Conv2d(3, cfg.dim, cfg.patch_size, cfg.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.mask_token = nn.Parameter(torch.zeros(1, 1, cfg.dim))

    def forward(self, px):
        x = self.proj(px).flatten(2).transpose(1, 2)
        return torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)


class _EmbedPositions(nn.Module):
    def __init__(self, cfg: BEiT3Config):
        super().__init__()
        self.A = _Positions(cfg.grid ** 2 + 1 + 2, cfg.dim)
        self.B = _Positions(cfg.max_source_positions, cfg.dim)


class _Encoder(nn.Module):
    def __init__(self, cfg: BEiT3Config):
        super().__init__()
        self.embed_positions = _EmbedPositions(cfg)
        self.layers = nn.ModuleList(_Layer(cfg) for _ in range(cfg.depth))
        self.layer_norm = _Multiway(lambda: nn.LayerNorm(cfg.dim, eps=cfg.layernorm_eps))


class BEiT3(nn.Module):
    """The BEiT-3 multiway encoder; parameter names follow the official checkpoints
    (without the ``beit3.`` prefix)."""

    def __init__(self, cfg: BEiT3Config):
        super().__init__()
        self.cfg = cfg
        self.text_embed = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.vision_embed = _VisionEmbed(cfg)
        self.encoder = _Encoder(cfg)

    def forward(self, pixels: torch.Tensor | None = None, ids: torch.Tensor | None = None,
                text_pad: torch.Tensor | None = None) -> torch.Tensor:
        """Fused sequence (n, vision + text, D), vision first. ``text_pad`` is True at
        padding."""
        pos = self.encoder.embed_positions
        xv = xt = None
        mask = None
        if pixels is not None:
            v = self.vision_embed(pixels)
            xv = (v + pos.A(v.shape[1])).transpose(0, 1).contiguous()
        if ids is not None:
            t = self.text_embed(ids)
            xt = (t + pos.B(t.shape[1])).transpose(0, 1).contiguous()
            if text_pad is not None and text_pad.any():
                lv = 0 if xv is None else xv.shape[0]
                keep = torch.cat([torch.ones(ids.shape[0], lv, dtype=torch.bool,
                                             device=ids.device), ~text_pad], dim=1)
                mask = keep[:, None, None, :]
        for layer in self.encoder.layers:
            xv, xt = layer(xv, xt, mask)
        xv, xt = self.encoder.layer_norm(xv, xt)
        return _cat(xv, xt).transpose(0, 1)


# ------------------------------------------------------------------ checkpoints
def interpolate_vision_positions(weight: torch.Tensor, new_grid: int) -> torch.Tensor:
    """Resize the vision position table (2 offsets + CLS + grid^2 rows) to ``new_grid``
    with bicubic interpolation of the patch part, as BEiT-3 does for 384-pixel fine-tuning."""
    extra = 3
    old = weight.shape[0] - extra
    g = int(round(math.sqrt(old)))
    if g * g != old:
        raise InputError(f"vision position table of {weight.shape[0]} rows is not 3 + a square")
    if g == new_grid:
        return weight
    patch = weight[extra:].reshape(1, g, g, -1).permute(0, 3, 1, 2).float()
    patch = nn.functional.interpolate(patch, size=(new_grid, new_grid), mode="bicubic",
                                      align_corners=False)
    patch = patch.permute(0, 2, 3, 1).reshape(new_grid * new_grid, -1).to(weight.dtype)
    return torch.cat([weight[:extra], patch], dim=0)


def load_beit3_state(path) -> dict[str, torch.Tensor]:
    """Read an official BEiT-3 checkpoint (``.pth``; weights under ``model`` or ``module``,
    keys prefixed ``beit3.``) or a ``.safetensors`` file; returns the encoder's state dict
    without the prefix. Task heads are dropped."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"BEiT-3 checkpoint not found: {str(p)!r}")
    if p.suffix == ".safetensors":
        from safetensors.torch import load_file

        raw = load_file(p)
    else:
        # weights_only: an official .pth holds tensors and plain containers only; refusing
        # anything else keeps a checkpoint from running code
        raw = torch.load(p, map_location="cpu", weights_only=True)
        for k in ("model", "module", "state_dict"):
            if isinstance(raw, dict) and k in raw and isinstance(raw[k], dict):
                raw = raw[k]
                break
    state = {k[len("beit3."):]: v for k, v in raw.items() if k.startswith("beit3.")}
    if not state:
        sample = ", ".join(list(raw)[:5])
        raise InputError(f"{p.name} has no 'beit3.*' weights (first keys: {sample}); is it an "
                         "official BEiT-3 checkpoint?")
    return state


def config_from_state(state: dict, **override) -> BEiT3Config:
    """Infer dim, depth, patch, image size and vocab from the weights; heads from the
    published sizes (or ``heads=`` when the width is not a published one)."""
    dim = state["text_embed.weight"].shape[1]
    vocab = state["text_embed.weight"].shape[0]
    depth = 1 + max(int(m.group(1)) for k in state
                    if (m := re.match(r"encoder\.layers\.(\d+)\.", k)))
    patch = state["vision_embed.proj.weight"].shape[-1]
    grid = int(round(math.sqrt(state["encoder.embed_positions.A.weight"].shape[0] - 3)))
    hidden = state["encoder.layers.0.ffn.A.fc1.weight"].shape[0]
    heads = next((c["heads"] for c in CONFIGS.values() if c["dim"] == dim), None)
    cfg = dict(dim=dim, depth=depth, heads=heads, mlp_ratio=hidden / dim, img_size=grid * patch,
               patch_size=patch, vocab_size=vocab,
               max_source_positions=state["encoder.embed_positions.B.weight"].shape[0])
    cfg.update({k: v for k, v in override.items() if v is not None})
    if cfg["heads"] is None:
        raise InputError(f"width {dim} is not a published BEiT-3 size (base 768, large 1024): "
                         "give the number of attention heads in config.json ({\"heads\": N})")
    return BEiT3Config(**cfg)


def beit3_transform(images: list[Image.Image], size: int) -> torch.Tensor:
    """BEiT-3's eval transform: bicubic resize to size x size, [0, 1], mean = std = 0.5
    (PIL's resize itself, as the reference transform runs it)."""
    arr = np.stack([np.asarray(im.convert("RGB").resize((size, size), Image.Resampling.BICUBIC),
                               dtype=np.float32) for im in images])
    x = torch.from_numpy(arr).permute(0, 3, 1, 2) / 255.0
    return (x - 0.5) / 0.5


class BEiT3Tokenizer:
    """XLM-R SentencePiece tokenizer of BEiT-3: bos + up to ``max_len - 2`` tokens + eos,
    padded to ``max_len`` (64), with a padding mask.

    transformers' ``XLMRobertaTokenizer.from_pretrained(dir)`` reads
    ``dir/sentencepiece.bpe.model``; given BEiT-3's ``beit3.spm`` the file is linked under
    that name in a folder beside it. (Passing the file path itself silently yields a
    5-token tokenizer; the size check below refuses that.)
    """

    def __init__(self, spm_path, max_len: int = 64):
        from transformers import XLMRobertaTokenizer

        spm = Path(spm_path)
        if spm.is_dir():
            self.tok = XLMRobertaTokenizer.from_pretrained(str(spm))
            f = spm / "sentencepiece.bpe.model"
            data = f.read_bytes() if f.is_file() else b""
        else:
            if not spm.is_file():
                raise InputError(f"BEiT-3 SentencePiece model not found: {str(spm)!r} (the "
                                 "official file is beit3.spm)")
            # transformers wants the file as sentencepiece.bpe.model in a folder: a private
            # one (mkdtemp: 0700, unpredictable, removed once read), never a shared and
            # predictable path where another user could plant a tokenizer config
            data = spm.read_bytes()
            d = tempfile.mkdtemp(prefix="scoreband-xlmr-")
            try:
                Path(d, "sentencepiece.bpe.model").write_bytes(data)
                self.tok = XLMRobertaTokenizer.from_pretrained(d)
            finally:
                shutil.rmtree(d, ignore_errors=True)
        if len(self.tok) <= 5:
            raise InputError(f"the tokenizer read from {str(spm)!r} has only {len(self.tok)} "
                             "tokens: the SentencePiece model was not loaded")
        self.max_len = max_len
        self.spm_sha256 = hashlib.sha256(data).hexdigest()[:16]

    def __len__(self) -> int:
        return len(self.tok)

    def batch(self, texts: list[str]):
        """(ids, padding mask, truncated flags, token counts)."""
        n = len(texts)
        ids = torch.full((n, self.max_len), self.tok.pad_token_id, dtype=torch.long)
        pad = torch.ones((n, self.max_len), dtype=torch.bool)
        trunc = np.zeros(n, dtype=bool)
        counts = np.zeros(n, dtype=int)
        for i, t in enumerate(texts):
            toks = self.tok.encode(t, add_special_tokens=False)
            counts[i] = len(toks)
            if len(toks) > self.max_len - 2:
                toks, trunc[i] = toks[: self.max_len - 2], True
            row = [self.tok.bos_token_id, *toks, self.tok.eos_token_id]
            ids[i, : len(row)] = torch.tensor(row)
            pad[i, : len(row)] = False
        return ids, pad, trunc, counts


class BEiT3Backbone:
    """``beit3:PATH``: PATH is a checkpoint file (``.pth`` / ``.safetensors``) with
    ``beit3.spm`` beside it, or a folder holding one checkpoint, ``beit3.spm`` and
    optionally ``config.json`` (``{"heads": N, "img_size": 384}``).
    Representation: vision CLS of the fused sequence (dim D)."""

    kind = "cross-encoder"

    def __init__(self, path, *, image_size: int | None = None, device: str = "cpu",
                 dtype: str = "float32"):

        p = Path(path)
        cfg_over = {}
        if p.is_dir():
            ckpts = sorted(list(p.glob("*.pth")) + list(p.glob("*.safetensors")))
            if not ckpts:
                raise InputError(f"{str(p)!r} holds no .pth or .safetensors BEiT-3 checkpoint")
            if len(ckpts) > 1:
                raise InputError(f"{str(p)!r} holds several checkpoints "
                                 f"({', '.join(c.name for c in ckpts)}); pass one file")
            ckpt, folder = ckpts[0], p
            if (p / "config.json").is_file():
                cfg_over = read_json(p / "config.json", what="BEiT-3 config")
        else:
            ckpt, folder = p, p.parent
        spm = folder / "beit3.spm"
        if not spm.is_file():
            raise InputError(f"no beit3.spm beside the checkpoint in {str(folder)!r}: BEiT-3's "
                             "SentencePiece model is needed for the captions")
        state = load_beit3_state(ckpt)
        cfg = config_from_state(state, heads=cfg_over.get("heads"))
        want = image_size or cfg_over.get("img_size") or cfg.img_size
        if want % cfg.patch_size:
            raise InputError(f"image size {want} is not a multiple of the patch {cfg.patch_size}")
        if want != cfg.img_size:
            state["encoder.embed_positions.A.weight"] = interpolate_vision_positions(
                state["encoder.embed_positions.A.weight"], want // cfg.patch_size)
            cfg.img_size = want
        self.cfg = cfg
        #: the transform squashes to img_size: larger JPEGs may be decoded down to it
        self.min_image_edge = cfg.img_size
        self.model = BEiT3(cfg)
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        if missing:
            raise InputError(f"{ckpt.name} lacks BEiT-3 weights: {missing[:5]} ...")
        self.ignored = list(unexpected)
        self.dtype = dtype
        self.device = device
        self.model = self.model.to(device, getattr(torch, dtype)).eval()
        self.tokenizer = BEiT3Tokenizer(spm)
        self.name = f"beit3:{path}"
        self.dim = cfg.dim
        self.fingerprint = weights_fingerprint(ckpt)

    def describe(self) -> dict:
        return {"backbone": self.name, "weights_sha256": self.fingerprint,
                "tokenizer_sha256": self.tokenizer.spm_sha256, "config": self.cfg.to_dict(),
                "preprocessing": {"size": self.cfg.img_size, "interpolation": "bicubic",
                                  "mean": [0.5] * 3, "std": [0.5] * 3, "text_max_len": 64},
                "dtype": self.dtype, "device": self.device,
                "representation": "vision CLS of the fused sequence"}

    def preprocess(self, images):
        return beit3_transform(images, self.cfg.img_size)

    def encode_text(self, texts):
        ids, pad, trunc, counts = self.tokenizer.batch(list(texts))
        return {"ids": ids, "pad": pad}, trunc, counts

    def represent(self, pixels: torch.Tensor, text: dict) -> torch.Tensor:
        dt = getattr(torch, self.dtype)
        x = self.model(pixels.to(self.device, dt), text["ids"].to(self.device),
                       text["pad"].to(self.device))
        return x[:, 0].float()

    def image_embedding(self, pixels: torch.Tensor) -> torch.Tensor:
        dt = getattr(torch, self.dtype)
        return self.model(pixels.to(self.device, dt))[:, 0].float()

    def trainable(self) -> nn.Module:
        return self.model
