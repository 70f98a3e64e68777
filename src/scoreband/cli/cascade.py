"""cascade: judges in order, cheapest first, then a human, with one guarantee for all."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from scoreband.cli._app import app, console, fail, guard, report_rows, warn
from scoreband.cli._checks import need, only_with
from scoreband.cli._options import later_path, open_unit
from scoreband.textsafe import plain

#: the views of ``--uncertainty`` (auto: both, tested together)
UNCERTAINTIES = {"auto": ("own", "joint", "joint-strict"), "own": ("own",),
                 "joint": ("joint", "joint-strict")}


@app.command()
@guard
def cascade(
    table: Annotated[Path, typer.Argument(
        help="Table of the judges' answers and confidences (.csv .tsv .jsonl .parquet ...): "
             "its labeled rows (--label-col) fit the cascade and every row is decided. "
             "With --rule: the table to decide.")],
    judge: Annotated[list[str] | None, typer.Option(
        "--judge", help="NAME=CONF_COL:ANSWER_COL, once per judge, cheapest first: its "
                        "answer column and its confidence in that answer (a probability in "
                        "[0, 1], e.g. max p or the score token's probability); or a pair "
                        "judge's NAME=PA_COL,PB_COL[,PT_COL] (its verdict the most probable "
                        "of A / B / tie; --label-col then holds A / B / tie or 1 / 2 / "
                        "0).")] = None,
    label_col: Annotated[str | None, typer.Option(
        "--label-col", help="Column of the human answer (empty = unlabeled: decided, not "
                            "fitted on).")] = None,
    risk: Annotated[float, typer.Option(
        "--risk", callback=open_unit,
        help="At most this share of the rows any judge decides may differ from the human "
             "answer.")] = 0.1,
    delta: Annotated[float, typer.Option(
        "--delta", callback=open_unit,
        help="The guarantee may fail with this probability over the draw of the labeled "
             "rows.")] = 0.1,
    cost: Annotated[list[str] | None, typer.Option(
        "--cost", help="NAME=C per judge (its cost per row), and optionally human=C: the "
                       "rule deciding within 10 % of the most at the least judge cost is "
                       "kept (with human=C, the least expected cost, a human's answers "
                       "included); the expected cost per row is reported.")] = None,
    uncertainty: Annotated[str, typer.Option(
        "--uncertainty", help="What a judge's stage may read: own (its confidence) | joint "
                              "(its answer's confidence combined with the judges before it: "
                              "agreement counts; also with the cheaper judges held to "
                              "twice the confidence) | auto (all, in one test).")] = "auto",
    out: Annotated[Path | None, typer.Option(
        "--out", help="The decided table: every row and column, with decided_by (a judge's "
                      "name, or human), decided_answer (its cell as written) and "
                      "cascade_error.")] = None,
    rule_out: Annotated[str | None, typer.Option(
        "--rule-out", callback=later_path,
        help="Where the fitted rule goes (JSON: thresholds, shares, cost, the guarantee in "
             "words); apply it to new tables with --rule.")] = None,
    rule: Annotated[Path | None, typer.Option(
        "--rule", help="A saved cascade rule (from --rule-out) to apply to TABLE instead of "
                       "fitting one.")] = None,
):
    """A cascade of judges with one guarantee: each row is decided by the first judge
    (cheapest first) confident enough, and goes to a human when none is. The thresholds
    are chosen on the labeled rows so that, among ALL the rows any judge decides, at most
    --risk get an answer other than the human's, with probability at least 1 - --delta
    over the draw of the labeled rows, for rows drawn like them. One test covers every
    stage (fixed sequences sharing --delta in one chain, Learn-then-Test): no stage
    spends its own delta.

    Fit and decide: scoreband cascade judged.csv --judge cheap=cheap_p:cheap_answer
    --judge strong=strong_p:strong_answer --label-col human --risk 0.1 --delta 0.1
    --cost cheap=1 --cost strong=20 --out decided.csv --rule-out cascade.json

    Apply the rule to new rows: scoreband cascade new.csv --rule cascade.json --out
    decided_new.csv
    """
    _run(table, judge, label_col, risk, delta, cost, uncertainty, out, rule_out, rule)


def _run(table, judge, label_col, risk, delta, cost, uncertainty, out, rule_out,
         rule) -> None:
    """Fit (or load) the rule, decide the table, print, write."""
    from scoreband import api
    from scoreband.api import cascade as fit
    from scoreband.api import load_cascade_rule

    if uncertainty not in UNCERTAINTIES:
        fail(f"--uncertainty {uncertainty!r}: choose {', '.join(UNCERTAINTIES)}")
    if rule_out is not None:
        api.distinct_outputs(("--out", out), ("--rule-out", rule_out.path))
        api.check_output(rule_out.path, what="--rule-out")
    if rule is not None:
        only_with("when fitting (without --rule)", judge=judge, label_col=label_col,
                  cost=cost, rule_out=rule_out)
        moved = [f for f, v, d in (("--risk", risk, 0.1), ("--delta", delta, 0.1),
                                   ("--uncertainty", uncertainty, "auto")) if v != d]
        if moved:
            fail(f"{', '.join(moved)}: a saved rule keeps the risk, delta and uncertainty it "
                 "was fitted with; leave them out (or fit a new rule)")
        need("applying a rule", out=out)
        res = load_cascade_rule(rule).decide(table)
    else:
        need("fitting a cascade", judge=judge, label_col=label_col)
        if out is None and rule_out is None:
            fail("fitting a cascade needs --out (the decided table) or --rule-out (the "
                 "rule), or both")
        res = fit(table, judge, label_col, risk, delta, costs=cost or None,
                  views=UNCERTAINTIES[uncertainty])
    report_rows(res.errors, len(res.table), action="had a judge skipped (the others decide)")
    for w in res.warnings:
        warn(w)
    print_cascade(res, fitted=rule is None)
    if out is not None:
        res.save(out)
    if rule_out is not None:
        res.rule.save(rule_out.path)
    wrote = [str(p) for p in (out, rule_out) if p is not None]
    if wrote:
        console.print(f"wrote {plain(' and '.join(wrote))}")


def print_cascade(res, fitted: bool) -> None:
    """A cascade's stages (cost, the confidence each must state where the rule records one,
    shares on the labeled rows and this table), the labeled rows' error and cost, and the
    guarantee: `scoreband cascade` and `triage --cascade` alike."""
    rule, rep = res.rule, res.rule.report
    mins, cal = rep.get("min_confidence"), rep.get("shares_on_calibration", {})
    t = Table(title=f"cascade: at most {rule.alpha:g} of decided rows wrong, with "
                    f"probability {1 - rule.delta:g} (uncertainty: {rule.view})")
    cols = ["stage", *(["trusts at confidence >="] if mins else []), "cost",
            "share (labeled rows)", "share (this table)"]
    for c in cols:
        t.add_column(c, justify="left" if c == "stage" else "right", overflow="fold")
    shares = res.shares
    for i, name in enumerate([j.name for j in rule.judges] + ["human"]):
        m = (mins or {}).get(name)
        c = ("-" if not rule.human_cost else f"{rule.human_cost:g}") \
            if rule.costs is None or i == len(rule.judges) else f"{rule.costs[i]:g}"
        t.add_row(plain(name), *(["-" if m is None else f"{m:.6g}"] if mins else []), c,
                  f"{cal[name]:.1%}" if name in cal else "-", f"{shares[name]:.1%}")
    console.print(t)
    r, cst = rep.get("risk_on_calibration"), rep.get("judge_cost_per_row")
    alone = rep.get("judge_cost_strongest_alone_per_row")
    n_lab = rep.get("n_labeled", rep.get("n_training", 0) + rep.get("n_calibration", 0))
    if fitted:
        console.print(f"labeled rows: {n_lab}; error among decided labeled rows: "
                      + ("-" if r is None else f"{r:.3f}")
                      + ("" if cst is None else f"; judge cost per row {cst:.3g}")
                      + ("" if cst is None or alone is None else
                         f" (the strongest alone {alone:g})"))
    console.print(plain(rep.get("guarantee", "")))
