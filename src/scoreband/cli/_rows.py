"""The row commands (score, judge, roundtrip, apply, a rule's apply) on the row jobs of
:mod:`scoreband.jobs` (``api.run``): local (the whole table, or streamed chunk by chunk when both
files are CSV / TSV / JSONL / Parquet) or on Ray, with the same journal, provenance and
end-of-run report."""

from __future__ import annotations

from pathlib import Path

from scoreband.api import RayEngine, run
from scoreband.cli._app import err, fail
from scoreband.cli._options import check_engine


def run_stage(table: Path, out: Path, job: str, kw: dict, engine_opts: dict | None, *,
              df=None, post=None, components: dict | None = None, local: dict | None = None,
              vectorized: bool | None = None):
    """Run the row job ``job`` (a name of ``api.JOBS``) with the stage options ``kw`` over
    ``table`` into ``out``; returns ``(run, stage)`` (stage None on Ray). ``df``: an
    already prepared table (read whole); ``post(table)``: a whole-table step before writing
    (forces the whole-table path); ``local``: arguments only a stage built here gets
    (callbacks: a Ray actor gets plain values only); ``vectorized`` is the job's own."""
    if out.is_dir():
        fail(f"--out {str(out)!r} is a folder; give a file name")
    engine = "local"
    if engine_opts is not None and check_engine(engine_opts):
        if df is not None or post is not None:
            fail("--engine ray runs on the table as it is; drop --captioner / --references "
                 "or run with --engine local")
        engine = RayEngine(actors=engine_opts["actors"], num_gpus=engine_opts["num_gpus"],
                           address=engine_opts["ray_address"])
    return run(job, table, out, options=kw, engine=engine, local=local, df=df, post=post,
               components=components, progress=err)


def end_judge_run(run, judge, spec: str, out: Path, *, noun: str = "rows",
                  extra: str = "") -> None:
    """The end of a judge run, score or pairwise (one report): the model the server says it
    ran where it differs from the one asked for, a warning when the model does not see the
    images (``--allow-blind``), why the run stopped asking, the failed rows (numbered from
    1) and the summary; exit status 1 when the run stopped or more than half the rows could
    not be judged (the table is written either way)."""
    import typer
    from rich.markup import escape

    from scoreband.cli._app import as_flags, finish_rows

    name = spec if judge is None else judge.name
    info = judge.run_info() if hasattr(judge, "run_info") else {}
    asked = [name.split(":", 1)[1]] if ":" in name else [name]
    if info.get("model_served") and info["model_served"] != asked:
        name += f" (the server reports {', '.join(info['model_served'])})"
    elif len(info.get("endpoint_models") or []) == 1 and info["endpoint_models"] != asked:
        name += f" (the server runs {info['endpoint_models'][0]})"
    summary = run.summary or {}
    if summary.get("blind") and summary.get("blind") != summary.get("stopped"):
        err.print(f"[yellow]warning (--allow-blind): {escape(as_flags(summary['blind']))}[/]",
                  markup=True, highlight=False)
    if summary.get("stopped"):
        err.print(f"[red]stopped: {escape(as_flags(summary['stopped']))}[/]", markup=True,
                  highlight=False)
    finish_rows(run.failures, run.rows, "could not be judged",
                f"wrote {out}: {run.rows - len(run.failures):,} of {run.rows:,} {noun} judged "
                f"by {name}{extra}"
                + (f" ({run.reused:,} resumed from the journal)" if run.reused else ""))
    if summary.get("stopped") or 2 * len(run.failures) > run.rows:
        err.print(f"[red]{len(run.failures)} of {run.rows} {noun} could not be judged: exit "
                  "status 1[/]", markup=True, highlight=False)
        raise typer.Exit(1)
