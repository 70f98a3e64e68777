"""The output policy (scoreband.files) and the atomic writer: an input found after a command
declared its options (the file behind a ``NAME:PATH`` table address) joins the policy; no
output is written over another tool's log, whatever its format; a new file gets the mode
``open()`` would give it; a full disk names the output; a refused command leaves no
journal; an unknown ``NAME:`` prefix lists the known formats."""

from __future__ import annotations

import errno
import os
import zipfile

import pandas as pd
import pytest

from scoreband.engine.journal import RowJournal
from scoreband.engine.stream import ChunkWriter
from scoreband.errors import InputError
from scoreband.files import (
    atomic_path,
    atomic_write_text,
    check_output,
    declare_input,
    output_errors,
    output_policy,
)
from scoreband.formats import all_formats, get_format, split_address
from scoreband.tables import read_table, write_table
from tests.formats.examples import example


def test_a_declared_input_is_never_written_over(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("a\n1\n")
    with output_policy() as pol:
        declare_input("TABLE", table)
        declare_input("TABLE", table)  # once only
        assert [w for w, _ in pol.inputs] == ["TABLE"]
        with pytest.raises(InputError, match="same file as TABLE"):
            check_output(tmp_path / "." / "t.csv")
        atomic_write_text(tmp_path / "other.csv", "b\n")  # any other path is fine
    assert table.read_text() == "a\n1\n"


def test_nothing_to_declare_without_a_policy_or_a_file(tmp_path):
    declare_input("TABLE", tmp_path / "t.csv")  # no policy in force: nothing happens
    with output_policy() as pol:
        declare_input("TABLE", tmp_path / "missing.csv")
        assert pol.inputs == []


def test_a_table_address_declares_its_file(tmp_path):
    table = tmp_path / "t.txt"
    table.write_text("a\n1\n")
    with output_policy():
        fmt, path = split_address(f"csv:{table}")
        assert path == table
        with pytest.raises(InputError, match="same file as TABLE"):
            check_output(table)


# ---------------------------------------------------------------- another tool's logs
LOGS = [f.name for f in all_formats() if f.sniffs]
TABLE = pd.DataFrame({"item": ["a", "b"], "human": [1.0, 2.0]})
#: the policy's refusal, or (an .eval output) the read-only format's
REFUSED = "exists and is .*another tool.*choose another output path|are read only"


def _eval_log(tmp_path):
    """An Inspect ``.eval`` log: a zip of ``header.json`` and one sample."""
    p = tmp_path / "run.eval"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("header.json", '{"version": 2, "status": "success", "eval": {"task": "t"}}')
        z.writestr("samples/1_epoch_1.json", '{"id": 1, "epoch": 1, "scores": {}}')
    return p


@pytest.mark.parametrize("name", LOGS + ["inspect.eval"])
def test_no_output_is_written_over_another_tools_log(tmp_path, name):
    """Every log format: an existing log that is not an input of the command is never
    replaced, whichever writer tries (a table, a JSON file, a streamed table), and with
    no policy declared at all."""
    log = _eval_log(tmp_path) if name == "inspect.eval" else example(name, tmp_path)[0]
    before = log.read_bytes()
    kind = get_format(name.split(".")[0]).help
    for write in (lambda: write_table(TABLE, log), lambda: atomic_write_text(log, "{}"),
                  lambda: check_output(log, what="--out")):
        with pytest.raises(InputError, match=REFUSED) as e:
            write()
        assert kind in str(e.value)
    if log.suffix == ".jsonl":
        with pytest.raises(InputError, match=REFUSED):
            ChunkWriter(log)
    with output_policy(), pytest.raises(InputError, match=REFUSED):
        write_table(TABLE, log)
    assert log.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [log.name]  # no temporary left


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_a_table_scoreband_wrote_is_replaced_as_before(tmp_path, suffix):
    """A table with a log's column names (custom_id, eval, status) is a table: a second
    run writes over the first run's output."""
    df = pd.DataFrame({"custom_id": ["r1"], "eval": ["x"], "status": ["ok"], "human": [3]})
    out = tmp_path / f"out{suffix}"
    write_table(df, out)
    write_table(df.assign(human=[4]), out)
    assert read_table(out)["human"].tolist() == [4]


# ---------------------------------------------------------------- modes and full disks
def test_a_file_gets_the_mode_open_gives_it(tmp_path):
    """Under umask 022 a new file is 0644 even when the writer made its own file 0600 (what
    safetensors' save_file does); a replaced file keeps its old mode, as ``open(path, "w")``
    keeps it."""
    old = os.umask(0o022)
    try:
        new = tmp_path / "model.safetensors"
        with atomic_path(new) as tmp:
            os.unlink(tmp)
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        assert new.stat().st_mode & 0o777 == 0o644
        write_table(TABLE, tmp_path / "t.csv")
        assert (tmp_path / "t.csv").stat().st_mode & 0o777 == 0o644
        os.chmod(tmp_path / "t.csv", 0o640)
        write_table(TABLE, tmp_path / "t.csv")
        assert (tmp_path / "t.csv").stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)


@pytest.mark.parametrize("name", [f.name for f in all_formats() if f.writable
                                  and not f.folder])
def test_a_full_disk_names_the_output_and_the_fix(tmp_path, monkeypatch, name):
    """Every writable format: a write that fails with ENOSPC raises an OSError naming the
    output (the CLI prints its filename and message), the old file unchanged, no
    temporary file left."""
    fmt = get_format(name)
    out = tmp_path / f"out{fmt.suffixes[0]}"
    out.write_text("old")

    def full(df, path):
        with open(path, "w") as f:
            f.write("x")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(type(fmt), "write", lambda self, df, path: full(df, path))
    with pytest.raises(OSError) as e:
        write_table(TABLE, out)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(out)
    assert "No space left" in str(e.value) and "choose another output path" in str(e.value)
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_a_full_disk_names_the_output_when_streamed(tmp_path, monkeypatch):
    """``apply --out`` streamed chunk by chunk (CSV / TSV / JSONL / Parquet): the same
    message, no temporary file left, and the output gets open()'s mode."""
    out = tmp_path / "out.csv"
    out.write_text("old")
    sink = type(get_format("csv").sink(tmp_path / "probe.csv"))
    (tmp_path / "probe.csv").unlink(missing_ok=True)
    monkeypatch.setattr(sink, "write", lambda self, df: (_ for _ in ()).throw(
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))))
    with pytest.raises(OSError) as e, ChunkWriter(out) as w:
        w.write(TABLE)
    assert e.value.filename == str(out) and "choose another output path" in str(e.value)
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_other_errors_pass_as_they_are(tmp_path):
    """An error about another file (an input read while writing) is not blamed on the
    output."""
    other = tmp_path / "input.csv"
    with pytest.raises(FileNotFoundError) as e, output_errors(tmp_path / "out.csv"):
        open(other)
    assert e.value.filename == str(other)


# ---------------------------------------------------------------- a refused run's journal
def test_a_journal_is_created_with_its_first_row(tmp_path):
    """A command refused before any row is done (a missing column, a bad option found on
    the first chunk) leaves no OUT.partial.jsonl; a finished row creates it."""
    path = tmp_path / "out.csv.partial.jsonl"
    with RowJournal(path) as jr:
        assert jr.active
    assert not path.exists()
    with pytest.raises(InputError), RowJournal(path):
        raise InputError("refused on the first chunk")
    assert not path.exists()
    with RowJournal(path) as jr:
        jr.add({"key": "k1", "v": 1})
    with RowJournal(path) as jr:
        assert jr.get("k1") == {"key": "k1", "v": 1}


def test_a_refused_row_run_leaves_no_journal(tmp_path):
    """Through the row engine (what judge, judge --pairwise, score and roundtrip run on): a
    table without the stage's columns is refused on its first chunk, and nothing is left
    beside the output."""
    from scoreband.engine.rows import run_file
    from scoreband.scorers.stages import score_stage

    TABLE.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(InputError, match="image"):
        run_file(tmp_path / "t.csv", score_stage(base_dir=tmp_path), tmp_path / "o.csv",
                 journal=tmp_path / "o.csv.partial.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


# ---------------------------------------------------------------- unknown prefixes
def test_an_unknown_prefix_lists_the_known_formats(tmp_path):
    scores = tmp_path / "scores.csv"
    TABLE.to_csv(scores, index=False)
    for addr in (f"xls:{scores}", "xls:nowhere.csv"):
        with pytest.raises(InputError, match="unknown table format 'xls'") as e:
            read_table(addr)
        assert all(f.name in str(e.value) for f in all_formats())
    with pytest.raises(InputError, match="unknown table format 'xls'"):
        write_table(TABLE, f"xls:{tmp_path / 'out.csv'}")
    assert not (tmp_path / "out.csv").exists()
    odd = tmp_path / "xls:odd.csv"  # a file whose name holds a colon is read as written
    TABLE.to_csv(odd, index=False)
    assert read_table(odd)["human"].tolist() == [1.0, 2.0]
    for plain in ("C:scores.csv", "http://host/t.csv", "a/b:c.csv"):
        assert split_address(plain) == (None, split_address(plain)[1])


def test_json_with_a_byte_order_mark_is_read_and_a_key_given_twice_refused(tmp_path):
    """A JSON file saved by a Windows editor (a UTF-8 BOM) reads as its JSON; a key given
    twice in one object is refused naming it (json.loads keeps the last silently)."""
    import pytest

    from scoreband.errors import InputError
    from scoreband.json_io import read_json

    (tmp_path / "bom.json").write_bytes(b'\xef\xbb\xbf{"retries": 2}')
    assert read_json(tmp_path / "bom.json", what="--config") == {"retries": 2}
    (tmp_path / "dup.json").write_text('{"a": {"retries": 2, "retries": 3}}')
    with pytest.raises(InputError, match="key 'retries' twice"):
        read_json(tmp_path / "dup.json", what="--config")
