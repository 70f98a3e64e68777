"""triage: which judge scores can be kept as they are, and which must a human redo."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from scoreband.cli._app import app, console, fail, guard, report_rows, warn
from scoreband.cli._checks import both_or_neither, exactly_one, need, only_with
from scoreband.cli._options import (
    HtmlOpt,
    IdOpt,
    PairLabelOpt,
    PairVotesOpt,
    later_path,
    open_unit,
    split_columns,
)
from scoreband.errors import ERROR_COLUMN
from scoreband.textsafe import plain


def _nonnegative(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise typer.BadParameter(f"{value:g} is not a finite number >= 0")
    return value


@app.command()
@guard
def triage(
    labeled: Annotated[Path | None, typer.Argument(
        help="Labeled table: the human score (--target) and the judge's score (--score) "
             "per row. Omit it with --rule.")] = None,
    target: Annotated[str | None, typer.Option(
        "--target", help="Column of the human score (mean rating).")] = None,
    scale: Annotated[str | None, typer.Option(
        "--scale", help="Scale of the human score, 'A,B' (e.g. 1,5).")] = None,
    score: Annotated[str | None, typer.Option(
        "--score", help="Column of the judge's or metric's score, on any scale (--map puts "
                        "it on the human one).")] = None,
    tolerance: Annotated[float | None, typer.Option(
        "--tolerance", callback=_nonnegative,
        help="How far from the human score a kept score may be, in the target's units "
             "(e.g. 0.5 on 1-5).")] = None,
    alpha: Annotated[float, typer.Option(
        "--risk", callback=open_unit,
        help="At most this share of the trusted scores may be off by more than "
             "--tolerance.")] = 0.1,
    delta: Annotated[float, typer.Option(
        "--delta", callback=open_unit,
        help="The guarantee may fail with this probability over the draw of the labeled "
             "rows.")] = 0.1,
    out: Annotated[Path | None, typer.Option("--out", help="The rule, JSON.")] = None,
    features: Annotated[str | None, typer.Option(
        "--features", help="Comma list or glob (e.g. 'logp_*') of columns the uncertainty "
                           "may read: a judge's score-token log-probs give its own "
                           "confidence, and break ties between equal scores.")] = None,
    uncertainty: Annotated[str | None, typer.Option(
        "--uncertainty", help="Column of your own uncertainty per row (larger = less sure); "
                              "a candidate for --by auto, or used alone with --by "
                              "column.")] = None,
    calibrator: Annotated[Path | None, typer.Option(
        "--calibrator", help="Calibrator JSON (from `scoreband calibrate`, fitted on OTHER "
                             "rows): its band width is a candidate uncertainty "
                             "(band-width).")] = None,
    by: Annotated[str, typer.Option(
        "--by", help="The uncertainty: auto (the one that accepts most on the training "
                     "share) | knn-miss | knn-abs | knn-miss-features | knn-abs-features (by name "
                     "only: auto does not try it) | fitted-abs | judge-confidence | "
                     "band-width | column.")] = "auto",
    map_: Annotated[str, typer.Option(
        "--map", help="tolerance (near each score, the human score most often within "
                      "--tolerance; monotone) | isotonic (the monotone mean) | none (the "
                      "score is on the target's scale).")] = "tolerance",
    groups: Annotated[str | None, typer.Option(
        "--groups", help="Column of tasks / groups: a threshold and a guarantee per "
                         "group.")] = None,
    train_frac: Annotated[float, typer.Option(
        "--train-frac", callback=open_unit,
        help="Share of the labeled rows that fit the map, the uncertainty and the "
             "sequence start; the rest calibrate the threshold.")] = 0.5,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the training / "
                                                            "calibration split.")] = 0,
    id_col: IdOpt = None,
    rule: Annotated[Path | None, typer.Option(
        "--rule", help="A saved rule (from --out) to apply, instead of fitting one.")] = None,
    apply_table: Annotated[Path | None, typer.Option(
        "--apply", help="Table to triage with the rule (every row and column kept).")] = None,
    apply_out: Annotated[str | None, typer.Option(
        "--apply-out", callback=later_path, help="Where the triaged table goes "
                                             "(.csv .tsv .jsonl .parquet).")] = None,
    html: HtmlOpt = None,
    pairwise: Annotated[bool, typer.Option(
        "--pairwise", help="LABELED is a pair table: calibrated verdicts A / B / tie (the "
                           "command `pairwise-triage`): --label-col or --votes, --feature "
                           "or --probs, --risk, --delta, --out; a pairwise --rule is "
                           "recognised without it.")] = False,
    label_col: PairLabelOpt = None,
    votes: PairVotesOpt = None,
    feature: Annotated[list[str] | None, typer.Option(
        "--feature", help="--pairwise: antisymmetric feature column(s) (a score difference, "
                          "pair_pref); one feature orders the pairs by |x| without labels, "
                          "so every labeled pair calibrates.")] = None,
    probs: Annotated[str | None, typer.Option(
        "--probs", help="--pairwise: columns of p(A), p(B)[, p(tie)] used as they "
                        "are.")] = None,
    set_alpha: Annotated[float | None, typer.Option(
        "--set-alpha", callback=open_unit,
        help="--pairwise: miscoverage of the prediction sets (default --risk).")] = None,
    sets: Annotated[str, typer.Option("--sets", help="--pairwise: lac | aps.")] = "lac",
    start: Annotated[str, typer.Option(
        "--start", help="--pairwise: first | likely (where the fixed sequence "
                        "starts: first = where a test can reject, at the most confident "
                        "fifth on the label-free path; likely = read from a training "
                        "share).")] = "first",
    asymmetric: Annotated[bool, typer.Option(
        "--asymmetric", help="--pairwise: let the verdict model learn an order "
                             "effect.")] = False,
):
    """Trust or escalate with a guaranteed risk: keep the judge's score where its
    uncertainty is at most a threshold, send the rest to a human. The threshold is chosen
    on the labeled rows (Learn-then-Test, fixed-sequence binomial tests) so that among the
    kept scores at most --risk are off the human score by more than --tolerance, with
    probability at least 1 - --delta over the draw of the labeled rows, for rows drawn
    like them.

    The labeled rows are split by their identity (--seed): a training share fits the map
    onto the human scale, the uncertainty and where the tests start; the rest calibrate
    the threshold, seen by nothing else. The rule JSON says the threshold, the share
    accepted, the guarantee in words and what keeping every score risks. Triaged tables
    get triage_score (on the human scale), triage_uncertainty, trusted (True / False) and
    triage_error (why a row could not be judged: such a row is escalated).

    Fit: scoreband triage labeled.csv --target human --scale 1,5 --score judge_score
    --features 'logp_*' --tolerance 0.5 --risk 0.1 --delta 0.1 --out rule.json
    --apply unlabeled.csv --apply-out triaged.csv

    Apply a saved rule later: scoreband triage --rule rule.json --apply unlabeled.csv
    --apply-out triaged.csv
    """
    if pairwise or (rule is not None and rule_kind(rule) == "pairwise"):
        only_with("without --pairwise", target=target, scale=scale, score=score,
                  tolerance=tolerance, features=features, uncertainty=uncertainty,
                  calibrator=calibrator, id_col=id_col, html=html)
        return triage_pairs(labeled, label_col=label_col, votes=votes, feature=feature,
                            probs=probs, alpha=alpha, delta=delta, set_alpha=set_alpha,
                            sets=sets, groups=groups, start=start, train_frac=train_frac,
                            asymmetric=asymmetric, seed=seed, out=out, rule=rule,
                            apply_table=apply_table, apply_out=apply_out)
    only_with("with --pairwise", label_col=label_col, votes=votes, feature=feature,
              probs=probs, set_alpha=set_alpha, asymmetric=asymmetric)
    from scoreband.decisions.triage import fit_triage, load_rule

    both_or_neither(apply=apply_table, apply_out=apply_out)
    if labeled is not None and rule is not None:
        fail("give either a LABELED table to fit a rule or --rule RULE to apply one, not "
             "both")
    if apply_out is not None:
        _check_apply_out(apply_out.path, out, html)
    if labeled is None:
        if rule is None:
            fail("give the LABELED table (with --target, --scale, --score, --tolerance and "
                 "--out) or --rule RULE with --apply TABLE --apply-out OUT")
        if apply_table is None:
            fail("--rule: give --apply TABLE --apply-out OUT (the rows to triage)")
        fitted, rule_path = load_rule(rule), rule
    else:
        need("fitting a rule", target=target, scale=scale, score=score, tolerance=tolerance,
             out=out)
        from scoreband.columns import needed_columns
        from scoreband.tables import read_table

        spec = {"target": target, "median": score, "groups": groups, "id_col": id_col,
                "features": features}
        # cells as written: a group 01 stays 01, as the apply (the row engine) reads it
        df = read_table(labeled, columns=needed_columns(labeled, spec, [uncertainty]),
                        text=True)
        fitted = fit_triage(df, target=target, score=score, scale=scale,
                            tolerance=tolerance, alpha=alpha, delta=delta,
                            features=features or (), groups=groups, uncertainty=uncertainty,
                            calibrator=calibrator, by=by, map=map_, train_frac=train_frac,
                            seed=seed, id_col=id_col).rule
        report_rows(fitted.errors, len(df))
        for w in fitted.warnings:
            warn(w)
        fitted.report["table"] = str(labeled)
        fitted.save(out)
        rule_path = out
        if html:
            from scoreband.decisions.report import write_triage_html

            write_triage_html(fitted, html)
        _print_rule(fitted)
        console.print(f"wrote {plain(out)}" + (f" and {plain(html)}" if html else ""))
    if apply_table is not None:
        _apply(fitted, rule_path, apply_table, apply_out.path)


def _check_apply_out(path: Path, out: Path | None, html: Path | None) -> None:
    from scoreband.files import check_output

    for what, other in (("--out", out), ("--html", html)):
        if other is not None and path.expanduser().resolve() == other.expanduser().resolve():
            fail(f"--apply-out and {what} name the same path {str(path)!r}; give each output "
                 "its own")
    check_output(path, what="--apply-out")


def rule_kind(path: Path) -> str | None:
    """``"triage"`` or ``"pairwise"`` when ``path`` is a rule file (its ``format`` field), else
    None: how ``apply --calibrator`` tells a rule from a calibrator."""
    from scoreband.decisions.triage import RULE_FORMAT
    from scoreband.pairwise.selective import PAIR_RULE_FORMAT

    try:
        if not Path(path).is_file():  # a FIFO or a device is never opened here
            return None
        with open(path, "rb") as f:
            fmt = json.loads(f.read(1 << 22)).get("format")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None  # the calibrator reader says what is wrong
    return {RULE_FORMAT: "triage", PAIR_RULE_FORMAT: "pairwise"}.get(fmt)


def apply_rule(rule_path: Path, table: Path, out: Path) -> None:
    """A saved triage or pairwise rule on ``table``'s rows, written to ``out`` (the same code
    as ``triage --rule RULE --apply TABLE --apply-out OUT``)."""
    _check_apply_out(out, None, None)
    if rule_kind(rule_path) == "pairwise":
        return apply_pair_rule(rule_path, table, out)
    from scoreband.decisions.triage import load_rule

    return _apply(load_rule(rule_path), rule_path, table, out)


def triage_pairs(labeled, *, label_col, votes, feature, probs, alpha, delta, set_alpha,
                 sets, groups, start, train_frac, asymmetric, seed, out, rule, apply_table,
                 apply_out) -> None:
    """``triage --pairwise`` (and ``pairwise-triage``): fit a pairwise rule (the pairwise
    command's fit) and / or apply one through the row engine (:func:`apply_pair_rule`); the
    output path and the table to apply are checked before any work."""

    both_or_neither(apply=apply_table, apply_out=apply_out)
    if (labeled is None) == (rule is None):
        fail("give a LABELED pair table (with --label-col or --votes, --feature or --probs, "
             "--out) or --rule RULE with --apply TABLE --apply-out OUT")
    if rule is not None and apply_table is None:
        fail("--rule: give --apply TABLE --apply-out OUT (the pairs to decide)")
    if apply_out is not None:
        _check_apply_out(apply_out.path, out, None)
    if labeled is not None:
        if apply_table is not None:  # refused now, not after the fit
            need("fitting a rule", out=out)
            _check_pair_table(apply_table, split_columns(feature) or split_columns([probs] if probs else []),
                              groups)
        run_pairwise_triage(labeled, label_col=label_col, votes=votes, feature=feature,
                            probs=probs, alpha=alpha, delta=delta, set_alpha=set_alpha,
                            sets=sets, groups=groups, start=start, train_frac=train_frac,
                            asymmetric=asymmetric, seed=seed, out=out)
        rule = out
    if apply_table is not None:
        apply_pair_rule(rule, apply_table, apply_out.path)


def _check_pair_table(table: Path, columns: list[str], groups: str | None) -> None:
    """Refuse, before a rule is fitted, a table to decide that lacks the rule's columns or
    already has one of the columns the rule adds (never overwritten)."""
    from scoreband.engine.rows import check_added_columns
    from scoreband.engine.stream import iter_chunks
    from scoreband.pairwise.selective import PAIR_COLUMNS
    from scoreband.tables import table_columns

    have = table_columns(table)
    if have is None:  # a format read whole or by lines: its first row says
        first = next(iter_chunks(table, 1), None)
        if first is None:
            return  # no rows: the apply says so
        have = list(first.columns)
    missing = [c for c in [*columns, groups] if c and c not in have]
    if missing:
        fail(f"--apply {str(table)!r} lacks the column{'s' if len(missing) > 1 else ''} "
             f"{', '.join(map(repr, missing))} the rule reads; available: "
             f"{', '.join(map(str, have[:30]))}")
    check_added_columns(have, list(PAIR_COLUMNS))


def apply_pair_rule(rule, table: Path, out: Path) -> None:
    """A pairwise rule (its file, or a fitted :class:`scoreband.pairwise.selective.PairRule`)
    on every pair of ``table``, written to ``out``: the pairwise stage on the row engine
    (:class:`scoreband.pairwise.selective.PairStage`), as ``apply`` and the triage rule do,
    so CSV / TSV cells come back byte for byte and a file is streamed chunk by chunk. The
    one path of ``triage --pairwise --apply``, ``triage --rule RULE --apply`` and ``apply
    --calibrator RULE``. The caller checks ``out`` (:func:`scoreband.files.check_output`)."""
    from scoreband.cli._rows import run_stage

    kw, local = ({"rule": str(rule)}, None) if isinstance(rule, (str, Path)) else \
        ({}, {"rule": rule})
    run, stage = run_stage(table, out, "scoreband.pairwise.selective:pair_stage", kw, None,
                           error_column=ERROR_COLUMN["pairwise-rule"],
                           local={**(local or {}), "on_warning": warn}, vectorized=True)
    report_rows(stage.errors, run.rows, action="left undecided (could not be judged)")
    if stage.judged == 0:
        fail(f"no pair of {str(table)!r} could be judged (see the reasons above; "
             f"{plain(out)} lists them in column {ERROR_COLUMN['pairwise-rule']!r})")
    n, k = run.rows, stage.decided
    bad = run.rows - stage.judged
    console.print(f"decided {k:,} of {n:,} pairs ({k / max(n, 1):.1%}); the other "
                  f"{n - k:,} go to a human"
                  + (f" ({bad:,} of them could not be judged)" if bad else "")
                  + f" -> {plain(out)}")


def _apply(fitted, rule_path: Path, table: Path, out: Path) -> None:
    from scoreband.cli._rows import run_stage

    run, stage = run_stage(table, out, "scoreband.decisions.triage:triage_stage",
                           {"rule": str(rule_path)}, None, error_column=ERROR_COLUMN["triage"],
                           local={"on_warning": warn}, vectorized=True)
    report_rows(stage.errors, run.rows, action="escalated (could not be judged)")
    if stage.judged == 0:
        fail(f"no row of {str(table)!r} could be triaged (see the reasons above)")
    ood = getattr(stage, "out_of_domain", 0)
    console.print(f"trusted {stage.trusted:,} of {run.rows:,} rows "
                  f"({stage.trusted / max(run.rows, 1):.1%}); escalate the other "
                  f"{run.rows - stage.trusted:,}"
                  + (f" ({ood:,} of them outside the rule's domain)" if ood else "")
                  + f" -> {plain(out)}")


def _print_rule(rule) -> None:
    rep = rule.report
    t = Table(title=f"trust or escalate: off by more than {rule.tolerance:g} at most "
                    f"{rule.alpha:.0%} of kept scores, with probability "
                    f"{1 - rule.delta:.0%}")
    for c in ("group", "calibration rows", "threshold", "accepted", "risk (calibration)",
              "accept-all risk"):
        t.add_column(c, justify="left" if c == "group" else "right", overflow="fold")
    for g, v in rule.groups.items():
        r = v.get("risk_on_calibration")
        aa = v.get("accept_all_risk")
        t.add_row(plain(g), str(v["n_calibration"]), f"{v['threshold']:.4g}",
                  f"{v['accepted_share']:.1%}", "-" if r is None else f"{r:.3f}",
                  "-" if aa is None else f"{aa:.3f}")
    console.print(t)
    ch = rep["uncertainty_choice"]
    console.print(f"uncertainty: {ch['chosen']} (expected share kept on the training share: "
                  + ", ".join(f"{k} {v:.2f}" for k, v in ch["training_share_accepted"].items())
                  + f"); map: {rule.map.kind}", soft_wrap=False)
    console.print(f"accepting every score would be off by more than {rule.tolerance:g} for "
                  f"{rep['accept_all_risk']:.1%} of the calibration rows")


def run_pairwise_triage(labeled, *, label_col, votes, feature, probs, alpha, delta,
                        set_alpha, sets, groups, start, train_frac, asymmetric, seed,
                        out) -> None:
    """The fit of `triage --pairwise` and `pairwise-triage` (one implementation, called by
    :func:`scoreband.cli.decisions.triage_pairs`, which also applies): the labeled table is
    read as written (a group named ``01`` stays ``01``, as the apply reads it; features
    and probabilities are parsed where they are used)."""
    from scoreband.pairwise.selective import fit_pairwise_triage
    from scoreband.tables import read_table

    if labeled is not None:
        need("fitting a rule", out=out)
        exactly_one("the human preference", label_col=label_col, votes=votes)
        exactly_one("the verdict model", feature=split_columns(feature) or None, probs=probs)
        df = read_table(labeled, text=True)
        fitted = fit_pairwise_triage(df, label_col=label_col,
                                     votes=split_columns([votes]) if votes else None,
                                     features=split_columns(feature) or None,
                                     probs=split_columns([probs]) if probs else None, alpha=alpha,
                                     delta=delta, set_alpha=set_alpha, set_method=sets,
                                     groups=groups, train_frac=train_frac, seed=seed,
                                     start=start, symmetric=not asymmetric)
        report_rows(fitted.errors, len(df))
        for w in fitted.warnings:
            warn(w)
        fitted.save(out)
        _print_pair_rule(fitted)
        console.print(f"wrote {plain(out)}")


def _print_pair_rule(rule) -> None:
    rep = rule.report
    t = Table(title=f"pairwise verdicts: at most {rule.alpha:.0%} of decided pairs wrong, "
                    f"with probability {1 - rule.delta:.0%}")
    for c in ("labeled pairs", "calibration", "threshold (1 - max p)", "decided",
              "error (calibration)", "accuracy deciding all", "set coverage", "set size"):
        t.add_column(c, justify="right")
    e = rep["error_among_decided_on_calibration"]
    # the pairs the threshold was calibrated on (every labeled pair on the label-free
    # path), as the JSON's n_threshold_calibration says; n_calibration is the sets' share
    t.add_row(str(rep["n_labeled"]), str(rep.get("n_threshold_calibration",
                                                 rep["n_calibration"])),
              f"{rule.threshold:.4g}",
              f"{rep['decided_share']:.1%}", "-" if e is None else f"{e:.3f}",
              f"{rep['accuracy_deciding_all']:.3f}",
              f"{rep['set_coverage_on_calibration']:.3f}",
              f"{rep['set_size_on_calibration']:.2f}")
    console.print(t)
