import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from PIL import Image

from scoreband.columns import ColumnSpec, load_inputs
from scoreband.datatypes import Scale
from scoreband.errors import InputError
from scoreband.tables import read_table, write_table


@pytest.fixture
def df():
    return pd.DataFrame({"id": ["a", "b", "c"], "y": [1.0, 3.0, 5.0], "m": [0.1, 0.5, 0.9],
                         "r": ["1;1", "3;3;3", "5"]})


@pytest.mark.parametrize("ext", [".csv", ".tsv", ".jsonl", ".json", ".parquet"])
def test_roundtrip_formats(tmp_path, df, ext):
    p = write_table(df, tmp_path / f"t{ext}")
    back = read_table(p)
    pd.testing.assert_frame_equal(back.reset_index(drop=True), df, check_dtype=False)
    assert [f for f in os.listdir(tmp_path) if f.endswith(".tmp")] == []


def test_hf_datasets_directory(tmp_path, df):
    d = tmp_path / "ds" / "train"
    d.mkdir(parents=True)
    table = pa.Table.from_pandas(df, preserve_index=False)
    with pa.OSFile(str(d / "data-00000-of-00001.arrow"), "wb") as sink:
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
    (tmp_path / "ds" / "dataset_dict.json").write_text('{"splits": ["train"]}')
    back = read_table(tmp_path / "ds")
    assert back["y"].tolist() == [1.0, 3.0, 5.0]


def test_unknown_format_and_missing(tmp_path):
    (tmp_path / "x.xlsx").write_text("x")
    with pytest.raises(InputError, match="unknown table format"):
        read_table(tmp_path / "x.xlsx")
    with pytest.raises(InputError, match="does not exist"):
        read_table(tmp_path / "nope.csv")


def test_empty_table_refused(tmp_path):
    (tmp_path / "e.csv").write_text("a,b\n")
    with pytest.raises(InputError, match="no rows"):
        read_table(tmp_path / "e.csv")


def test_unknown_column_lists_available(df):
    spec = ColumnSpec(scale=Scale(1, 5, True), target="human", median="m")
    with pytest.raises(InputError, match="available: id, y, m, r"):
        load_inputs(df, spec)


def test_bad_rows_reported_and_skipped():
    df = pd.DataFrame({
        "id": list("abcdefgh"),
        "y": [1, 2, "x", 9, 3, 4, np.nan, 2],
        "m": [0.1, np.inf, 0.5, 0.5, 0.5, 0.2, 0.3, 0.4],
        "lo": [0.0, 0.0, 0.0, 0.0, 0.6, 0.1, 0.1, 0.1],
        "hi": [0.2, 0.2, 0.6, 0.6, 0.4, 0.3, 0.5, 0.5],
    })
    spec = ColumnSpec(scale=Scale(1, 5, True), target="y", median="m", lo="lo", hi="hi",
                      pred_scale=Scale(0, 1))
    inp = load_inputs(df, spec)
    assert inp.rows.tolist() == [0, 5, 7]
    reasons = {e.row: (e.column, e.reason) for e in inp.errors}
    assert reasons["2 (id=b)"][0] == "m" and "infinite" in reasons["2 (id=b)"][1]
    assert "not a number: 'x'" in reasons["3 (id=c)"][1]
    assert "outside the scale" in reasons["4 (id=d)"][1]
    assert "lo (0.6) > hi (0.4)" in reasons["5 (id=e)"][1]
    assert "missing value" in reasons["7 (id=g)"][1]
    assert [e.position for e in inp.errors] == [1, 2, 3, 4, 6]
    np.testing.assert_allclose(inp.y01, [0, 0.75, 0.25])


def test_ratings_column(df):
    spec = ColumnSpec(scale=Scale(1, 5, True), ratings="r", median="m", pred_scale=Scale(0, 1))
    inp = load_inputs(df, spec)
    assert inp.n_ratings.tolist() == [2, 3, 1]
    bad = pd.DataFrame({"r": ["1;7", "", "2;x", "2.5"], "m": [0.5] * 4})
    inp = load_inputs(pd.concat([df[["r", "m"]], bad]).reset_index(drop=True), spec)
    assert len(inp.errors) == 4 and len(inp.rows) == 3


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    from scoreband.files import atomic_path

    target = tmp_path / "out.csv"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        with open(tmp, "w") as f:
            f.write("half")
        raise RuntimeError("crash mid-write")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


@pytest.mark.parametrize("ext", ["csv", "tsv", "jsonl", "json", "parquet"])
def test_text_and_floats_round_trip_exactly(tmp_path, ext):
    from scoreband.tables import read_table, write_table

    df = pd.DataFrame({"caption": ["a\rb", 'say "hi"', "x\r\ny", "new\nline", "ok, fine"],
                       "v": [0.1234567890123456789, 1 / 3, 2.0, 1e-300, np.nan]})
    write_table(df, tmp_path / f"t.{ext}")
    back = read_table(tmp_path / f"t.{ext}")
    assert back["caption"].tolist() == df["caption"].tolist()
    np.testing.assert_array_equal(back["v"].to_numpy(), df["v"].to_numpy())


def test_duplicated_columns_and_bare_cr_in_a_csv(tmp_path):
    from scoreband.errors import InputError
    from scoreband.tables import read_table

    (tmp_path / "d.csv").write_text("a,a,b\n1,2,3\n")
    with pytest.raises(InputError, match="duplicated column names: 'a'"):
        read_table(tmp_path / "d.csv")
    (tmp_path / "cr.csv").write_bytes(b"caption,v\nhello\rworld,1\nok,2\n")
    assert read_table(tmp_path / "cr.csv")["caption"].tolist() == ["hello\rworld", "ok"]


def test_journal_after_a_torn_line_keeps_the_next_record(tmp_path):
    from scoreband.engine.journal import RowJournal

    j = tmp_path / "j.jsonl"
    j.write_text('{"key": "a", "v": 1}\n{"key": "b", "v"')  # killed mid-write
    with RowJournal(j) as jr:
        assert set(jr.done) == {"a"}
        jr.add({"key": "b", "v": 2})
    assert set(RowJournal(j).done) == {"a", "b"}


def test_progress_when_piped_prints_lines_with_rate():
    import io

    from rich.console import Console

    from scoreband.progress import row_progress, step_status

    buf = io.StringIO()
    con = Console(file=buf, force_terminal=False, width=80)
    with row_progress(con, "scoring", 200, every=0.25) as update:
        for k in range(0, 201, 10):
            update(k)
    lines = [ln for ln in buf.getvalue().splitlines() if ln]
    assert len(lines) == 4 and "200/200 rows (100%)" in lines[-1] and "rows/s" in lines[0]
    buf.seek(0)
    buf.truncate(0)
    with step_status(con, "demo") as step:
        step("clean set")
    assert "clean set" in buf.getvalue() and all(len(x) <= 80 for x in
                                                  buf.getvalue().splitlines())


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_evaluate_and_calibrate_read_only_the_columns_they_use(tmp_path, suffix):
    """needed_columns names exactly the columns of the spec (globs expanded against the
    header, scorer_fingerprint kept); read_table then skips the rest while reading."""
    from scoreband.columns import needed_columns
    from scoreband.tables import read_table, write_table

    df = pd.DataFrame({"human": [1.0, 2.0], "med": [0.1, 0.2], "logp_1": [0.0, -1.0],
                       "logp_2": [-1.0, 0.0], "junk": ["x", "y"], "big_text": ["a", "b"],
                       "scorer_fingerprint": ["f", "f"]})
    src = tmp_path / f"t{suffix}"
    write_table(df, src)
    spec = {"target": "human", "median": "med", "features": "logp_*"}
    cols = needed_columns(src, spec)
    assert cols == ["human", "med", "logp_1", "logp_2", "scorer_fingerprint"]
    assert list(read_table(src, columns=cols).columns) == cols
    # a name the header lacks: read everything, so the usual error names the column
    assert needed_columns(src, {"target": "nope"}) is None
    assert needed_columns(tmp_path / "t.jsonl", spec) is None  # JSONL: read whole


def _today(p, size):
    """The decode before issue 25, the reference: PIL's full decode, PIL's bicubic."""
    from PIL import ImageOps

    import scoreband.images as images

    with Image.open(p) as im:
        im.load()
        rgb = images.to_rgb(ImageOps.exif_transpose(im))
        return np.asarray(rgb.resize((size, size), Image.Resampling.BICUBIC)).astype(int)


def test_fast_decoding_stays_within_its_tolerance(tmp_path):
    """JPEGs decoded at a reduced DCT scale, then resized by torch's PIL-bicubic kernel:
    pixels within a mean of 1.5 grey levels of PIL's full decode + PIL's resize; PNG and
    WebP (full decode, only the resize kernel differs) within 4 levels everywhere and 0.3
    on average; the bundled model's medians within 0.01 of [0, 1]."""
    import scoreband.images as images
    from scoreband.scorers import load_scorer

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
    import scoreband.images as images

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
    import io as _io
    import sys

    from PIL import ImageOps

    import scoreband.images as images

    rng = np.random.default_rng(5)
    for k in range(25):
        w, h = (int(v) for v in rng.integers(8, 1300, 2))
        need = int(rng.integers(8, 400))
        mode = "L" if k % 5 == 0 else "RGB"
        a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        im = Image.fromarray(a).convert(mode)
        buf = _io.BytesIO()
        exif = Image.Exif()
        if k % 3 == 0:
            exif[0x0112] = int(rng.integers(2, 9))
        im.save(buf, "JPEG", quality=85, exif=exif.tobytes())
        data = buf.getvalue()
        with Image.open(_io.BytesIO(data)) as ref:
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
    import io as _io
    import sys

    from PIL import PngImagePlugin

    import scoreband.images as images

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
        buf = _io.BytesIO()
        im.save(buf, "PNG", **kw)
        data = datas[name] = buf.getvalue()
        with Image.open(_io.BytesIO(data)) as opened:
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
    import struct
    import zlib

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
        with Image.open(_io.BytesIO(data)) as opened:
            assert (images._png_fast(data, opened) is not None) == fast, name
        got = np.asarray(images.load_images([data, data], None)[0])
        monkeypatch.setattr(images, "FAST_PNG", False)
        assert np.array_equal(got, np.asarray(images.load_images([data, data], None)[0])), name
        monkeypatch.setattr(images, "FAST_PNG", True)
    torn = datas["rgb"][: len(datas["rgb"]) // 2]  # libpng fails; PIL gives its verdict
    with pytest.raises(ValueError, match="could not be decoded|not a readable"):
        images.load_image(torn, 16)
