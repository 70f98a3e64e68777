"""Property-based tests (hypothesis): tables, options and files that nobody wrote by hand,
fed to evaluate / calibrate / apply / score, and the invariants that must hold whatever
arrives:

* the command ends cleanly: exit 0, 1 or 2, never a traceback or an "unexpected" error;
* every input file is byte-identical after the run (the output may even name an input);
* every input row is in the output table, or reported with its reason;
* every band lies inside the scale (and a band's lo <= median <= hi).
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from scoreband.cli import app
from tests.conftest import copy_world, runner

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# a cell as real tables hold them: numbers in and out of range, text, blanks, inf
CELL = st.one_of(st.floats(-2, 7), st.sampled_from([float("nan"), float("inf"), -float("inf")]),
                 st.integers(-3, 9), st.sampled_from(["", " ", "abc", "1,5", "nan", "inf",
                                                      "4;4;5", "3;x", "é", "1e309"]),
                 st.none())
RATINGS = st.one_of(st.lists(st.integers(0, 6), min_size=0, max_size=5).map(
    lambda r: ";".join(map(str, r))), CELL)


@st.composite
def tables(draw):
    n = draw(st.integers(1, 60))
    good = draw(st.sampled_from([1.0, 0.97, 0.9, 0.7, 0.3]))  # share of well-formed rows

    def col(well, bad):
        return [draw(well) if draw(st.floats(0, 1)) < good else draw(bad) for _ in range(n)]

    median = col(st.floats(0.05, 0.95), CELL)
    lo = [m - 0.1 if isinstance(m, float) and np.isfinite(m) else m for m in median]
    hi = [m + 0.1 if isinstance(m, float) and np.isfinite(m) else m for m in median]
    df = pd.DataFrame({
        "ratings": col(st.lists(st.integers(1, 5), min_size=1, max_size=4).map(
            lambda r: ";".join(map(str, r))), RATINGS),
        "median": median, "lo": lo, "hi": hi,
        "task": col(st.sampled_from(["a", "b", "c"]), CELL),
    })
    return df, draw(st.sampled_from([".csv", ".parquet", ".jsonl"]))


def _write(df: pd.DataFrame, path: Path) -> None:
    if path.suffix == ".parquet":
        df.astype(str).to_parquet(path, index=False)  # mixed cells as text, as tables come
    elif path.suffix == ".jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_csv(path, index=False)


def _hashes(d: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in d.iterdir()
            if p.is_file()}


def _clean(r) -> str:
    text = " ".join(r.output.split())
    assert r.exit_code in (0, 1, 2), (r.exit_code, text)
    assert "Traceback" not in r.output and "unexpected" not in text, text
    assert r.exception is None or isinstance(r.exception, SystemExit), (text, r.exception)
    return text


def _bands_inside(out: pd.DataFrame, lo_col, hi_col, med_col, a, b) -> None:
    lo = pd.to_numeric(out[lo_col], errors="coerce").to_numpy(float)
    hi = pd.to_numeric(out[hi_col], errors="coerce").to_numpy(float)
    med = pd.to_numeric(out[med_col], errors="coerce").to_numpy(float)
    ok = np.isfinite(lo) & np.isfinite(hi)
    assert (lo[ok] >= a - 1e-9).all() and (hi[ok] <= b + 1e-9).all()
    assert (lo[ok] <= hi[ok] + 1e-9).all()
    m = ok & np.isfinite(med)
    assert (lo[m] <= med[m] + 1e-9).all() and (med[m] <= hi[m] + 1e-9).all()


OPTIONS = st.fixed_dictionaries({
    "method": st.sampled_from(["split", "crc", "marginal", "crc-same", "auto"]),
    # mostly valid options (the interesting part is the table), sometimes not
    "alpha": st.sampled_from(["0.1"] * 4 + ["0.2", "0.3", "0", "1", "-0.1", "abc"]),
    "scale": st.sampled_from(["1,5"] * 6 + ["1,4", "0,6", "5,1", "x,y"]),
    "extra": st.sampled_from([[], ["--mondrian", "--groups", "task"], ["--adjust-boundary"],
                              ["--randomize"]]),
    "out_is_input": st.sampled_from([False] * 5 + [True]),
})


@pytest.mark.slow  # three commands per drawn table (~12 s)
@SETTINGS
@given(tables(), OPTIONS)
def test_calibrate_apply_evaluate_invariants(table, opts):
    df, suffix = table
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        src = d / f"t{suffix}"
        _write(df, src)
        cols = ["--ratings", "ratings", "--scale", opts["scale"], "--median", "median",
                "--pred-scale", "0,1", "--method", opts["method"], "--alpha", opts["alpha"],
                *opts["extra"]]
        if opts["method"] in ("crc", "crc-same"):
            cols += ["--lo", "lo", "--hi", "hi"]
        before = _hashes(d)
        cal = src if opts["out_is_input"] else d / "cal.json"
        r = runner.invoke(app, ["calibrate", str(src), *cols, "--out", str(cal)])
        _clean(r)
        if opts["out_is_input"]:
            assert r.exit_code == 2
        r2 = runner.invoke(app, ["evaluate", str(src), *cols, "--seeds", "2",
                                 "--out", str(d / "m.json")])
        _clean(r2)
        if r.exit_code == 0:
            out = d / f"banded{suffix}"
            r3 = runner.invoke(app, ["apply", str(src), "--calibrator", str(cal), "--out",
                                     str(out)])
            text = _clean(r3)
            assert r3.exit_code == 0, text
            res = pd.read_parquet(out) if suffix == ".parquet" else (
                pd.read_json(out, lines=True) if suffix == ".jsonl" else pd.read_csv(out))
            assert len(res) == len(df)  # every row kept
            unbanded = pd.to_numeric(res["band_lo"], errors="coerce").isna()
            errs = res["band_error"].astype(object).fillna("").astype(str)
            assert (errs[unbanded] != "").all()  # ... or reported with its reason
            a, b = (float(x) for x in opts["scale"].split(","))
            _bands_inside(res, "band_lo", "band_hi", "band_median", a, b)
        after = _hashes(d)
        assert all(after[k] == v for k, v in before.items()), "an input file changed"


@pytest.fixture(scope="module")
def images(tmp_path_factory, world_dir):
    """Image files of every kind a user's folder holds."""
    d = tmp_path_factory.mktemp("imgs")
    copy_world(world_dir, d / "w", 3)
    good = sorted((d / "w" / "images").glob("*.png"))
    arr = np.asarray(Image.open(good[0]).convert("RGB"))
    Image.fromarray(arr).convert("RGBA").save(d / "rgba.png")
    Image.fromarray(arr).convert("P").save(d / "pal.png")
    Image.fromarray(arr).convert("CMYK").save(d / "cmyk.jpg")
    Image.fromarray(arr[..., 0].astype(np.uint16) * 257).save(d / "g16.png")
    Image.fromarray(arr).convert("1").save(d / "bw.png")
    Image.fromarray(arr).save(d / "a.webp")
    (d / "trunc.png").write_bytes(good[1].read_bytes()[:60])
    (d / "text.png").write_text("not an image")
    (d / "empty.png").write_bytes(b"")
    (d / "adir.png").mkdir()
    return d, [str(p) for p in good] + [str(d / n) for n in (
        "rgba.png", "pal.png", "cmyk.jpg", "g16.png", "bw.png", "a.webp", "trunc.png",
        "text.png", "empty.png", "adir.png", "missing.png")] + ["", "x" * 300]


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data())
def test_score_invariants(images, data):
    d, paths = images
    n = data.draw(st.integers(1, 12))
    df = pd.DataFrame({
        "image": [data.draw(st.sampled_from(paths)) for _ in range(n)],
        "caption": [data.draw(st.one_of(st.sampled_from(
            ["a red circle left of a blue star", "", "   ", "12345 %%%", "a dog on a beach"]),
            st.text(max_size=60))) for _ in range(n)],
    })
    suffix = data.draw(st.sampled_from([".csv", ".parquet", ".jsonl"]))
    with tempfile.TemporaryDirectory() as t:
        t = Path(t)
        src = t / f"pairs{suffix}"
        _write(df, src)
        before = _hashes(t)
        out = t / f"scored{suffix}"
        r = runner.invoke(app, ["score", str(src), "--out", str(out)])
        text = _clean(r)
        assert _hashes(t).items() >= before.items()
        if r.exit_code == 2:
            return
        res = pd.read_parquet(out) if suffix == ".parquet" else (
            pd.read_json(out, lines=True) if suffix == ".jsonl" else pd.read_csv(out))
        assert len(res) == n, text
        med = pd.to_numeric(res["band_median"], errors="coerce")
        errs = res["band_error"].astype(object).fillna("").astype(str)
        assert (errs[med.isna()] != "").all()
        assert (errs[med.notna()] == "").all()
        _bands_inside(res, "band_lo", "band_hi", "band_median", 1.0, 5.0)  # the 1-5 scale
        _bands_inside(res, "band_lo01", "band_hi01", "band_median01", 0.0, 1.0)


@st.composite
def image_files(draw):
    """The bytes of an image nobody wrote by hand: a format, a mode, a size, an EXIF
    orientation, a JPEG quality, sometimes cut short or with bytes overwritten."""
    import io

    fmt = draw(st.sampled_from(["JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF"]))
    modes = {"JPEG": ["RGB", "L", "CMYK"], "PNG": ["RGB", "L", "RGBA", "P", "LA", "I;16", "1"],
             "WEBP": ["RGB", "RGBA"], "GIF": ["P", "L"], "BMP": ["RGB", "L", "P"],
             "TIFF": ["RGB", "L", "I;16", "F", "CMYK"]}[fmt]
    mode = draw(st.sampled_from(modes))
    w, h = draw(st.integers(1, 300)), draw(st.integers(1, 300))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w] / max(w, h)
    a = np.stack([np.sin(5 * x + seed), np.cos(4 * y), np.sin(3 * (x + y))], -1) * 100 + 128
    base = Image.fromarray(np.clip(a + rng.normal(0, 10, a.shape), 0, 255).astype(np.uint8))
    if mode == "I;16":
        im = Image.fromarray(np.asarray(base.convert("L")).astype(np.uint16) * 257)
    elif mode == "F":
        im = Image.fromarray(np.asarray(base.convert("L")).astype(np.float32) / 255)
    else:
        im = base.convert(mode)
    kw = {}
    if fmt in ("JPEG", "WEBP"):
        kw["quality"] = draw(st.integers(5, 100))
    if fmt in ("JPEG", "PNG", "WEBP", "TIFF") and draw(st.booleans()):
        exif = Image.Exif()
        exif[0x0112] = draw(st.integers(1, 8))
        kw["exif"] = exif.tobytes()
    if fmt == "JPEG" and draw(st.booleans()):
        kw["progressive"] = True
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    data = bytearray(buf.getvalue())
    damage = draw(st.sampled_from(["none", "none", "cut", "flip"]))
    if damage == "cut":
        data = data[: draw(st.integers(0, len(data)))]
    elif damage == "flip" and len(data) > 20:
        for _ in range(draw(st.integers(1, 8))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data), fmt, mode, (w, h), damage


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(image_files(), st.one_of(st.none(), st.integers(1, 256)), st.integers(1, 256))
def test_the_decoder_on_any_image(file, size, min_edge):
    """Whatever file arrives: an RGB uint8 picture of the size asked (or, with ``min_edge``,
    at least that large on each edge unless the file is smaller), or a ValueError with a
    reason; never another exception. An undamaged file always decodes, the size-given and
    the threaded paths agree, and a lossless file gives PIL's own pixels at full size."""
    import io

    import scoreband.images as images

    data, fmt, mode, (w, h), damage = file
    try:
        out = images.load_image(data, size)
    except ValueError as e:
        assert str(e) and damage != "none", (fmt, mode, e)
        return
    if size is not None:
        assert out.shape == (size, size, 3) and out.dtype == np.uint8
        assert np.array_equal(images.load_images([data, data], size)[0], out)
        return
    assert out.ndim == 3 and out.shape[2] == 3 and out.dtype == np.uint8
    reduced = images.load_images([data, data], None, min_edge=min_edge)[0]
    assert not isinstance(reduced, ValueError), reduced
    rw, rh = reduced.size
    assert min(rw, rh) >= min(min_edge, min(out.shape[:2])), (reduced.size, out.shape)
    if damage == "none" and fmt in ("PNG", "BMP", "TIFF", "GIF"):
        from PIL import ImageOps

        with Image.open(io.BytesIO(data)) as im:
            im.load()
            ref = images.to_rgb(ImageOps.exif_transpose(im))
        assert np.array_equal(np.asarray(ref), out), (fmt, mode)


# ------------------------------------------------------------ passthrough round trip
# cells a careless table holds: leading zeros, every spelling of "missing", booleans,
# unicode, quotes, embedded newlines and delimiters
TEXT_CELL = st.one_of(
    st.sampled_from(["00017", "01234", "007", "0", "-0", "1e5", "1.50", "NA", "nan", "NaN",
                     "null", "None", "", "N/A", "#N/A", "TRUE", "FALSE", "true", "False",
                     "é", "日本", '"', 'a "quoted" word', "x,y", "line\nbreak", "tab\there",
                     " padded ", "2;3;4", "inf", "-inf"]),
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=6),
    st.text(st.sampled_from('ab,"\n\t 0;'), max_size=6))


@pytest.fixture(scope="module")
def round_trip_cal():
    import scoreband.api as sb

    d = Path(tempfile.mkdtemp(prefix="sb-roundtrip-"))
    base = sb.read_table(sb.example_table()).head(200)
    fit = sb.calibrate(base, ratings="ratings", scale="1,5", median="median",
                       pred_scale="0,1", method="split")
    fit.save(d / "cal.json")
    return d


@pytest.mark.slow  # 60 apply runs (~12 s)
@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(TEXT_CELL, min_size=3, max_size=3), min_size=1, max_size=8),
       st.lists(st.one_of(st.floats(0, 1).map(repr), st.sampled_from(["", "NA", "x", "0.50",
                                                                      "1e-1"])),
                min_size=8, max_size=8),
       st.sampled_from([".csv", ".tsv", ".jsonl", ".json"]))
def test_apply_gives_the_table_back_as_it_went_in(round_trip_cal, rows, medians, fmt):
    """A table through ``apply`` differs only by the added columns: every passthrough cell
    (CSV / TSV: its text, byte for byte; JSON: its value and number literal) comes back as
    it was, in every text format; the prediction column is still read as numbers."""
    import csv
    import io
    import json

    d = round_trip_cal
    names = ["zip", "note", "flag"]
    med = ["0.5", *medians][:len(rows)]  # one usable row at least
    src, out = d / f"t{fmt}", d / f"o{fmt}"
    if fmt in (".csv", ".tsv"):
        buf = io.StringIO()
        w = csv.writer(buf, delimiter="," if fmt == ".csv" else "\t", lineterminator="\n")
        w.writerow(["median", *names])
        w.writerows([m, *r] for m, r in zip(med, rows, strict=True))
        src.write_text(buf.getvalue(), encoding="utf-8")
    else:
        recs = [{"median": m, **dict(zip(names, r, strict=True))}
                for m, r in zip(med, rows, strict=True)]
        lines = [json.dumps(r, ensure_ascii=False) for r in recs]
        src.write_text("\n".join(lines) + "\n" if fmt == ".jsonl" else
                       "[" + ",".join(lines) + "]", encoding="utf-8")
    before = src.read_bytes()
    r = runner.invoke(app, ["apply", str(src), "--calibrator", str(d / "cal.json"), "--out",
                            str(out)])
    assert r.exit_code == 0, r.output
    assert src.read_bytes() == before
    if fmt in (".csv", ".tsv"):
        sep = "," if fmt == ".csv" else "\t"
        got = list(csv.reader(io.StringIO(out.read_text(encoding="utf-8"), newline=""),
                              delimiter=sep))
        k = got[0].index("band_lo")
        assert got[0][:k] == ["median", *names]
        buf = io.StringIO()
        csv.writer(buf, delimiter=sep, lineterminator="\n").writerows(g[:k] for g in got)
        assert buf.getvalue().encode("utf-8") == before  # byte for byte
        band = [g[k] for g in got[1:]]
    else:
        text = out.read_text(encoding="utf-8")
        docs = ([json.loads(x) for x in text.splitlines()] if fmt == ".jsonl"
                else json.loads(text))
        assert [{c: doc[c] for c in ["median", *names]} for doc in docs] == recs
        band = [doc["band_lo"] for doc in docs]
    # the prediction column was read as numbers: a band exactly where it is one
    for m, b in zip(med, band, strict=True):
        try:
            ok = 0 <= float(m) <= 1
        except ValueError:
            ok = False
        ok = ok and m.strip().lower() not in ("nan",)
        assert (b not in ("", None)) == ok, (m, b)
