"""pairs, and the shared implementations of `judge --pairwise` and `systems --pairwise`: the
pairwise path (judges rank better than they score: compare two responses instead of scoring
one). Calibrated pair verdicts are `triage --pairwise`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from scoreband.cli._app import app, console, fail, guard, report_rows, warn
from scoreband.cli._checks import exactly_one
from scoreband.cli._options import (
    split_columns,
)
from scoreband.textsafe import complement_text, plain


@app.command()
@guard
def pairs(
    table: Annotated[Path, typer.Argument(help="Score table: one row per system and item "
                                                "(any metric or judge table).")],
    system_col: Annotated[str, typer.Option("--system-col", help="Column of the system.")],
    item_col: Annotated[str, typer.Option("--item-col", help="Column of the item (the "
                                                             "image / prompt the systems "
                                                             "answered).")],
    score: Annotated[list[str], typer.Option(
        "--score", help="Score column(s) (repeat or comma list): each pair gets {s}_a, {s}_b "
                        "and {s}_diff = A - B.")],
    out: Annotated[Path, typer.Option("--out", help="The pair table (.csv .tsv .jsonl "
                                                    ".parquet).")],
    target: Annotated[str | None, typer.Option(
        "--target", help="Column of the human score: the pair's human preference `human` "
                         "(A / B / tie) where both systems are labeled.")] = None,
    tie_tol: Annotated[float, typer.Option(
        "--tie-tol", min=0, help="Human scores within this of each other are a tie.")] = 0.0,
    response_col: Annotated[str | None, typer.Option(
        "--response-col", help="Column of the responses: pairs of identical responses are "
                               "reported and skipped; {col}_a / {col}_b go to the pair "
                               "table (for judge --pairwise).")] = None,
    keep: Annotated[list[str] | None, typer.Option(
        "--keep", help="Item columns copied to each pair (e.g. task, image).")] = None,
):
    """Pairs from any score table: every pair of systems on the same item, with each score's
    difference and, where both are labeled, the human preference (A / B / tie, ties within
    --tie-tol). Systems are ordered by name within a pair (system_a < system_b).

    scoreband pairs scores.csv --system-col system --item-col image --score clip_score
    --target human --tie-tol 0.25 --out pairs.csv
    """
    from scoreband.api import as_text, make_pairs, read_table, write_table

    # cells as written: item ids, --keep columns, responses and system names are copied
    # byte for byte into a text output (0007 stays 0007; systems 01 and 1 are two)
    df = read_table(table, text=as_text(out))
    res = make_pairs(df, system_col=system_col, item_col=item_col, scores=split_columns(score),
                     target=target, tie_tol=tie_tol, response_col=response_col,
                     keep=split_columns(keep))
    rows, same = _pair_skips(res.errors)
    report_rows(rows, len(df))
    if same:
        _report_pair_skips(same, len(res.table) + len(same))
    for w in res.warnings:
        warn(w)
    write_table(res.table, out)
    t = res.table
    n_sys = len(set(t["system_a"]) | set(t["system_b"]))
    msg = f"{len(t):,} pairs of {n_sys} systems on " \
          f"{t[item_col].nunique():,} items"
    if "human" in t:
        lab = t["human"]
        msg += (f"; human preference on {int((lab != '').sum()):,} (A {int((lab == 'A').sum())}"
                f", B {int((lab == 'B').sum())}, tie {int((lab == 'tie').sum())})")
    console.print(msg + f" -> {plain(out)}")


def run_judge_pairs(table: Path, *, judge: str, out: Path, response_a: str, response_b: str,
                    image_col: str, root, instruction_col, instruction: str, tie,
                    base_url=None, top_logprobs: int = 20, max_tokens: int = 256,
                    seed: int = 0, engine_opts: dict | None = None,
                    judge_options: dict | None = None, rubric: str | None = None,
                    template: str | None = None) -> None:
    """`judge --pairwise`: the pairwise judge stage
    on the row engine, journaled (OUT.partial.jsonl) and resumed when run again."""
    from scoreband.cli._rows import end_judge_run, run_stage

    options = dict(judge_options or {})
    if judge.startswith("openai:"):
        options.update(top_logprobs=top_logprobs, max_tokens=max_tokens,
                       **({"base_url": base_url} if base_url else {}))
    if not out.parent.is_dir():
        out.parent.mkdir(parents=True, exist_ok=True)
    run, stage = run_stage(table, out, "judge-pairwise", dict(
        judge_spec=judge, tie=tie, judge_options=options, response_a=response_a,
        response_b=response_b, image_col=image_col, instruction_col=instruction_col,
        instruction=instruction, root=None if root is None else str(root), seed=seed,
        **{k: v for k, v in (("rubric", rubric), ("template", template)) if v is not None}),
        engine_opts)
    runner = None if stage is None else stage.runner
    bias = ""
    if runner is not None and len(run.failures) < run.rows:
        import pandas as pd  # lazy: start-up

        from scoreband.api import read_table

        t = run.table if run.table is not None else read_table(out)
        ok = t["pair_error"].astype(object).fillna("").astype(str) == ""
        bias = (f"; mean position bias "
                f"{float(pd.to_numeric(t.loc[ok, 'pair_position_bias']).mean()):+.3f}")
    end_judge_run(run, getattr(runner, "judge", None), judge if runner is None
                  else runner.name, out, noun="pairs",
                  extra=(" (SIMULATED)" if runner is not None and runner.simulated else "")
                  + bias)


def run_pairwise_systems(table: Path, *, out: Path, probs, verdict, label_col, votes,
                         alpha: float, method: str, by: str, system_a: str,
                         system_b: str, html: Path | None = None) -> None:
    """`systems --pairwise`: rank systems from judge verdicts rectified by human
    preferences."""
    from scoreband.api import provenance, rank_systems, read_table, write_json

    exactly_one("the human preference", label_col=label_col, votes=votes)
    if probs is not None and verdict is not None:
        fail("give --probs or --verdict, not both")
    # system names as written: 01 and 1 are two systems
    df = read_table(table, text=True)
    pcols = split_columns([probs]) if probs else (None if verdict else
                                          [c for c in ("pair_p_a", "pair_p_b", "pair_p_tie")
                                           if c in df.columns])
    doc, errors = rank_systems(df, label_col=label_col,
                               votes=split_columns([votes]) if votes else None, probs=pcols,
                               verdict=verdict, alpha=alpha, method=method, by=by,
                               system_a=system_a, system_b=system_b)
    report_rows(errors, len(df))
    for w in doc["warnings"]:
        warn(w)
    if "pair_position_bias" in df.columns:
        from scoreband.api import position_bias_by_task

        doc["position_bias"] = position_bias_by_task(
            df, task_col="task" if "task" in df.columns else None)
    doc["provenance"] = provenance({})
    if html is not None:
        from scoreband.api import check_output, distinct_outputs

        distinct_outputs(("--out", out), ("--html", html))
        check_output(html, what="the HTML report")
    write_json(out, doc)
    if html is not None:
        from scoreband.api import write_report

        write_report([doc], html)
    t = Table(title=f"systems by win rate ({method}, rank sets at {complement_text(alpha)})")
    for c in ("system", "win rate", "interval", "BT strength", "ranks"):
        t.add_column(c, justify="left" if c == "system" else "right")
    for r in doc["ranking"]:
        ci = r["ci"]
        t.add_row(plain(r["system"]), "-" if r["estimate"] is None else f"{r['estimate']:.3f}",
                  "-" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]",
                  "-" if r["strength"] is None else f"{r['strength']:+.2f}",
                  f"{r['ranks'][0]}-{r['ranks'][1]}")
    console.print(t)
    console.print(f"wrote {plain(out)}" + (f" and {plain(html)}" if html else ""))


def _pair_skips(errors) -> tuple[list, list]:
    """The skipped rows, and apart the skipped pairs (two rows named ``a/b``: identical
    responses), which are counted and named as pairs."""
    pairs = [e for e in errors if "/" in str(e.row) and "pair is skipped" in str(e.reason)]
    return [e for e in errors if e not in pairs], pairs


def _report_pair_skips(pairs, total: int) -> None:
    shown = "; ".join(f"rows {plain(str(e.row))}: {plain(str(e.reason))}" for e in pairs[:5])
    warn(f"{len(pairs):,} of {total:,} pairs skipped (identical responses: nothing to "
         f"prefer): {shown}" + (f"; and {len(pairs) - 5:,} more" if len(pairs) > 5 else ""))
