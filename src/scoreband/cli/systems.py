"""systems: which system is better, from a few human labels and many metric scores."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from scoreband import api
from scoreband.cli._app import app, console, fail, guard, report_rows, warn
from scoreband.cli._checks import need, only_with
from scoreband.cli._options import (
    HtmlOpt,
    PairLabelOpt,
    PairVotesOpt,
    Table_,
    check_scale,
    open_unit,
    positive,
    split_commas,
)
from scoreband.errors import InputError
from scoreband.textsafe import complement_text, plain

# the options, one alias each, so that the command's signature is one line per option
OutOpt = Annotated[Path, typer.Option("--out", help=(
    "Results JSON (with --propose-labels: the table with inclusion_prob and propose_label, "
    "format by extension)."))]
SystemColOpt = Annotated[str | None, typer.Option(
    "--system-col", help="Column naming the system of each row (required); with --pairwise "
                         "the two system columns of a pair, 'A_COL,B_COL' (default "
                         "system_a,system_b).")]
ScaleOpt = Annotated[str | None, typer.Option("--scale", callback=check_scale, help=(
    "Scale of the human score, 'A,B' (required without --pairwise)."))]
TargetOpt = Annotated[str | None, typer.Option("--target", help=(
    "Column of the human score; empty cells are unlabeled rows (with --propose-labels it may "
    "be absent: no labels yet)."))]
ScoreOpt = Annotated[list[str] | None, typer.Option("--score", callback=split_commas, help=(
    "Metric or judge column(s): a comma list or the option repeated (several are combined in "
    "one map onto the human scale)."))]
ItemOpt = Annotated[str | None, typer.Option("--item-col", help=(
    "Column of the item (prompt, image) each row answers: pairs of systems are compared on "
    "the items they share."))]
AlphaOpt = Annotated[float, typer.Option("--alpha", callback=open_unit, help=(
    "1 - confidence of every interval; the Holm decisions and the rank sets hold all at once "
    "with probability >= 1 - alpha (with --pairwise too)."))]
MethodOpt = Annotated[str, typer.Option("--method", help=(
    "ppi++ (power-tuned) | ppi | classical (the labels alone)."))]
PlanOpt = Annotated[float | None, typer.Option("--plan", callback=positive, help=(
    "Interval width on the human scale: how many labels per system reach it, with PPI++ and "
    "alone."))]
StrictOpt = Annotated[bool, typer.Option("--strict", help=(
    f"Exit 2 when a system has fewer than {api.MIN_LABELS} labeled rows (default: excluded "
    "with a warning)."))]
ProposeOpt = Annotated[float | None, typer.Option(
    "--propose-labels", callback=positive, metavar="N", help=(
    "Choose the rows to send to humans instead: N expected new labels per system, each row "
    "(each item with --item-col) drawn with probability proportional to its uncertainty mixed "
    "with uniform; writes the table to --out with inclusion_prob and propose_label, and the "
    "design to --design."))]
CalibratorOpt = Annotated[Path | None, typer.Option("--calibrator", help=(
    "With --propose-labels: a calibrator whose band width is each row's uncertainty (else a "
    "residual model on the labeled rows, from 20 of them, else uniform)."))]
MixOpt = Annotated[float, typer.Option("--mix", help=(
    "With --propose-labels: weight of the uniform design (also the floor: no row below mix x "
    "the uniform probability)."))]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the draw and the folds.")]
InclusionOpt = Annotated[str | None, typer.Option("--inclusion-prob", metavar="COL", help=(
    "Column of each row's probability of being labeled, in (0, 1] (a design of your own): "
    "inverse-probability-weighted PPI++ means, differences and ranks. For a proposal give "
    "--design instead (it checks the labels by row identity); on a proposal's table the "
    "labels are checked against its propose_label column."))]
DesignOpt = Annotated[Path | None, typer.Option("--design", metavar="FILE", help=(
    "With --propose-labels: where to write the label design (default: --out with "
    ".design.json appended). Without: the design to check the labels against (proposed rows "
    "left unlabeled or labeled rows never proposed are an error) and to weight them by, "
    "instead of --inclusion-prob."))]
StrataOpt = Annotated[str | None, typer.Option("--strata", metavar="COL", help=(
    "Column of the stratum (task, dimension): stratified PPI++, strata weighted by size, each "
    "with its own weight; with --propose-labels the residual model's cells."))]
PairwiseOpt = Annotated[bool, typer.Option("--pairwise", help=(
    "TABLE is a pair table with a judge's verdicts: win "
    "rates and Bradley-Terry strengths by PPI from --label-col or --votes and the judge's "
    "--probs or --verdict."))]
ProbsOpt = Annotated[str | None, typer.Option("--probs", help=(
    "--pairwise: columns of the judge's p(A), p(B)[, p(tie)] (default "
    "pair_p_a,pair_p_b,pair_p_tie)."))]
VerdictOpt = Annotated[str | None, typer.Option("--verdict", help=(
    "--pairwise: a column of judge verdicts A / B / tie instead of --probs."))]
ByOpt = Annotated[str, typer.Option("--by", help=(
    "--pairwise: head-to-head | bradley-terry (what the pairwise decisions compare)."))]


@app.command()
@guard
def systems(table: Table_, out: OutOpt, system_col: SystemColOpt = None,
            scale: ScaleOpt = None, target: TargetOpt = None, score: ScoreOpt = None,
            item_col: ItemOpt = None, alpha: AlphaOpt = 0.05, method: MethodOpt = "ppi++",
            plan: PlanOpt = None, strict: StrictOpt = False, html: HtmlOpt = None,
            propose_labels: ProposeOpt = None, calibrator: CalibratorOpt = None,
            mix: MixOpt = 0.5, seed: SeedOpt = 0, inclusion_prob: InclusionOpt = None,
            design: DesignOpt = None, strata: StrataOpt = None, pairwise: PairwiseOpt = False,
            label_col: PairLabelOpt = None, votes: PairVotesOpt = None,
            probs: ProbsOpt = None, verdict: VerdictOpt = None, by: ByOpt = "head-to-head"):
    """Each system's mean human score with a 95 % interval from a few labeled rows and many
    scored ones (prediction-powered inference, PPI++, Student t), every pair's difference
    with Holm-adjusted p-values, and the ranks each system can hold. The intervals assume the
    labeled rows are a random sample of each system's rows; a system needs 5 labels. Pairs
    are paired on the items labeled for both systems when enough are (--item-col), unpaired
    otherwise; the JSON says which and why (pairing, n_labeled_both).

    Which items to label (active labeling, Zrnic and Candes 2024): --propose-labels N writes
    the table with each row's inclusion_prob and propose_label (drawn with --seed) and the
    label design (--design); label the proposed rows, then run systems with --design FILE
    (the labels are checked against it). --plan WIDTH then also says how many labels active
    sampling needs against uniform, and whether it pays.

    Example: scoreband systems outputs.csv --system-col system --item-col image
    --score clip_score --target human --scale 1,5 --out systems.json --html systems.html
    """
    if pairwise:
        only_with("without --pairwise", scale=scale, target=target, score=score,
                  item_col=item_col, plan=plan, propose_labels=propose_labels,
                  calibrator=calibrator, inclusion_prob=inclusion_prob, strata=strata,
                  design=design)
        return _pairwise(table, out, system_col, probs=probs, verdict=verdict,
                         label_col=label_col, votes=votes, alpha=alpha, method=method, by=by,
                         html=html)
    only_with("with --pairwise", label_col=label_col, votes=votes, probs=probs,
              verdict=verdict)
    need("systems", system_col=system_col, scale=scale)
    if propose_labels is not None:
        return _propose(table, system_col, score or [], target, scale, out, item_col,
                        propose_labels, calibrator, strata, mix, seed, alpha, plan, design)
    if target is None:
        raise InputError("--target: give the column of the human score (only "
                         "--propose-labels runs without labels)")
    if calibrator is not None:
        raise InputError("--calibrator is read by --propose-labels only")
    res = api.systems(table, system_col=system_col, score=score or [], target=target,
                      scale=scale, item_col=item_col, alpha=alpha, method=method, plan=plan,
                      strict=strict, seed=seed, inclusion_prob=inclusion_prob, strata=strata,
                      design=design)
    res.write(out, html=html)  # the files first: nothing printed can lose them
    report_rows(res.errors, res.doc["n_rows"])
    for w in res.warnings:
        warn(w)
    _print(res.doc)
    console.print(f"wrote {plain(out)}" + (f" and {plain(html)}" if html else ""))


def _pairwise(table, out, system_col, **kw) -> None:
    """`systems --pairwise`: the shared implementation of cli/pairwise.py, the two system
    columns from --system-col 'A_COL,B_COL'."""
    from scoreband.cli.pairwise import run_pairwise_systems

    cols = [c.strip() for c in (system_col or "system_a,system_b").split(",")]
    if len(cols) != 2 or not all(cols):
        fail(f"--system-col with --pairwise: give the two system columns of a pair, "
             f"'A_COL,B_COL'; got {system_col!r}")
    return run_pairwise_systems(table, out=out, system_a=cols[0], system_b=cols[1], **kw)


def _print(doc: dict) -> None:
    level = complement_text(doc['alpha'])
    t = Table(title=f"mean human score per system ({doc['method']}, {level} intervals)")
    for c in ("rank", "system", "labels", "estimate", "interval", "labels alone", "eff."):
        t.add_column(c, justify="left" if c == "system" else "right",
                     overflow="fold" if c == "system" else "ellipsis")
    for r in doc["ranking"]:
        s = doc["systems"][r["system"]]
        lo, hi = r["ranks"]
        t.add_row(str(lo) if lo == hi else f"{lo}-{hi}", plain(r["system"]),
                  f"{s['n_labeled']}/{s['n_labeled'] + s['n_unlabeled']}",
                  f"{s['estimate']:.3f}", f"{s['ci'][0]:.2f}-{s['ci'][1]:.2f}",
                  f"{s['classical']['ci'][0]:.2f}-{s['classical']['ci'][1]:.2f}",
                  f"{s['effective_labels']:.0f}")
    console.print(t)
    kish = {k: v["design_effective_labels"] for k, v in doc["systems"].items()
            if "design_effective_labels" in v}
    if kish:
        console.print("labels drawn with unequal probabilities: effective labels (Kish) "
                      + ", ".join(f"{plain(k)} {v:.1f}" for k, v in kish.items())
                      + "; eff. is the labels a uniform design would need for the same width")
    sig = [p for p in doc["pairs"] if p["significant"]]
    console.print(f"{len(sig)} of {len(doc['pairs'])} pairs differ at family-wise level "
                  f"{doc['alpha']:g} (Holm):")
    for p in sig[:15]:
        better, worse = (p["a"], p["b"]) if p["estimate"] > 0 else (p["b"], p["a"])
        console.print(f"  {plain(better)} > {plain(worse)} by {abs(p['estimate']):.3f} "
                      f"[{abs(p['ci'][0 if p['estimate'] > 0 else 1]):.3f}, "
                      f"{abs(p['ci'][1 if p['estimate'] > 0 else 0]):.3f}]"
                      f" ({p['pairing']}"
                      + (f", {p['n_labeled_both']} items labeled for both)"
                         if p.get("n_labeled_both") is not None else ")"), soft_wrap=False)
    unpaired = [p for p in doc["pairs"]
                 if not p["paired"] and p.get("n_labeled_both") is not None]
    if unpaired:
        console.print(f"{len(unpaired)} of {len(doc['pairs'])} pairs compared unpaired: fewer "
                      "items labeled for both systems than pairing needs (`pairing_reason` "
                      "and `n_labeled_both` in the JSON)")
    if "plan" in doc:
        console.print(f"labels per system for a {doc['plan']['width']:g}-wide interval:")
        for s, v in doc["plan"]["systems"].items():
            ppi = v["ppi++"] if v["ppi++"] is not None else "unreachable (too few unlabeled rows)"
            extra = ""
            if "predicted_width_ratio" in v and v["ppi++"] is not None:
                r = v["design_variance_ratio"]
                extra = (f"; this design vs uniform: {v['predicted_width_ratio']:.2f}x the "
                         f"width (uniform needs ~{int(np.ceil(v['ppi++'] / r))})")
            console.print(f"  {plain(s)}: {ppi} with PPI++, {v['classical']} alone{extra}")


def _propose(table, system_col, scores, target, scale, out, item_col, n, calibrator, strata,
             mix, seed, alpha, plan, design) -> None:
    # the table comes back as it went in: its cells read as text for a text output
    prop = api.propose_labels(api.read_table(table, text=api.as_text(out)),
                              system_col=system_col,
                              score=scores, target=target, scale=scale, item_col=item_col,
                              n_labels=n, calibrator=calibrator, strata=strata, mix=mix,
                              seed=seed, alpha=alpha, plan=plan)
    report_rows(prop.errors, prop.doc["n_rows"])
    for w in prop.warnings:
        warn(w)
    design = design or out.with_name(out.name + ".design.json")
    api.write_table(prop.table, out)
    api.write_design(design, prop.design)
    d = prop.doc
    t = Table(title=f"rows to label ({n:g} expected new labels per system"
                    + (", by item" if d["by_item"] else "") + ")")
    for c in ("system", "rows", "labeled", "expected", "proposed"):
        t.add_column(c, justify="left" if c == "system" else "right")
    for s, v in d["systems"].items():
        t.add_row(plain(s), str(v["n_rows"]), str(v["n_labeled"]),
                  f"{v['expected_new_labels']:.1f}",
                  str(v["proposed"]))
    console.print(t)
    console.print(f"uncertainty: {d['uncertainty']}; smallest inclusion probability "
                  f"{d['min_inclusion_prob']:.3g}")
    console.print(f"predicted width, active / uniform: {d['predicted_width_ratio']:.2f} (from "
                  f"{d['predicted_from']}): {d['advice']}")
    if "design" in d:
        console.print(f"design: {plain(str(d['design']))} ({plain(str(d['design_reason']))})")
    if "plan" in d:
        console.print(f"labels per system for a {plan:g}-wide interval:")
        for s, v in d["plan"]["systems"].items():
            if v["ppi++"] is None:
                console.print(f"  {plain(s)}: unknown (fewer than {api.MIN_LABELS} labels and "
                              "no calibrator)")
            else:
                console.print(f"  {plain(s)}: {v['ppi++']} uniform, {v['active']} active (PPI++; "
                              f"from {v['from']})")
    console.print(f"wrote {plain(out)} and the design {plain(design)}: label the rows with "
                  f"propose_label true, then run systems with --design {plain(design)} (the "
                  "labels are checked against it)")
