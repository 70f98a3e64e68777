"""A Hugging Face ``datasets`` folder (``save_to_disk`` output: ``*.arrow`` files) or a folder
of Parquet files, read whole; a ``DatasetDict`` folder with several splits is refused, naming
them (:func:`scoreband.formats.common._read_dir`). Read only: scoreband writes tables as files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from scoreband.errors import InputError
from scoreband.formats.base import TableFormat
from scoreband.formats.common import _read_dir

__all__ = ["HF_DATASET"]


class HFDataset(TableFormat):
    name = "hf-dataset"
    help = "a Hugging Face datasets folder (save_to_disk) or a folder of Parquet files"
    folder = True
    writable = False

    def read(self, path: Path, columns=None, *, text: bool = False) -> pd.DataFrame:
        return _read_dir(path)

    def refuse_write(self, path) -> None:
        raise InputError(f"cannot write {Path(path).name!r} as a folder: scoreband writes "
                         "tables as .csv, .tsv, .jsonl, .json or .parquet files")


HF_DATASET = HFDataset()
