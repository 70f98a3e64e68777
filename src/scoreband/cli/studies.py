"""demo: everything on the embedded world, with no download."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from scoreband.cli._app import app, console, guard, run_study
from scoreband.cli._options import AlphaOpt


@app.command()
@guard
def demo(
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("scoreband-demo"),
    n_test: Annotated[int, typer.Option("--n-test", help="Items per test set.")] = 600,
    seeds: Annotated[int, typer.Option("--seeds", help="Random calibration/test splits.")]
    = 10,
    alpha: AlphaOpt = 0.1,
    mc_passes: Annotated[int, typer.Option("--mc-passes", help="MC-dropout passes.")] = 25,
):
    """Run everything on the embedded world, with no download.

    Three test sets (clean multi-annotator, noisy single-annotator, painting-style out of domain), the bundled
    quantile scorer and its MC-dropout baseline, CRC and cluster calibration over repeated
    splits. Writes results.json, results.md, widths.png and examples.png to --out.
    """
    from scoreband.studies.demo import run

    result = run_study("demo: scoring the three test sets ...", lambda step: run(
        n_test=n_test, seeds=seeds, alpha=alpha, mc_passes=mc_passes, on_step=step), out)
    _print_demo(result.doc, alpha, seeds, n_test)
    console.print(f"wrote {out}/results.json, results.md, widths.png, examples.png "
                  f"({result.doc['_meta']['seconds']} s)")


def _print_demo(doc: dict, alpha: float, seeds: int, n_test: int) -> None:
    from scoreband.studies.demo import METRICS, ROWS, TEST_SETS

    def cell(v):
        return "-" if v["mean"] is None or np.isnan(v["mean"]) else f"{v['mean']:.3f}"

    # short names so the tables fit 80 columns; the legend below says what they stand for
    short = {"mc_dropout": "mc-drop", "unconstrained_pinball": "pin", "chained_pinball":
             "ch-pin", "chained_ci": "ch-ci", "chained_ci_clusters": "ch-ci-k"}
    heads = {"kendall_tau_c": "tau-c", "ups": "UPS", "sharpness": "width", "coverage": "cover"}
    for s in TEST_SETS:
        t = Table(title=f"{s}: before -> after calibration (alpha={alpha}, {seeds} seeds, "
                        f"n={n_test})")
        t.add_column("head")
        for m in METRICS:
            t.add_column(heads.get(m, m), justify="right")
        for row in ROWS:
            t.add_row(short.get(row, row), *[f"{cell(doc[s][row]['before'][m])} -> "
                                             f"{cell(doc[s][row]['after'][m])}"
                                             for m in METRICS])
        console.print(t)
    console.print("heads: mc-drop = MC dropout of the point head, pin = unconstrained pinball, "
                  "ch-pin = chained pinball, ch-ci = chained with the centred interval loss "
                  "(CRC), ch-ci-k = ch-ci with the cluster-conservative rule; width = "
                  "sharpness on [0, 1], cover = coverage, UPS = width-error correlation")
    for f in doc["_meta"]["findings"]:
        mark = "[green]yes[/]" if f["holds"] else "[red]no[/]"
        console.print(f"  {mark}  {f['claim']} ({f['value']:.3f})")
    sh = doc["ood_painting_shift"]["chained_ci"]["after"]["coverage"]
    console.print(f"calibrated in domain, applied to ood_painting: coverage {sh['mean']:.3f}")
