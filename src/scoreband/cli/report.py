"""report: one self-contained HTML page from results files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scoreband.api import kinds_help
from scoreband.cli._app import app, console, guard
from scoreband.textsafe import plain


@app.command()
@guard
def report(
    results: Annotated[list[Path], typer.Argument(
        help=f"Results JSON files: {kinds_help()} (--out, or a study's "
             "OUT/results.json).")],
    out: Annotated[Path, typer.Option("--out", help="The HTML file to write.")]
    = Path("report.html"),
    title: Annotated[str | None, typer.Option("--title", help="Page title.")] = None,
):
    """One HTML report (self-contained: opens offline, prints, reads on a phone).

    A verdict first, then per-group coverage with Clopper-Pearson intervals against the
    target, width distributions, method comparisons, the reliability map, the calibration
    curve, the definition of every metric and the provenance.

    Example: scoreband report scoreband-demo/results.json metrics.json --out report.html
    """
    from scoreband.api import write_report  # lazy: loads scipy

    write_report(list(results), out, title=title)
    console.print(f"wrote {plain(out)} ({Path(out).stat().st_size / 1024:.0f} KB)")
