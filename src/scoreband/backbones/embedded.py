"""The embedded cross-encoder: a tiny joint-attention transformer over image patches and
caption tokens (BEiT-3's fused encoder at toy scale), trained from scratch on CPU."""

from __future__ import annotations

import hashlib
import io
import re
import warnings
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import torch
from torch import nn

from scoreband.checksums import verify_checksums
from scoreband.errors import InputError
from scoreband.json_io import read_json
from scoreband.schemas import EmbeddedModelDoc, ScorerDoc, validate
from scoreband.world.scenes import COLOURS, NUMBERS, SHAPES, SIZES

__all__ = ["WordTokenizer", "EmbeddedConfig", "EmbeddedCrossEncoder", "preprocess_images"]

_BASE_WORDS = (
    "a an the there is are only in total picture shows number of with and on plain background "
    "simple alone middle left right above below"
).split()


class WordTokenizer:
    """Word-level tokenizer built from the world's grammar; unknown words map to [UNK].

    ``encode`` returns ids padded to ``max_len`` and whether the text was truncated.
    """

    PAD, CLS, UNK = "[PAD]", "[CLS]", "[UNK]"

    def __init__(self, vocab: list[str] | None = None, max_len: int = 40):
        if vocab is None:
            words = set(_BASE_WORDS) | set(COLOURS) | set(SHAPES) | set(SIZES)
            words |= {s + "s" for s in SHAPES} | set(NUMBERS.values()) | {","}
            vocab = [self.PAD, self.CLS, self.UNK, *sorted(words)]
        self.vocab = list(vocab)
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.max_len = max_len

    def __len__(self) -> int:
        return len(self.vocab)

    @staticmethod
    def words(text: str) -> list[str]:
        return re.findall(r"[a-z]+|,", str(text).lower())

    def encode(self, text: str) -> tuple[list[int], bool, int]:
        """(ids padded to max_len, truncated?, number of words before truncation)."""
        w = self.words(text)
        ids = [self.index.get(t, self.index[self.UNK]) for t in w]
        n = len(ids)
        truncated = n > self.max_len
        ids = ids[: self.max_len]
        return ids + [0] * (self.max_len - len(ids)), truncated, n

    def out_of_vocabulary(self, text: str) -> str:
        """Why the model cannot read this caption, or "" when it knows every word: the
        embedded model was trained on the world's grammar only, so its band for "a dog on the
        beach" is a confident guess about nothing it has seen."""
        w = self.words(text)
        if not w:
            return "caption: no words (only digits, symbols or emoji)"
        unknown = list(dict.fromkeys(t for t in w if t not in self.index))
        if unknown:
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            return ("caption: words the model does not know: "
                    + ", ".join(repr(t) for t in unknown[:5]) + more)
        return ""

    def batch(self, texts) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
        enc = [self.encode(t) for t in texts]
        ids = torch.tensor([e[0] for e in enc], dtype=torch.long)
        return ids, np.array([e[1] for e in enc]), np.array([e[2] for e in enc])


@dataclass
class EmbeddedConfig:
    image_size: int = 64
    patch: int = 16
    dim: int = 64
    depth: int = 2
    heads: int = 4
    mlp: int = 128
    dropout: float = 0.1
    max_len: int = 40
    vocab_size: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def preprocess_images(images: np.ndarray, size: int) -> torch.Tensor:
    """uint8 (n, H, W, 3) at ``size`` -> float tensor (n, 3, H, W) in [-1, 1]."""
    x = torch.from_numpy(np.ascontiguousarray(images)).float().permute(0, 3, 1, 2)
    if x.shape[-1] != size or x.shape[-2] != size:
        raise ValueError(f"images must be {size}x{size}, got {tuple(x.shape[-2:])}")
    return x / 127.5 - 1.0


class EmbeddedCrossEncoder(nn.Module):
    """[CLS] + caption tokens + image patches through one transformer encoder (joint
    attention). ``forward`` returns the CLS representation (n, dim)."""

    def __init__(self, cfg: EmbeddedConfig):
        super().__init__()
        self.cfg = cfg
        n_patches = (cfg.image_size // cfg.patch) ** 2
        # A small convolutional stem turns each patch into one token (colour and shape
        # detectors need a few non-linear layers; a single linear patch projection made the
        # from-scratch model learn far too slowly on CPU).
        c = cfg.dim // 4
        self.patch_embed = nn.Sequential(
            nn.Conv2d(3, c, 3, stride=2, padding=1), nn.GELU(),
            nn.Conv2d(c, cfg.dim, 3, stride=2, padding=1), nn.GELU(),
            nn.AdaptiveMaxPool2d(cfg.image_size // cfg.patch),
            nn.Conv2d(cfg.dim, cfg.dim, 1),
        )
        self.tok_embed = nn.Embedding(cfg.vocab_size, cfg.dim, padding_idx=0)
        self.cls = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.pos_text = nn.Parameter(torch.randn(1, cfg.max_len, cfg.dim) * 0.02)
        self.pos_img = nn.Parameter(torch.randn(1, n_patches, cfg.dim) * 0.02)
        self.type_embed = nn.Embedding(2, cfg.dim)  # 0 text, 1 image (multiway-like)
        layer = nn.TransformerEncoderLayer(cfg.dim, cfg.heads, cfg.mlp, cfg.dropout,
                                           activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, cfg.depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(cfg.dim)
        # auxiliary per-patch head: colour (7 classes incl. empty) and shape (5) of the object
        # in each patch; trained on the world's known scenes to give the stem a fast start
        self.cell_head = nn.Linear(cfg.dim, len(COLOURS) + 1 + len(SHAPES) + 1)

    @property
    def dim(self) -> int:
        return self.cfg.dim

    def _image_tokens(self, pixels: torch.Tensor) -> torch.Tensor:
        p = self.patch_embed(pixels).flatten(2).transpose(1, 2)
        return p + self.pos_img + self.type_embed.weight[1]

    def forward(self, pixels: torch.Tensor, ids: torch.Tensor,
                image_tokens: torch.Tensor | None = None) -> torch.Tensor:
        b = pixels.shape[0]
        t = self.tok_embed(ids) + self.pos_text + self.type_embed.weight[0]
        img = self._image_tokens(pixels) if image_tokens is None else image_tokens
        x = torch.cat([self.cls.expand(b, -1, -1), t, img], dim=1)
        pad = torch.cat([torch.zeros(b, 1, dtype=torch.bool), ids == 0,
                         torch.zeros(b, x.shape[1] - 1 - ids.shape[1], dtype=torch.bool)], 1)
        h = self._encode(x, pad)
        # CLS plus the mean of the caption-token outputs: each word's output has attended to
        # the image, so pooling the words carries the match signal in one hop (CLS alone
        # needs two hops, and a from-scratch model learned that far too slowly).
        words = ~pad[:, 1:1 + ids.shape[1]]
        wmean = (h[:, 1:1 + ids.shape[1]] * words[..., None]).sum(1) / words.sum(1,
                                                                                keepdim=True).clamp(min=1)
        return self.norm(h[:, 0] + wmean)

    def _encode(self, x: torch.Tensor, pad: torch.Tensor | None) -> torch.Tensor:
        """The encoder layers. Training runs nn.TransformerEncoder (dropout included); at
        inference the same weights run through scaled_dot_product_attention, which on CPU is
        about 1.4x faster than the native fast path's masked softmax (outputs agree to 1e-4).
        """
        if self.training:
            return self.encoder(x, src_key_padding_mask=pad)
        keep = None if pad is None else (~pad)[:, None, None, :]
        for layer in self.encoder.layers:
            att = layer.self_attn
            b, t, d = x.shape
            qkv = nn.functional.linear(layer.norm1(x), att.in_proj_weight, att.in_proj_bias)
            q, k, v = qkv.view(b, t, 3, att.num_heads, d // att.num_heads).permute(2, 0, 3, 1, 4)
            a = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            x = x + att.out_proj(a.transpose(1, 2).reshape(b, t, d))
            x = x + layer.linear2(nn.functional.gelu(layer.linear1(layer.norm2(x))))
        return x

    def cell_logits(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-patch colour and shape logits, (n, patches, 7) and (n, patches, 5)."""
        z = self.cell_head(self.patch_embed(pixels).flatten(2).transpose(1, 2))
        return z[..., : len(COLOURS) + 1], z[..., len(COLOURS) + 1:]

    @torch.no_grad()
    def image_embedding(self, pixels: torch.Tensor,
                        image_tokens: torch.Tensor | None = None) -> torch.Tensor:
        """Image-only embedding (CLS over the patches alone), for clustering."""
        b = pixels.shape[0]
        img = self._image_tokens(pixels) if image_tokens is None else image_tokens
        x = torch.cat([self.cls.expand(b, -1, -1), img], dim=1)
        return self.norm(self._encode(x, None)[:, 0])

    def represent_and_embed(self, pixels: torch.Tensor, ids: torch.Tensor):
        """``forward`` and ``image_embedding`` of one batch, the convolutional stem run once
        for both (the same numbers as the two calls)."""
        img = self._image_tokens(pixels)
        return self(pixels, ids, img), self.image_embedding(pixels, img)

    def flops_per_pair(self) -> float:
        """Multiply-adds x 2 of one forward pass (matmuls only)."""
        c = self.cfg
        L = 1 + c.max_len + (c.image_size // c.patch) ** 2
        per_layer = 2 * L * (4 * c.dim * c.dim + 2 * c.dim * c.mlp) + 2 * 2 * L * L * c.dim
        h1, h2 = c.image_size // 2, c.image_size // 4
        stem = (2 * h1**2 * 27 * (c.dim // 4) + 2 * h2**2 * 9 * (c.dim // 4) * c.dim
                + 2 * (c.image_size // c.patch) ** 2 * c.dim * c.dim)
        return float(c.depth * per_layer + stem)

    def flops_per_scoring_pass(self) -> float:
        """Multiply-adds x 2 of what scoring computes per pair (matmuls only):
        :meth:`represent_and_embed`, the joint pass plus the image-only pass, the stem once."""
        c = self.cfg
        L = 1 + (c.image_size // c.patch) ** 2
        per_layer = 2 * L * (4 * c.dim * c.dim + 2 * c.dim * c.mlp) + 2 * 2 * L * L * c.dim
        return self.flops_per_pair() + float(c.depth * per_layer)


class _RepAndEmbedding(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixels, ids):
        return self.model.represent_and_embed(pixels, ids)


def _onnx_session(model, profile: bool = False):
    """An ONNX Runtime session of the encoder's inference path (exported in memory, batch
    size free); raises ImportError without onnxruntime / onnx. ``profile``: ONNX Runtime's
    profiler on (benchmarks/scorer_roofline.py)."""
    import onnx  # noqa: F401  (lazy: the exporter needs it)
    import onnxruntime as ort  # lazy: the optional [onnx] extra

    size, n_words = model.cfg.image_size, model.cfg.max_len
    px = torch.zeros(2, 3, size, size)
    ids = torch.ones(2, n_words, dtype=torch.long)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_RepAndEmbedding(model.eval()), (px, ids), buf,
                          input_names=["px", "ids"], output_names=["rep", "emb"],
                          dynamic_axes={k: {0: "n"} for k in ("px", "ids", "rep", "emb")},
                          opset_version=17, dynamo=False)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    # no busy-waiting between runs: the spinning threads would take the cores from the
    # torch work around each batch (heads, tokenizing, decoding)
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.enable_profiling = profile
    return ort.InferenceSession(buf.getvalue(), opts, providers=["CPUExecutionProvider"])


def bundled_model_dir() -> Path:
    """Folder of the trained embedded model shipped in the package."""
    return Path(str(resources.files("scoreband") / "data" / "models" / "embedded-default"))


def read_model_config(path) -> dict:
    """A model folder's ``config.json`` as a dict (any scorer folder; what it must hold is
    checked by its schema where it is read)."""
    cfg_file = Path(path) / "config.json"
    if not cfg_file.exists():
        raise InputError(f"model folder {str(path)!r} has no config.json; train one with "
                         "`scoreband train --out DIR`")
    meta = read_json(cfg_file, what="model config",
                     fix="the model folder is damaged: retrain it or restore the file")
    if not isinstance(meta, dict):
        raise InputError(f"{cfg_file} is not a scoreband model config (a JSON object); "
                         "retrain it with `scoreband train`")
    return meta


def read_model_folder(path) -> dict:
    """Read a model folder written by ``scoreband train`` (or the bundled one): its
    ``config.json`` (``meta``), the encoder ``config``, the ``state`` dict of
    ``model.safetensors``, the ``tokenizer`` and the weights ``fingerprint``."""
    from safetensors.torch import load_file

    path = Path(path)
    cfg_file, w_file = path / "config.json", path / "model.safetensors"
    meta = read_model_config(path)
    if not w_file.exists():
        raise InputError(f"model folder {str(path)!r} has no {w_file.name}; train one with "
                         "`scoreband train --out DIR`")
    fix = ("the model folder is damaged or not a scoreband model: retrain it with "
           "`scoreband train` or restore the file")
    doc = validate(EmbeddedModelDoc if meta.get("format_version") == 1 else ScorerDoc, meta,
                   cfg_file, fix=fix)
    if doc.backbone is None or doc.vocab is None:
        raise InputError(f"{cfg_file}: no embedded encoder in this folder (its backbone is "
                         f"{doc.backbone_name!r}); {fix}")
    cfg = EmbeddedConfig(**doc.backbone.model_dump())
    vocab = doc.vocab
    try:
        state = load_file(str(w_file))  # checks the header and the tensors' byte ranges
    except Exception as e:  # safetensors raises its own error type for a damaged file
        raise InputError(f"{w_file} cannot be read as safetensors weights ({type(e).__name__}: "
                         f"{' '.join(str(e).split())[:120]}); the file is truncated or "
                         "damaged: retrain or restore it") from None
    verify_checksums(path)  # well-formed, but edited since it was written?
    return {"meta": meta, "config": cfg, "state": state,
            "tokenizer": WordTokenizer(vocab, cfg.max_len),
            "fingerprint": "sha256:" + hashlib.sha256(w_file.read_bytes()).hexdigest()[:16],
            "path": path, "weights_file": w_file}


class EmbeddedBackbone:
    """The embedded cross-encoder behind the common backbone interface: the bundled one
    (``embedded:default``), or one rebuilt from a trained model folder
    (:meth:`from_parts`). It takes uint8 arrays at its own size as they are (the world's
    images) and PIL images resized to it; it has dropout of its own (``stochastic``: the
    MC-dropout baseline runs it again for every pass)."""

    kind = "cross-encoder"
    stochastic = True
    batch_size = 256

    def __init__(self, name: str = "embedded:default"):
        folder = read_model_folder(bundled_model_dir())
        # the folder holds the whole scorer (encoder + heads): take the encoder's weights
        enc = {k[len("backbone."):]: v for k, v in folder["state"].items()
               if k.startswith("backbone.")}
        self._setup(name, folder["config"], folder["tokenizer"], enc, folder["fingerprint"])

    @classmethod
    def from_parts(cls, name: str, cfg: EmbeddedConfig, tokenizer: WordTokenizer,
                   state: dict, fingerprint: str) -> EmbeddedBackbone:
        """The encoder of a trained embedded model: its config, tokenizer and weights."""
        self = cls.__new__(cls)
        self._setup(name, cfg, tokenizer, state, fingerprint)
        return self

    def _setup(self, name, cfg, tokenizer, state, fingerprint) -> None:
        model = EmbeddedCrossEncoder(cfg)
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise InputError(f"the embedded encoder's weights do not match its config: "
                             f"missing {missing[:5]}, unexpected {unexpected[:5]}")
        self.name = name
        self.cfg = cfg
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.size = self.input_size = cfg.image_size
        self.dim = cfg.dim
        self.fingerprint = fingerprint

    def describe(self) -> dict:
        return {"backbone": self.name, "weights_sha256": self.fingerprint,
                "preprocessing": {"size": self.size, "interpolation": "bicubic",
                                  "range": [-1, 1]}, "dtype": "float32", "device": "cpu",
                "text_max_len": self.tokenizer.max_len}

    def preprocess(self, images) -> torch.Tensor:
        """uint8 arrays (n, size, size, 3) as they are; PIL images (or arrays of another
        size) converted and resized as a file is (:func:`scoreband.images.image_input`:
        RGB by meaning, the one bicubic resize)."""
        from scoreband.images import image_input  # lazy: loads pandas, pyarrow

        if isinstance(images, np.ndarray) and images.ndim == 4 and \
                images.shape[1:] == (self.size, self.size, 3):
            return preprocess_images(images, self.size)
        arr = np.stack([
            a if isinstance(a, np.ndarray) and a.shape == (self.size, self.size, 3)
            and a.dtype == np.uint8 else image_input(a, self.size) for a in images])
        return preprocess_images(arr, self.size)

    def encode_text(self, texts):
        ids, trunc, counts = self.tokenizer.batch(list(texts))
        return {"ids": ids}, trunc, counts

    def represent(self, pixels, text) -> torch.Tensor:
        return self.model(pixels, text["ids"]).float()

    def image_embedding(self, pixels) -> torch.Tensor:
        return self.model.image_embedding(pixels).float()

    def represent_and_embed(self, pixels, text) -> tuple[torch.Tensor, torch.Tensor]:
        """The joint representation and the image embedding of one batch, through ONNX
        Runtime when :meth:`use_runtime` chose it (eager torch otherwise)."""
        if getattr(self, "_session", None) is not None:
            rep, emb = self._session.run(None, {"px": pixels.numpy(),
                                                "ids": text["ids"].numpy()})
            return torch.from_numpy(rep), torch.from_numpy(emb)
        rep, emb = self.model.represent_and_embed(pixels, text["ids"])
        return rep.float(), emb.float()

    def use_runtime(self, runtime: str = "eager") -> str:
        """``"onnx"``: export the encoder (representation and image embedding, one graph)
        in memory and run it with ONNX Runtime from now on (outputs within 1e-5 of eager
        torch; on 2 CPU cores 1.05-1.1x eager's scoring pass alone and no faster through a
        whole ``predict``: ``benchmarks/scorer_roofline.py``); ``"eager"``: torch.
        Without the ``onnx`` extra, or when the export fails, it stays eager and says why in
        a warning. Returns the runtime in use."""
        self._session = None
        if runtime == "eager":
            return "eager"
        if runtime != "onnx":
            raise InputError(f"`runtime` {runtime!r}: choose eager or onnx")
        try:
            self._session = _onnx_session(self.model)
        except ImportError as e:  # lazy: onnxruntime is the optional [onnx] extra
            warnings.warn(f"runtime onnx needs {e.name}: pip install \"scoreband[onnx]\"; "
                          "scoring with eager torch", stacklevel=2)
            return "eager"
        except Exception as e:  # noqa: BLE001 - an exporter gap must not stop the scoring
            warnings.warn(f"the ONNX export failed ({type(e).__name__}: {str(e)[:120]}); "
                          "scoring with eager torch", stacklevel=2)
            return "eager"
        return "onnx"

    def trainable(self) -> nn.Module:
        return self.model
