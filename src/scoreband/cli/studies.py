"""demo: everything on the embedded world, with no download."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from scoreband.api import Scale, read_table
from scoreband.cli._app import app, console, fail, guard, report_rows, run_study, styled
from scoreband.cli._options import (
    AlphaOpt,
    ImageColOpt,
    NRatingsOpt,
    RatingsOpt,
    StudyHtmlOpt,
    TargetOpt,
    TextColOpt,
    check_scale,
)
from scoreband.textsafe import plain


@app.command()
@guard
def demo(
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("scoreband-demo"),
    n_test: Annotated[int, typer.Option("--n-test", min=20, max=1_000_000,
                                        help="Items per test set.")] = 600,
    seeds: Annotated[int, typer.Option("--seeds", min=1, max=10_000,
                                       help="Random calibration/test splits.")]
    = 10,
    alpha: AlphaOpt = 0.1,
    mc_passes: Annotated[int, typer.Option("--mc-passes", min=2, max=10_000,
                                           help="MC-dropout passes.")] = 25,
    html: StudyHtmlOpt = None,
    quick: Annotated[bool, typer.Option(
        "--quick", help="A first look in about 14 s: 200 items per set, 3 splits, 5 "
                        "MC-dropout passes (noisier numbers).")] = False,
):
    """Run everything on the embedded world, with no download.

    Three test sets (clean multi-annotator, noisy single-annotator, painting-style out of
    domain), the bundled quantile scorer and its MC-dropout baseline, CRC and cluster
    calibration over repeated splits. Writes results.json, results.md, widths.png, examples.png and report.html to --out.
    """
    from scoreband.api import demo_study  # lazy: loads safetensors, scipy, torch

    if quick:
        n_test, seeds, mc_passes = 200, 3, 5
    result = run_study("demo: scoring the three test sets ...", lambda step: demo_study.run(
        n_test=n_test, seeds=seeds, alpha=alpha, mc_passes=mc_passes, on_step=step), out, html,
        show=False)
    _print_demo(result.doc, alpha, seeds, n_test)
    console.print(f"wrote {plain(out)}/results.json, results.md, widths.png, examples.png and "
                  f"{plain(html or Path(out) / 'report.html')} "
                  f"({result.doc['_meta']['seconds']} s)")


def _print_demo(doc: dict, alpha: float, seeds: int, n_test: int) -> None:
    from scoreband.api import demo_study  # lazy: loads safetensors, scipy, torch

    METRICS, ROWS, TEST_SETS = demo_study.METRICS, demo_study.ROWS, demo_study.TEST_SETS

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
        mark = styled("  yes", "green") if f["holds"] else styled("  no", "red")
        console.print(mark.append(f"  {plain(f['claim'])} ({f['value']:.3f})"))
    from scoreband.api import demo_study

    for line in demo_study.decisions_lines(doc):
        console.print(plain(line))
    sh = doc["ood_painting_shift"]["chained_ci"]["after"]["coverage"]
    console.print(f"calibrated in domain, applied to ood_painting: coverage {sh['mean']:.3f}")


# ------------------------------------------------------------------ stress
def _csv(value: str | None, what: str, cast=str) -> list | None:
    if value is None:
        return None
    try:
        return [cast(v.strip()) for v in value.split(",") if v.strip()]
    except ValueError:
        fail(f"{what}: expected a comma list of {cast.__name__} values, got {value!r}")


@app.command()
@guard
def stress(
    table: Annotated[Path | None, typer.Argument(
        help="Table of (image, caption, human target) rows; omit for the embedded world "
             "(photo vs painting) and the bundled model.")] = None,
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("stress"),
    model: Annotated[Path | None, typer.Option(
        "--model", help="A model folder from `scoreband train` (default: the bundled "
                        "model).")] = None,
    target: TargetOpt = None,
    ratings: RatingsOpt = None,
    scale: Annotated[str, typer.Option("--scale", callback=check_scale,
                                       help="Native scale of the target.")] = "1,5",
    n_ratings: NRatingsOpt = None,
    image_col: ImageColOpt = "image",
    text_col: TextColOpt = "caption",
    domain_col: Annotated[str | None, typer.Option(
        "--domain-col", help="Column naming each row's domain (for the shift study).")] = None,
    in_domain: Annotated[str | None, typer.Option(
        "--in-domain", help="The --domain-col value calibration is done on (default: the "
                            "most frequent).")] = None,
    distortions: Annotated[str | None, typer.Option(
        "--distortions", help="Comma list of blur, noise, jpeg, cutout, elastic, contrast "
                              "(default: all).")] = None,
    levels: Annotated[str | None, typer.Option(
        "--levels", help="Comma list of light, moderate, strong, extreme (default: all; "
                         "clean is always included).")] = None,
    ks: Annotated[str, typer.Option("--k", help="Cluster counts for the k-sensitivity.")]
    = "1,2,4,8,16,32,63",
    n: Annotated[int, typer.Option("--n", min=40, help="World: items per style.")] = 1500,
    alpha: AlphaOpt = 0.1,
    seeds: Annotated[int, typer.Option("--seeds", min=1, help="Resplits of the domain-"
                                                              "shift study.")] = 10,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1,
                                      help="Seed of the split and the "
                                           "distortions.")] = 0,
    html: StudyHtmlOpt = None,
):
    """How bands react to distortions, domain shift, caption length and k.

    Calibrated on clean in-domain items, applied to six distortions at four levels each
    (albumentations, a fixed seed per item), to out-of-domain items (plain and weighted
    conformal, full switch and 80/20 -> 20/80 mixture), to short vs long captions, and the
    cluster-conservative rule for each k. Writes results.json, results.md, report.html and
    figures (widths_by_distortion.png, k_curve.png, domain_widths.png, examples_by_level.png).

    Example: scoreband stress --out stress; on your data: scoreband stress pairs.csv
    --model DIR --target human --scale 1,5 --domain-col source
    """
    from scoreband.api import stress_study as study  # lazy: loads scipy

    kw = dict(distortions=_csv(distortions, "--distortions"), levels=_csv(levels, "--levels"),
              ks=_csv(ks, "--k", int), alpha=alpha, seed=seed, seeds=seeds, n=n)
    study.parse_distortions(kw["distortions"], kw["levels"])  # fail before any work
    scorer = items = sc = None
    if model is not None:
        from scoreband.api import load_scorer  # lazy: loads torch

        scorer = load_scorer(model)
    if table is not None:
        items, in_domain, sc = _stress_table(table, scale, target, ratings, image_col,
                                             text_col, domain_col, in_domain, n_ratings)
    result = run_study("stress study ...", lambda step: study.run(
        scorer, items=items, in_domain=in_domain, scale=sc, on_step=step, **kw), out, html)
    console.print(f"wrote {plain(out)}/results.json, results.md, figures and "
                  f"{plain(html or Path(out) / 'report.html')} ({result.doc['seconds']} s)")


def _stress_table(table, scale, target, ratings, image_col, text_col, domain_col, in_domain,
                  n_ratings):
    from scoreband.api import table_items  # lazy: loads scipy

    return table_items(read_table(table), scale=Scale.parse(scale), target=target,
                       ratings=ratings, image_col=image_col, text_col=text_col,
                       domain_col=domain_col, in_domain=in_domain,
                       base_dir=Path(table).parent, n_ratings=n_ratings, on_rows=report_rows)
