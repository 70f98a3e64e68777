"""judge and judge-study: score-token log-probs of VLM judges and their calibration."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scoreband.api import JUDGES, Scale, read_table
from scoreband.cli._app import (
    app,
    fail,
    guard,
    report_rows,
    run_study,
    text_or_file,
)
from scoreband.cli._options import (
    ENGINE_OPTIONS,
    AlphaOpt,
    BaseUrlOpt,
    ImageColOpt,
    Knob,
    NRatingsOpt,
    RatingsOpt,
    StudyHtmlOpt,
    Table_,
    TargetOpt,
    check_scale,
    config_option,
    int_knob,
    read_knobs,
    with_options,
)
from scoreband.cli._rows import end_judge_run, run_stage

JudgeSpecOpt = Annotated[str, typer.Option(
    "--judge", help=JUDGES.choices() + ".")]
OutOpt = Annotated[Path, typer.Option("--out", help="Output table (every row kept).")]
ScaleOpt = Annotated[str, typer.Option("--scale", callback=check_scale, help="Integer label scale 'A,B', e.g. 1,5; "
                                                   "every label must be one token.")]
InstructionColOpt = Annotated[str, typer.Option(
    "--instruction-col", help="Column of the instruction the response answers.")]
ResponseColOpt = Annotated[str, typer.Option(
    "--response-col", help="Column of the response to judge.")]
RubricOpt = Annotated[str | None, typer.Option(
    "--rubric", help="Rubric text, or @FILE to read it from a file.")]
TemplateOpt = Annotated[str | None, typer.Option(
    "--template", help="Prompt template (or @FILE) with {instruction} {response} {rubric} "
                       "{delimiter} {lo} {hi}; --pairwise: {instruction} {response} "
                       "(shown first) {response_b} {rubric} {delimiter} "
                       "{tie_clause}.")]
DelimiterOpt = Annotated[str, typer.Option(
    "--delimiter", help="Text after which the judge writes its score, searched from the "
                        "end of the answer (e.g. 'Score:' or '\"score\":').")]
DeviceOpt = Annotated[str, typer.Option("--device", help="hf: cpu | cuda.")]
DtypeOpt = Annotated[str, typer.Option("--dtype", help="hf: float32 | bfloat16 | float16.")]
#: judge's rarely used knobs (`--config FILE`, JSON or TOML)
JUDGE_KNOBS = {
    "max_new_tokens": int_knob(0, 0, 100_000, "hf: tokens of reasoning before the score; 0: "
                               "read the score right after the prompt and delimiter"),
    "top_logprobs": int_knob(20, 1, 100, "openai: top-k log-probs at the score position, at "
                             "least twice the number of labels (each has two spellings, '4' "
                             "and ' 4'); rows where labels outside the list may hold over 5 % "
                             "of the label probability are not scored"),
    "max_tokens": int_knob(256, 1, 1_000_000, "openai: answer length"),
    "timeout": Knob(60.0, float, "a number of seconds > 0", "openai: seconds per request",
                    lambda v: v > 0),
    "retries": int_knob(4, 0, 100, "openai: retries of what another attempt can fix (HTTP "
                        "408, 429, 502, 503, 504, a connection reset), with back-off; anything "
                        "else fails the row at once"),
    "stop_after": int_knob(10, 0, 1_000_000, "stop asking after this many rows in a row fail "
                           "at the judge (a server down, no log-probs, an image it cannot "
                           "read); the rest are marked not asked and the cause printed; 0: "
                           "never stop"),
}
JudgeConfigOpt = config_option(JUDGE_KNOBS)
ConcurrencyOpt = Annotated[int, typer.Option(
    "--concurrency", min=1, max=256,
    help="openai: requests in flight at once (over one kept-alive connection pool); "
         "rows are still written in order and resumable.")]
AllowBlindOpt = Annotated[bool, typer.Option(
    "--allow-blind",
    help="openai: go on when the model does not see the images (a text-only model: "
         "same prompt tokens with and without the image); otherwise the run "
         "stops.")]
CacheOpt = Annotated[Path | None, typer.Option(
    "--cache", help="openai: response cache folder (default: OUT.cache/).")]
PairwiseOpt = Annotated[bool, typer.Option(
    "--pairwise", help="Judge pairs of responses instead: "
                       "the verdict tokens' log-probs in both orders, A/B and B/A; the "
                       "responses are --a-col and --b-col, --judge may also be a "
                       "simulated pairwise judge (sim-pair-strong | sim-pair-biased | "
                       "sim-pair-fair).")]
AColOpt = Annotated[str, typer.Option("--a-col", help="--pairwise: column of response A.")]
BColOpt = Annotated[str, typer.Option("--b-col", help="--pairwise: column of response "
                                                   "B.")]
NoTieOpt = Annotated[bool, typer.Option("--no-tie", help="--pairwise: verdicts A or B "
                                                      "only (no tie token).")]
TieTokenOpt = Annotated[str, typer.Option(
    "--tie-token", help="--pairwise: the tie verdict's token (one token of the judge's "
                        "vocabulary, e.g. C).")]


@app.command("judge")
@guard
@with_options(ENGINE_OPTIONS)
def judge(
    table: Table_,
    judge_spec: JudgeSpecOpt,
    out: OutOpt,
    scale: ScaleOpt = "1,5",
    image_col: ImageColOpt = "image",
    instruction_col: InstructionColOpt = "instruction",
    response_col: ResponseColOpt = "response",
    rubric: RubricOpt = None,
    template: TemplateOpt = None,
    delimiter: DelimiterOpt = "Score:",
    device: DeviceOpt = "cpu",
    dtype: DtypeOpt = "float32",
    base_url: BaseUrlOpt = "https://api.openai.com/v1",
    concurrency: ConcurrencyOpt = 1,
    allow_blind: AllowBlindOpt = False,
    cache: CacheOpt = None,
    pairwise: PairwiseOpt = False,
    a_col: AColOpt = "response_a",
    b_col: BColOpt = "response_b",
    no_tie: NoTieOpt = False,
    tie_token: TieTokenOpt = "tie",
    config: JudgeConfigOpt = None,
    **engine_opts,
):
    """Score-token log-probs of a VLM judge for every row of a table.

    For every (image, instruction, response) row: logp_<label> columns (log-softmax over
    the labels; variants such as
    " 5", "▁5", "Ġ5" added together), expected score, argmax, entropy, max probability and
    missing mass. Failed rows keep empty features and the reason in judge_error. Rerunning
    the same command resumes: finished rows are kept in OUT.partial.jsonl (and endpoint
    answers in the cache).

    Exits 1 when more than half of the rows could not be judged, or when the run stopped
    asking (stop_after in --config). Then calibrate, e.g.: scoreband evaluate OUT --target human
    --scale 1,5 --median judge_expected --features 'logp_*' --method r2ccp
    """
    o = dict(locals())  # every option by name, and the knobs of --config
    o.update(read_knobs(o.pop("config"), JUDGE_KNOBS))
    _check_mode(o)
    if pairwise:
        return _judge_pairwise(**o)
    _judge_scores(**o)


def _check_mode(o: dict) -> None:
    """Refuse the options of the other mode (score vs --pairwise), said by flag."""
    given = {"--scale": o["scale"] != "1,5", "--response-col": o["response_col"] != "response",
             "--delimiter": o["delimiter"] != "Score:",
             "max_new_tokens (--config)": o["max_new_tokens"] != 0,
             "--a-col": o["a_col"] != "response_a", "--b-col": o["b_col"] != "response_b",
             "--no-tie": o["no_tie"], "--tie-token": o["tie_token"] != "tie"}
    other = (("--scale", "--response-col", "--delimiter", "max_new_tokens (--config)")
             if o["pairwise"]
             else ("--a-col", "--b-col", "--no-tie", "--tie-token"))
    wrong = [f for f in other if given[f]]
    if wrong:
        fail(f"{', '.join(wrong)}: not used {'with' if o['pairwise'] else 'without'} "
             "--pairwise (a pairwise judge reads --a-col and --b-col and answers A / B / tie; "
             "a score judge reads --response-col on --scale); leave them out")
    if o["pairwise"] and o["a_col"] == o["b_col"]:
        fail(f"--a-col and --b-col both name {o['a_col']!r}: give the two responses' columns")
    if o["pairwise"] and o["no_tie"] and o["tie_token"] != "tie":
        fail("--no-tie and --tie-token: give one (A / B only, or the tie's token)")


def _judge_scores(table, judge_spec, out, scale, image_col, instruction_col, response_col,
                  rubric, template, delimiter, max_new_tokens, device, dtype, base_url,
                  top_logprobs, max_tokens, timeout, retries, concurrency, stop_after,
                  allow_blind, cache, engine_opts, **_) -> None:
    """judge (scores): the judge stage on the row engine, journaled and resumed."""
    from scoreband.api import JudgePrompt  # lazy: loads scipy

    sc = Scale.parse(scale)
    if not (float(sc.lo).is_integer() and float(sc.hi).is_integer()):
        fail(f"--scale {scale!r}: a judge scores on integer labels; give integers A,B (e.g. 1,5)")
    kw = {k: text_or_file(v) for k, v in (("rubric", rubric), ("template", template))
          if v is not None}
    prompt = JudgePrompt(int(sc.lo), int(sc.hi), delimiter=delimiter, **kw)
    _ = prompt.labels  # validates the scale
    options = dict(max_new_tokens=max_new_tokens, device=device, dtype=dtype,
                   base_url=base_url, top_logprobs=top_logprobs, max_tokens=max_tokens,
                   timeout=timeout, retries=retries, allow_blind=allow_blind,
                   cache_dir=cache if cache is not None else Path(str(out) + ".cache"))
    prov = {"prompt": {"template": prompt.template, "rubric": prompt.rubric,
                       "delimiter": prompt.delimiter, "labels": prompt.labels}}
    if not out.parent.is_dir():
        out.parent.mkdir(parents=True, exist_ok=True)
    run, stage = run_stage(table, out, "judge", dict(
        judge_spec=judge_spec, prompt=dict(lo=int(sc.lo), hi=int(sc.hi), delimiter=delimiter,
                                           **kw), judge_options=options,
        concurrency=concurrency, stop_after=stop_after,
        image_col=image_col, instruction_col=instruction_col, response_col=response_col),
        engine_opts, components=prov)
    end_judge_run(run, None if stage is None else stage.judge, judge_spec, out)


def _judge_pairwise(table, judge_spec, out, image_col, instruction_col, a_col, b_col,
                    no_tie, tie_token, base_url, top_logprobs, max_tokens, timeout, retries,
                    cache, rubric, template, allow_blind, device, dtype, concurrency,
                    stop_after, engine_opts, **_) -> None:
    """judge --pairwise: the pairwise judge stage (:func:`scoreband.cli.pairwise.run_judge_pairs`)."""
    from scoreband.cli.pairwise import run_judge_pairs

    if judge_spec.startswith("openai:"):
        options = {"timeout": timeout, "retries": retries, "allow_blind": allow_blind,
                   "cache_dir": cache if cache is not None else Path(str(out) + ".cache"),
                   "concurrency": concurrency, "stop_after": stop_after}
    elif judge_spec.startswith("hf:"):
        options = {"device": device, "dtype": dtype, "concurrency": concurrency,
                   "stop_after": stop_after}
    else:
        options = None
    run_judge_pairs(table, judge=judge_spec, out=out, response_a=a_col, response_b=b_col,
                    image_col=image_col, root=None,
                    instruction_col=instruction_col,
                    instruction="Which response describes the image better?",
                    tie=None if no_tie else tie_token, base_url=base_url,
                    top_logprobs=top_logprobs, max_tokens=max_tokens,
                    engine_opts=engine_opts, judge_options=options,
                    rubric=text_or_file(rubric) if rubric is not None else None,
                    template=text_or_file(template) if template is not None else None)


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
    scale: Annotated[str, typer.Option("--scale", callback=check_scale, help="Label scale 'A,B' (K = B - A + 1 "
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
    html: StudyHtmlOpt = None,
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
    from scoreband.api import judge_study as study  # lazy: loads scipy

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
