"""Backbone registry: kept as data, discoverable, addressed with explicit prefixes.

Every backbone object has ``name``, ``kind`` (cross-encoder / dual-encoder), ``dim`` (the
representation a quantile head sits on), ``fingerprint``, ``describe()`` (provenance),
``preprocess(list of PIL images) -> pixels``, ``encode_text(texts) -> (batch, truncated,
token counts)``, ``represent(pixels, batch) -> (n, dim) float32``, ``image_embedding(pixels)``
and ``trainable()`` (the module to fine-tune).
"""

from __future__ import annotations

from scoreband.errors import InputError

__all__ = ["BACKBONES", "PREFIXES", "list_backbones", "resolve_backbone", "load_backbone"]

#: named entries (no weights to find) -> description
BACKBONES: dict[str, dict] = {
    "embedded:default": {
        "kind": "cross-encoder",
        "description": "tiny joint-attention transformer trained on the embedded world "
                       "(ships with scoreband; no download)",
    },
}
#: prefix -> what follows it
PREFIXES = {
    "embedded:": "NAME of a bundled model (embedded:default)",
    "beit3:": "PATH to an official BEiT-3 checkpoint (.pth) with beit3.spm beside it, or a "
              "folder holding both",
    "hf:": "MODEL_ID_OR_DIR of a transformers dual encoder (CLIP, SigLIP ...)",
    "open_clip:": "ARCH:PRETRAINED_OR_PATH (needs open_clip_torch)",
}


def list_backbones() -> list[str]:
    """The named backbones and the addressable kinds (``beit3:PATH`` ...)."""
    return sorted(BACKBONES) + [p + v.split(" ")[0] for p, v in PREFIXES.items()
                                if p != "embedded:"]


def _choices() -> str:
    return "; ".join(f"{p}{d}" for p, d in PREFIXES.items())


def resolve_backbone(name: str) -> dict:
    """Look a backbone up; errors list the choices."""
    if name in BACKBONES:
        return {"name": name, **BACKBONES[name]}
    prefix = next((p for p in PREFIXES if name.startswith(p)), None)
    if prefix is None:
        raise InputError(f"backbone {name!r} has no known prefix; choices: {_choices()}")
    if prefix == "embedded:":
        raise InputError(f"unknown backbone {name!r}; available: "
                         f"{', '.join(sorted(BACKBONES))}")
    if not name[len(prefix):]:
        raise InputError(f"backbone {name!r} names nothing after {prefix!r}; choices: "
                         f"{_choices()}")
    return {"name": name, "kind": "dual-encoder" if prefix in ("hf:", "open_clip:")
            else "cross-encoder", "description": PREFIXES[prefix]}


def load_backbone(name: str, *, device: str = "cpu", dtype: str = "float32",
                  image_size: int | None = None):
    """Instantiate a backbone from its address (see ``PREFIXES``)."""
    if dtype not in ("float32", "bfloat16", "float16"):
        raise InputError(f"--dtype {dtype!r}: choose float32, bfloat16 or float16")
    resolve_backbone(name)
    if name.startswith("embedded:"):
        from scoreband.backbones.embedded import EmbeddedBackbone

        return EmbeddedBackbone(name)
    if name.startswith("beit3:"):
        from scoreband.backbones.beit3 import BEiT3Backbone

        return BEiT3Backbone(name[len("beit3:"):], image_size=image_size, device=device,
                             dtype=dtype)
    if name.startswith("hf:"):
        from scoreband.backbones.dual import HFDualEncoder

        return HFDualEncoder(name[3:], device=device, dtype=dtype)
    arch, _, pre = name[len("open_clip:"):].partition(":")
    if not arch or not pre:
        raise InputError(f"{name!r}: expected open_clip:ARCH:PRETRAINED_OR_PATH")
    from scoreband.backbones.dual import OpenCLIPDualEncoder

    return OpenCLIPDualEncoder(arch, pre, device=device, dtype=dtype)
