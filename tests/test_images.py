"""Image decoding (scoreband.images): the fast paths (reduced-scale JPEG decode, libpng
through imagecodecs, torch's bicubic resize) give PIL's pixels, exactly or within a stated
tolerance, and fall back to PIL where they cannot."""

import io
import struct
import sys
import zlib

import numpy as np
import pytest
from PIL import Image, ImageOps, PngImagePlugin

import scoreband.images as images
from scoreband.scorers import load_scorer


def _today(p, size):
    """The decode before issue 25, the reference: PIL's full decode, PIL's bicubic."""
    with Image.open(p) as im:
        im.load()
        rgb = images.to_rgb(ImageOps.exif_transpose(im))
        return np.asarray(rgb.resize((size, size), Image.Resampling.BICUBIC)).astype(int)


def test_fast_decoding_stays_within_its_tolerance(tmp_path):
    """JPEGs decoded at a reduced DCT scale, then resized by torch's PIL-bicubic kernel:
    pixels within a mean of 1.5 grey levels of PIL's full decode + PIL's resize; PNG and
    WebP (full decode, only the resize kernel differs) within 4 levels everywhere and 0.3
    on average; the bundled model's medians within 0.01 of [0, 1]."""
    rng = np.random.default_rng(0)
    files = []
    for k, (w, h) in enumerate([(640, 480), (1024, 768), (300, 500), (97, 61)]):
        y, x = np.mgrid[0:h, 0:w] / max(w, h)
        a = np.stack([np.sin(5 * x), np.cos(4 * y), np.sin(3 * (x + y))], -1) * 100 + 128
        a = np.clip(a + rng.normal(0, 10, a.shape), 0, 255).astype(np.uint8)
        for ext in ("jpg", "png", "webp"):
            p = tmp_path / f"{k}.{ext}"
            Image.fromarray(a).save(p, quality=90)
            files.append(p)
    scorer = load_scorer("embedded:default")
    for size in (64, 224):
        ref = [_today(p, size) for p in files]
        new = [images.load_image(p, size).astype(int) for p in files]
        for p, a, b in zip(files, ref, new, strict=True):
            d = np.abs(a - b)
            if p.suffix == ".jpg":
                assert d.mean() <= 1.5, (p, size)
            else:
                assert d.max() <= 4 and d.mean() <= 0.3, (p, size, d.max(), d.mean())
        if size == scorer.input_size:
            caps = ["a red circle"] * len(files)
            m_ref = scorer.predict(np.stack(ref).astype(np.uint8), caps).median
            m_new = scorer.predict(np.stack(new).astype(np.uint8), caps).median
            assert np.abs(m_ref - m_new).max() <= 0.01


def test_resize_kernel_matches_pil_bicubic():
    """resize_square (torch's vectorised antialiased bicubic) against PIL's BICUBIC on
    photo-like images of random sizes, shrinking, growing and both: within 4 grey levels,
    0.3 on average. (Both run the same filter in two passes, each rounded and clipped to
    8 bits; PIL picks which pass goes first, torch always goes horizontal first, so pure
    noise, whose overshoots are clipped, can differ by more at a few pixels.)"""
    rng = np.random.default_rng(3)
    for _ in range(60):
        h, w = (int(v) for v in rng.integers(1, 700, 2))
        size = int(rng.integers(1, 300))
        y, x = np.mgrid[0:h, 0:w] / max(w, h)
        a = np.stack([np.sin(5 * x + rng.uniform(0, 6)), np.cos(4 * y), np.sin(3 * (x + y))],
                     -1) * 100 + 128
        a = np.clip(a + rng.normal(0, 10, a.shape), 0, 255).astype(np.uint8)
        ref = np.asarray(Image.fromarray(a).resize((size, size), Image.Resampling.BICUBIC))
        got = images.resize_square(a, size)
        assert got.shape == (size, size, 3) and got.dtype == np.uint8
        d = np.abs(ref.astype(int) - got.astype(int))
        assert d.max() <= 4 and d.mean() <= 0.3, (h, w, size, d.max(), d.mean())


def test_reduced_jpeg_decode_equals_pils_draft(tmp_path, monkeypatch):
    """simplejpeg's scaled decode gives PIL's ``draft`` pixels exactly (random sizes and
    targets, greyscale, EXIF-rotated); without simplejpeg the PIL path gives the same
    arrays; CMYK JPEGs and truncated files go through PIL and keep its verdicts."""

    rng = np.random.default_rng(5)
    for k in range(25):
        w, h = (int(v) for v in rng.integers(8, 1300, 2))
        need = int(rng.integers(8, 400))
        mode = "L" if k % 5 == 0 else "RGB"
        a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        im = Image.fromarray(a).convert(mode)
        buf = io.BytesIO()
        exif = Image.Exif()
        if k % 3 == 0:
            exif[0x0112] = int(rng.integers(2, 9))
        im.save(buf, "JPEG", quality=85, exif=exif.tobytes())
        data = buf.getvalue()
        with Image.open(io.BytesIO(data)) as ref:
            ref.draft(None, (need, need))
            ref_a = np.asarray(images.to_rgb(ImageOps.exif_transpose(ref)))
        got = images.load_images([data, data], None, min_edge=need)[0]
        assert np.array_equal(np.asarray(got), ref_a), (w, h, need, mode)
        sized = images.load_image(data, 57)
        monkeypatch.setitem(sys.modules, "simplejpeg", None)  # import fails: PIL's draft
        assert np.array_equal(images.load_image(data, 57), sized)
        monkeypatch.delitem(sys.modules, "simplejpeg")
    cmyk = tmp_path / "cmyk.jpg"
    Image.fromarray(rng.integers(0, 256, (80, 90, 4), dtype=np.uint8), "CMYK").save(cmyk)
    assert images.load_image(cmyk, 32).shape == (32, 32, 3)
    whole = tmp_path / "whole.jpg"
    Image.fromarray(rng.integers(0, 256, (300, 400, 3), dtype=np.uint8)).save(whole)
    torn = tmp_path / "torn.jpg"
    torn.write_bytes(whole.read_bytes()[:5000])
    with pytest.raises(ValueError, match="could not be decoded"):
        images.load_image(torn, 64)


def test_plain_pngs_decode_through_libpng_as_pil_decodes_them(monkeypatch):
    """8-bit RGB and grey PNGs (interlaced, with a gAMA chunk) come from libpng through
    imagecodecs, pixel for pixel what PIL gives; palette, alpha, 16-bit and EXIF-oriented
    PNGs go through PIL; without imagecodecs everything goes through PIL, the same arrays."""
    rng = np.random.default_rng(2)
    a = rng.integers(0, 256, (41, 67, 3), dtype=np.uint8)
    gamma = PngImagePlugin.PngInfo()
    gamma.add(b"gAMA", (45455).to_bytes(4, "big"))
    exif = Image.Exif()
    exif[0x0112] = 6
    cases = {"rgb": (Image.fromarray(a), {}, True),
             "grey": (Image.fromarray(a[..., 0]), {}, True),
             "interlaced": (Image.fromarray(a), {"interlace": 1}, True),
             "gamma": (Image.fromarray(a), {"pnginfo": gamma}, True),
             "grey16": (Image.fromarray(a[..., 0].astype(np.uint16) * 257), {}, False),
             "palette": (Image.fromarray(a).convert("P"), {}, False),
             "rgba": (Image.fromarray(np.dstack([a, a[..., :1]])), {}, False),
             "exif": (Image.fromarray(a), {"exif": exif.tobytes()}, False)}
    datas = {}
    for name, (im, kw, fast) in cases.items():
        buf = io.BytesIO()
        im.save(buf, "PNG", **kw)
        data = datas[name] = buf.getvalue()
        with Image.open(io.BytesIO(data)) as opened:
            assert (images._png_fast(data, opened) is not None) == fast, name
        got = [np.asarray(images.load_images([data, data], None)[0]),
               images.load_image(data, 23)]
        monkeypatch.setitem(sys.modules, "imagecodecs", None)  # the PIL path
        ref = [np.asarray(images.load_images([data, data], None)[0]),
               images.load_image(data, 23)]
        monkeypatch.delitem(sys.modules, "imagecodecs")
        for g, r in zip(got, ref, strict=True):
            assert g.shape == r.shape and np.array_equal(g, r), name
    # written by hand (PIL writes neither): 2-bit grey (scaled to 0-255 by both) and
    # 16-bit RGB (PIL keeps the high bytes: left to PIL)
    def png(w, h, depth, colour, rows):
        def chunk(t, d):
            return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
        ihdr = struct.pack(">IIBBBBB", w, h, depth, colour, 0, 0, 0)
        raw = b"".join(b"\x00" + r for r in rows)
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw))
                + chunk(b"IEND", b""))

    two = png(8, 3, 2, 0, [bytes(rng.integers(0, 256, 2, dtype=np.uint8)) for _ in range(3)])
    deep = png(5, 4, 16, 2, [rng.integers(0, 65536, 15, dtype=np.uint16).astype(">u2").tobytes()
                              for _ in range(4)])
    for name, data, fast in (("grey2", two, True), ("rgb16", deep, False)):
        with Image.open(io.BytesIO(data)) as opened:
            assert (images._png_fast(data, opened) is not None) == fast, name
        got = np.asarray(images.load_images([data, data], None)[0])
        monkeypatch.setattr(images, "FAST_PNG", False)
        assert np.array_equal(got, np.asarray(images.load_images([data, data], None)[0])), name
        monkeypatch.setattr(images, "FAST_PNG", True)
    torn = datas["rgb"][: len(datas["rgb"]) // 2]  # libpng fails; PIL gives its verdict
    with pytest.raises(ValueError, match="could not be decoded|not a readable"):
        images.load_image(torn, 16)
