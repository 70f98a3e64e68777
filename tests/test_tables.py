"""Tables (scoreband.tables): every format round-trips text and floats exactly, Hugging Face
dataset folders read, unknown / missing / empty / duplicated-column tables are clear errors,
and a failed write keeps the old file and leaves no temp file."""

import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from scoreband.errors import InputError
from scoreband.files import atomic_path
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


def test_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
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
    df = pd.DataFrame({"caption": ["a\rb", 'say "hi"', "x\r\ny", "new\nline", "ok, fine"],
                       "v": [0.1234567890123456789, 1 / 3, 2.0, 1e-300, np.nan]})
    write_table(df, tmp_path / f"t.{ext}")
    back = read_table(tmp_path / f"t.{ext}")
    assert back["caption"].tolist() == df["caption"].tolist()
    np.testing.assert_array_equal(back["v"].to_numpy(), df["v"].to_numpy())


def test_duplicated_columns_and_bare_cr_in_a_csv(tmp_path):
    (tmp_path / "d.csv").write_text("a,a,b\n1,2,3\n")
    with pytest.raises(InputError, match="duplicated column names: 'a'"):
        read_table(tmp_path / "d.csv")
    (tmp_path / "cr.csv").write_bytes(b"caption,v\nhello\rworld,1\nok,2\n")
    assert read_table(tmp_path / "cr.csv")["caption"].tolist() == ["hello\rworld", "ok"]
