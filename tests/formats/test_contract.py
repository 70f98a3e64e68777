"""The contract every registered table format keeps, checked format by format over the whole
registry: a new format is one module and passes these tests (writable formats: round trip,
chunked = whole, row count, text formats byte for byte; read-only formats: an example file
read whole and in chunks alike, writing refused, the file never modified)."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from scoreband.engine.stream import ChunkWriter, as_text, iter_chunks, table_rows
from scoreband.errors import InputError
from scoreband.formats import FORMATS, all_formats, get_format, known_formats, resolve
from scoreband.tables import read_table, write_table
from tests.formats.examples import BUILDERS, TEXT_CELLS, TYPED, example

WRITABLE = [f.name for f in all_formats() if f.writable]
READ_ONLY = [f.name for f in all_formats() if not f.writable]
TEXT = [f.name for f in all_formats() if f.writable and f.text]


def _path(tmp_path, name, stem="t"):
    return tmp_path / f"{stem}{get_format(name).suffixes[0]}"


def _sha(p):
    if p.is_dir():
        return {q.name: hashlib.sha256(q.read_bytes()).hexdigest() for q in sorted(p.iterdir())}
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_registry_is_addressed_by_name_and_suffix():
    assert {"csv", "tsv", "jsonl", "json", "parquet", "hf-dataset"} <= set(FORMATS.names())
    for f in all_formats():
        assert FORMATS.resolve(f.name)[0].info["format"] is f
        for s in f.suffixes:
            assert s == s.lower() and s.startswith(".")
    # every suffix has one default (plain) format: the one an output is written in
    for f in all_formats():
        for s in f.suffixes:
            plain = [g for g in all_formats() if s in g.suffixes and not g.sniffs]
            assert len(plain) <= 1, (s, plain)


def test_every_format_has_an_example():
    assert set(READ_ONLY) <= set(BUILDERS), set(READ_ONLY) - set(BUILDERS)


@pytest.mark.parametrize("name", WRITABLE)
def test_round_trip_chunked_equals_whole_and_row_count(tmp_path, name):
    fmt = get_format(name)
    p = _path(tmp_path, name)
    write_table(TYPED, p)
    assert resolve(p)[0] is fmt
    back = read_table(p)
    pd.testing.assert_frame_equal(back, TYPED, check_dtype=False)
    if fmt.streamable:
        n = table_rows(p)
        assert n == len(TYPED)
    for text in (False, True):
        whole = read_table(p, text=text)
        parts = list(iter_chunks(p, 3, text=text))
        assert [len(c) for c in parts] == [3, 3, 1]
        pd.testing.assert_frame_equal(pd.concat(parts, ignore_index=True), whole)
    # written chunk by chunk = written whole
    if fmt.streamable:
        q = _path(tmp_path, name, "chunked")
        with ChunkWriter(q) as w:
            for c in iter_chunks(p, 2, text=as_text(q)):
                w.write(c)
        pd.testing.assert_frame_equal(read_table(q), back)
        if fmt.text:
            assert q.read_bytes() == p.read_bytes()
    else:
        with pytest.raises(InputError, match="cannot stream"):
            ChunkWriter(_path(tmp_path, name, "chunked"))


@pytest.mark.parametrize("name", TEXT)
def test_text_formats_come_back_byte_for_byte(tmp_path, name):
    """A table of CSV-like cells written in a text format, read as text and written again
    (whole, and chunk by chunk where the format streams), is the same bytes."""
    p = _path(tmp_path, name)
    write_table(pd.DataFrame(TEXT_CELLS), p)
    df = read_table(p, text=True)
    assert df.to_dict("list") == TEXT_CELLS  # every cell as the text it is
    q = _path(tmp_path, name, "again")
    write_table(df, q)
    assert q.read_bytes() == p.read_bytes()
    if get_format(name).streamable:
        r = _path(tmp_path, name, "chunks")
        with ChunkWriter(r) as w:
            for c in iter_chunks(p, 4, text=True):
                w.write(c)
        assert r.read_bytes() == p.read_bytes()


@pytest.mark.parametrize("name", READ_ONLY)
def test_read_only_formats(tmp_path, name):
    fmt = get_format(name)
    p, n = example(name, tmp_path)
    before = _sha(p)
    assert resolve(p)[0] is fmt  # found by its suffix / content, without a prefix
    for text in (False, True):
        whole = read_table(p, text=text)
        assert len(whole) == n
        parts = list(iter_chunks(p, 2, text=text)) if not fmt.folder else [whole]
        pd.testing.assert_frame_equal(pd.concat(parts, ignore_index=True), whole)
    rows = table_rows(p)
    assert rows in (None, n)
    # the explicit NAME:PATH address reads the same table
    pd.testing.assert_frame_equal(read_table(f"{name}:{p}"), read_table(p))
    with pytest.raises(InputError, match=f"cannot write .* as {name}|as a folder"):
        write_table(whole, f"{name}:{tmp_path / 'out.csv'}")
    assert _sha(p) == before  # never modified


def test_unknown_suffix_lists_the_known_formats(tmp_path):
    p = tmp_path / "t.xlsx"
    p.write_bytes(b"x")
    with pytest.raises(InputError, match="unknown table format '.xlsx'") as e:
        read_table(p)
    for f in all_formats():
        assert f.name in str(e.value)
    with pytest.raises(InputError, match="known formats: csv"):
        write_table(TYPED, tmp_path / "o.xlsx")
    assert "hf-dataset (a folder)" in known_formats()


def test_a_prefix_names_the_format(tmp_path):
    p = tmp_path / "scores.txt"
    write_table(TYPED, f"csv:{p}")
    assert p.read_text().startswith("item,score,n\n")
    pd.testing.assert_frame_equal(read_table(f"csv:{p}"), TYPED, check_dtype=False)
    # a file whose name holds a colon is read as that file
    odd = tmp_path / "csv:odd.tsv"
    write_table(TYPED, odd)
    assert resolve(odd)[0] is get_format("tsv")
    np.testing.assert_allclose(read_table(odd)["score"], TYPED["score"])
    with pytest.raises(InputError, match="takes no options"):
        read_table(f"csv@1-5:{p}")
