"""Streaming tables: apply in chunks equals apply on the whole table, for every streamable
format, with bad rows spread over the chunks; and its memory stays bounded."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import scoreband.api as sb
from scoreband.cli import app
from scoreband.engine import ChunkWriter, iter_chunks
from tests.conftest import runner

COLS = dict(ratings="ratings", scale="1,5", median="median", lo="q05", hi="q95",
            pred_scale="0,1", groups="task")


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    d = tmp_path_factory.mktemp("engine")
    df = sb.read_table(sb.example_table())
    for method in ("crc", "split"):
        sb.calibrate(df.iloc[:1000], **COLS, method=method, mondrian=True).save(
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
        from scoreband.tables import write_table

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


@pytest.mark.slow  # a table large enough to measure the peak (~8 s)
def test_streamed_apply_memory_is_bounded(fitted, tmp_path):
    """A 2.5-million-row Parquet table (about 340 MB as a DataFrame) applied in a child
    process: what the apply adds to the process's resident memory at its peak (VmHWM after
    it, less VmRSS once the imports are done; ru_maxrss would carry the parent's over exec)
    stays well below the table's in-memory size - holding the table would take all of it.
    The imports are left out because their size is the interpreter's, not the table's: where
    no bytecode is cached (PYTHONDONTWRITEBYTECODE), importing pandas alone costs 30 MB more
    while it compiles."""
    d, new = fitted
    good = new.assign(median=pd.to_numeric(new["median"], errors="coerce")).dropna()
    big = pd.concat([good] * 2500, ignore_index=True)
    src = tmp_path / "big.parquet"
    big.to_parquet(src)
    in_memory = big.memory_usage(deep=True).sum()
    del big
    code = ("import scoreband.api as sb\n"
            "def kb(key): return [int(ln.split()[1]) for ln in open('/proc/self/status')\n"
            "                     if ln.startswith(key)][0]\n"
            "base = kb('VmRSS')\n"
            f"sb.apply_file({str(src)!r}, {str(d / 'crc.json')!r}, "
            f"{str(tmp_path / 'o.parquet')!r}, chunk_rows=50_000)\n"
            "print(kb('VmHWM') - base)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    grown = int(r.stdout.split()[-1]) * 1024
    assert grown < 0.75 * in_memory, (grown / 1e6, in_memory / 1e6)
    assert sum(1 for _ in iter_chunks(tmp_path / "o.parquet", 500_000)) >= 3


# ------------------------------------------------------------------ the row engine
@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    d = tmp_path_factory.mktemp("rows")
    assert runner.invoke(app, ["world", "--out", str(d), "--n", "40"]).exit_code == 0
    df = pd.read_csv(d / "world.csv")
    df.loc[5, "image"] = "images/missing.png"
    df.loc[23, "caption"] = ""
    df.to_csv(d / "t.csv", index=False)
    return d, df


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_streamed_score_equals_whole_table_score(pairs, tmp_path, suffix):
    """run_file (chunks of 7 rows, the failed rows in different chunks) writes the table
    run_rows makes from the whole table, and reports the same failures and counts (bands
    to 1e-6: the float32 model sees other batches when the chunks cut them otherwise)."""
    from scoreband.engine.rows import run_file, run_rows
    from scoreband.scorers.stages import score_stage
    from scoreband.tables import read_table, write_table

    d, df = pairs
    src = tmp_path / f"in{suffix}"
    write_table(df, src)
    whole = run_rows(read_table(src), score_stage(base_dir=d, batch_size=5))
    streamed = run_file(src, score_stage(base_dir=d, batch_size=5), tmp_path / f"o{suffix}",
                        chunk_rows=7)
    got = read_table(tmp_path / f"o{suffix}")
    assert streamed.rows == len(df) and streamed.failures == whole.failures
    assert sorted(streamed.failures) == [5, 23] and streamed.counts == whole.counts
    assert list(got.columns) == list(whole.table.columns)
    for c in ("band_lo", "band_median", "band_hi"):
        np.testing.assert_allclose(got[c], whole.table[c], atol=1e-6, equal_nan=True)
    assert streamed.summary["shift"] is not None


def test_streamed_run_resumes_from_its_journal_across_chunks(pairs, tmp_path):
    """A journal written by an interrupted streamed run is reused row by row (whatever the
    chunking), and removed once the output is complete."""
    from scoreband.engine.rows import run_file
    from scoreband.scorers.stages import score_stage

    d, df = pairs
    journal = tmp_path / "o.csv.partial.jsonl"
    df.head(17).to_csv(tmp_path / "head.csv", index=False)
    first = run_file(tmp_path / "head.csv", score_stage(base_dir=d), tmp_path / "x.csv",
                     journal=journal, chunk_rows=5)
    assert first.reused == 0 and not journal.exists()
    # an interrupted run leaves its journal: replay the first 17 rows' records into one
    from scoreband.engine.journal import RowJournal
    from scoreband.engine.rows import _records

    stage = score_stage(base_dir=d)
    with RowJournal(journal) as jr:
        _records(df.head(17), stage, jr, lambda done: None)
    run = run_file(d / "t.csv", score_stage(base_dir=d), tmp_path / "o.csv", journal=journal,
                   chunk_rows=6)
    assert run.reused == 17 and run.rows == len(df) and not journal.exists()
    run_file(d / "t.csv", score_stage(base_dir=d), tmp_path / "o2.csv", chunk_rows=11)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "o.csv"),
                                  pd.read_csv(tmp_path / "o2.csv"), check_exact=False,
                                  atol=1e-6)


def test_a_killed_writers_temp_file_is_removed_by_the_next_run(tmp_path):
    out = tmp_path / "o.csv"
    stale = tmp_path / ".o.csv.999999999.tmp"  # no such process
    stale.write_text("half a table")
    with ChunkWriter(out) as w:
        w.write(pd.DataFrame({"a": [1]}))
    assert not stale.exists() and out.exists()


def test_stage_records_never_raise_for_bad_rows(pairs):
    """Every row gets a record; a bad one has the reason, the good ones values."""
    from scoreband.scorers.stages import score_stage

    d, df = pairs
    recs = score_stage(base_dir=d).process(df, [4, 5, 23])
    assert recs[0]["error"] == "" and recs[0]["band_lo"] <= recs[0]["band_hi"]
    assert "missing" in recs[1]["error"] and "empty caption" in recs[2]["error"]


def test_score_any_scores_a_table_in_memory(pairs):
    """The library entry for an in-memory table: the run's table and its failures."""
    from scoreband.scorers.stages import score_any

    d, df = pairs
    run = score_any(df.head(8), base_dir=d, journal=None)
    assert run["error_column"] == "band_error" and run["n_bad"] == 1
    assert run["files"]["calibrator"].name == "calibrator.json"
    assert run["table"]["band_lo"].notna().sum() == 7


def test_apply_is_one_vectorized_stage_of_the_row_engine(fitted, tmp_path):
    """apply in memory, apply_file and the CLI all run ApplyStage through the row engine:
    no journal is written, row errors carry whole-table positions, and the stage's summary
    is what apply_file reports."""
    from scoreband.apply_stage import ApplyStage
    from scoreband.engine.rows import run_file, run_rows

    d, new = fitted
    src = tmp_path / "in.csv"
    new.to_csv(src, index=False)
    whole = run_rows(sb.read_table(src), stage := ApplyStage(d / "crc.json"))
    assert stage.vectorized and not stage.whole_table
    assert sorted(e.position for e in stage.errors) == [3, 404, 405, 999]
    streamed = ApplyStage(d / "crc.json")
    journal = tmp_path / "out.csv.partial.jsonl"
    run_file(src, streamed, tmp_path / "out.csv", journal=journal, chunk_rows=128)
    assert not journal.exists()
    assert sorted(e.position for e in streamed.errors) == [3, 404, 405, 999]
    assert streamed.banded == stage.banded == len(new) - 4
    out = sb.read_table(tmp_path / "out.csv")
    np.testing.assert_allclose(out["band_lo"], whole.table["band_lo"], equal_nan=True)
    assert streamed.summary()["method"] == stage.summary()["method"]
    res = sb.apply_file(src, d / "crc.json", tmp_path / "api.csv", chunk_rows=300)
    assert (res.rows, res.banded, len(res.errors)) == (len(new), stage.banded, 4)
