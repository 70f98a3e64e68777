"""Backbone registry: kept as data, discoverable, addressed with explicit prefixes.

Every backbone object has ``name``, ``kind`` (cross-encoder / dual-encoder), ``dim`` (the
representation a quantile head sits on), ``fingerprint``, ``describe()`` (provenance),
``preprocess(list of PIL images) -> pixels``, ``encode_text(texts) -> (batch, truncated,
token counts)``, ``represent(pixels, batch) -> (n, dim) float32``, ``image_embedding(pixels)``
and ``trainable()`` (the module to fine-tune).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from scoreband.errors import InputError
from scoreband.registry import Registry

__all__ = ["BACKBONES", "Backbone", "list_backbones", "resolve_backbone", "load_backbone"]


@runtime_checkable
class Backbone(Protocol):
    """What a quantile head needs from a vision-language model (see the module docstring)."""

    name: str
    kind: str  #: "cross-encoder" or "dual-encoder"
    dim: int
    fingerprint: str

    def describe(self) -> dict: ...

    def preprocess(self, images): ...

    def encode_text(self, texts): ...

    def represent(self, pixels, batch): ...

    def image_embedding(self, pixels): ...

    def trainable(self): ...


#: every backbone a scorer can sit on; ``BACKBONES.create(name, device=..., dtype=...)``
BACKBONES = Registry("backbone")


@BACKBONES.register("embedded:default", kind="cross-encoder",
                    help="tiny joint-attention transformer trained on the embedded world "
                         "(ships with scoreband; no download)")
def _embedded():
    from scoreband.backbones.embedded import EmbeddedBackbone  # lazy: loads PIL, pydantic, torch

    return EmbeddedBackbone("embedded:default")


@BACKBONES.register("beit3:", argument="PATH", kind="cross-encoder",
                    help="an official BEiT-3 checkpoint (.pth) with beit3.spm beside it, or a "
                         "folder holding both")
def _beit3(path, *, device="cpu", dtype="float32", image_size=None):
    from scoreband.backbones.beit3 import BEiT3Backbone  # lazy: loads PIL, httpx, rich, torch

    return BEiT3Backbone(path, image_size=image_size, device=device, dtype=dtype)


@BACKBONES.register("hf:", argument="MODEL_ID_OR_DIR", kind="dual-encoder",
                    help="a transformers dual encoder (CLIP, SigLIP ...)")
def _hf(path, *, device="cpu", dtype="float32"):
    from scoreband.backbones.dual import HFDualEncoder  # lazy: loads httpx, rich, torch

    return HFDualEncoder(path, device=device, dtype=dtype)


@BACKBONES.register("open_clip:", argument="ARCH:PRETRAINED_OR_PATH", kind="dual-encoder",
                    help="an open_clip model (needs open_clip_torch)")
def _open_clip(rest, *, device="cpu", dtype="float32"):
    arch, _, pre = rest.partition(":")
    if not arch or not pre:
        raise InputError(f"open_clip:{rest!r}: expected open_clip:ARCH:PRETRAINED_OR_PATH")
    from scoreband.backbones.dual import OpenCLIPDualEncoder  # lazy: loads httpx, rich, torch

    return OpenCLIPDualEncoder(arch, pre, device=device, dtype=dtype)


def list_backbones() -> list[str]:
    """The named backbones and the addressable kinds (``beit3:PATH`` ...)."""
    return BACKBONES.names()


def resolve_backbone(name: str) -> dict:
    """Look a backbone up without loading it; errors list the choices."""
    entry, _ = BACKBONES.resolve(name)
    return {"name": name, "kind": entry.info["kind"], "description": entry.help}


def load_backbone(name: str, *, device: str = "cpu", dtype: str = "float32",
                  image_size: int | None = None):
    """Instantiate a backbone from its address (see ``BACKBONES``)."""
    if dtype not in ("float32", "bfloat16", "float16"):
        raise InputError(f"`dtype` {dtype!r}: choose float32, bfloat16 or float16")
    sized = {} if image_size is None else {"image_size": image_size}  # asked for: BEiT-3 only
    return BACKBONES.create(name, offered=dict(device=device, dtype=dtype), **sized)
