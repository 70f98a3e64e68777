"""docs/INPUTS.md cannot drift from the readers: every example on the page is written to a
file (a Python example is run, in an empty folder) and read through the real readers, by
the address the page gives; the format found, the row count and the columns the page
promises are checked; every registered format has an example and a row in the prefix
table."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from scoreband.formats import FORMATS, resolve
from scoreband.tables import read_table

PAGE = Path(__file__).resolve().parents[2] / "docs" / "INPUTS.md"
_EXAMPLE = re.compile(r"<!-- example: (?P<spec>[^\n]*?) -->\n```(?P<lang>\w*)\n(?P<body>.*?)```",
                      re.S)


def _examples() -> list[dict]:
    out = []
    for m in _EXAMPLE.finditer(PAGE.read_text(encoding="utf-8")):
        words = m["spec"].split()
        ex = {"file": words[0], "lang": m["lang"], "body": m["body"], "read": words[0]}
        key = None
        for w in words[1:]:
            if w.endswith(":") and w[:-1] in ("read", "format", "rows", "columns"):
                key = w[:-1]
                ex.setdefault(key, [] if key == "columns" else None)
            elif key == "columns":
                ex["columns"].append(w)
            else:
                ex[key] = w
        ex["rows"] = int(ex["rows"])
        out.append(ex)
    return out


EXAMPLES = _examples()


def test_the_page_has_an_example_and_a_prefix_row_for_every_format():
    assert {e["format"] for e in EXAMPLES} == set(FORMATS.names())
    text = PAGE.read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([a-z-]+)` \|", text, re.M))
    assert listed == set(FORMATS.names())


@pytest.mark.parametrize("ex", EXAMPLES, ids=[e["file"] for e in EXAMPLES])
def test_every_example_reads_as_the_page_says(tmp_path, monkeypatch, ex):
    monkeypatch.chdir(tmp_path)
    # the Inspect example is the documented JSON layout, read by scoreband's own parser
    # (inspect_ai, where installed, reads whole logs that Inspect writes)
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    if ex["lang"] == "python":
        r = subprocess.run([sys.executable, "-c", ex["body"]], capture_output=True, text=True,
                           timeout=120)
        if "No module named 'datasets'" in r.stderr:
            pytest.skip("the Hugging Face datasets example needs `pip install datasets`")
        assert r.returncode == 0, r.stderr[-2000:]
    else:
        Path(ex["file"]).write_text(ex["body"], encoding="utf-8")
    assert resolve(ex["read"])[0].name == ex["format"]
    df = read_table(ex["read"])
    assert len(df) == ex["rows"]
    missing = [c for c in ex["columns"] if c not in df.columns]
    assert not missing, (missing, list(df.columns))
    # no reader error hidden in an example: a row with no error of its tool's (a failed
    # request says so in batch_error) has no other error either
    errors = [c for c in df.columns if c.endswith("_error")]
    failed = df["batch_error"].fillna("") != "" if "batch_error" in df else df.index < 0
    for c in errors:
        assert (df.loc[~failed, c].fillna("") == "").all(), (c, df[c].tolist())
