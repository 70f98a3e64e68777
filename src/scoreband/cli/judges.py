"""judge and judge-study: score-token log-probs of VLM judges and their calibration."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scoreband.cli._app import app, fail, finish_rows, guard, report_rows, run_study, text_or_file
from scoreband.cli._options import (
    ENGINE_OPTIONS,
    AlphaOpt,
    BaseUrlOpt,
    HtmlOpt,
    ImageColOpt,
    NRatingsOpt,
    RatingsOpt,
    Table_,
    TargetOpt,
    positive,
    with_options,
)
from scoreband.cli._rows import run_stage
from scoreband.judges.registry import JUDGES
from scoreband.records import Scale
from scoreband.tables import read_table


@app.command("judge")
@guard
@with_options(ENGINE_OPTIONS)
def judge(
    table: Table_,
    judge_spec: Annotated[str, typer.Option(
        "--judge", help=JUDGES.choices() + ".")],
    out: Annotated[Path, typer.Option("--out", help="Output table (every row kept).")],
    scale: Annotated[str, typer.Option("--scale", help="Integer label scale 'A,B', e.g. 1,5; "
                                                       "every label must be one token.")] = "1,5",
    image_col: ImageColOpt = "image",
    instruction_col: Annotated[str, typer.Option(
        "--instruction-col", help="Column of the instruction the response answers.")]
    = "instruction",
    response_col: Annotated[str, typer.Option(
        "--response-col", help="Column of the response to judge.")] = "response",
    rubric: Annotated[str | None, typer.Option(
        "--rubric", help="Rubric text, or @FILE to read it from a file.")] = None,
    template: Annotated[str | None, typer.Option(
        "--template", help="Prompt template (or @FILE) with {instruction} {response} {rubric} "
                           "{delimiter} {lo} {hi}.")] = None,
    delimiter: Annotated[str, typer.Option(
        "--delimiter", help="Text after which the judge writes its score, searched from the "
                            "end of the answer (e.g. 'Score:' or '\"score\":').")] = "Score:",
    max_new_tokens: Annotated[int, typer.Option(
        "--max-new-tokens", min=0, max=100_000,
        help="hf: tokens of reasoning before the score (0: read the score "
             "right after the prompt and delimiter).")] = 0,
    device: Annotated[str, typer.Option("--device", help="hf: cpu | cuda.")] = "cpu",
    dtype: Annotated[str, typer.Option("--dtype", help="hf: float32 | bfloat16 | float16.")]
    = "float32",
    base_url: BaseUrlOpt = "https://api.openai.com/v1",
    top_logprobs: Annotated[int, typer.Option("--top-logprobs", min=1, max=100,
                                              help="openai: top-k.")] = 20,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, max=1_000_000,
                                            help="openai: answer length.")]
    = 256,
    timeout: Annotated[float, typer.Option("--timeout", callback=positive,
                                           help="openai: seconds per request.")]
    = 60.0,
    retries: Annotated[int, typer.Option("--retries", min=0, max=100,
                                         help="openai: retries on 429/5xx/"
                                              "time-outs.")] = 4,
    cache: Annotated[Path | None, typer.Option(
        "--cache", help="openai: response cache folder (default: OUT.cache/).")] = None,
    **engine_opts,
):
    """Score-token log-probs of a VLM judge for every row of a table.

    For every (image, instruction, response) row: logp_<label> columns (log-softmax over
    the labels; variants such as
    " 5", "▁5", "Ġ5" added together), expected score, argmax, entropy, max probability and
    missing mass. Failed rows keep empty features and the reason in judge_error. Rerunning
    the same command resumes: finished rows are kept in OUT.partial.jsonl (and endpoint
    answers in the cache).

    Then calibrate, e.g.: scoreband evaluate OUT --target human --scale 1,5
    --median judge_expected --features 'logp_*' --method r2ccp
    """
    from scoreband.judges.extract import JudgePrompt  # lazy: loads scipy

    sc = Scale.parse(scale)
    if not (float(sc.lo).is_integer() and float(sc.hi).is_integer()):
        fail(f"--scale {scale!r}: a judge scores on integer labels; give integers A,B (e.g. 1,5)")
    kw = {k: text_or_file(v) for k, v in (("rubric", rubric), ("template", template))
          if v is not None}
    prompt = JudgePrompt(int(sc.lo), int(sc.hi), delimiter=delimiter, **kw)
    _ = prompt.labels  # validates the scale
    options = dict(max_new_tokens=max_new_tokens, device=device, dtype=dtype,
                   base_url=base_url, top_logprobs=top_logprobs, max_tokens=max_tokens,
                   timeout=timeout, retries=retries,
                   cache_dir=cache if cache is not None else Path(str(out) + ".cache"))
    prov = {"prompt": {"template": prompt.template, "rubric": prompt.rubric,
                       "delimiter": prompt.delimiter, "labels": prompt.labels}}
    run, stage = run_stage(table, out, "scoreband.judges.extract:judge_stage", dict(
        judge_spec=judge_spec, prompt=dict(lo=int(sc.lo), hi=int(sc.hi), delimiter=delimiter,
                                           **kw), judge_options=options,
        image_col=image_col, instruction_col=instruction_col, response_col=response_col),
        engine_opts, error_column="judge_error", components=prov)
    name = judge_spec if stage is None else stage.judge.name
    finish_rows(run.failures, run.rows, "could not be judged",
                f"wrote {out}: {run.rows - len(run.failures)} of {run.rows} rows judged by "
                f"{name}" + (f" ({run.reused} resumed from the journal)" if run.reused else ""))


# ------------------------------------------------------------------ judge-study
@app.command("judge-study")
@guard
def judge_study(
    table: Annotated[Path | None, typer.Argument(
        help="Table of judge log-probs (e.g. from `scoreband judge`); omit to run on the "
             "SIMULATED judges of the embedded world.")] = None,
    judge_cols: Annotated[list[str] | None, typer.Option(
        "--judge", help="NAME=COLUMNS: one judge's K log-prob columns (comma list or glob, "
                        "in label order), repeatable; several judges are also fused.")] = None,
    target: TargetOpt = None,
    ratings: RatingsOpt = None,
    scale: Annotated[str, typer.Option("--scale", help="Label scale 'A,B' (K = B - A + 1 "
                                                       "labels).")] = "1,5",
    task_col: Annotated[str | None, typer.Option(
        "--task-col", help="Column of the task / category (Mondrian groups and the "
                           "reliability map).")] = None,
    n_ratings: NRatingsOpt = None,
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("judge-study"),
    n: Annotated[int, typer.Option("--n", min=40, max=1_000_000,
                                   help="Items of the embedded world.")] = 2000,
    seeds: Annotated[int, typer.Option("--seeds", min=1, max=10_000,
                                       help="Random calibration/test splits.")] = 10,
    alpha: AlphaOpt = 0.1,
    threshold: Annotated[float, typer.Option(
        "--threshold", min=0, max=1,
        help="Width (share of the scale) above which a task is sent to "
             "pairwise ranking.")] = 0.5,
    map_method: Annotated[str, typer.Option(
        "--map-method", help="Bands of the reliability map: split (around the judge's own "
                             "score: can its absolute scores be used?) or r2ccp (a model "
                             "re-learned on its log-probs). Both are computed.")] = "split",
    html: HtmlOpt = None,
):
    """Calibrate judges' log-probs: methods, Mondrian, boundary, reliability map.

    The judge-uncertainty protocol: split CP, CQR and R2CCP, Mondrian by task on/off, boundary
    adjustment on/off, judge fusion, over --seeds random 50/50 splits; per-task reliability
    map with RSG and a recommendation. Writes results.json, results.md,
    reliability_map.png and report.html.

    Without TABLE it runs on the SIMULATED judges of the embedded world (labelled so in every
    output). With TABLE: e.g. scoreband judge-study judged.csv --judge llava='logp_*'
    --target human --scale 1,5 --task-col task
    """
    from scoreband.studies import judge as study  # lazy: loads scipy

    if table is None:
        data = study.simulated_judges(n)
    else:
        data = study.judges_from_table(read_table(table), judge_cols or [],
                                       scale=Scale.parse(scale), target=target,
                                       ratings=ratings, task_col=task_col,
                                       n_ratings=n_ratings)
    errors = data.pop("errors")
    report_rows(errors, len(data["y01"]) + len(errors))
    run_study("judge study ...", lambda step: study.run(
        data.pop("judges"), data.pop("y01"), data.pop("tasks"), data.pop("n_ratings"),
        seeds=seeds, alpha=alpha, threshold=threshold, simulated=table is None, on_step=step,
        map_method=map_method, **data), out, html)
