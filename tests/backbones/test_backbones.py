"""Real backbones through the real loading code, on tiny models built and saved here:
BEiT-3 (official checkpoint layout, SentencePiece trained here) and CLIP (tokenizer from a
local vocab). Registry, representations, CLIP-S, training heads, scoring, provenance."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from scoreband.backbones import list_backbones, load_backbone, resolve_backbone
from scoreband.backbones.beit3 import BEiT3Tokenizer, interpolate_vision_positions, load_beit3_state
from scoreband.cli import app
from scoreband.errors import InputError
from scoreband.world import make_dataset
from tests.conftest import runner


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from tiny_models import tiny_beit3, tiny_clip

    d = tmp_path_factory.mktemp("backbones")
    return {"beit3": tiny_beit3(d / "beit3"), "clip": tiny_clip(d / "clip")}


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """World items as train / val / test tables with PNG images and 3 ratings each."""
    d = tmp_path_factory.mktemp("tables")
    out = {}
    for name, n, seed in (("train", 160, 1), ("val", 80, 2), ("test", 30, 3)):
        ds = make_dataset(n, seed, n_annotators=3, name=name)
        df = ds.to_frame(d / name)
        out[name] = d / f"{name}.csv"
        df.to_csv(out[name], index=False)
    return out


def _images(n=3, seed=0):
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 255, (40, 50, 3), dtype=np.uint8))
            for _ in range(n)]


# ------------------------------------------------------------------ registry
def test_registry_lists_and_refuses():
    names = list_backbones()
    assert "embedded:default" in names and any(n.startswith("beit3:") for n in names)
    assert resolve_backbone("hf:openai/clip-vit-base-patch32")["kind"] == "dual-encoder"
    with pytest.raises(InputError, match="beit3:.*hf:.*open_clip:"):
        resolve_backbone("clip:x")
    with pytest.raises(InputError, match="names nothing"):
        resolve_backbone("beit3:")
    with pytest.raises(InputError, match="open_clip is not installed|torchvision"):
        load_backbone("open_clip:ViT-B-32:laion2b")
    with pytest.raises(InputError, match="`dtype`"):
        load_backbone("embedded:default", dtype="int8")


# ------------------------------------------------------------------ BEiT-3
def test_beit3_checkpoint_layout_and_golden_values(models):
    state = load_beit3_state(models["beit3"] / "tiny_beit3.pth")
    assert "head.weight" not in state and "text_embed.weight" in state
    assert "encoder.layers.1.self_attn.inner_attn_ln.B.weight" in state
    bb = load_backbone(f"beit3:{models['beit3']}")
    assert (bb.cfg.dim, bb.cfg.depth, bb.cfg.heads, bb.cfg.img_size) == (32, 2, 2, 32)
    px = bb.preprocess(_images())
    assert px.shape == (3, 3, 32, 32) and float(px.min()) >= -1 and float(px.max()) <= 1
    tb, trunc, counts = bb.encode_text(["a red circle", "two blue stars above a square",
                                        "a " * 80])
    assert tb["ids"].shape == (3, 64) and list(trunc) == [False, False, True]
    assert counts[2] > 62 and int(tb["ids"][0, 0]) == bb.tokenizer.tok.bos_token_id
    n0 = int((~tb["pad"][0]).sum())
    assert int(tb["ids"][0, n0 - 1]) == bb.tokenizer.tok.eos_token_id
    assert int(tb["ids"][2, 63]) == bb.tokenizer.tok.eos_token_id  # eos kept on truncation
    with torch.inference_mode():
        rep = bb.represent(px, tb)
    # golden values: the tiny model is built from a fixed seed; a change in the encoder
    # (positions, multiway split, norms, masking) moves these numbers
    np.testing.assert_allclose(rep[0, :4].numpy(), GOLDEN_BEIT3, atol=2e-4)
    assert rep.dtype == torch.float32


# the same numbers come out of torchscale's reference BEiT-3 on this checkpoint
# (scripts/check_beit3_vs_torchscale.py: max difference 1.4e-6)
GOLDEN_BEIT3 = [1.453053, -0.947670, -0.309467, -1.720990]


def test_beit3_position_interpolation_and_sizes(models):
    w = torch.arange(3 + 4 * 4, dtype=torch.float32)[:, None].repeat(1, 5)
    w2 = interpolate_vision_positions(w, 6)
    assert w2.shape == (3 + 36, 5) and torch.equal(w2[:3], w[:3])
    bb = load_backbone(f"beit3:{models['beit3']}", image_size=48)
    assert bb.cfg.img_size == 48
    with torch.inference_mode():
        r = bb.represent(bb.preprocess(_images(2)), bb.encode_text(["a", "b"])[0])
    assert r.shape == (2, 32)
    with pytest.raises(InputError, match="multiple of the patch"):
        load_backbone(f"beit3:{models['beit3']}", image_size=40)


def test_beit3_errors(models, tmp_path):
    import shutil

    shutil.copy(models["beit3"] / "tiny_beit3.pth", tmp_path / "lonely.pth")
    with pytest.raises(InputError, match="no beit3.spm"):
        load_backbone(f"beit3:{tmp_path / 'lonely.pth'}")
    with pytest.raises(InputError, match="checkpoint not found"):
        load_backbone(f"beit3:{models['beit3'] / 'nope.pth'}")
    torch.save({"model": {"visual.proj": torch.zeros(2)}}, tmp_path / "other.pth")
    with pytest.raises(InputError, match="no 'beit3"):
        load_beit3_state(tmp_path / "other.pth")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError):
        BEiT3Tokenizer(tmp_path / "empty")


def test_beit3_bfloat16_heads_in_float32(models):
    bb = load_backbone(f"beit3:{models['beit3']}", dtype="bfloat16")
    with torch.inference_mode():
        r = bb.represent(bb.preprocess(_images(2)), bb.encode_text(["a red circle", "b"])[0])
    ref = load_backbone(f"beit3:{models['beit3']}")
    with torch.inference_mode():
        r32 = ref.represent(ref.preprocess(_images(2)), ref.encode_text(["a red circle", "b"])[0])
    assert r.dtype == torch.float32 and torch.allclose(r, r32, atol=0.1)


# ------------------------------------------------------------------ CLIP
def test_clip_dual_encoder_and_clip_s(models, tables, tmp_path):
    from transformers import AutoProcessor, CLIPModel

    bb = load_backbone(f"hf:{models['clip']}")
    assert bb.kind == "dual-encoder" and bb.dim == 4 * 8
    long = "a red circle " * 20
    tb, trunc, counts = bb.encode_text(["a red circle", long])
    assert list(trunc) == [False, True] and counts[1] > 32
    assert int(tb["input_ids"][1, -1]) == bb.tokenizer.eos_token_id  # end-of-text kept
    out = tmp_path / "clips.csv"
    df = pd.read_csv(tables["test"]).head(6)
    df.loc[2, "caption"] = long
    df.loc[3, "image"] = "missing.png"
    df.to_csv(tmp_path / "t.csv", index=False)
    r = runner.invoke(app, ["score", str(tmp_path / "t.csv"), "--backbone",
                            f"hf:{models['clip']}", "--scorer", "clip-s", "--out", str(out)])
    assert r.exit_code == 0, r.output
    res = pd.read_csv(out, keep_default_na=False)
    assert res.loc[2, "truncated"] in (True, "True") and "image file not found" in \
        res.loc[3, "score_error"]
    # CLIP-S by hand with the model called directly
    model = CLIPModel.from_pretrained(models["clip"]).eval()
    proc = AutoProcessor.from_pretrained(models["clip"])
    img = Image.open(df.loc[0, "image"]).convert("RGB")
    with torch.inference_mode():
        ei = model.get_image_features(**proc(images=[img], return_tensors="pt"))
        et = model.get_text_features(**proc.tokenizer([df.loc[0, "caption"]],
                                                     return_tensors="pt"))
        ei = ei if isinstance(ei, torch.Tensor) else ei.pooler_output
        et = et if isinstance(et, torch.Tensor) else et.pooler_output
    cos = torch.nn.functional.cosine_similarity(ei, et).item()
    assert float(res.loc[0, "clip_s"]) == pytest.approx(2.5 * max(cos, 0), abs=1e-5)
    prov = json.loads((tmp_path / "clips.csv.provenance.json").read_text())
    assert prov["components"]["scorer"]["w"] == 2.5
    assert prov["components"]["backbone"]["weights_sha256"]


# ------------------------------------------------------------------ train + score
@pytest.mark.parametrize("kind", ["clip", "beit3"])
def test_train_calibrate_score_end_to_end(kind, models, tables, tmp_path):
    spec = f"hf:{models['clip']}" if kind == "clip" else f"beit3:{models['beit3']}"
    out = tmp_path / "model"
    r = runner.invoke(app, ["train", str(tables["train"]), "--backbone", spec, "--ratings",
                            "ratings", "--scale", "1,5", "--val", str(tables["val"]),
                            "--epochs", "3", "--head-epochs", "3", "--out", str(out)])
    assert r.exit_code == 0, r.output
    for f in ("config.json", "model.safetensors", "calibrator.json", "MODEL_CARD.md"):
        assert (out / f).is_file(), f
    assert list((out / "cache").glob("reps-*.safetensors"))  # frozen: cached representations
    meta = json.loads((out / "config.json").read_text())
    assert meta["backbone_name"] == spec and meta["training"]["n_calibration"] == 40
    card = (out / "MODEL_CARD.md").read_text()
    assert "scoreband train" in card and "| chained_ci |" in card and "omega" in card
    assert "How it was trained" in card
    from scoreband.scorers import load_scorer
    from scoreband.scorers.scorer import Scorer

    # one scorer for every kind, one folder format
    assert isinstance(load_scorer(out), Scorer)
    assert isinstance(load_scorer("embedded:default"), Scorer)
    assert meta["format"] == "scoreband.scorer" and meta["format_version"] == 2
    assert not meta["backbone_in_file"] and not (out / "heads.safetensors").exists()
    scored = tmp_path / "scored.csv"
    r = runner.invoke(app, ["score", str(tables["test"]), "--model", str(out), "--out",
                            str(scored)])
    assert r.exit_code == 0, r.output
    res = pd.read_csv(scored)
    assert res["band_error"].isna().all() and len(res) == 30
    assert (res["band_lo"] <= res["band_median"] + 1e-9).all()
    assert (res["band_median"] <= res["band_hi"] + 1e-9).all()
    prov = json.loads((tmp_path / "scored.csv.provenance.json").read_text())
    assert prov["files"]["calibrator"]["sha256"]
    assert prov["components"]["backbone"]["preprocessing"]
    _a_folder_of_before_version_2_still_loads(out, meta, tables)
    # the scorer refuses a backbone whose weights changed
    meta["backbone_fingerprint"] = "0" * 16
    (out / "config.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match="config.json was changed after the model was written"):
        Scorer.load(out)  # the folder's SHA256SUMS sees the edit
    (out / "SHA256SUMS").unlink()  # a folder without checksums: the fingerprint check
    with pytest.raises(InputError, match="other weights"):
        Scorer.load(out)


def test_fine_tuning_and_mc_dropout(models, tables, tmp_path):
    from scoreband.scorers.scorer import Scorer

    out = tmp_path / "ft"
    r = runner.invoke(app, ["train", str(tables["train"]), "--backbone", f"hf:{models['clip']}",
                            "--ratings", "ratings", "--scale", "1,5", "--fine-tune",
                            "--epochs", "1", "--head-epochs", "2", "--out", str(out)])
    assert r.exit_code == 0, r.output
    meta = json.loads((out / "config.json").read_text())
    assert meta["backbone_in_file"] and not (out / "backbone.safetensors").exists()
    sc = Scorer.load(out)
    df = pd.read_csv(tables["test"]).head(5)
    ims = [Image.open(p) for p in df["image"]]
    mc = sc.mc_dropout(ims, list(df["caption"]), passes=5)
    q = sc.predict(ims, list(df["caption"]))
    assert np.all(mc.lo <= mc.hi) and np.all(q.lo <= q.median) and np.all(q.median <= q.hi)


def test_train_table_errors(models, tables, tmp_path):
    r = runner.invoke(app, ["train", str(tables["train"]), "--backbone", f"hf:{models['clip']}",
                            "--target", "human", "--out", str(tmp_path / "m")])
    assert r.exit_code == 2 and "--scale" in r.output
    r = runner.invoke(app, ["train", "--backbone", f"hf:{models['clip']}",
                            "--out", str(tmp_path / "m")])
    assert r.exit_code == 2 and "TRAIN_TABLE" in r.output


def test_clip_golden_values(models):
    """The tiny CLIP's dual-encoder features for fixed inputs (seeded weights, the
    tokenizer from the local vocab): a change in preprocessing, tokenisation, pooling or the
    feature layout moves these numbers."""
    bb = load_backbone(f"hf:{models['clip']}")
    tb, _, _ = bb.encode_text(["a red circle", "two blue stars above a square", "a"])
    with torch.inference_mode():
        r = bb.represent(bb.preprocess(_images()), tb)
    np.testing.assert_allclose(r[0, :4].numpy(), [0.546422, 0.326912, -0.080279, -0.169373],
                               atol=2e-4)
    np.testing.assert_allclose(r[1, 8:12].numpy(), [0.063809, 0.469744, 0.360218, 0.424107],
                               atol=2e-4)
    # the layout: [e_img, e_txt, e_img * e_txt, |e_img - e_txt|] of unit vectors
    a, b = r[:, :8], r[:, 8:16]
    torch.testing.assert_close(r[:, 16:24], a * b)
    torch.testing.assert_close(a.norm(dim=1), torch.ones(3))


def _a_folder_of_before_version_2_still_loads(out, meta, tables):
    """The same heads written as a ``scoreband.backbone-scorer`` folder (heads.safetensors,
    before the one format): it loads as the same scorer and predicts the same bands."""
    import shutil

    from safetensors.torch import load_file, save_file

    from scoreband.checksums import write_checksums
    from scoreband.scorers.scorer import Scorer

    old = out.parent / "legacy"
    old.mkdir()
    state = load_file(str(out / "model.safetensors"))
    save_file({k: v for k, v in state.items() if not k.startswith("backbone.")},
              str(old / "heads.safetensors"))
    legacy = {"format": "scoreband.backbone-scorer", "format_version": 1,
              "backbone_name": meta["backbone_name"],
              "backbone_fingerprint": meta["backbone_fingerprint"], "dim": meta["dim"],
              "dropout": meta["dropout"], "fine_tuned": False, "levels": meta["levels"],
              "provenance": meta["provenance"], "training": meta["training"]}
    (old / "config.json").write_text(json.dumps(legacy))
    write_checksums(old, ["config.json", "heads.safetensors"])
    shutil.copy(out / "calibrator.json", old / "calibrator.json")
    df = pd.read_csv(tables["test"]).head(6)
    ims = [Image.open(p) for p in df["image"]]
    a = Scorer.load(out).predict(ims, list(df["caption"]))
    b = Scorer.load(old).predict(ims, list(df["caption"]))
    np.testing.assert_allclose(a.quantiles, b.quantiles, atol=1e-6)


def test_clip_preprocessing_in_threads_equals_the_processor(models, tmp_path):
    """CLIP's preprocessing run by scoreband (threads, the same PIL resize) gives the
    processor's pixels to 1e-6 on PNG, JPEG, WebP, grey, RGBA and odd-sized images, and
    CLIP-S scores equal to 1e-5 with the fast paths on or off; decoding in threads keeps
    the rows' order and each bad file's own error."""
    import scoreband.backbones.dual as dual
    import scoreband.images as images
    from scoreband.backbones import load_backbone
    from scoreband.scorers.stages import score_any

    rng = np.random.default_rng(0)
    rows = []
    for i, (h, w, mode, fmt) in enumerate([(480, 640, "RGB", "png"), (640, 480, "RGB", "jpg"),
                                           (33, 77, "L", "png"), (300, 301, "RGBA", "png"),
                                           (225, 1000, "RGB", "webp"), (32, 32, "RGB", "png")]):
        a = rng.integers(0, 255, (h, w, {"L": 1, "RGB": 3, "RGBA": 4}[mode])).astype(np.uint8)
        f = tmp_path / f"im{i}.{fmt}"
        Image.fromarray(a[..., 0] if mode == "L" else a, mode).save(f)
        rows.append({"image": str(f), "caption": f"a red circle number {i}"})
    (tmp_path / "bad.png").write_text("not an image")
    rows.insert(2, {"image": str(tmp_path / "bad.png"), "caption": "a red circle"})
    bb = load_backbone(f"hf:{models['clip']}")
    ims = [images.decode_image(r["image"]) for r in rows if "bad" not in r["image"]]
    ref = bb.processor.image_processor(images=ims, return_tensors="pt")["pixel_values"]
    assert bb._clip_steps() is not None
    assert float((bb.preprocess(ims) - ref).abs().max()) < 1e-6
    loaded = images.load_images([r["image"] for r in rows], None)
    assert isinstance(loaded[2], ValueError) and "not a readable image" in str(loaded[2])
    assert [im.size for im in loaded if not isinstance(im, ValueError)] == [
        im.size for im in ims]
    df = pd.DataFrame(rows)
    fast = score_any(df, scorer="clip-s", backbone=f"hf:{models['clip']}")["table"]
    try:
        images.PARALLEL, dual.FAST_CLIP = False, False
        slow = score_any(df, scorer="clip-s", backbone=f"hf:{models['clip']}")["table"]
    finally:
        images.PARALLEL, dual.FAST_CLIP = True, True
    assert fast["score_error"].fillna("").tolist() == slow["score_error"].fillna("").tolist()
    assert fast["score_error"].fillna("").astype(bool).sum() == 1
    np.testing.assert_allclose(fast["clip_s"], slow["clip_s"], atol=1e-5, equal_nan=True)


def test_processor_backbones_take_jpegs_decoded_towards_their_size(models, tmp_path,
                                                                   monkeypatch):
    """CLIP's processor needs its shortest edge (32 px here), BEiT-3's its square: a large
    JPEG reaches them DCT-reduced (640x480 -> 80x60 at 1/8), CLIP-S moves little against
    the full decode, and a PNG (no DCT scaling) gives the very same scores."""
    import pandas as pd

    import scoreband.images as images
    from scoreband.scorers.stages import score_any

    clip = load_backbone(f"hf:{models['clip']}")
    assert clip.min_image_edge == 32
    assert load_backbone(f"beit3:{models['beit3']}").min_image_edge == 32
    rng = np.random.default_rng(0)
    rows = []
    for i in range(6):
        im = Image.fromarray(rng.integers(0, 255, (30, 40, 3), dtype=np.uint8)).resize(
            (640, 480), Image.Resampling.BICUBIC)
        for ext in ("jpg", "png"):
            im.save(tmp_path / f"{i}.{ext}", quality=90)
            rows.append({"image": str(tmp_path / f"{i}.{ext}"), "caption": f"thing {i}"})
    got = images.load_images([rows[0]["image"]] * 2, None, min_edge=32)[0]
    assert got.size == (80, 60)
    df = pd.DataFrame(rows)
    spec = f"hf:{models['clip']}"
    assert score_any(df, scorer="clip-s", backbone=spec)["table"]["score_error"].eq("").all()
    paths = [r["image"] for r in rows]

    def embed():
        ims = images.load_images(paths, None, min_edge=clip.min_image_edge)
        with torch.inference_mode():
            e = clip.image_embedding(clip.preprocess(ims)).numpy()
        return e / np.linalg.norm(e, axis=1, keepdims=True)

    reduced = embed()
    monkeypatch.setattr(images, "DCT_SCALING", False)
    full = embed()
    jpg = np.array([p.endswith(".jpg") for p in paths])
    assert np.array_equal(reduced[~jpg], full[~jpg])
    cos = (reduced[jpg] * full[jpg]).sum(1)
    assert not np.array_equal(reduced[jpg], full[jpg]) and cos.min() > 0.99, cos
