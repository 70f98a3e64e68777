"""triage: which judge scores can be kept as they are, and which must a human redo (and,
with --pairwise, which pair verdicts can be given without a human)."""

from __future__ import annotations

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
    Knob,
    choice_knob,
    config_option,
    later_path,
    open_unit,
    read_knobs,
    split_columns,
)
from scoreband.textsafe import complement_text, plain, share_text


def _nonnegative(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise typer.BadParameter(f"{value:g} is not a finite number >= 0")
    return value


def _opt(flag: str, help: str, kind=str | None, **kw):
    return Annotated[kind, typer.Option(flag, help=help, **kw)]


#: the rarely used knobs `--config FILE` sets (JSON or TOML)
CONFIG = {
    "train_frac": Knob(0.5, float, "a share in (0, 1)", "share of the labeled rows fitting "
                       "the map / uncertainty / sequence start, or the pairwise verdict model",
                       lambda v: 0 < v < 1),
    "start": choice_knob(None, ("first", "likely"), "where the fixed sequence starts: likely "
                         "(scores' default) or first; pairwise: first, at the most confident "
                         "fifth on the label-free path, or likely, read from a training "
                         "share"),
    "set_alpha": Knob(None, float, "a miscoverage in (0, 1)", "--pairwise: miscoverage of "
                      "the prediction sets (none: --risk)", lambda v: 0 < v < 1,
                      nullable=True),
    "sets": choice_knob("lac", ("lac", "aps"), "--pairwise: the prediction sets' score"),
    "asymmetric": Knob(False, bool, "true | false", "--pairwise: the verdict model may "
                       "learn an order effect"),
    "pool": Knob(False, bool, "true | false", "with --groups: one threshold and one "
                 "guarantee over the mixture of groups (for groups too small to each keep "
                 "anything), each group's kept share reported"),
}
Target = _opt("--target", "Column of the human score (mean rating).")
ScaleO = _opt("--scale", "Scale of the human score, 'A,B' (e.g. 1,5).")
Score = _opt("--score", "Column of the judge's or metric's score, on any scale (--map puts "
                        "it on the human one).")
Tol = _opt("--tolerance", "How far from the human score a kept score may be, in the "
                          "target's units (e.g. 0.5 on 1-5).", float | None,
           callback=_nonnegative)
Risk = _opt("--risk", "At most this share of the trusted scores (decided pairs) may be off by "
                      "more than --tolerance (differ from the human preference).", float,
            callback=open_unit)
Delta = _opt("--delta", "The guarantee may fail with this probability over the draw of the "
                        "labeled rows.", float, callback=open_unit)
Features = Annotated[list[str] | None, typer.Option(
    "--features", "--feature",
    help="Comma list or glob (e.g. 'logp_*') of columns the uncertainty may read: a judge's "
         "score-token log-probs give its own confidence, and break ties between equal "
         "scores. --pairwise (also spelled --feature, repeatable): antisymmetric feature "
         "column(s) (a score difference, pair_pref); one feature orders the pairs by |x| "
         "without labels, so every labeled pair calibrates.")]
Unc = _opt("--uncertainty", "Column of your own uncertainty per row (larger = less sure); a "
                            "candidate for --by auto, or used alone with --by column.")
Cal = _opt("--calibrator", "Calibrator JSON (from `scoreband calibrate`, fitted on OTHER "
                           "rows): its band width is a candidate uncertainty (band-width).",
           Path | None)
By = _opt("--by", "The uncertainty: auto (the one that accepts most on the training share) "
                  "| knn-miss | knn-abs | knn-miss-features | knn-abs-features (by name only: "
                  "auto does not try it) | fitted-abs | judge-confidence | band-width | "
                  "column.", str)
MapO = _opt("--map", "tolerance (near each score, the human score most often within "
                     "--tolerance; monotone) | isotonic (the monotone mean) | none (the score "
                     "is on the target's scale).", str)
Groups = _opt("--groups", "Column of tasks / groups: a threshold and a guarantee per group "
                          "(--pairwise: prediction sets per group).")
Seed = _opt("--seed", "Seed of the training / calibration split.", int, min=0)
RuleO = _opt("--rule", "A saved rule (from --out; triage or pairwise) to apply, instead of "
                       "fitting one.", Path | None)
ApplyO = _opt("--apply", "Table to decide with the rule (every row and column kept).",
              Path | None)
ApplyOut = _opt("--apply-out", "Where the decided table goes (.csv .tsv .jsonl .parquet).",
                callback=later_path)
Pairwise = _opt("--pairwise", "LABELED is a pair table: calibrated verdicts A / B / tie: "
                              "--label-col or --votes, --feature or --probs, --risk, --delta, "
                              "--out; a pairwise --rule is recognised without it.", bool)
Label = Annotated[str | None, typer.Option(
    "--label-col", "--votes",
    help="(pairwise) Column of the human preference: A / B / tie, or 1 / 2 / 0 (empty = "
         "unlabeled); or vote-count columns 'A_COL,B_COL[,TIE_COL]' (also spelled --votes).")]
CascadeO = _opt("--cascade", "A cascade of judges with one guarantee, once per judge, "
                             "cheapest first: NAME=SCORE_COL[:FEATURES] (a score judge and "
                             "the columns its stated error may read, e.g. its log-probs), "
                             "or with --pairwise NAME=PA_COL,PB_COL[,PT_COL]. Each row is "
                             "decided by the first judge sure enough, a human last; among "
                             "ALL rows any judge decides at most --risk are wrong. Decided "
                             "rows get decided_by (the judge, or human).", list[str] | None)
CostO = _opt("--cost", "With --cascade: NAME=C per judge (its cost per row), optionally "
                       "human=C: the rule deciding within 10 % of the most at the least "
                       "cost is kept; the expected cost per row is reported.",
             list[str] | None)
Probs = _opt("--probs", "--pairwise: columns of p(A), p(B)[, p(tie)] used as they are.")
Config = config_option(CONFIG)


@app.command()
@guard
def triage(
    labeled: Annotated[Path | None, typer.Argument(
        help="Labeled table: the human score (--target) and the judge's score (--score) "
             "per row (--pairwise: a pair table). Omit it with --rule.")] = None,
    target: Target = None, scale: ScaleO = None, score: Score = None, tolerance: Tol = None,
    alpha: Risk = 0.1, delta: Delta = 0.1,
    out: _opt("--out", "The rule, JSON.", Path | None) = None,
    features: Features = None, uncertainty: Unc = None, calibrator: Cal = None,
    by: By = "auto", map_: MapO = "tolerance", groups: Groups = None, seed: Seed = 0,
    id_col: IdOpt = None, rule: RuleO = None, apply_table: ApplyO = None,
    apply_out: ApplyOut = None, html: HtmlOpt = None, config: Config = None,
    pairwise: Pairwise = False, label_col: Label = None, probs: Probs = None,
    cascade: CascadeO = None, cost: CostO = None,
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

    --pairwise: decide a pair (A or B better, or tie) only where the verdict model is
    confident enough (at most --risk of decided pairs wrong), with conformal prediction
    sets over {A, B, tie}; applied rows get verdict (empty where undecided), p_a, p_b,
    p_tie, pair_uncertainty, decided, pair_set and verdict_error.

    Fit: scoreband triage labeled.csv --target human --scale 1,5 --score judge_score
    --features 'logp_*' --tolerance 0.5 --risk 0.1 --delta 0.1 --out rule.json
    --apply unlabeled.csv --apply-out triaged.csv

    Pairs: scoreband triage --pairwise pairs.csv --label-col human --feature
    clip_score_diff --out rule.json

    A cascade: scoreband triage labeled.csv --cascade cheap=cheap_score:'cheap_lp*' --cascade
    strong=strong_score --target human --scale 1,5 --tolerance 0.5 --cost cheap=1 --cost
    strong=10 --out rule.json (pairs: --pairwise --cascade cheap=PA,PB ... --label-col human)

    Apply a saved rule later: scoreband triage --rule rule.json --apply unlabeled.csv
    --apply-out triaged.csv
    """
    knobs = read_knobs(config, CONFIG)
    both_or_neither(apply=apply_table, apply_out=apply_out)
    _check_io(labeled, rule, apply_table, apply_out, out, html, id_col)
    label_col, votes = (None, label_col) if label_col and "," in label_col else \
        (label_col, None)
    if knobs["pool"] and (cascade or cost or pairwise):
        fail("--config pool = true pools a score triage rule's --groups: not with --cascade "
             "or --pairwise")
    if cascade or cost:
        only_with("without --cascade", score=score, features=features,
                  uncertainty=uncertainty, calibrator=calibrator, by=by if by != "auto"
                  else None, groups=groups, html=html, probs=probs, rule=rule)
        need("a cascade", cascade=cascade)
        fitted = labeled and _fit_cascade(labeled, cascade, cost, pairwise, dict(
            target=target, scale=scale, tolerance=tolerance, alpha=alpha, delta=delta,
            seed=seed, id_col=id_col, map=map_, train_frac=knobs["train_frac"]),
            label_col, votes, out)
    elif pairwise or (rule is not None and rule_kind(rule) == "pairwise"):
        only_with("without --pairwise", target=target, scale=scale, score=score,
                  tolerance=tolerance, uncertainty=uncertainty,
                  calibrator=calibrator, id_col=id_col, html=html)
        fitted = labeled and _fit_pairs(labeled, label_col, votes, features, probs, alpha,
                                        delta, groups, seed, out, apply_table, knobs)
    else:
        only_with("with --pairwise", label_col=label_col, votes=votes, probs=probs)
        fitted = labeled and _fit(labeled, dict(
            target=target, score=score, scale=scale, tolerance=tolerance, alpha=alpha,
            delta=delta, features=split_columns(features), groups=groups,
            uncertainty=uncertainty, calibrator=calibrator, by=by, map=map_, seed=seed,
            id_col=id_col, pool=knobs["pool"], train_frac=knobs["train_frac"],
            start=knobs["start"] or "likely"), out, html)
    if apply_table is not None:
        apply_rule(rule or out, apply_table, apply_out.path, fitted=fitted or None)


def _check_io(labeled, rule, apply_table, apply_out, out, html, id_col) -> None:
    """Fit (LABELED) or apply (--rule), and where each output goes."""
    if rule is not None and id_col:
        fail("--id-col is read when fitting: a saved rule names rows by the id column it was "
             "fitted with; leave it out with --rule")
    if (labeled is None) == (rule is None):
        fail("give a LABELED table to fit a rule (with --out) or --rule RULE with --apply "
             "TABLE --apply-out OUT, not both or neither")
    if rule is not None and apply_table is None:
        fail("--rule: give --apply TABLE --apply-out OUT (the rows to decide)")
    if apply_out is not None:
        _check_apply_out(apply_out.path, out, html)


def _fit(labeled: Path, kw: dict, out: Path | None, html: Path | None):
    """Fit a triage rule on the labeled table (cells read as written: a group 01 stays
    01, as the apply reads it), save it and print its summary."""
    from scoreband.api import fit_triage, needed_columns, read_table

    need("fitting a rule", target=kw["target"], scale=kw["scale"], score=kw["score"],
         tolerance=kw["tolerance"], out=out)
    if kw["pool"] and not kw["groups"]:
        fail("--config pool = true pools the groups of --groups: give --groups COLUMN (without "
             "groups every rule is pooled already)")
    spec = {"target": kw["target"], "median": kw["score"], "groups": kw["groups"],
            "id_col": kw["id_col"], "features": kw["features"] or None}
    df = read_table(labeled, columns=needed_columns(labeled, spec, [kw["uncertainty"]]),
                    text=True)
    res = fit_triage(df, **kw)
    report_rows(res.errors, len(df))
    for w in res.warnings:
        warn(w)
    res.rule.report["table"] = str(labeled)
    res.save(out, html)
    _print_rule(res)
    console.print(f"wrote {plain(out)}" + (f" and {plain(html)}" if html else ""))
    return res.rule


def _fit_cascade(labeled: Path, judges: list[str], cost, pairwise: bool, kw: dict,
                 label_col, votes, out: Path | None):
    """Fit a cascade of judges on the labeled table (score judges, or pair judges with
    --pairwise), save it and print its summary; the rule (applied by ``--apply``)."""
    from scoreband.api import cascade as fit_pairs
    from scoreband.api import fit_score_cascade, read_table
    from scoreband.cli.cascade import print_cascade  # lazy: the commands keep their order

    need("fitting a cascade", out=out)
    df = read_table(labeled, text=True)
    if pairwise:
        only_with("without --pairwise", target=kw["target"], scale=kw["scale"],
                  tolerance=kw["tolerance"], id_col=kw["id_col"])
        exactly_one("the human preference", label_col=label_col, votes=votes)
        if votes:
            label_col = _vote_labels(df, votes)
        res = fit_pairs(df, judges, label_col, kw["alpha"], kw["delta"], costs=cost or None)
    else:
        only_with("with --pairwise", label_col=label_col, votes=votes)
        need("fitting a cascade of score judges", target=kw["target"], scale=kw["scale"],
             tolerance=kw["tolerance"])
        res = fit_score_cascade(df, judges, target=kw["target"], scale=kw["scale"],
                                tolerance=kw["tolerance"], alpha=kw["alpha"],
                                delta=kw["delta"], costs=cost or None, seed=kw["seed"],
                                train_frac=kw["train_frac"], map=kw["map"],
                                id_col=kw["id_col"])
    report_rows(res.errors, len(df), action="had a judge skipped (the others decide)")
    for w in res.warnings:
        warn(w)
    res.rule.report["table"] = str(labeled)
    res.rule.save(out)
    print_cascade(res, fitted=True)
    console.print(f"wrote {plain(out)}")
    return res.rule


def _vote_labels(df, votes: str) -> str:
    """The majority of the vote counts as a label column added to ``df`` (its name)."""
    from scoreband.api import pair_labels

    lab, _, errors = pair_labels(df, votes=split_columns([votes]))
    report_rows(errors, len(df))
    name = "human (majority of " + votes + ")"
    df[name] = lab
    return name


def _check_apply_out(path: Path, out: Path | None, html: Path | None) -> None:
    from scoreband.api import check_output, distinct_outputs

    distinct_outputs(("--apply-out", path), ("--out", out), ("--html", html))
    check_output(path, what="--apply-out")


def rule_kind(path: Path) -> str | None:
    """``"triage"`` or ``"pairwise"`` when ``path`` is a rule file (its ``format`` field), else
    None: how ``apply --calibrator`` tells a rule from a calibrator."""
    from scoreband.api import RULES, rule_format

    fmt = rule_format(path)
    return None if fmt is None else RULES.resolve(fmt)[0].info["cls"].kind


#: what the apply says per rule kind: (the rows' noun, what an undecided row is, the count)
_SAID = {"triage": ("rows", "escalated (could not be judged)", "trusted"),
         "pairwise": ("pairs", "left undecided (could not be judged)", "decided"),
         "cascade": ("rows", "had a judge skipped (the judges after it decide; a row no "
                             "judge could read goes to a human)", "decided")}


def apply_rule(rule_path: Path, table: Path, out: Path, *, fitted=None) -> None:
    """A saved triage or pairwise rule on every row of ``table``, written to ``out``: the
    one rule stage on the row engine (:class:`scoreband.decisions.rule.RuleStage`), so CSV
    / TSV cells come back byte for byte and a file is streamed chunk by chunk. The one path
    of ``triage --apply`` and ``apply --calibrator RULE``; ``fitted``: the rule just fitted
    (read once: the file is not read again)."""
    from scoreband.api import load_rule
    from scoreband.cli._rows import run_stage

    if fitted is None:
        _check_apply_out(out, None, None)
    rule = fitted if fitted is not None else load_rule(rule_path)
    kind = rule.kind
    noun, action, count = _SAID[kind]
    # every rule kind's row job (rule.job: api.JOBS "triage", "pairwise-rule", "cascade")
    # runs the one rule stage; a Ray actor reads the file, a local run gets the rule read here
    run, stage = run_stage(table, out, rule.job,
                           {"rule": str(rule_path)}, None,
                           local={"rule": rule, "source": rule_path, "on_warning": warn})
    report_rows(stage.errors, run.rows, action=action)
    if stage.judged == 0:
        fail(f"no row of {str(table)!r} could be triaged (see the reasons above)"
             if kind == "triage" else
             f"no pair of {str(table)!r} could be judged (see the reasons above; "
             f"{plain(out)} lists them in column {rule.error_column!r})")
    n, k = run.rows, stage.counts.get(count, 0)
    bad, ood = n - stage.judged, stage.counts.get("out_of_domain", 0)
    if kind == "triage":
        console.print(f"trusted {k:,} of {n:,} rows ({k / max(n, 1):.1%}); escalate the "
                      f"other {n - k:,}" + (f" ({ood:,} of them outside the rule's domain)"
                                            if ood else "") + f" -> {plain(out)}")
    else:
        console.print(f"decided {k:,} of {n:,} {noun} ({k / max(n, 1):.1%}); the other "
                      f"{n - k:,} go to a human"
                      + (f" ({bad:,} of them could not be judged)" if bad else "")
                      + f" -> {plain(out)}")


def _print_rule(res) -> None:
    """The fitted rule's summary, readable at 80 columns (short headers, a legend)."""
    rule, rep = res.rule, res.report
    t = Table(title=f"trust or escalate: off by more than {rule.tolerance:g} at most "
                    f"{share_text(rule.alpha)} of kept scores, with probability "
                    f"{complement_text(rule.delta)}")
    for c in ("group", "cal. rows", "threshold", "kept", "risk kept", "risk all"):
        t.add_column(c, justify="left" if c == "group" else "right", overflow="fold",
                     no_wrap=c != "group")
    for _, v in res.table().iterrows():
        r, aa = v["risk"], v["accept-all risk"]
        t.add_row(plain(v["group"]), str(v["calibration rows"]), f"{v['threshold']:.4g}",
                  f"{v['accepted']:.1%}", "-" if r is None or r != r else f"{r:.3f}",
                  "-" if aa is None or aa != aa else f"{aa:.3f}")
    console.print(t)
    console.print("kept: share of the calibration rows trusted; risk kept / all: share off "
                  "by more than the tolerance among the kept rows / among all rows")
    ch = rep["uncertainty_choice"]
    console.print(f"uncertainty: {ch['chosen']} (expected share kept on the training share: "
                  + ", ".join(f"{k} {v:.2f}" for k, v in ch["training_share_accepted"].items())
                  + f"); map: {rule.map.kind}", soft_wrap=False)
    console.print(f"accepting every score would be off by more than {rule.tolerance:g} for "
                  f"{rep['accept_all_risk']:.1%} of the calibration rows")


def _fit_pairs(labeled, label_col, votes, feature, probs, alpha, delta, groups, seed, out,
               apply_table, knobs):
    """Fit a pairwise rule (the labeled table read as written: a group named ``01`` stays
    ``01``, as the apply reads it), save it and print its summary; a table to apply that
    lacks the rule's columns is refused before the fit."""
    from scoreband.api import fit_pairwise_triage, read_table

    need("fitting a rule", out=out)
    exactly_one("the human preference", label_col=label_col, votes=votes)
    exactly_one("the verdict model", feature=split_columns(feature) or None, probs=probs)
    cols = split_columns(feature) or split_columns([probs])
    if apply_table is not None:  # refused now, not after the fit
        _check_pair_table(apply_table, cols, groups)
    df = read_table(labeled, text=True)
    fitted = fit_pairwise_triage(
        df, label_col=label_col, votes=split_columns([votes]) if votes else None,
        features=split_columns(feature) or None, probs=cols if probs else None,
        alpha=alpha, delta=delta, set_alpha=knobs["set_alpha"], set_method=knobs["sets"],
        groups=groups, train_frac=knobs["train_frac"], seed=seed,
        start=knobs["start"] or "first", symmetric=not knobs["asymmetric"])
    report_rows(fitted.errors, len(df))
    for w in fitted.warnings:
        warn(w)
    fitted.save(out)
    _print_pair_rule(fitted)
    console.print(f"wrote {plain(out)}")
    return fitted


def _check_pair_table(table: Path, columns: list[str], groups: str | None) -> None:
    """Refuse, before a rule is fitted, a table to decide that lacks the rule's columns or
    already has one of the columns the rule adds (never overwritten)."""
    from scoreband.api import PAIR_COLUMNS, check_added_columns, iter_chunks, table_columns

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


def _print_pair_rule(rule) -> None:
    rep = rule.report
    t = Table(title=f"pairwise verdicts: at most {share_text(rule.alpha)} of decided pairs "
                    f"wrong, with probability {complement_text(rule.delta)}")
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
