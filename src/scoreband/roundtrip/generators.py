"""Text-to-image generators for the round-trip metric, addressed like backbones.

* ``embedded:renderer``: the embedded world's renderer drawing the scene a caption of the
  world's grammar describes (what the caption leaves open, e.g. positions, sizes or the
  colours of counted objects, is drawn from the seed). No model, no download.
* ``diffusers:PATH_OR_ID``: a diffusers text-to-image pipeline (``AutoPipelineForText2Image``,
  e.g. Stable Diffusion) from a local directory or a hub id; one ``torch.Generator`` seeded per
  generation on the pipeline's device, so a run is reproducible.
* ``openai:MODEL``: an OpenAI-compatible ``/images/generations`` endpoint; retries with
  back-off, a disk cache keyed on model + prompt + seed + size, failures raised per row (the
  row is recorded, never scored).

Every generator has ``generate(caption, seed) -> PIL.Image`` and ``describe() -> dict``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import warnings
from pathlib import Path

import numpy as np
from PIL import Image

from scoreband.errors import InputError
from scoreband.files import atomic_path
from scoreband.http import EndpointClient, public_url
from scoreband.images import decode_image
from scoreband.model_sources import model_source
from scoreband.registry import Registry
from scoreband.world.scenes import COLOURS, NUMBERS, SHAPES, SIZES, Obj, Scene, relation, render

__all__ = ["GENERATORS", "make_generator", "parse_caption", "EmbeddedRenderer",
           "DiffusersGenerator", "OpenAIImageGenerator", "GenerationError"]

#: the text-to-image generators; ``GENERATORS.create(spec, **options)``
GENERATORS = Registry("generator")


class GenerationError(Exception):
    """One generation failed; the row records the reason and is not scored."""


# ------------------------------------------------------------------ embedded renderer
_WORDS = {n: k for k, n in NUMBERS.items()}
_REL = ("left of", "right of", "above", "below")


def _phrases(tokens: list[str]) -> list[dict]:
    """Every 'a [size] colour shape' phrase, in order."""
    out = []
    for i, t in enumerate(tokens):
        if t != "a":
            continue
        j = i + 1
        size = tokens[j] if j < len(tokens) and tokens[j] in SIZES else None
        j += size is not None
        if j + 1 < len(tokens) and tokens[j] in COLOURS and tokens[j + 1] in SHAPES:
            out.append({"size": size, "colour": tokens[j], "shape": tokens[j + 1], "at": i})
    return out


def parse_caption(caption: str) -> dict:
    """What a caption of the world's grammar states: objects, a count, a relation.

    >>> parse_caption("a red circle left of a small blue star")["relation"]
    'left of'
    >>> parse_caption("the number of stars is three")["count"]
    ('star', 3)
    >>> parse_caption("a dog on a sofa")
    Traceback (most recent call last):
    ...
    ValueError: the embedded renderer cannot draw this caption: it names no 'a [size] <colour> <shape>' object and no count (colours: red, green, blue, yellow, purple, orange; shapes: circle, square, triangle, star)
    """
    tokens = re.sub(r"[,.;]", " ", caption.lower()).split()
    text = " ".join(tokens)
    m = re.search(r"number of (\w+?)s is (\w+)", text)
    if m and m.group(1) in SHAPES and m.group(2) in _WORDS:
        return {"objects": [], "count": (m.group(1), _WORDS[m.group(2)]), "relation": None,
                "alone": False}
    objs = _phrases(tokens)
    if not objs:
        raise ValueError(
            "the embedded renderer cannot draw this caption: it names no 'a [size] <colour> "
            f"<shape>' object and no count (colours: {', '.join(COLOURS)}; shapes: "
            f"{', '.join(SHAPES)})")
    rel = None
    if len(objs) == 2:
        between = " ".join(tokens[objs[0]["at"] + 1: objs[1]["at"]])
        rel = next((r for r in _REL if r in between), None)
    return {"objects": objs, "count": None, "relation": rel, "alone": "alone" in tokens}


def _cell_xy(c: int, rng) -> tuple[float, float]:
    return (float((c % 4 + 0.5) / 4 + rng.uniform(-0.04, 0.04)),
            float((c // 4 + 0.5) / 4 + rng.uniform(-0.04, 0.04)))


def scene_for(caption: str, seed: int) -> Scene:
    """A scene that makes ``caption`` true; what it leaves open is drawn from ``seed``."""
    facts = parse_caption(caption)
    rng = np.random.default_rng(seed)

    def pick(v, choices):
        return v if v is not None else str(rng.choice(choices))

    if facts["count"] is not None:
        shape, k = facts["count"]
        cells = rng.choice(16, size=k, replace=False)
        return Scene(tuple(Obj(shape, pick(None, list(COLOURS)), pick(None, SIZES),
                               *_cell_xy(int(c), rng)) for c in cells))
    objs = facts["objects"][:16]
    if facts["alone"] and len(objs) == 1:
        o = objs[0]
        return Scene((Obj(o["shape"], o["colour"], pick(o["size"], SIZES), 0.5, 0.5),))
    for _ in range(200):
        cells = rng.choice(16, size=len(objs), replace=False)
        scene = tuple(Obj(o["shape"], o["colour"], pick(o["size"], SIZES),
                          *_cell_xy(int(c), rng)) for o, c in zip(objs, cells, strict=True))
        if facts["relation"] is None or relation(scene[0], scene[1]) == facts["relation"]:
            return Scene(scene)
    return Scene(scene)  # pragma: no cover - 200 draws always find a placement


class EmbeddedRenderer:
    """``embedded:renderer`` (see module docstring)."""

    name = "embedded:renderer"

    def __init__(self, size: int = 64, style: str = "photo"):
        self.size, self.style = size, style

    def describe(self) -> dict:
        return {"generator": self.name, "size": self.size, "style": self.style}

    def generate(self, caption: str, seed: int) -> Image.Image:
        try:
            scene = scene_for(caption, seed)
        except ValueError as e:
            raise GenerationError(str(e)) from None
        arr = render(scene, self.size, self.style, np.random.default_rng([seed, 1]))
        return Image.fromarray(arr)


# ------------------------------------------------------------------ diffusers
class DiffusersGenerator:
    """``diffusers:PATH_OR_ID``: ``AutoPipelineForText2Image`` (Stable Diffusion and the
    other text-to-image pipelines), seeded per generation on the pipeline's device."""

    def __init__(self, source: str, *, steps: int = 25, size: int = 512,
                 guidance: float = 7.5, device: str = "cpu", dtype: str = "float32"):
        import torch
        from diffusers import AutoPipelineForText2Image

        if dtype not in ("float32", "bfloat16", "float16"):
            raise InputError(f"`dtype` {dtype!r}: choose float32, bfloat16 or float16")
        self.name = f"diffusers:{source}"
        self.steps, self.size, self.guidance = int(steps), int(size), float(guidance)
        self.device, self.dtype = device, dtype
        from diffusers.utils import deprecation_utils

        # diffusers renamed torch_dtype to dtype (the old name warns from then on)
        key = ("dtype" if hasattr(deprecation_utils, "_TORCH_DTYPE_DEPRECATION_MESSAGE")
               else "torch_dtype")
        try:
            source = model_source(source, "diffusers:")
            self.pipe = AutoPipelineForText2Image.from_pretrained(
                source, **{key: getattr(torch, dtype)})
        except (OSError, ValueError) as e:
            raise InputError(f"could not load the diffusers pipeline {source!r}: {e}. Fix: "
                             "pass a directory saved with save_pretrained (model_index.json, "
                             "unet/, vae/, text_encoder/, tokenizer/, scheduler/) or a hub id "
                             "on a machine with internet") from None
        self.pipe = self.pipe.to(device)
        self.pipe.set_progress_bar_config(disable=True)
        # the safety checker is kept as loaded; recorded so a user knows blacked-out images
        # may occur
        self.safety_checker = getattr(self.pipe, "safety_checker", None) is not None

    def describe(self) -> dict:
        return {"generator": self.name, "steps": self.steps, "size": self.size,
                "guidance": self.guidance, "device": self.device, "dtype": self.dtype,
                "safety_checker": self.safety_checker}

    def generate(self, caption: str, seed: int) -> Image.Image:
        import torch

        g = torch.Generator(device=self.device).manual_seed(int(seed))
        try:
            out = self.pipe(caption, num_inference_steps=self.steps, guidance_scale=self.guidance,
                            height=self.size, width=self.size, generator=g, output_type="pil")
        except (RuntimeError, ValueError) as e:
            raise GenerationError(f"the pipeline failed: {e}") from None
        return out.images[0]


# ------------------------------------------------------------------ endpoint
class OpenAIImageGenerator(EndpointClient):
    """``openai:MODEL``: ``POST {base_url}/images/generations`` with ``response_format``
    ``b64_json``. The seed is part of the cache key; it is sent to the server only with
    ``send_seed=True`` (OpenAI's own API has no seed, so several generations there differ by
    the service's randomness and are not reproducible)."""

    error = GenerationError

    def __init__(self, model: str, *, base_url: str = "https://api.openai.com/v1",
                 size: int = 512, timeout: float = 120.0, retries: int = 4,
                 backoff: float = 1.0, cache_dir=None, send_seed: bool = False,
                 api_key: str | None = None):
        self.model = model
        self.name = f"openai:{model}"
        self._init_endpoint(base_url, api_key, timeout=timeout, retries=retries,
                            backoff=backoff)
        self.size = size
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.send_seed = send_seed

    def describe(self) -> dict:
        return {"generator": self.name, "endpoint": public_url(self.base_url), "size": self.size,
                "send_seed": self.send_seed}

    def generate(self, caption: str, seed: int) -> Image.Image:
        key = hashlib.sha256(json.dumps({"endpoint": public_url(self.base_url), "model": self.model,
                                         "prompt": caption, "seed": int(seed),
                                         "size": self.size}, sort_keys=True).encode()
                             ).hexdigest()
        f = self.cache_dir / f"{key}.png" if self.cache_dir is not None else None
        if f is not None and f.exists():
            try:
                return decode_image(f)
            except ValueError as e:  # a damaged cache entry: reported, generated again
                warnings.warn(f"damaged image cache entry {f.name} ({e}); asking the "
                              "endpoint again", stacklevel=2)
        body = {"model": self.model, "prompt": caption, "n": 1,
                "size": f"{self.size}x{self.size}", "response_format": "b64_json"}
        if self.send_seed:
            body["seed"] = int(seed)
        resp = self._post("images/generations", body)
        try:
            data = base64.b64decode(resp["data"][0]["b64_json"], validate=True)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            raise GenerationError(f"the endpoint returned no image data ({type(e).__name__}: "
                                  f"{e})") from None
        try:  # the one image decoder: size, pixel and bomb limits
            img = decode_image(data)
        except ValueError as e:
            raise GenerationError(f"the endpoint's image is unusable: {e}") from None
        if f is not None:
            f.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(f) as tmp:
                img.save(tmp, format="PNG")
        return img


GENERATORS.register("embedded:renderer", factory=lambda style="photo": EmbeddedRenderer(style=style),
                    help="draws the scene a caption of the embedded world describes "
                         "(no model; ships with scoreband)")
GENERATORS.register("diffusers:", argument="PATH_OR_ID", factory=DiffusersGenerator,
                    help="a diffusers text-to-image pipeline (local directory or hub id)")
GENERATORS.register("openai:", argument="MODEL", factory=OpenAIImageGenerator,
                    help="an OpenAI-compatible /images/generations endpoint "
                         "($OPENAI_API_KEY)")


#: build a generator by address (see ``GENERATORS``); options it does not take are ignored
make_generator = GENERATORS.create
