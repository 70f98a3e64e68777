"""Text that is data is never read as markup: group, task and judge names made of rich
markup, mathtext, pipes, HTML, newlines, brackets and any unicode go through every command
that prints, plots or writes markdown (evaluate with --groups --out --html, judge-study on a
table, report) and come out literally: exit 0, the name in results.md (escaped), in
report.html (escaped) and on the console, never a style, a link, a formula or a column."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markupsafe import escape as jinja_escape
from rich.color import ColorSystem
from rich.console import Console

from scoreband.cli import _app, app
from scoreband.cli.markdown import table_cells
from scoreband.tables import NA_TEXT
from scoreband.textsafe import fig, md, md_unescape, plain, term
from tests.conftest import EXAMPLE, EXAMPLE_FLAGS, EXAMPLE_INTERVAL, runner

EVAL = [*EXAMPLE_FLAGS, *EXAMPLE_INTERVAL, "--method", "crc", "--groups", "task", "--seeds", "2"]
HOSTILE = ["[/]", "$\\textbf{ours}$", "[link=https://evil.example/]A[/link]", "a|b",
           "<script>alert(1)</script>", "line\nbreak", "[bold red]x[/]", ":warning:",
           "`code` & *em* _u_ ~~s~~", "[A](https://evil.example/)", "\x1b[31mred\x1b[0m",
           "tab\there", "# heading", "\\", "日本語 ü ·", "$", "a\r\nb", "&amp; &lt;"]
# a CLI run takes seconds: a failing example is reported as drawn, not shrunk for minutes
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)")

names = st.one_of(st.sampled_from(HOSTILE),
                  st.text(alphabet=st.sampled_from(list("[]/$|<>&`*_~\\#:=-\n\t()!{} aZ·é")),
                          min_size=1, max_size=14),
                  st.text(min_size=1, max_size=10)).filter(
    # a spelling of a missing value ("NULL", "NA" ...) is a missing group by design
    lambda s: s.strip() == s and s and s not in NA_TEXT)


def _read(path) -> str:
    """A file's text as written (a "\\r\\n" in a name stays one)."""
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def _visible(name: str) -> str:
    """How the console shows a name: control characters as their escapes."""
    return plain(name)


# ------------------------------------------------------------------ the rules themselves
@given(st.text(max_size=40))
@settings(max_examples=200, deadline=None)
def test_term_prints_the_text_itself(s):
    """Between tags, as markup is written (a trailing backslash is doubled so that it does
    not escape the tag after it)."""
    c = Console(file=io.StringIO(), width=1000, markup=True, emoji=True, highlight=False,
                color_system=None)
    c.print(f"[bold]{term(s)}[/bold]", soft_wrap=True, end="")
    assert c.file.getvalue() == plain(s)


_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])


@given(st.text(max_size=40))
@settings(max_examples=200, deadline=None)
def test_md_is_one_cell_of_plain_text(s):
    one_line = plain(s)
    # a table cell: one cell, whose text is the name (no link, code, emphasis or HTML)
    doc = f"| name | n |\n|---|---|\n| {md(s)} | 1 |\n"
    tokens = _MD.parse(doc)
    cells = [t for t in tokens if t.type == "inline"]
    assert len(cells) == 4, (s, doc)
    inline = cells[2]
    assert all(c.type == "text" for c in inline.children or []), inline.children
    assert "".join(c.content for c in inline.children or []) == one_line.strip()
    # a heading after scoreband's words
    html = _MD.render(f"## Reliability map: {md(s)}")
    assert html.startswith("<h2>") and "<a" not in html and "<code" not in html
    # what the terminal's table printer shows
    assert md_unescape(md(s)) == one_line


@given(st.text(max_size=40))
@settings(max_examples=200, deadline=None)
def test_fig_is_never_mathtext(s):
    from matplotlib.text import Text

    shown, math = Text()._preprocess_math(fig(s))
    assert math is False and shown == plain(s)


# ------------------------------------------------------------------ the commands
@pytest.fixture
def terminal(monkeypatch):
    """The CLI's consoles as a colour terminal 400 columns wide (hyperlinks and styles would
    be escape sequences here), recorded."""
    buf = io.StringIO()
    for c in (_app.console, _app.err):
        monkeypatch.setattr(c, "_file", buf)  # (not .file: it would pin sys.stdout after)
        monkeypatch.setattr(c, "_force_terminal", True)
        monkeypatch.setattr(c, "_color_system", ColorSystem.TRUECOLOR)
        monkeypatch.setattr(c, "_width", 400)
    return buf


def _check_console(out: str, group_names, *, wrapped: bool = False) -> None:
    """Each name shown as written (``wrapped``: a markdown table's cell wraps between
    words, so each word of it)."""
    assert "\x1b]8;" not in out, "a hyperlink reached the terminal"
    text = ANSI.sub("", out)
    for g in group_names:
        for part in _visible(g).split() if wrapped else [_visible(g)]:
            assert part in text, (g, text[-3000:])


def _hostile_table(tmp_path, groups: list[str]):
    df = pd.read_csv(EXAMPLE).head(600)
    old = sorted(df["task"].unique())
    df["task"] = df["task"].map(dict(zip(old, groups, strict=True)))
    p = tmp_path / "t.parquet"
    df.to_parquet(p)
    return p


@pytest.mark.slow  # nine evaluate --html runs (~30 s)
@given(st.lists(names, min_size=5, max_size=5, unique=True))
@example(HOSTILE[:5])
@example(HOSTILE[5:10])
@example(HOSTILE[10:15])
@settings(max_examples=6, deadline=None, phases=NO_SHRINK,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much])
def test_evaluate_and_report_show_hostile_names_literally(tmp_path_factory, terminal, groups):
    d = tmp_path_factory.mktemp("hostile")
    t = _hostile_table(d, groups)
    terminal.seek(0)
    terminal.truncate()
    r = runner.invoke(app, ["evaluate", str(t), *EVAL, "--out", str(d / "m.json"), "--html",
                            str(d / "m.html")])
    assert r.exit_code == 0, (r.output, terminal.getvalue()[-2000:])
    doc = json.loads((d / "m.json").read_text())
    assert set(doc["groups"]) == set(groups)
    _check_console(terminal.getvalue(), groups)
    page = _read(d / "m.html")
    assert "<script" not in page and "<a " not in page
    for g in groups:
        assert str(jinja_escape(g)) in page, g
    # report, with a hostile title too
    terminal.seek(0)
    terminal.truncate()
    r = runner.invoke(app, ["report", str(d / "m.json"), "--out", str(d / "r.html"),
                            "--title", groups[0]])
    assert r.exit_code == 0, (r.output, terminal.getvalue()[-2000:])
    page = _read(d / "r.html")
    assert "<script" not in page and "<a " not in page
    assert f"<h1>{jinja_escape(groups[0])}</h1>" in page
    for g in groups:
        assert str(jinja_escape(g)) in page, g


@pytest.fixture(scope="module")
def judge_run(tmp_path_factory):
    """One judge-study on a table whose judge and tasks have hostile names (the study itself
    takes ~20 s, so its outputs are then re-rendered with generated names below)."""
    from tests.golden.cases import judge_table

    d = tmp_path_factory.mktemp("judge")
    df = judge_table(150)
    tasks = {"coherence": HOSTILE[2], "fluency": HOSTILE[1], "relevance": "a|b <b>x</b>\n2"}
    df["task"] = df["task"].map(tasks)
    df.to_parquet(d / "j.parquet")
    judge = "[/]<i>|$x$"
    buf = io.StringIO()
    cons = [(c, c._file, c._force_terminal, c._width, c._color_system)
            for c in (_app.console, _app.err)]
    for c in (_app.console, _app.err):
        c._file, c._force_terminal, c._width = buf, True, 400
        c._color_system = ColorSystem.TRUECOLOR
    try:
        r = runner.invoke(app, ["judge-study", str(d / "j.parquet"), "--judge",
                                f"{judge}=logp_*", "--target", "human", "--n-ratings", "3",
                                "--task-col", "task", "--seeds", "1", "--out", str(d / "js")])
    finally:
        for c, f, ft, w, cs in cons:
            c._file, c._force_terminal, c._width, c._color_system = f, ft, w, cs
    return d, r, buf.getvalue(), judge, list(tasks.values())


def test_judge_study_on_a_table_of_hostile_names(judge_run):
    d, r, out, judge, tasks = judge_run
    assert r.exit_code == 0, (r.output, out[-3000:])
    _check_console(out, [judge, *tasks], wrapped=True)
    md_text = (d / "js" / "results.md").read_text()
    rows = [line for line in md_text.splitlines() if line.startswith("| ")]
    for line in rows:  # every row has the cells of its table (9, 4 or 2 + tasks)
        assert len(table_cells(line)) in (9, 4, 5), line
    for t in [judge, *tasks]:
        assert md(t) in md_text, t
    assert "<b>" not in md_text and "<i>" not in md_text
    page = _read(d / "js" / "report.html")
    for t in [judge, *tasks]:
        assert str(jinja_escape(t)) in page
    assert "<i>" not in page and "<b>" not in page


@given(st.lists(names, min_size=3, max_size=3, unique=True), names)
@settings(max_examples=10, deadline=None, phases=NO_SHRINK,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much])
def test_judge_results_with_generated_names_print_and_report(judge_run, terminal, tmp_path,
                                                            tasks, judge):
    """The judge study's results.md, console print and report with generated judge and task
    names (its results renamed; the numbers are the study's)."""
    from scoreband.studies.judge import study_markdown

    d, r, _, old_judge, old_tasks = judge_run
    doc = json.loads((d / "js" / "results.json").read_text())
    rename = dict(zip(old_tasks, tasks, strict=True))

    def tasks_of(m):
        return {rename[t]: v for t, v in m.items()}

    doc["methods"] = {judge: doc["methods"].pop(old_judge)}
    doc["reliability_map"] = {judge: tasks_of(doc["reliability_map"][old_judge])}
    doc["reliability_maps"] = {m: {judge: tasks_of(v[old_judge])}
                               for m, v in doc["reliability_maps"].items()}
    text = study_markdown(doc)
    for line in text.splitlines():
        if line.startswith("| "):
            assert len(table_cells(line)) in (9, 4, 5), line
    terminal.seek(0)
    terminal.truncate()
    _app.print_markdown(text)
    _check_console(terminal.getvalue(), [judge, *tasks], wrapped=True)
    p = tmp_path / "results.json"
    p.write_text(json.dumps(doc))
    r = runner.invoke(app, ["report", str(p), "--out", str(tmp_path / "r.html")])
    assert r.exit_code == 0, r.output
    page = _read(tmp_path / "r.html")
    for t in [judge, *tasks]:
        assert str(jinja_escape(t)) in page
    assert "<script" not in page


# ------------------------------------------------------------------ encodings and paths
def test_calibrate_prints_the_path_it_wrote(tmp_path, terminal):
    out = tmp_path / "cal[final].json"
    r = runner.invoke(app, ["calibrate", EXAMPLE, *EVAL[:12], "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert out.exists() and f"-> {out}" in ANSI.sub("", terminal.getvalue()).replace("\n", "")


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_terminal_that_cannot_encode_gets_replacements(tmp_path, encoding):
    """PYTHONIOENCODING=ascii: "·", "±" and a name in another script print as "?"; the run
    ends 0 with --out and --html written."""
    t = _hostile_table(tmp_path, ["日本語", "ü·", "[/]", "$\\textbf{ours}$", "a|b"])
    r = subprocess.run([sys.executable, "-m", "scoreband", "evaluate", str(t), *EVAL,
                        "--out", str(tmp_path / "m.json"), "--html", str(tmp_path / "m.html")],
                       capture_output=True, env={**_env(), "PYTHONIOENCODING": encoding},
                       timeout=300)
    text = r.stdout.decode(encoding) + r.stderr.decode(encoding)
    assert r.returncode == 0, text
    assert (tmp_path / "m.json").exists() and (tmp_path / "m.html").exists()
    assert "unexpected" not in text and "?" in text


def _env():
    import os

    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}



@pytest.mark.parametrize("is_terminal", [True, False])
def test_progress_shows_messages_as_text(is_terminal):
    """A step or a description that names data ("[/]", a link) is text on a spinner, a bar
    and the plain lines of a log alike."""
    from scoreband.progress import row_progress, step_status

    c = Console(file=io.StringIO(), force_terminal=is_terminal, width=200,
                color_system="truecolor" if is_terminal else None)
    with step_status(c, "judge [/] ...") as step:
        step("[link=https://evil.example/]A[/link], split: resplit 1 of 2")
    with row_progress(c, "scoring [b]x[/b]", 4) as update:
        update(2)
        update(4)
    out = c.file.getvalue()
    assert "\x1b]8;" not in out
    if not is_terminal:  # a spinner's and a bar's frames are overwritten in a terminal
        assert "judge [/] ..." in out and "[link=https://evil.example/]A[/link]" in out
        assert "scoring [b]x[/b]: 4/4 rows" in out
