"""The row commands (score, judge, roundtrip, apply) on the row engine: local (the whole table, or
streamed chunk by chunk when both files are CSV / TSV / JSONL / Parquet) or on Ray, with the
same journal, provenance and end-of-run report."""

from __future__ import annotations

from pathlib import Path

from scoreband.cli._app import err, fail
from scoreband.cli._options import check_engine
from scoreband.engine.journal import discard_journal
from scoreband.engine.ray_engine import stage_ray
from scoreband.engine.rows import RowRun, build_stage, run_file, run_rows
from scoreband.engine.stream import as_text
from scoreband.provenance import write_provenance
from scoreband.tables import read_table, write_table

CHUNK_ROWS = 10_000


def run_stage(table: Path, out: Path, factory: str, kw: dict, engine_opts: dict | None, *,
              error_column: str, df=None, post=None, components: dict | None = None,
              local: dict | None = None, vectorized: bool = False):
    """Run the stage ``factory(**kw)`` over ``table`` into ``out``; returns ``(run, stage)``
    (stage None on Ray). ``df``: an already prepared table (read whole); ``post(table)``:
    a whole-table step before writing (forces the whole-table path); ``local``: arguments
    only a stage built here gets (callbacks: a Ray actor gets plain values only);
    ``vectorized``: the stage computes whole chunks (apply), for Ray's batch size."""
    if out.is_dir():
        fail(f"--out {str(out)!r} is a folder; give a file name")
    if engine_opts is not None and check_engine(engine_opts):
        if df is not None or post is not None:
            fail("--engine ray runs on the table as it is; drop --captioner / --references "
                 "or run with --engine local")
        return _ray(table, out, factory, kw, engine_opts, error_column, components,
                    vectorized), None
    from scoreband.formats import resolve, split_address  # the table's format and file

    stage = build_stage(factory, {**kw, **(local or {}),
                                  "base_dir": split_address(table)[1].parent})
    # a vectorized stage (apply) keeps no journal: it never reads, writes or removes one
    journal = None if stage.vectorized else Path(str(out) + ".partial.jsonl")
    streamed = (df is None and post is None and resolve(table)[0].streamable
                and resolve(out, write=True)[0].streamable)
    if streamed:
        run = run_file(table, stage, out, journal=journal, progress=err,
                       chunk_rows=10 * CHUNK_ROWS if stage.vectorized else CHUNK_ROWS)
    else:
        # cells read as text (JSON values as they are): the table comes back as it went in
        run = run_rows(read_table(table, text=as_text(out)) if df is None else df, stage,
                       journal=journal, progress=err)
        if post is not None:
            post(run.table)
        write_table(run.table, out)
        discard_journal(journal)  # the table is complete (only a journal scoreband wrote)
    comps = {**(components or {}), **(stage.components() if hasattr(stage, "components")
                                      else {})}
    write_provenance(out, comps, files=_files(stage))
    return run, stage


def _files(stage) -> dict:
    cal = getattr(stage, "calibrator", None)
    return {"calibrator": cal} if cal else {}


def _ray(table, out, factory, kw, engine_opts, error_column, components,
         vectorized) -> RowRun:
    n, failures = stage_ray(table, out, factory, kw, error_column=error_column,
                            actors=engine_opts["actors"], num_gpus=engine_opts["num_gpus"],
                            address=engine_opts["ray_address"], vectorized=vectorized)
    write_provenance(out, {**(components or {}), "engine": {
        "name": "ray", "actors": engine_opts["actors"], "num_gpus": engine_opts["num_gpus"]}})
    return RowRun(None, n, failures)


def end_judge_run(run: RowRun, judge, spec: str, out: Path, *, noun: str = "rows",
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
