"""Streaming tables: apply in chunks equals apply on the whole table, for every streamable
format, with bad rows spread over the chunks; and its memory stays bounded."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import scoreband.api as sb
from scoreband.cli import app
from scoreband.engine import ChunkWriter, iter_chunks

runner = CliRunner()
COLS = dict(ratings="ratings", scale="1,5", median="median", lo="q05", hi="q95",
            pred_scale="0,1", groups="task")


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    d = tmp_path_factory.mktemp("engine")
    df = sb.read_table(sb.example_table())
    for method in ("crc", "split"):
        sb.calibrate(df.iloc[:1000], COLS, {"method": method, "mondrian": True}).save(
            d / f"{method}.json")
    new = df.iloc[1000:].reset_index(drop=True)
    new["median"] = new["median"].astype(object)
    new.loc[[3, 404, 405, 999], "median"] = ["x", 7.0, None, "y"]  # bad rows, several chunks
    return d, new


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet"])
@pytest.mark.parametrize("method", ["crc", "split"])
def test_chunked_apply_equals_whole_table_apply(fitted, tmp_path, suffix, method):
    d, new = fitted
    src = tmp_path / f"in{suffix}"
    if suffix == ".parquet":
        new.astype({"median": str}).to_parquet(src)
    else:
        from scoreband.io import write_table

        write_table(new, src)
    whole = sb.apply(sb.read_table(src), d / f"{method}.json").table
    out = tmp_path / f"out{suffix}"
    res = sb.apply_file(src, d / f"{method}.json", out, chunk_rows=97)
    got = sb.read_table(out)
    assert res.rows == len(new) and res.banded == len(new) - 4 and len(res.errors) == 4
    assert [e.position for e in res.errors] == [3, 404, 405, 999]
    for c in ("band_lo", "band_hi", "band_median"):
        np.testing.assert_allclose(got[c], whole[c], atol=1e-12, equal_nan=True)
    assert (got["band_error"].fillna("") != "").sum() == 4
    assert list(got.columns) == list(whole.columns)


def test_cli_apply_streams_and_reports_rows_with_global_numbers(fitted, tmp_path):
    d, new = fitted
    new.to_csv(tmp_path / "in.csv", index=False)
    r = runner.invoke(app, ["apply", str(tmp_path / "in.csv"), "--calibrator",
                            str(d / "crc.json"), "--out", str(tmp_path / "o.parquet")])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "4 of 1000 rows left without a band" in text and "row 1000" in text
    assert len(pd.read_parquet(tmp_path / "o.parquet")) == 1000


def test_chunk_writer_leaves_nothing_on_failure(tmp_path):
    out = tmp_path / "t.parquet"
    with pytest.raises(RuntimeError), ChunkWriter(out) as w:
        w.write(pd.DataFrame({"a": [1, 2]}))
        raise RuntimeError("crash")
    assert list(tmp_path.iterdir()) == []


def test_streamed_apply_memory_is_bounded(fitted, tmp_path):
    """A 2.5-million-row Parquet table (about 340 MB as a DataFrame) applied in a child
    process whose peak resident memory (VmHWM; ru_maxrss would carry the parent's over exec)
    is measured: it stays below the table's in-memory size."""
    d, new = fitted
    good = new.assign(median=pd.to_numeric(new["median"], errors="coerce")).dropna()
    big = pd.concat([good] * 2500, ignore_index=True)
    src = tmp_path / "big.parquet"
    big.to_parquet(src)
    in_memory = big.memory_usage(deep=True).sum()
    del big
    code = ("import scoreband.api as sb; "
            f"sb.apply_file({str(src)!r}, {str(d / 'crc.json')!r}, {str(tmp_path / 'o.parquet')!r},"
            " chunk_rows=50_000); "
            "print([ln for ln in open('/proc/self/status') if ln.startswith('VmHWM')][0])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    peak = int(r.stdout.split()[-2]) * 1024  # "VmHWM:  123456 kB"
    assert peak < in_memory, (peak / 1e6, in_memory / 1e6)
    assert sum(1 for _ in iter_chunks(tmp_path / "o.parquet", 500_000)) >= 3
