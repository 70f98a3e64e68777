"""`report` on results files edited by hand (a key gone, a section emptied, a number as a
string, an array where an object was): a clear error naming the file, exit 2, never a crash;
and a report of hostile group names that Chromium shows as text (no script, no link)."""

import copy
import json
import re
import shutil
import subprocess

import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from markupsafe import escape

from scoreband.cli import app
from scoreband.errors import InputError
from scoreband.report.html import write_report
from tests.conftest import runner

FILES = {"evaluate": "ev.json", "judge-study": "js/results.json", "stress": "st/results.json"}


def _paths(doc, prefix=()):
    """Every key path of a document, outside its provenance."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k in ("provenance", "study"):
                continue
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            yield (*prefix, i)
            yield from _paths(v, (*prefix, i))


def _edit(doc, path, value):
    d = doc
    for k in path[:-1]:
        d = d[k]
    if value is _DROP:
        d.pop(path[-1])
    else:
        d[path[-1]] = value


_DROP = object()
EDITS = st.sampled_from([_DROP, "0.1", None, [], {}, True, -1, 1e308, "", [1, 2, 3]])


@pytest.mark.slow  # 30 hypothesis examples through the report (~12 s)
@given(data=st.data())
@settings(max_examples=30, deadline=None, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_an_edited_results_file_is_named_never_a_crash(results, tmp_path, data):
    kind = data.draw(st.sampled_from(sorted(FILES)))
    doc = json.loads((results / FILES[kind]).read_text())
    paths = list(_paths(doc))
    path = data.draw(st.sampled_from(paths))
    edited = copy.deepcopy(doc)
    _edit(edited, path, data.draw(EDITS))
    f = tmp_path / "edited.json"
    f.write_text(json.dumps(edited))
    # exit 0 or 2 with one line naming the file
    r = runner.invoke(app, ["report", str(f), "--out", str(tmp_path / "r2.html")])
    assert r.exit_code in (0, 2), r.output
    assert "unexpected" not in r.output and "Traceback" not in r.output
    if r.exit_code == 2:
        assert "edited.json" in " ".join(r.output.split()).replace(" ", "")


@pytest.mark.parametrize("doc,says", [
    ([], "a JSON array"),
    ({"study": "stress"}, "missing key 'alpha'"),
    ({"study": "demo", "_meta": {"alpha": 0.1, "findings": []}, "clean": {},
      "ood_painting_shift": {}}, "field 'clean'"),
    ({"study": "systems", "alpha": 0.1, "method": "ppi++", "scale": {"lo": 1, "hi": 5},
      "ranking": [], "systems": {}, "pairs": []}, "field 'ranking'"),
])
def test_an_empty_section_names_the_key(tmp_path, doc, says):
    f = tmp_path / "res.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=re.escape(says)) as e:
        write_report([f], tmp_path / "r.html")
    assert str(e.value).startswith(f"{f}: ")


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
HOSTILE = ["<script>document.title='pwned'</script>", "<a href='https://evil.example/'>A</a>",
           "[link=https://evil.example/]B[/link]", "$\\textbf{ours}$", "a|b & c"]


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium here: apt-get install chromium (.ci/run does)")
def test_hostile_names_are_text_in_chromium(results, tmp_path):
    """A report whose groups are HTML: Chromium's DOM has no script and no link from them,
    and shows each name as text."""
    df = pd.read_csv(results / "ex.csv").head(600)
    old = sorted(df["task"].unique())
    df["task"] = df["task"].map(dict(zip(old, HOSTILE, strict=True)))
    df.to_parquet(tmp_path / "t.parquet")
    from tests.report.conftest import EXAMPLE_ARGS

    r = runner.invoke(app, ["evaluate", str(tmp_path / "t.parquet"), *EXAMPLE_ARGS,
                            "--seeds", "2", "--html", str(tmp_path / "r.html")])
    assert r.exit_code == 0, r.output
    page = (tmp_path / "r.html").read_text()
    for g in HOSTILE:
        assert str(escape(g)) in page
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          "--host-resolver-rules=MAP * ~NOTFOUND", "--dump-dom",
                          (tmp_path / "r.html").as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    assert "<script" not in dom and "<a " not in dom and "pwned" not in dom.split("<body")[0]
    assert dom.count("<svg") >= 1
    for g in HOSTILE:  # as text, entity-escaped by the DOM serialiser
        assert str(escape(g)).replace("&#39;", "'").replace("&#34;", '"') in dom, g
