"""One small example file per registered table format, for the contract test: a format added
to the registry without an example here fails ``test_every_format_has_an_example``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

#: a CSV-like cell set: leading zeros, NA spellings, booleans, empty cells, separators,
#: quotes, line breaks, unicode, number literals
TEXT_CELLS = {
    "id": ["00017", "2", "3", "4", "5", "6"],
    "na": ["NA", "", "nan", "NULL", "None", "#N/A"],
    "flag": ["FALSE", "TRUE", "true", "0", "1", ""],
    "num": ["1.50", "1e5", "-0", "007", "3.14159265358979323846", "+2"],
    "text": ["a,b", 'say "hi"', "tab\there", "line\nbreak", "caf\u00e9 \u2713", " pad "],
}

TYPED = pd.DataFrame({
    "item": ["a", "b", "c", "d", "e", "f", "g"],
    "score": [0.1, 0.25, 1 / 3, 0.5, 0.75, 0.9, 1.0],
    "n": [1, 2, 3, 4, 5, 6, 7],
})


def _parquet_folder(path: Path) -> Path:
    path.mkdir()
    TYPED.iloc[:3].to_parquet(path / "part-0.parquet", index=False)
    TYPED.iloc[3:].reset_index(drop=True).to_parquet(path / "part-1.parquet", index=False)
    return path


#: format name -> (file name, builder(path) -> path, expected number of rows)
BUILDERS: dict = {
    "hf-dataset": ("ds", _parquet_folder, len(TYPED)),
}


def example(name: str, tmp: Path) -> tuple[Path, int]:
    """An example file of the read-only format ``name`` under ``tmp``, and its row count."""
    fname, build, n = BUILDERS[name]
    return build(tmp / fname), n
