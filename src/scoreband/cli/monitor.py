"""monitor: does a calibrator or a triage rule still keep its promise on newly labeled rows?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scoreband.cli._app import app, console, err, guard, report_rows, styled
from scoreband.cli._options import (
    PREDICTION_OVERRIDES,
    GroupsOpt,
    NRatingsOpt,
    RatingsOpt,
    TargetOpt,
    open_unit,
    with_options,
)
from scoreband.textsafe import plain

#: the exit code of a run that alarmed (0: no alarm; 2: an error)
ALARM_EXIT = 1


@app.command()
@guard
@with_options(PREDICTION_OVERRIDES)
def monitor(
    source: Annotated[Path, typer.Argument(
        help="Calibrator JSON (`scoreband calibrate`) or triage rule (`scoreband triage "
             "--out`) to watch.")],
    stream: Annotated[Path, typer.Argument(
        help="Newly labeled rows in arrival order, scored like the calibration rows (a table: "
             ".csv .tsv .jsonl .json .parquet ... as for apply).")],
    out: Annotated[Path | None, typer.Option(
        "--out", help="Results JSON (alarm_row, each stream's e-value path, the change "
                      "row, the loss rate since it, the advice); `scoreband report` draws "
                      "it.")] = None,
    target: TargetOpt = None,
    ratings: RatingsOpt = None,
    groups: GroupsOpt = None,
    n_ratings: NRatingsOpt = None,
    by: Annotated[str | None, typer.Option(
        "--by", help="Monitor each value of this column apart (e.g. the judge's model "
                     "version), each at --false-alarm.")] = None,
    false_alarm: Annotated[float, typer.Option(
        "--false-alarm", callback=open_unit,
        help="Chance of ever alarming while the promise holds, however long the stream "
             "(per --by value).")] = 0.05,
    promise: Annotated[float | None, typer.Option(
        "--promise", callback=open_unit,
        help="Loss rate to hold the source to (default: the calibrator's alpha, the "
             "rule's risk).")] = None,
    since_out: Annotated[Path | None, typer.Option(
        "--since-out", help="On an alarm, write the stream's rows from the estimated change "
                            "on (of the alarming --by value): the rows to recalibrate "
                            "on.")] = None,
    **predictions,
):
    """Watch newly labeled rows (in arrival order) for the moment a calibrator's
    bands miss more often than its alpha, or a triage rule's trusted rows err more often
    than its risk (rows it escalates do not count).

    An anytime-valid betting e-process: while the promise holds, the chance of ever
    alarming is at most --false-alarm, however long the stream. Exit code 0 without an
    alarm, 1 with one (for CI jobs); the results JSON holds alarm_row either way. A
    calibrator fitted without --delta promises alpha only on average over calibration
    draws: fit with --delta for a promise this calibrator keeps.

    Example: scoreband monitor calibrator.json audit.csv --target human --false-alarm 0.05
    --out monitor.json --since-out since.csv
    """
    from scoreband.api import as_text, check_output, distinct_outputs, read_table, write_table
    from scoreband.api import monitor as run_monitor

    if since_out is not None:
        check_output(since_out, what="`since_out`")
        distinct_outputs(("--out", out), ("--since-out", since_out))
    df = read_table(stream)
    res = run_monitor(source, df, target=target, ratings=ratings, groups=groups, by=by,
                      false_alarm=false_alarm, promise=promise, n_ratings=n_ratings,
                      on_warning=lambda m: err.print(styled("warning:", "yellow", m)),
                      **predictions)
    report_rows(res.errors, len(df))
    if out is not None:
        res.save(out)
    _print(res, out)
    if res.alarm_row is not None and since_out is not None:
        rows = res.since_rows(df)
        # the same rows with every cell as it was read (into a text format: `01` stays
        # `01`), as every command writes the rows it was given
        rows = read_table(stream, text=as_text(since_out)).loc[rows.index]
        write_table(rows, since_out)
        console.print(f"{len(rows)} rows since the change -> {plain(since_out)}")
    if res.alarm_row is not None:
        raise typer.Exit(ALARM_EXIT)


def _print(res, out: Path | None) -> None:
    kind = "misses" if res.kind == "calibrator" else "errors among trusted rows"
    for name, s in res.streams.items():
        where = "" if name == "(all)" else f"{res.by} = {name}: "
        rate = f"{s.losses.mean():.3f}" if len(s.losses) else "-"
        state = (f"ALARM at row {s.alarm_row}" if s.alarm_row is not None else "no alarm")
        console.print(plain(f"{where}{len(s.rows)} rows monitored, {kind} {rate} against the "
                            f"promised {res.promise:g}: {state}"))
    if res.escalated:
        console.print(f"{res.escalated} rows escalated by the rule (not monitored)")
    console.print(plain(res.advice))
    if out is not None:
        console.print(f"-> {plain(out)}")
