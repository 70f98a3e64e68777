"""pairs / pairwise-triage / judge-pairs / pairwise-systems: the pairwise path (judges rank
better than they score: compare two responses instead of scoring one)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from scoreband.cli._app import app, console, fail, guard, report_rows, text_or_file, warn
from scoreband.cli._checks import exactly_one
from scoreband.cli._options import (
    HtmlOpt,
    PairLabelOpt,
    PairVotesOpt,
    later_path,
    open_unit,
    split_columns,
)
from scoreband.errors import ERROR_COLUMN
from scoreband.textsafe import plain


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
                               "table (for judge-pairs).")] = None,
    keep: Annotated[list[str] | None, typer.Option(
        "--keep", help="Item columns copied to each pair (e.g. task, image).")] = None,
):
    """Pairs from any score table: every pair of systems on the same item, with each score's
    difference and, where both are labeled, the human preference (A / B / tie, ties within
    --tie-tol). Systems are ordered by name within a pair (system_a < system_b).

    scoreband pairs scores.csv --system-col system --item-col image --score clip_score
    --target human --tie-tol 0.25 --out pairs.csv
    """
    from scoreband.engine.stream import as_text
    from scoreband.pairwise.pairs import make_pairs
    from scoreband.tables import read_table, write_table

    # cells as written: item ids, --keep columns, responses and system names are copied
    # byte for byte into a text output (0007 stays 0007; systems 01 and 1 are two)
    df = read_table(table, text=as_text(out))
    res = make_pairs(df, system_col=system_col, item_col=item_col, scores=split_columns(score),
                     target=target, tie_tol=tie_tol, response_col=response_col,
                     keep=split_columns(keep))
    report_rows(res.errors, len(df))
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


@app.command("pairwise-triage")
@guard
def pairwise_triage(
    labeled: Annotated[Path | None, typer.Argument(
        help="Labeled pair table (from `scoreband pairs` or your own). Omit with "
             "--rule.")] = None,
    label_col: PairLabelOpt = None,
    votes: PairVotesOpt = None,
    feature: Annotated[list[str] | None, typer.Option(
        "--feature", help="Antisymmetric feature column(s) of the logistic verdict model: a "
                          "score difference ({score}_diff), a judge's preference "
                          "(pair_pref).")] = None,
    probs: Annotated[str | None, typer.Option(
        "--probs", help="Instead of --feature: columns of p(A), p(B)[, p(tie)] used as "
                        "they are (e.g. pair_p_a,pair_p_b,pair_p_tie from judge-pairs).")
    ] = None,
    alpha: Annotated[float, typer.Option(
        "--risk", callback=open_unit, help="At most this share of the decided pairs may "
                                           "disagree with the human preference.")] = 0.1,
    delta: Annotated[float, typer.Option(
        "--delta", callback=open_unit, help="The guarantee may fail with this probability "
                                            "over the draw of the labeled pairs.")] = 0.1,
    set_alpha: Annotated[float | None, typer.Option(
        "--set-alpha", callback=open_unit,
        help="Miscoverage of the prediction sets (default --risk).")] = None,
    sets: Annotated[str, typer.Option("--sets", help="lac (smallest sets) | aps "
                                                     "(adaptive).")] = "lac",
    groups: Annotated[str | None, typer.Option(
        "--groups", help="Column of tasks: prediction sets per task (Mondrian).")] = None,
    start: Annotated[str, typer.Option(
        "--start", help="Where the fixed sequence starts: first (where enough pairs are "
                        "decided for a test to reject; label-free: at the most confident "
                        "fifth) | likely (read from a training share).")] = "first",
    train_frac: Annotated[float, typer.Option("--train-frac", callback=open_unit,
                                              help="Share fitting the verdict model.")] = 0.5,
    asymmetric: Annotated[bool, typer.Option(
        "--asymmetric", help="Let the logistic verdict model learn an order effect (e.g. "
                             "the second system of the table's pairs is usually the better) "
                             "instead of fitting it order-fair.")] = False,
    seed: Annotated[int, typer.Option("--seed", min=0)] = 0,
    out: Annotated[Path | None, typer.Option("--out", help="The rule, JSON.")] = None,
    rule: Annotated[Path | None, typer.Option("--rule", help="A saved rule to apply.")] = None,
    apply_table: Annotated[Path | None, typer.Option(
        "--apply", help="Pair table to give verdicts (every row and column kept).")] = None,
    apply_out: Annotated[str | None, typer.Option(
        "--apply-out", callback=later_path, help="Where the verdicts go.")] = None,
):
    """Calibrated pairwise verdicts: decide a pair (A or B better, or tie) only when the
    verdict model is confident enough, with the threshold chosen on labeled pairs
    (Learn-then-Test) so that at most --risk of the decided pairs disagree with the human
    preference, with probability at least 1 - --delta over the draw of the labeled pairs;
    and conformal prediction sets over {A, B, tie} holding the human preference with
    probability at least 1 - --set-alpha. The labeled pairs are split by their identity
    (--seed): a training share fits the verdict model, the rest calibrates.

    Applied rows get verdict (A / B / tie, empty where undecided), p_a, p_b, p_tie,
    pair_uncertainty, decided, pair_set (e.g. A|tie) and verdict_error (why a row could not
    be judged; a judged table's pair_error is kept beside it).

    scoreband pairwise-triage pairs.csv --label-col human --feature clip_score_diff
    --risk 0.1 --delta 0.1 --out rule.json --apply unlabeled_pairs.csv --apply-out
    verdicts.csv
    """
    from scoreband.cli.decisions import triage_pairs

    triage_pairs(labeled, label_col=label_col, votes=votes, feature=feature, probs=probs,
                 alpha=alpha, delta=delta, set_alpha=set_alpha, sets=sets, groups=groups,
                 start=start, train_frac=train_frac, asymmetric=asymmetric, seed=seed, out=out,
                 rule=rule, apply_table=apply_table, apply_out=apply_out)


@app.command("judge-pairs")
@guard
def judge_pairs_cmd(
    table: Annotated[Path, typer.Argument(help="Pair table: one row per pair of responses "
                                                "(from `scoreband pairs --response-col`).")],
    judge: Annotated[str, typer.Option(
        "--judge", help="openai:MODEL (an OpenAI-compatible endpoint), hf:MODEL (local), or "
                        "a simulated judge of the embedded world: sim-pair-strong | "
                        "sim-pair-biased | sim-pair-fair, options after ':' (e.g. "
                        "sim-pair-biased:bias=0.2; reads true_a / true_b).")],
    out: Annotated[Path, typer.Option("--out", help="The table with the verdict columns.")],
    response_a: Annotated[str, typer.Option("--response-a", "--a-col",
                                            help="Column of response A.")] = "response_a",
    response_b: Annotated[str, typer.Option("--response-b", "--b-col",
                                            help="Column of response B.")] = "response_b",
    image_col: Annotated[str, typer.Option("--image-col", help="Column of the image "
                                                               "path.")] = "image",
    root: Annotated[Path | None, typer.Option("--root", help="Folder the image paths are "
                                                             "relative to.")] = None,
    instruction_col: Annotated[str | None, typer.Option(
        "--instruction-col", help="Column of the instruction (default: one instruction, "
                                  "--instruction).")] = None,
    instruction: Annotated[str, typer.Option("--instruction")] =
        "Which response describes the image better?",
    no_tie: Annotated[bool, typer.Option("--no-tie", help="Verdicts A or B only (no tie "
                                                          "token).")] = False,
    tie_token: Annotated[str, typer.Option("--tie-token", help="The tie token.")] = "tie",
    rubric: Annotated[str | None, typer.Option(
        "--rubric", help="Rubric text, or @FILE to read it from a file.")] = None,
    template: Annotated[str | None, typer.Option(
        "--template", help="Prompt template (or @FILE) with {instruction} {response} (shown "
                           "first) {response_b} {rubric} {delimiter} {tie_clause}.")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="openai: the endpoint's "
                                                                    "base URL.")] = None,
    top_logprobs: Annotated[int, typer.Option("--top-logprobs", min=1)] = 20,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1)] = 256,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Simulated judges: the "
                                                            "seed.")] = 0,
):
    """Pairwise verdicts from a judge: the log-probs of the verdict tokens ("A", "B" and a
    tie token; every tokenizer spelling merged) at the verdict position, asked in both
    orders (A/B and B/A, the second mapped back). Adds per order pair_ab_p_a / _p_b /
    _p_tie and pair_ba_*, the order-averaged pair_p_a / pair_p_b / pair_p_tie and pair_pref
    (= pair_p_a - pair_p_b, a feature for pairwise-triage), pair_position_bias
    ((p_AB(A) - p_BA(A)) / 2) and pair_error (identical responses, no verdict token, an
    endpoint error: reported, the pair skipped).

    scoreband judge-pairs pairs.csv --judge openai:gpt-4o-mini --image-col image
    --response-a hyp_a --response-b hyp_b --out judged_pairs.csv

    scoreband judge-pairs world_pairs.csv --judge sim-pair-biased --out judged.csv
    """
    run_judge_pairs(table, judge=judge, out=out, response_a=response_a,
                    response_b=response_b, image_col=image_col, root=root,
                    instruction_col=instruction_col, instruction=instruction,
                    tie=None if no_tie else tie_token, base_url=base_url,
                    top_logprobs=top_logprobs, max_tokens=max_tokens, seed=seed,
                    rubric=text_or_file(rubric) if rubric is not None else None,
                    template=text_or_file(template) if template is not None else None)


def run_judge_pairs(table: Path, *, judge: str, out: Path, response_a: str, response_b: str,
                    image_col: str, root, instruction_col, instruction: str, tie,
                    base_url=None, top_logprobs: int = 20, max_tokens: int = 256,
                    seed: int = 0, engine_opts: dict | None = None,
                    judge_options: dict | None = None, rubric: str | None = None,
                    template: str | None = None) -> None:
    """`judge-pairs` and `judge --pairwise` (one implementation): the pairwise judge stage
    on the row engine, journaled (OUT.partial.jsonl) and resumed when run again."""
    from scoreband.cli._rows import end_judge_run, run_stage

    options = dict(judge_options or {})
    if judge.startswith("openai:"):
        options.update(top_logprobs=top_logprobs, max_tokens=max_tokens,
                       **({"base_url": base_url} if base_url else {}))
    if not out.parent.is_dir():
        out.parent.mkdir(parents=True, exist_ok=True)
    run, stage = run_stage(table, out, "scoreband.pairwise.extract:pair_judge_stage", dict(
        judge_spec=judge, tie=tie, judge_options=options, response_a=response_a,
        response_b=response_b, image_col=image_col, instruction_col=instruction_col,
        instruction=instruction, root=None if root is None else str(root), seed=seed,
        **{k: v for k, v in (("rubric", rubric), ("template", template)) if v is not None}),
        engine_opts, error_column=ERROR_COLUMN["pairwise"])
    runner = None if stage is None else stage.runner
    bias = ""
    if runner is not None and len(run.failures) < run.rows:
        import pandas as pd  # lazy: start-up

        from scoreband.tables import read_table

        t = run.table if run.table is not None else read_table(out)
        ok = t["pair_error"].astype(object).fillna("").astype(str) == ""
        bias = (f"; mean position bias "
                f"{float(pd.to_numeric(t.loc[ok, 'pair_position_bias']).mean()):+.3f}")
    end_judge_run(run, getattr(runner, "judge", None), judge if runner is None
                  else runner.name, out, noun="pairs",
                  extra=(" (SIMULATED)" if runner is not None and runner.simulated else "")
                  + bias)


#: `pairwise-systems` and `systems --pairwise` run one code with one default --alpha (the
#: one of `systems`): every interval at 1 - alpha, the Holm decisions and the simultaneous
#: rank sets at family-wise level alpha
ALPHA_DEFAULT = 0.05
ALPHA_HELP = ("1 - confidence of every interval (win rates, head-to-head, Bradley-Terry "
              "strengths); the Holm-adjusted decisions and the simultaneous rank sets hold "
              "all at once with probability >= 1 - alpha.")


@app.command("pairwise-systems")
@guard
def pairwise_systems(
    table: Annotated[Path, typer.Argument(help="Pair table with the judge's verdicts (from "
                                                "judge-pairs or pairwise-triage) and some "
                                                "human preferences.")],
    out: Annotated[Path, typer.Option("--out", help="The ranking, JSON (the shape of "
                                                    "`scoreband systems`).")],
    probs: Annotated[str | None, typer.Option(
        "--probs", help="Columns of the judge's p(A), p(B)[, p(tie)] (default "
                        "pair_p_a,pair_p_b,pair_p_tie).")] = None,
    verdict: Annotated[str | None, typer.Option(
        "--verdict", help="Instead of --probs: a column of judge verdicts A / B / "
                          "tie.")] = None,
    label_col: PairLabelOpt = None,
    votes: PairVotesOpt = None,
    alpha: Annotated[float, typer.Option("--alpha", callback=open_unit,
                                         help=ALPHA_HELP)] = ALPHA_DEFAULT,
    method: Annotated[str, typer.Option("--method", help="ppi++ | ppi | classical "
                                                         "(labels alone).")] = "ppi++",
    by: Annotated[str, typer.Option(
        "--by", help="Pairwise decisions from head-to-head preferences (head-to-head) or "
                     "Bradley-Terry strengths (bradley-terry).")] = "head-to-head",
    system_a: Annotated[str, typer.Option("--system-a")] = "system_a",
    system_b: Annotated[str, typer.Option("--system-b")] = "system_b",
    html: HtmlOpt = None,
):
    """Rank systems from many judge verdicts and a few human preferences: win rates and
    Bradley-Terry strengths by prediction-powered inference (the human-labeled pairs
    rectify the judge), Holm-adjusted pairwise decisions and simultaneous rank sets at
    1 - --alpha (default 0.05, as `systems --pairwise`: one code). A system none of whose
    pairs has a human preference is reported and skipped (its pairs leave every estimate;
    the JSON lists it under skipped_systems). Where the table has the judge's pair_position_bias (judge-pairs writes it),
    the ranking records it per task (column task, where there is one). --html: the report
    section (win matrix with intervals, win rates and Bradley-Terry strengths as a forest
    plot, position bias by task).

    scoreband pairwise-systems judged_pairs.csv --label-col human --out ranking.json
    """
    run_pairwise_systems(table, out=out, probs=probs, verdict=verdict, label_col=label_col,
                         votes=votes, alpha=alpha, method=method, by=by, system_a=system_a,
                         system_b=system_b, html=html)


def run_pairwise_systems(table: Path, *, out: Path, probs, verdict, label_col, votes,
                         alpha: float, method: str, by: str, system_a: str,
                         system_b: str, html: Path | None = None) -> None:
    """`pairwise-systems` and `systems --pairwise` (one implementation)."""
    from scoreband.json_io import write_json
    from scoreband.pairwise.ranking import rank_systems
    from scoreband.provenance import provenance
    from scoreband.tables import read_table

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
        from scoreband.pairwise.report import position_bias_by_task

        doc["position_bias"] = position_bias_by_task(
            df, task_col="task" if "task" in df.columns else None)
    doc["provenance"] = provenance({})
    if html is not None:
        from scoreband.files import check_output

        if html.expanduser().resolve() == out.expanduser().resolve():
            fail(f"--html and --out name the same path {str(html)!r}; give each its own")
        check_output(html, what="the HTML report")
    write_json(out, doc)
    if html is not None:
        from scoreband.report.html import write_report

        write_report([doc], html)
    t = Table(title=f"systems by win rate ({method}, rank sets at {1 - alpha:.0%})")
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
