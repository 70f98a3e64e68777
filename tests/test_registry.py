"""The Registry class, and a contract test over every registered backbone, judge, generator
and encoder: each entry builds through the registry from a tiny local model (or says why it
cannot here) and the object it builds keeps its extension point's contract."""

import numpy as np
import pytest
from PIL import Image

from scoreband.backbones import BACKBONES, Backbone
from scoreband.errors import InputError
from scoreband.judges.base import JudgePrompt
from scoreband.judges.registry import JUDGES
from scoreband.registry import Registry
from scoreband.roundtrip.encoders import ENCODERS
from scoreband.roundtrip.generators import GENERATORS
from tests.tiny_models import tiny_beit3, tiny_clip, tiny_llava, tiny_stable_diffusion, tiny_vit


def test_registry_resolves_exact_and_prefixed_names():
    r = Registry("thing")
    r.register("plain", help="an exact name", factory=lambda *, size=1: ("plain", size))

    @r.register("pre:", argument="ARG", help="a prefix")
    def _pre(arg, *, size=1):
        return ("pre", arg, size)

    assert r.names() == ["plain", "pre:ARG"] and list(r) == r.names() and len(r) == 2
    assert r.create("plain", size=3) == ("plain", 3)
    with pytest.raises(InputError, match="thing 'plain' takes no 'unused', 'other'; it takes: "
                                         "size"):
        r.create("plain", size=3, unused=9, other=1)  # an option asked for is never dropped
    # options offered to every entry alike: each takes those it knows; asked ones win
    assert r.create("plain", offered={"size": 5, "unused": 9}) == ("plain", 5)
    assert r.create("pre:x", offered={"size": 5}, size=2) == ("pre", "x", 2)
    assert r.create("pre:x:y") == ("pre", "x:y", 1)
    assert "pre:a" in r and "other" not in r
    with pytest.raises(InputError, match="unknown thing 'nope'; choose one of plain, pre:ARG"):
        r.resolve("nope")
    with pytest.raises(InputError, match="names nothing after 'pre:'"):
        r.resolve("pre:")
    with pytest.raises(ValueError, match="registered twice"):
        r.register("plain", help="again", factory=lambda: None)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("registry-models")
    return {"beit3": tiny_beit3(d / "beit3"), "clip": tiny_clip(d / "clip"),
            "vit": tiny_vit(d / "vit"), "sd": tiny_stable_diffusion(d / "sd"),
            "llava": tiny_llava(d / "llava")}


def _spec(entry, tiny):
    """The address of a tiny local model for each entry; None when none can be built here."""
    local = {"beit3:": "beit3", "hf:": "clip"}
    if not entry.is_prefix:
        return entry.name
    if entry.name in local:
        return entry.name + str(tiny[local[entry.name]])
    return None


@pytest.mark.parametrize("name", [e.name for e in BACKBONES.entries()])
def test_every_backbone_keeps_the_contract(tiny, name):
    entry = BACKBONES.entries()[[e.name for e in BACKBONES.entries()].index(name)]
    spec = _spec(entry, tiny)
    if spec is None:  # open_clip: the package is an optional extra, not installed here
        with pytest.raises(InputError, match="open_clip"):
            BACKBONES.create(entry.name + "ViT-B-32:laion2b")
        return
    bb = BACKBONES.create(spec)
    assert isinstance(bb, Backbone) and bb.kind == entry.info["kind"]
    rng = np.random.default_rng(0)
    ims = [Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)) for _ in range(2)]
    batch, truncated, counts = bb.encode_text(["a red circle", "a blue square left of it"])
    import torch

    with torch.no_grad():
        rep = bb.represent(bb.preprocess(ims), batch).float().cpu().numpy()
    assert rep.shape == (2, bb.dim) and np.isfinite(rep).all()
    assert len(truncated) == 2 and len(counts) == 2
    assert isinstance(bb.describe(), dict) and bb.fingerprint


@pytest.mark.parametrize("name", [e.name for e in GENERATORS.entries()])
def test_every_generator_draws_an_image(tiny, name):
    spec = {"embedded:renderer": "embedded:renderer",
            "diffusers:": f"diffusers:{tiny['sd']}", "openai:": None}[name]
    if spec is None:  # an endpoint: covered against a local HTTP server in test_roundtrip
        assert GENERATORS.resolve("openai:m")[1] == "m"
        return
    gen = GENERATORS.create(spec, offered=dict(steps=2, size=32))
    im = gen.generate("a red circle", seed=0)
    assert isinstance(im, Image.Image) and isinstance(gen.describe(), dict)


@pytest.mark.parametrize("name", [e.name for e in ENCODERS.entries()])
def test_every_encoder_embeds(tiny, name):
    spec = {"embedded:default": "embedded:default", "hf:": f"hf:{tiny['vit']}"}[name]
    enc = ENCODERS.create(spec)
    ims = [Image.new("RGB", (32, 32), c) for c in ("red", "blue")]
    e = np.asarray(enc.embed(ims))
    assert e.shape[0] == 2 and np.isfinite(e).all() and isinstance(enc.describe(), dict)


@pytest.mark.parametrize("name", [e.name for e in JUDGES.entries()])
def test_every_judge_builds(tiny, name, tmp_path):
    prompt = JudgePrompt(1, 5)
    if name == "openai:":  # no request is sent until a row is judged
        j = JUDGES.create("openai:m", prompt, base_url="http://127.0.0.1:9", cache_dir=tmp_path)
    else:
        j = JUDGES.create(f"hf:{tiny['llava']}", prompt)
    assert j.name.startswith(name) and j.prompt is prompt and isinstance(j.describe(), dict)
