"""systems: which system is better, from a few human labels and many metric scores."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from scoreband import api
from scoreband.cli._app import app, console, guard, report_rows, warn
from scoreband.cli._options import HtmlOpt, Table_, open_unit, positive
from scoreband.inference import MIN_LABELS


@app.command()
@guard
def systems(
    table: Table_,
    system_col: Annotated[str, typer.Option("--system-col",
                                            help="Column naming the system of each row.")],
    target: Annotated[str, typer.Option(
        "--target", help="Column of the human score; empty cells are unlabeled rows.")],
    scale: Annotated[str, typer.Option("--scale", help="Scale of the human score, 'A,B'.")],
    out: Annotated[Path, typer.Option("--out", help="Results JSON.")],
    score: Annotated[list[str] | None, typer.Option(
        "--score", help="Metric or judge column (repeat for several: they are combined in "
                        "one map onto the human scale).")] = None,
    item_col: Annotated[str | None, typer.Option(
        "--item-col", help="Column of the item (prompt, image) each row answers: pairs of "
                           "systems are compared on the items they share.")] = None,
    alpha: Annotated[float, typer.Option("--alpha", callback=open_unit,
                                         help="1 - confidence of every interval.")] = 0.05,
    method: Annotated[str, typer.Option(
        "--method", help="ppi++ (power-tuned) | ppi | classical (the labels alone).")] = "ppi++",
    plan: Annotated[float | None, typer.Option(
        "--plan", callback=positive, help="Interval width on the human scale: how many labels "
                                          "per system reach it, with PPI++ and alone.")] = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help=f"Exit 2 when a system has fewer than {MIN_LABELS} labeled rows "
                         "(default: excluded with a warning).")] = False,
    html: HtmlOpt = None,
):
    """Each system's mean human score with a 95 % interval from a few labeled rows and many
    scored ones (prediction-powered inference, PPI++, Student t), every pair's difference
    with Holm-adjusted p-values, and the ranks each system can hold. The intervals assume the
    labeled rows are a random sample of each system's rows; a system needs 5 labels. Pairs
    are paired on the items labeled for both systems when enough are (--item-col), unpaired
    otherwise; the JSON says which and why (pairing, n_labeled_both).

    Example: scoreband systems outputs.csv --system-col system --item-col image
    --score clip_score --target human --scale 1,5 --out systems.json --html systems.html
    """
    res = api.systems(table, system_col=system_col, score=score or [], target=target,
                      scale=scale, item_col=item_col, alpha=alpha, method=method, plan=plan,
                      strict=strict)
    report_rows(res.errors, res.doc["n_rows"])
    for w in res.warnings:
        warn(w)
    res.write(out, html=html)
    _print(res.doc)
    console.print(f"wrote {out}" + (f" and {html}" if html else ""))


def _print(doc: dict) -> None:
    level = f"{1 - doc['alpha']:.0%}"
    t = Table(title=f"mean human score per system ({doc['method']}, {level} intervals)")
    for c in ("rank", "system", "labels", "estimate", "interval", "labels alone", "eff."):
        t.add_column(c, justify="left" if c == "system" else "right")
    for r in doc["ranking"]:
        s = doc["systems"][r["system"]]
        lo, hi = r["ranks"]
        t.add_row(str(lo) if lo == hi else f"{lo}-{hi}", r["system"],
                  f"{s['n_labeled']}/{s['n_labeled'] + s['n_unlabeled']}",
                  f"{s['estimate']:.3f}", f"{s['ci'][0]:.2f}-{s['ci'][1]:.2f}",
                  f"{s['classical']['ci'][0]:.2f}-{s['classical']['ci'][1]:.2f}",
                  f"{s['effective_labels']:.0f}")
    console.print(t)
    sig = [p for p in doc["pairs"] if p["significant"]]
    console.print(f"{len(sig)} of {len(doc['pairs'])} pairs differ at family-wise level "
                  f"{doc['alpha']:g} (Holm):")
    for p in sig[:15]:
        better, worse = (p["a"], p["b"]) if p["estimate"] > 0 else (p["b"], p["a"])
        console.print(f"  {better} > {worse} by {abs(p['estimate']):.3f} "
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
            console.print(f"  {s}: {ppi} with PPI++, {v['classical']} alone")
