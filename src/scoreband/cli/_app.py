"""The ``scoreband`` application object and what every command shares: the error guard,
row reports and warnings. Which options are inputs and outputs is
:mod:`scoreband.cli.command_files`; the terminal's markdown, :mod:`scoreband.cli.markdown`.

Every command validates its input at the edge; bad rows are reported (row, column,
reason) and skipped, never a traceback.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import re
import sys
import warnings
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from scoreband._version import __version__
from scoreband.api import check_readable, install_hint
from scoreband.cli.command_files import outputs_checked
from scoreband.cli.markdown import markdown_parts
from scoreband.errors import RowError, ScorebandError
from scoreband.progress import step_status
from scoreband.textsafe import plain

app = typer.Typer(
    name="scoreband",
    help="Calibrated uncertainty bands around image-text evaluation scores.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # plain click help: it wraps every column at the terminal's width; rich's option panels
    # cut long option names, choices and defaults with an ellipsis at 80 columns
    rich_markup_mode=None,
)


def _no_hyphen_breaks() -> None:
    """Help text wraps at spaces only: a method name (crc-cluster-mondrian, weighted-split)
    or an option is never broken at its hyphens, where a reader would copy half of it."""
    for name in ("typer._click._textwrap", "click._textwrap"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        base = mod.TextWrapper
        if getattr(base, "_scoreband", False):
            continue

        class Wrapper(base):
            _scoreband = True

            def __init__(self, *args, **kwargs):
                kwargs["break_on_hyphens"] = False
                super().__init__(*args, **kwargs)

        mod.TextWrapper = Wrapper


_no_hyphen_breaks()


def safe_streams() -> None:
    """stdout and stderr replace what their encoding cannot write (``PYTHONIOENCODING=ascii``,
    a pipe or a terminal in latin-1): a "·" or a group's name in another script is shown as
    "?", never a UnicodeEncodeError after the work is done."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
            try:
                reconfigure(errors="replace")
            except (ValueError, OSError):  # a closed or detached stream: nothing to print to
                pass


safe_streams()
# Text that is data (names, paths, cells) is never interpreted: markup and emoji codes are
# off by default; a line that styles is a rich Text (:func:`styled`) with its data as plain
# text (textsafe.plain: control characters shown as escapes).
console = Console(markup=False, emoji=False)
err = Console(stderr=True, markup=False, emoji=False)


def styled(label: str, style: str, message: object = "", *, lines: bool = False):
    """``label`` in ``style``, then ``message`` as it is (never markup; its control
    characters shown as escapes, line breaks kept with ``lines``)."""
    from rich.text import Text

    text = Text(label, style=style)
    if message != "":
        text.append(" " + plain(message, lines=lines))
    return text


def _version(value: bool):
    if value:
        console.print(f"scoreband {__version__}")
        raise typer.Exit()


_STATE = {"debug": False}


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log more.")] = False,
    debug: Annotated[bool, typer.Option(
        "--debug", help="Show the full traceback of an unexpected error.")] = False,
):
    safe_streams()  # the streams of this run (a test runner swaps them)
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    _STATE["debug"] = debug


def fail(msg: str, code: int = 2):
    """Print an error (flags named as on this command line) and exit."""
    # the message is plain text: "[stress]" in an install line is not a style
    err.print(styled("error:", "bold red", as_flags(msg), lines=True))
    raise typer.Exit(code)


def text_or_file(value: str | None) -> str | None:
    """An option's text, or the contents of the file it names with a leading @."""
    if value is not None and value.startswith("@"):
        if not Path(value[1:]).exists():
            fail(f"{value}: file not found")
        f = check_readable(value[1:], "file")
        if f.stat().st_size > 1 << 20:
            fail(f"{value}: above 1 MiB; a prompt or rubric file is text of a few KB")
        return f.read_text(encoding="utf-8", errors="replace")
    return value


def warn(message: str) -> None:
    err.print(styled("warning:", "yellow", message, lines=True))


#: evaluate and calibrate exit with this status (their files written) when more than half
#: of the table's rows were skipped: a table that is mostly unreadable is rarely what was meant
MOSTLY_SKIPPED_EXIT = 1


def report_rows(errors: list[RowError], total: int, action: str = "skipped",
                listed_in=None) -> bool:
    """Print how many of ``total`` rows were ``action`` and why: one line per reason with its
    count (a whole column of ``?`` is one line, not 650), then up to 20 rows. ``listed_in``:
    the file that lists every row (named only when there is one). Returns True when more
    than half of the rows were affected."""
    if not errors:
        return False
    err.print(styled(f"{len(errors)} of {total} rows {plain(action)}:", "yellow"))
    # one reason per kind: the row's own value quoted in a reason ('?') is kept, numbers of
    # rows are not part of the reason
    reasons: dict[tuple[str, str], list] = {}
    for e in errors:
        reasons.setdefault((str(e.column), re.sub(r"\brow (?!\()\S+", "row", str(e.reason))),
                           []).append(e)
    if len(reasons) < len(errors):
        for (col, why), es in sorted(reasons.items(), key=lambda kv: -len(kv[1]))[:10]:
            first = ", ".join(str(e.row) for e in es[:3]) + (", ..." if len(es) > 3 else "")
            s = "s" if len(es) > 1 else ""
            err.print(f"  {len(es)} row{s} (row{s} {plain(first)}), "
                      f"column {plain(repr(col))}: {plain(as_flags(why))}")
        if len(reasons) > 10:
            err.print(f"  ... and {len(reasons) - 10} more reasons")
    else:
        for e in errors[:20]:
            err.print(f"  {plain(as_flags(str(e)))}")
        if len(errors) > 20:
            where = (f"all listed in {plain(listed_in)}" if listed_in else
                     "the first 20 shown")
            err.print(f"  ... and {len(errors) - 20} more ({where})")
    return 2 * len(errors) > total


def as_flags(message: str) -> str:
    """The library names parameters in backticks (`image_col`); on the command line they
    are the current command's options (--image-col)."""
    try:  # typer >= 0.24 runs on its own copy of click
        from typer._click.globals import get_current_context
    except ImportError:
        from click import get_current_context

    ctx = get_current_context(silent=True)
    flags = {}
    if ctx is not None:
        for p in ctx.command.params:
            opts = [o for o in p.opts if o.startswith("--")]
            if opts:
                flags[p.name.rstrip("_")] = opts[0]
            elif p.name:  # an argument: named as --help shows it
                flags[p.name.rstrip("_")] = p.name.upper()
    for lib, opt in PARAM_ALIASES.items():  # a library parameter the CLI spells otherwise
        if opt in flags:
            flags.setdefault(lib, flags[opt])
    return re.sub(r"`([a-z][a-z0-9_]*)`", lambda m: flags.get(m.group(1), m.group(0)), message)


#: library parameter -> the command parameter that sets it
PARAM_ALIASES = {"n_clusters": "clusters", "cache_dir": "cache", "keep_dir": "keep_images",
                 # cascade's `label`; triage reads its --score as the inputs' `median`
                 "label": "label_col", "median": "score"}


def reflow(doc: str | None) -> str | None:
    """A command's docstring as its help: the lines of each paragraph joined, so the
    terminal wraps them at word boundaries (kept as written, they break mid-phrase at 80
    columns: "truncated, not an" / "image, huge")."""
    if not doc:
        return doc
    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def guard(fn):
    """Turn scoreband errors into a clean message and exit code 2; run the command under
    the output policy (its outputs never replace its inputs, a device or a file it did not
    write). Its help is the docstring reflowed (:func:`reflow`)."""
    fn.__doc__ = reflow(fn.__doc__)

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        try:
            _SHOWN.clear()  # once per command run
            with warnings.catch_warnings(), outputs_checked(fn.__name__, kw):
                warnings.simplefilter("default")
                warnings.showwarning = _show_warning_once
                return fn(*a, **kw)
        except ScorebandError as e:
            fail(str(e))
        except (typer.Exit, typer.Abort, KeyboardInterrupt, SystemExit):
            raise
        except ModuleNotFoundError as e:  # an optional dependency: say which extra

            hint = install_hint(e.name or "")
            if hint is None or _STATE["debug"]:
                raise
            fail(f"this needs {e.name}, which is not installed: {hint}")
        except OSError as e:  # a path the user gave: a folder, no permission, a full disk
            if _STATE["debug"]:
                raise
            where = f" {str(e.filename)!r}" if e.filename else ""
            fail(f"cannot use{where}: {e.strerror or e}")
        except Exception as e:  # anything else is a bug: one line, the traceback on request
            if _STATE["debug"]:
                raise
            path = _unknown_home(kw) if isinstance(e, RuntimeError) else None
            if path is not None:  # Path.expanduser: "~name/..." for a user not on this machine
                fail(f"path {path!r}: {path.split('/')[0]} names no user on this machine (a "
                     "path starting with ~ is that user's home); write the path in full")
            msg = " ".join(str(e).split())[:300]
            fail(f"unexpected {type(e).__name__}: {msg} (rerun with `scoreband --debug "
                  f"{fn.__name__.replace('_', '-')} ...` for the traceback)", code=1)

    return wrapper


def _unknown_home(kw: dict) -> str | None:
    """The first option value starting with ``~`` whose user this machine does not know."""
    import pathlib

    for v in kw.values():
        for x in v if isinstance(v, (list, tuple)) else [v]:
            x = getattr(x, "path", x)  # a later_path
            if isinstance(x, (str, pathlib.Path)) and str(x).startswith("~"):
                try:
                    pathlib.Path(str(x)).expanduser()
                except RuntimeError:
                    return str(x)
    return None


_SHOWN: set[str] = set()


def _show_warning_once(message, category, filename, lineno, file=None, line=None) -> None:
    """Library warnings as one line each (no file path or source line), each shown once."""
    text = " ".join(str(message).split())
    if text not in _SHOWN:
        _SHOWN.add(text)
        err.print(styled("warning:", "yellow", text))


def print_warnings(messages) -> None:
    for m in messages:
        warn(m)


def run_study(description: str, run, out, html=None, *, show: bool = True):
    """Run a study with progress (``run(on_step)`` returns a StudyResult), write it to
    ``out`` with its HTML report (``html``, default OUT/report.html) and (``show``) print
    its markdown; returns the result."""
    with step_status(err, description) as step:
        result = run(step)
        result.write(out, on_step=step, html=html or "report.html")
    if show:
        print_markdown(result.markdown)
    return result


def finish_rows(failures: dict[int, str], total: int, action: str, summary: str) -> None:
    """End of a row batch (score, judge, roundtrip): list the failed rows (``failures``:
    0-based position -> reason; numbered from 1, as in every other report), print the
    summary, and exit 1 when no row succeeded (a run that did nothing is a failure)."""
    if failures:
        err.print(styled(f"{len(failures)} of {total} rows {plain(action)}:", "yellow"))
        for i, e in list(failures.items())[:20]:
            err.print(f"  row {i + 1}: {plain(e)}")
    console.print(plain(summary), soft_wrap=True)
    if len(failures) == total:
        raise typer.Exit(1)


def print_markdown(text: str) -> None:
    """A study's markdown for the terminal's width: paragraphs wrapped by rich, tables as
    tables whose cells wrap (never cut), never hard-wrapped source."""
    for part in markdown_parts(text, console.width):
        console.print(part)

