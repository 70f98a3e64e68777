"""The judge-uncertainty protocol (Sheng et al., analysing the uncertainty of LLM-as-a-judge) on judge log-probs: methods x Mondrian x boundary adjustment x
fusion over repeated 50/50 splits, and the per-task reliability map."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Annotated

import numpy as np
from scipy import stats

from scoreband import metrics as M
from scoreband.conformal import METHODS as CALIBRATION_METHODS
from scoreband.conformal import Mondrian, adjust_band
from scoreband.conformal.boundary import check_on_grid
from scoreband.datatypes import Predictions, Scale
from scoreband.errors import InputError, RowError
from scoreband.evaluation import resplits, summarize
from scoreband.logprobs import expected_score, max_prob
from scoreband.metrics import binomial_ci
from scoreband.report.blocks import bar_figure, fig_block, fmt, mean_std, table_block
from scoreband.report.result import StudyResult
from scoreband.report.sections import ReportSection
from scoreband.textsafe import md

__all__ = ["run", "reliability_map", "unreliable", "USABLE", "COMPARE", "COMPARE_HOW",
           "PROTOCOL_METHODS", "judges_from_table", "simulated_judges",
           "best_judge_method", "judge_section", "REPORT_SECTION"]

#: the calibration methods the protocol compares (Sheng et al.): names of
#: :data:`scoreband.conformal.METHODS`, built through that registry
PROTOCOL_METHODS = ("split", "cqr", "chr", "r2ccp")
_unknown = [m for m in PROTOCOL_METHODS if m not in CALIBRATION_METHODS]
if _unknown:  # a method renamed in the registry must be renamed here
    raise ImportError(f"judge study: {_unknown} are not registered calibration methods")


def _make(method: str, alpha: float, scale: Scale, mondrian: bool, seed: int, epochs: int):
    """The registry's ``method`` (each takes the options its class declares: a seed for the
    learned ones, ``epochs`` for R2CCP), Mondrian by task when asked."""
    base = CALIBRATION_METHODS.create(method, alpha, scale=scale, seed=seed, epochs=epochs)
    return Mondrian(base) if mondrian else base


#: a task's recommendation where its bands are narrow enough to use the scores as they are
USABLE = "absolute scores usable"
#: where they are not: the sources' advice (judges rank better than they score), with the
#: commands that do it
COMPARE = ("compare instead: scoreband pairs, judge --pairwise, triage --pairwise, "
           "systems --pairwise")
#: the same advice in a sentence, for captions and the markdown
COMPARE_HOW = ("compare instead of scoring: `scoreband pairs` turns a score table into pairs "
               "of systems on the same item, `scoreband judge --pairwise` asks the judge which "
               "of two responses is better (both orders, position bias measured), "
               "`scoreband triage --pairwise` decides the pairs it can with a guaranteed "
               "error rate, `scoreband systems --pairwise` ranks the systems with intervals")


def unreliable(recommendation: str) -> bool:
    """Whether a reliability-map recommendation says the absolute scores are not to be used
    (also the former wording, "use pairwise ranking", of older results files)."""
    return recommendation != USABLE


def reliability_map(per_task: dict, k: int, threshold: float = 0.5) -> dict:
    """Add RSG and a recommendation per task; ``threshold`` is the width (share of the
    K-point range) above which absolute scores are not to be trusted."""
    out = {}
    for t, v in per_task.items():
        w = v["mean_width"]
        rsg = M.ranking_scoring_gap(v["pearson"], w, k) if not np.isnan(v["pearson"]) else np.nan
        out[t] = {**v, "rsg": rsg,
                  "recommendation": COMPARE if w > threshold * (k - 1) else USABLE}
    return dict(sorted(out.items(), key=lambda kv: kv[1]["mean_width"]))


def run(judges: dict[str, np.ndarray], y01: np.ndarray, tasks: np.ndarray,
        n_ratings, *, scale: Scale, seeds: int = 10, alpha: float = 0.1,
        cal_frac: float = 0.5, r2ccp_epochs: int = 100, threshold: float = 0.5,
        on_step: Callable[[str], None] | None = None,
        simulated: bool = False, map_method: str = "split") -> StudyResult:
    """Run the protocol. ``judges`` maps a name to its (n, K) score-token log-probs; a
    ``fusion`` judge (concatenated features) is added when there are several.

    The per-task reliability map is computed for split CP (a band around the judge's own
    expected score: can its absolute scores be used?) and for R2CCP (a band from a model
    re-learned on its log-probs); ``map_method`` picks the one reported as
    ``reliability_map`` and drawn, both are in ``reliability_maps``."""
    if map_method not in ("split", "r2ccp"):
        raise InputError(f"`map_method` {map_method!r}: choose split or r2ccp")
    step = on_step or (lambda m: None)
    # boundary adjustment onto the wrong grid destroys coverage: refuse it up front
    check_on_grid(y01, scale, n_ratings)
    k, preds = _judge_predictions(judges, n_ratings, y01)
    table: dict = {}
    maps: dict = {"split": {}, "r2ccp": {}}
    for name, pred in preds.items():
        for method in PROTOCOL_METHODS:
            for mondrian in (False, True):
                task_map = method in maps and mondrian and name in judges
                entry, per_task = _resplit_protocol(
                    pred, y01, tasks, n_ratings, judges[name] if task_map else None,
                    method=method, mondrian=mondrian, scale=scale, seeds=seeds, alpha=alpha,
                    cal_frac=cal_frac, r2ccp_epochs=r2ccp_epochs,
                    step=lambda i, name=name, method=method, mondrian=mondrian: step(
                        f"{name}, {method}{' + mondrian' if mondrian else ''}: "
                        f"resplit {i} of {seeds}"))
                table.setdefault(name, {})[f"{method}{'+mondrian' if mondrian else ''}"] = entry
                if per_task:
                    maps[method][name] = reliability_map(
                        {t: {k2: float(np.nanmean(v)) for k2, v in d.items()}
                         for t, d in per_task.items()}, k, threshold)
    agreement = {m: _order_agreement(v) for m, v in maps.items()}
    tasks_map = maps[map_method]
    doc = {"simulated": simulated, "alpha": alpha, "seeds": seeds, "n": len(y01), "k": k,
           "threshold": threshold, "methods": table, "map_method": map_method,
           "reliability_map": tasks_map, "reliability_maps": maps,
           "task_order_spearman": agreement[map_method],
           "task_order_spearman_by_method": agreement}
    from scoreband.report.figures import reliability_figure  # lazy: loads PIL, matplotlib

    return StudyResult("judge-study", doc, study_markdown(doc), [
        ("reliability_map.png", lambda p: reliability_figure(p, tasks_map, k))])


def _judge_predictions(judges: dict, n_ratings, y01) -> tuple[int, dict]:
    """``(K, predictions per judge)``: the expected score (labels 1..K span the scale) as
    the point, the log-probs as features; a ``fusion`` judge (concatenated features, the
    mean expected score) where there are several."""
    k = next(iter(judges.values())).shape[1]
    feats = dict(judges)
    if len(judges) > 1:
        feats["fusion"] = np.concatenate(list(judges.values()), axis=1)
    expected = {j: expected_score(lp) for j, lp in judges.items()}
    if "fusion" in feats:
        expected["fusion"] = np.mean(list(expected.values()), axis=0)
    nr_all = np.broadcast_to(np.asarray(n_ratings, dtype=float), np.shape(y01))
    return k, {name: Predictions((expected[name] - 1) / (k - 1), features=lp,
                                 n_ratings=nr_all) for name, lp in feats.items()}


def _resplit_protocol(pred, y01, tasks, n_ratings, logprobs, *, method: str, mondrian: bool,
                      scale: Scale, seeds: int, alpha: float, cal_frac: float,
                      r2ccp_epochs: int, step) -> tuple[dict, dict]:
    """One judge and method over the resplits: coverage and width (plain, boundary-adjusted,
    R2CCP's own set), the worst task's coverage; with the judge's ``logprobs``, the per-task
    measurements of the reliability map."""
    rec = {"plain": {"coverage": [], "width": []},
           "boundary": {"coverage": [], "width": []}, "worst_task_coverage": []}
    if method == "r2ccp":
        rec["set"] = {"coverage": [], "width": []}
    per_task: dict = {}
    for sp in resplits(len(y01), seeds, cal_frac):
        step(sp.seed + 1)  # a line per split: R2CCP on a few thousand items takes seconds
        cal, test = sp.cal, sp.test
        c = _make(method, alpha, scale, mondrian, sp.seed, r2ccp_epochs)
        c.fit(pred.take(cal), y01[cal], groups=tasks[cal])
        band = c.predict(pred.take(test), groups=tasks[test])
        nr = n_ratings[test] if np.ndim(n_ratings) else n_ratings
        for kind, b in (("plain", band), ("boundary", adjust_band(band, nr))):
            rec[kind]["coverage"].append(M.coverage(b.lo01, b.hi01, y01[test]))
            rec[kind]["width"].append(M.sharpness(b.lo, b.hi))
        if band.sets01 is not None:
            # R2CCP's own prediction set (a union of intervals), beside its hull
            rec["set"]["coverage"].append(M.set_coverage(band.sets01, y01[test]))
            rec["set"]["width"].append(M.set_length(band.sets01, scale.hi - scale.lo))
        b = adjust_band(band, nr)
        gc = M.group_coverage(b.lo01, b.hi01, y01[test], tasks[test])
        rec["worst_task_coverage"].append(min(v["coverage"] for v in gc.values()))
        if logprobs is not None:
            _add_task_measures(per_task, scale.from01(pred.median[test]), scale.from01(
                y01[test]), b, gc, tasks[test], max_prob(logprobs[test]))
    entry = {kind: {"coverage": summarize(v["coverage"]), "width": summarize(v["width"])}
             for kind, v in rec.items() if kind != "worst_task_coverage" and v["coverage"]}
    return entry | {"worst_task_coverage": summarize(rec["worst_task_coverage"])}, per_task


def _add_task_measures(per_task: dict, e, y, b, gc: dict, tasks, mp) -> None:
    """One split's measurements per task (native scale ``e`` / ``y``, the adjusted band
    ``b``, its coverage per task ``gc``, the judge's top probability ``mp``)."""
    for t in np.unique(tasks):
        m = tasks == t
        d = per_task.setdefault(str(t), {k2: [] for k2 in (
            "n", "exact_agreement", "pearson", "mean_width", "coverage", "overconfidence")})
        d["n"].append(int(m.sum()))
        d["exact_agreement"].append(M.exact_agreement(e[m], y[m]))
        d["pearson"].append(M.pearson(e[m], y[m]))
        d["mean_width"].append(float(np.mean(b.hi[m] - b.lo[m])))
        d["coverage"].append(gc[str(t)]["coverage"])
        d["overconfidence"].append(M.overconfidence_rate(mp[m]))


def simulated_judges(n: int = 2000, seed: int = 42) -> dict:
    """The SIMULATED judges of the embedded world on ``n`` items: the inputs of :func:`run`
    (``judges``, ``y01``, ``tasks``, ``n_ratings``, ``scale``)."""
    from scoreband.world import make_dataset  # lazy: loads PIL
    from scoreband.world.dataset import LIKERT  # lazy: loads PIL
    from scoreband.world.judges import SIMULATED_JUDGES, judge_logprobs  # lazy: loads PIL

    ds = make_dataset(n, seed, n_annotators=3, name="judged")
    return {"judges": {j.name: judge_logprobs(j, ds.true01, ds.tasks) for j in SIMULATED_JUDGES},
            "y01": ds.y01, "tasks": ds.tasks, "n_ratings": ds.n_ratings, "scale": LIKERT,
            "errors": []}


def judges_from_table(df, judges: list[str], *, scale: Scale, target=None, ratings=None,
                      task_col=None, n_ratings=None) -> dict:
    """Read judges' log-prob columns from a table. ``judges``: ``NAME=COLUMNS`` strings (a
    comma list or glob, in label order), one per judge. Returns the inputs of :func:`run`
    and the skipped rows (``errors``)."""
    from scoreband.columns import (  # lazy: loads pandas, pyarrow
        ColumnSpec,
        expand_columns,
        load_inputs,
    )

    if not judges:
        raise InputError("give at least one judge as NAME=COLUMNS (e.g. llava='logp_*')")
    parts = {}
    for spec in judges:
        name, eq, cols = spec.partition("=")
        if not eq or not name or not cols:
            raise InputError(f"judge {spec!r}: expected NAME=COLUMNS, e.g. llava='logp_*'")
        parts[name] = expand_columns(cols, df.columns)
    k = int(scale.hi - scale.lo + 1)
    for name, cols in parts.items():
        if len(cols) != k:
            raise InputError(f"judge {name}: {len(cols)} columns ({', '.join(cols)}) but the "
                             f"scale {scale.lo:g},{scale.hi:g} has K = {k} labels; give one "
                             "log-prob column per label")
    allcols = [c for cols in parts.values() for c in cols]
    inp = load_inputs(df, ColumnSpec(scale=scale, target=target, ratings=ratings,
                                     features=allcols, groups=task_col),
                      require_median=False, n_ratings=n_ratings)
    feats = inp.pred.features
    # a log-prob is at most 0: a positive one is a probability or a logit in the wrong column
    bad = np.flatnonzero((feats > 1e-6).any(axis=1))
    errors = list(inp.errors)
    for i in bad:
        j = int(np.argmax(feats[i] > 1e-6))
        errors.append(RowError(inp.row_ids[i], allcols[j],
                               f"log-prob {feats[i, j]:g} is above 0 (these columns must be "
                               "log-probabilities, e.g. judge's logp_*)", int(inp.rows[i])))
    keep = np.setdiff1d(np.arange(len(feats)), bad)
    out, at = {}, 0
    for name, cols in parts.items():
        out[name] = feats[keep, at:at + len(cols)]
        at += len(cols)
    # without a task column the table is one task: Mondrian is then the marginal band
    tasks = np.full(len(keep), "all") if inp.groups is None else inp.groups[keep].astype(str)
    if not len(keep):
        raise InputError("no row has valid log-probs (every row was skipped)")
    return {"judges": out, "y01": inp.y01[keep], "tasks": tasks,
            "n_ratings": inp.n_ratings[keep], "scale": scale, "errors": errors}


def _order_agreement(maps: dict) -> dict:
    """Spearman correlation of the task orderings (by width) between every pair of judges."""
    orders = {j: list(m) for j, m in maps.items()}
    names = list(orders)
    out = {}
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            a, b = orders[names[i]], orders[names[j]]
            out[f"{names[i]} vs {names[j]}"] = float(stats.spearmanr(
                [a.index(t) for t in a], [b.index(t) for t in a]).statistic)
    return out


def study_markdown(doc: dict) -> str:
    head = "SIMULATED judges (embedded world)" if doc["simulated"] else "judges"
    lines = [f"# Judge study: {head}, alpha = {doc['alpha']}, {doc['seeds']} seeds, "
             f"n = {doc['n']}", "",
             "Coverage and width of the band (for R2CCP: the hull of its set), with and without "
             "boundary adjustment; R2CCP's own set (a union of intervals) in the last columns. "
             "Widths on the native scale.", "",
             "| judge | method | coverage | width | coverage (boundary) "
             "| width (boundary) | worst task coverage | set coverage | set width |",
             "|---|---|---|---|---|---|---|---|---|"]
    for j, rows in doc["methods"].items():
        for m, v in rows.items():
            st = v.get("set")
            extra = (f"{st['coverage']['mean']:.3f} | {st['width']['mean']:.3f}" if st
                     else "- | -")
            lines.append(f"| {md(j)} | {md(m)} | {v['plain']['coverage']['mean']:.3f} | "
                         f"{v['plain']['width']['mean']:.3f} | "
                         f"{v['boundary']['coverage']['mean']:.3f} | "
                         f"{v['boundary']['width']['mean']:.3f} | "
                         f"{v['worst_task_coverage']['mean']:.3f} | {extra} |")
    names = {"split": "split CP around the judge's own score", "r2ccp": "R2CCP"}
    mm = doc.get("map_method", "split")
    for j, tasks in doc["reliability_map"].items():
        lines += ["", f"## Reliability map: {md(j)} ({names[mm]} + Mondrian by task + "
                      "boundary)",
                  "",
                  "| task | n | exact agreement | Pearson | width | coverage | RSG | "
                  "overconfidence | recommendation |", "|---|---|---|---|---|---|---|---|---|"]
        for t, v in tasks.items():
            lines.append(f"| {md(t)} | {v['n']:.0f} | {v['exact_agreement']:.3f} | "
                         f"{v['pearson']:.3f} | {v['mean_width']:.2f} | {v['coverage']:.3f} | "
                         f"{v['rsg']:.3f} | {v['overconfidence']:.2f} | {v['recommendation']} |")
    if any(unreliable(v["recommendation"]) for tasks in doc["reliability_map"].values()
           for v in tasks.values()):
        lines += ["", f"Where a task's band is wider than {doc['threshold']:.0%} of the "
                      f"scale, {COMPARE_HOW}."]
    lines += ["", "Spearman correlation of task orderings (by width): " + ", ".join(
        f"{md(k)} {v:.2f}" for k, v in doc["task_order_spearman"].items()), ""]
    other = [m for m in doc.get("reliability_maps", {}) if m != mm]
    for m in other:
        lines += [f"## Widths per task with {names[m]} + Mondrian (native scale)", "",
                  "| judge | " + " | ".join(md(t) for t in sorted(
                      next(iter(doc["reliability_maps"][m].values()), {}))) + " |",
                  "|---|" + "---|" * len(next(iter(doc["reliability_maps"][m].values()), {}))]
        for j, tasks in doc["reliability_maps"][m].items():
            lines.append(f"| {md(j)} | " + " | ".join(
                f"{tasks[t]['mean_width']:.2f} (cov {tasks[t]['coverage']:.2f})"
                for t in sorted(tasks)) + " |")
        lines += ["", "Spearman of task orderings: " + ", ".join(
            f"{md(k)} {v:.2f}" for k, v in doc["task_order_spearman_by_method"][m].items()), ""]
    return "\n".join(lines)


# ------------------------------------------------------------------ its report section
def best_judge_method(doc: dict) -> dict | None:
    """The narrowest (judge, method) of a judge study whose mean coverage reaches the target
    within its 95 % Clopper-Pearson interval (on the study's distinct items: the splits
    reuse them), or None. A method below its target is never named."""
    target, n = 1 - doc["alpha"], int(doc["n"])
    ok = []
    for j, ms in doc["methods"].items():
        for m, v in ms.items():
            cov = v["plain"]["coverage"]["mean"]
            ci = binomial_ci(int(round(cov * n)), n)
            if ci[1] >= target:
                ok.append({"judge": j, "method": m, "coverage": cov, "ci": ci, "n": n,
                           "width": v["plain"]["width"]["mean"]})
    return min(ok, key=lambda r: r["width"], default=None)


def judge_section(doc: dict) -> dict:
    """The judge study's section of the HTML report."""
    target, k, thr = 1 - doc["alpha"], doc["k"], doc["threshold"]
    rows, blocks = [], []
    for judge, methods in doc["methods"].items():
        for m, v in methods.items():
            rows.append([judge, m, mean_std(v["plain"]["coverage"]), mean_std(v["plain"]["width"]),
                         mean_std(v["boundary"]["coverage"]), mean_std(v["boundary"]["width"])])
    best = best_judge_method(doc)
    verdict = ("SIMULATED judges. " if doc.get("simulated") else "") + (
        f"Narrowest method whose coverage reaches {target:.0%} within its 95 % interval: "
        f"{best['judge']} / {best['method']} (coverage {best['coverage']:.3f}, interval "
        f"{best['ci'][0]:.3f}-{best['ci'][1]:.3f} on {best['n']} items; width "
        f"{best['width']:.2f} of {k - 1})." if best else
        f"No method's coverage reaches {target:.0%} within its 95 % interval.")
    for judge, tasks in doc["reliability_map"].items():
        names = list(tasks)
        widths = [tasks[t]["mean_width"] for t in names]
        colors = ["#9b2c2c" if unreliable(tasks[t]["recommendation"]) else "#2b6cb0"
                  for t in names]
        blocks.append(fig_block(bar_figure(names, widths, xlabel=f"mean band width (of {k - 1})",
                                       target=thr * (k - 1), colors=colors),
                           f"Reliability map of {judge}: tasks by band width; past the dashed "
                           f"threshold ({thr:.0%} of the scale, red) the absolute scores are "
                           f"unreliable: {COMPARE_HOW.replace('`', '')}."))
        blocks.append(table_block(["task", "n", "coverage", "width", "pearson", "RSG",
                              "recommendation"],
                             [[t, fmt(v["n"], 0), fmt(v["coverage"]), fmt(v["mean_width"], 2),
                               fmt(v["pearson"]), fmt(v["rsg"]), v["recommendation"]]
                              for t, v in tasks.items()], f"{judge}: per task"))
    blocks.append(table_block(["judge", "method", "coverage", "width", "coverage (boundary)",
                          "width (boundary)"], rows, "Methods (mean ± std over splits)"))
    return {"title": "judge study", "verdict": verdict, "blocks": blocks}


@cache
def report_schema():
    """The keys :func:`judge_section` reads (pydantic, loaded when a report is checked)."""
    from scoreband.report.schema import Measured, NonEmpty, StrictModel

    class PlainBand(StrictModel):
        coverage: Measured
        width: Measured


    class JudgeMethod(StrictModel):
        plain: PlainBand
        boundary: PlainBand


    class JudgeTask(StrictModel):
        n: float
        coverage: float
        mean_width: float
        pearson: float | None
        rsg: float | None
        recommendation: str


    class JudgeDoc(StrictModel):
        alpha: float
        k: int
        n: float
        threshold: float
        simulated: bool = False
        methods: dict[str, dict[str, JudgeMethod]]
        reliability_map: dict[str, Annotated[dict[str, JudgeTask], NonEmpty]]

    return JudgeDoc


REPORT_SECTION = ReportSection(judge_section, schema=report_schema)
