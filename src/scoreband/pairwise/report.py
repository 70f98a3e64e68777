"""The HTML report's section for ``scoreband systems --pairwise`` (results kind
``pairwise-systems``): the verdict, the win matrix
with intervals, every system's win rate and Bradley-Terry strength as a forest plot, and the
judge's position bias by task where the ranking document carries it
(:func:`position_bias_by_task` of the judged pair table)."""

from __future__ import annotations

import math
from functools import cache
from typing import Annotated

import numpy as np

from scoreband.report.blocks import bar_figure, fig_block, fmt, pyplot, svg, table_block
from scoreband.report.sections import ReportSection
from scoreband.textsafe import complement_text
from scoreband.textsafe import fig as label

__all__ = ["pairwise_section", "position_bias_by_task", "win_matrix", "DEFINITIONS",
           "REPORT_SECTION"]

DEFINITIONS = [
    ("win rate", "A system's mean preference over every pair it is in (a tie counts 1/2), "
                 "estimated from the judge's verdicts on all pairs rectified by the "
                 "human-labeled pairs (prediction-powered inference, PPI++)."),
    ("win matrix", "P(row preferred to column): from the pairs of the two systems "
                   "(head-to-head) or from their Bradley-Terry strengths; with its interval "
                   "at the ranking's level, * where the Holm-adjusted decision says they "
                   "differ."),
    ("Bradley-Terry strength", "beta with P(a beats b) = 1 / (1 + exp(-(beta_a - beta_b))), "
                               "the reference system's fixed at 0 (the last by name of those "
                               "with enough human-labeled pairs); prediction-powered "
                               "M-estimate with a sandwich-covariance normal interval."),
    ("skipped system", "A system none of whose pairs has a human preference: not ranked, "
                       "and its pairs left out of every estimate (the labels are then not "
                       "a random sample of the pairs, and the judge's bias on its pairs "
                       "could not be rectified). Label a random sample of its pairs."),
    ("position bias", "(p_AB(A) - p_BA(A)) / 2 of a pair judged in both orders: how much "
                      "more the judge prefers a response for being shown first (0: none). "
                      "Both orders are averaged, so it does not bias the verdicts; a large "
                      "one says the judge reads the order, not only the responses."),
]


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def win_matrix(doc: dict) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray,
                                   np.ndarray]:
    """``(names, p, lo, hi, significant)``: P(row preferred to column) for the systems in
    ranking order, its interval (NaN where the pair has none: too few labels) and the Holm
    decision. A head-to-head pair gives ``1/2 + estimate``; a Bradley-Terry one the sigmoid
    of the strength difference and of its normal interval."""
    from scipy.stats import norm  # lazy: scipy

    names = [r["system"] for r in doc["ranking"]]
    at = {s: i for i, s in enumerate(names)}
    k = len(names)
    p, lo, hi = (np.full((k, k), np.nan) for _ in range(3))
    sig = np.zeros((k, k), bool)
    z = float(norm.ppf(1 - doc["alpha"] / 2))
    for r in doc["pairs"]:
        if r.get("estimate") is None or r["a"] not in at or r["b"] not in at:
            continue
        i, j = at[r["a"]], at[r["b"]]
        est = r["estimate"]
        if r.get("scale") == "strength difference":
            se = r.get("se") or 0.0
            pij, lij, hij = _sigmoid(est), _sigmoid(est - z * se), _sigmoid(est + z * se)
        else:
            ci = r.get("ci")
            pij = 0.5 + est
            lij, hij = (0.5 + ci[0], 0.5 + ci[1]) if ci else (np.nan, np.nan)
        p[i, j], lo[i, j], hi[i, j] = pij, lij, hij
        p[j, i], lo[j, i], hi[j, i] = 1 - pij, 1 - hij, 1 - lij
        sig[i, j] = sig[j, i] = bool(r.get("significant"))
    return names, p, lo, hi, sig


def _matrix_figure(names, p, lo, hi, sig) -> str:
    plt = pyplot()
    k = len(names)
    fig, ax = plt.subplots(figsize=(1.15 * k + 2.2, 0.8 * k + 1.4))
    ax.imshow(np.where(np.isfinite(p), p, 0.5), cmap="RdBu", vmin=0, vmax=1)
    for i in range(k):
        for j in range(k):
            if i == j:
                continue
            if not np.isfinite(p[i, j]):
                ax.text(j, i, "-", ha="center", va="center", fontsize=8)
                continue
            band = (f"\n[{lo[i, j]:.2f}, {hi[i, j]:.2f}]" if np.isfinite(lo[i, j]) else
                    "\n(no interval)")
            ax.text(j, i, f"{p[i, j]:.2f}{' *' if sig[i, j] else ''}{band}", ha="center",
                    va="center", fontsize=7,
                    color="white" if abs(p[i, j] - 0.5) > 0.3 else "#1b1b1b")
    ax.set_xticks(range(k), [label(n) for n in names], rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(k), [label(n) for n in names], fontsize=8)
    ax.set_xlabel("column system")
    ax.set_ylabel("row system")
    ax.set_title("P(row preferred to column)", fontsize=9)
    return svg(fig)


def _forest_figure(doc: dict) -> str:
    plt = pyplot()
    rank = doc["ranking"][::-1]
    has_bt = any(r.get("strength") is not None for r in rank)
    fig, axes = plt.subplots(1, 2 if has_bt else 1, figsize=(9.6 if has_bt else 6.4,
                                                             0.45 * len(rank) + 1.3),
                             squeeze=False, sharey=True)
    ax = axes[0][0]
    for i, r in enumerate(rank):
        s = doc["systems"][r["system"]]
        c = s.get("classical")
        if c and c.get("ci"):
            ax.plot(c["ci"], [i - 0.15] * 2, color="0.6", lw=2)
        if s.get("ci"):
            ax.plot(s["ci"], [i + 0.15] * 2, color="C0", lw=3)
        if s.get("estimate") is not None:
            ax.plot([s["estimate"]], [i + 0.15], "o" if s.get("ci") else "x", color="C0")
    ax.axvline(0.5, color="#555", ls=":", lw=1)
    ax.set_yticks(range(len(rank)), [label(r["system"]) for r in rank])
    ax.set_xlabel("win rate (tie = 1/2)")
    ax.plot([], [], color="C0", lw=3, label=label(doc.get("method", "ppi++")))
    ax.plot([], [], color="0.6", lw=2, label="labels alone")
    ax.legend(loc="lower right", fontsize=8)
    if has_bt:
        ax = axes[0][1]
        for i, r in enumerate(rank):
            s = doc["systems"][r["system"]]
            if s.get("strength") is None:
                continue
            if s.get("strength_ci"):
                ax.plot(s["strength_ci"], [i] * 2, color="C2", lw=3)
            ax.plot([s["strength"]], [i], "o", color="C2")
        ax.axvline(0, color="#555", ls=":", lw=1)
        ref = doc.get("bradley_terry_reference")
        ax.set_xlabel("Bradley-Terry strength" + (f" ({label(ref)} = 0)" if ref else ""))
    fig.tight_layout()
    return svg(fig)


def position_bias_by_task(df, *, task_col: str | None = "task",
                          bias_col: str = "pair_position_bias", alpha: float = 0.05) -> dict:
    """The judge's position bias per task of a judged pair table (``judge-pairs`` writes
    ``pair_position_bias``): per task its rows, mean and ``1 - alpha`` Student-t interval;
    one task ``all`` without ``task_col``. Rows without a bias (a failed pair) are left out.
    The value of ``doc["position_bias"]`` the section draws.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"task": ["a"] * 4 + ["b"] * 4,
    ...                    "pair_position_bias": [0.1, 0.12, 0.08, 0.1, 0, 0.01, -0.01, 0]})
    >>> r = position_bias_by_task(df)
    >>> round(r["tasks"]["a"]["mean"], 3), r["tasks"]["b"]["n"]
    (0.1, 4)
    """
    import pandas as pd  # lazy: pandas
    from scipy.stats import t as student  # lazy: scipy

    b = pd.to_numeric(df[bias_col], errors="coerce")
    tasks = (df[task_col].astype(str) if task_col is not None and task_col in df.columns
             else pd.Series("all", index=df.index))
    out = {}
    for task, v in b.groupby(tasks, sort=True):
        v = v[np.isfinite(v)].to_numpy(float)
        if not len(v):
            continue
        m = float(v.mean())
        h = (float(student.ppf(1 - alpha / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))
             if len(v) > 1 else math.inf)
        out[str(task)] = {"n": int(len(v)), "mean": m, "ci": [m - h, m + h]}
    return {"column": bias_col, "task_col": task_col, "alpha": alpha, "tasks": out}


def pairwise_section(doc: dict) -> dict:
    """The ``pairwise-systems`` section of the HTML report."""
    level = complement_text(doc['alpha'])
    best = doc["ranking"][0]
    sig = [p for p in doc["pairs"] if p.get("significant")]
    est = "-" if best.get("estimate") is None else f"{best['estimate']:.2f}"
    ci = best.get("ci")
    verdict = (f"{best['system']} has the highest win rate ({est}"
               + (f", {level} interval {ci[0]:.2f}-{ci[1]:.2f}" if ci else ", no interval")
               + "); " + ("it is first with family-wise confidence " + level
                          if best["ranks"] == [1, 1] else
                          f"it may rank {best['ranks'][0]}-{best['ranks'][1]}")
               + f"; {len(sig)} of {len(doc['pairs'])} pairs of systems differ (Holm, alpha "
               f"{doc['alpha']:g}), from {doc.get('n_labeled_pairs', '?')} human-labeled of "
               f"{doc.get('n_pairs', '?')} judged pairs.")
    names, p, lo, hi, sg = win_matrix(doc)
    by = doc.get("by", "head-to-head")
    blocks = [fig_block(_matrix_figure(names, p, lo, hi, sg),
                        f"Win matrix: P(row preferred to column) with its {level} interval "
                        f"({by}; * the Holm-adjusted decision says the two differ). Blue: the "
                        "row system wins, red: it loses."),
              fig_block(_forest_figure(doc),
                        f"Each system's win rate ({doc.get('method', 'ppi++')}, blue; labels "
                        f"alone, grey; {level}) and, where fitted, its Bradley-Terry strength "
                        "(green, normal interval).")]
    rows = []
    for r in doc["ranking"]:
        s = doc["systems"][r["system"]]
        lo_r, hi_r = r["ranks"]
        rows.append([r["system"], f"{lo_r}" if lo_r == hi_r else f"{lo_r}-{hi_r}",
                     f"{s['n_labeled']} / {s['n_unlabeled']}", fmt(s.get("estimate")),
                     f"{fmt(s['ci'][0])}-{fmt(s['ci'][1])}" if s.get("ci") else "-",
                     fmt(s.get("strength"), 2),
                     f"{fmt(s['strength_ci'][0], 2)}-{fmt(s['strength_ci'][1], 2)}"
                     if s.get("strength_ci") else "-"])
    blocks.append(table_block(["system", "ranks", "labeled / unlabeled pairs", "win rate",
                               f"{level} interval", "BT strength", "BT interval"], rows,
                              "Systems"))
    cell = [[names[i], *("" if i == j else "-" if not np.isfinite(p[i, j]) else
                         f"{p[i, j]:.2f}" + (f" [{lo[i, j]:.2f}, {hi[i, j]:.2f}]"
                                             if np.isfinite(lo[i, j]) else "")
                         + (" *" if sg[i, j] else "") for j in range(len(names)))]
            for i in range(len(names))]
    blocks.append(table_block(["row vs column", *names], cell,
                              f"P(row preferred to column), {level} intervals"))
    pb = doc.get("position_bias")
    if pb and pb.get("tasks"):
        t = pb["tasks"]
        tasks = list(t)
        finite = [v["ci"] if all(map(math.isfinite, v["ci"])) else [v["mean"], v["mean"]]
                  for v in t.values()]
        blocks.append(fig_block(
            bar_figure(tasks, [t[k]["mean"] for k in tasks], intervals=finite,
                       xlabel="position bias (p_AB(A) - p_BA(A)) / 2",
                       colors=["#9b2c2c" if abs(t[k]["mean"]) >= 0.05 else "#2b6cb0"
                               for k in tasks]),
            f"The judge's position bias by task (mean over the task's pairs, "
            f"{1 - pb.get('alpha', 0.05):.0%} interval; red: 0.05 or more). Judging both "
            "orders cancels it in the verdicts."))
        blocks.append(table_block(["task", "pairs", "position bias", "interval"],
                                  [[k, v["n"], fmt(v["mean"]),
                                    f"{fmt(v['ci'][0])}-{fmt(v['ci'][1])}"]
                                   for k, v in t.items()], "Position bias by task"))
    if doc.get("skipped_systems"):
        blocks.append(table_block(["system", "pairs", "why"],
                                  [[k, v.get("n_pairs"), v.get("reason")]
                                   for k, v in doc["skipped_systems"].items()],
                                  "Systems not ranked"))
    if doc.get("warnings") or doc.get("skipped_rows"):
        blocks.append(table_block(["note"], [[w] for w in doc.get("warnings", [])]
                                  + [[f"skipped: {e}"] for e in
                                     doc.get("skipped_rows", [])[:50]], "Notes"))
    return {"title": "pairwise: which system wins", "verdict": verdict, "blocks": blocks}


@cache
def report_schema():
    """The keys :func:`pairwise_section` reads (pydantic, loaded when a report is
    checked)."""
    from pydantic import Field, model_validator

    from scoreband.report.schema import NonEmpty, Pair, StrictModel
    from scoreband.report.systems import ranked_systems_known

    class Classical(StrictModel):
        ci: Pair | None = None

    class System(StrictModel):
        n_labeled: int
        n_unlabeled: int
        estimate: float | None
        ci: Pair | None = None
        classical: Classical | None = None
        strength: float | None = None
        strength_ci: Pair | None = None

    class Ranked(StrictModel):
        system: str
        estimate: float | None
        ci: Pair | None = None
        ranks: Annotated[list[int], Field(min_length=2, max_length=2)]

    class PairRec(StrictModel):
        a: str
        b: str
        estimate: float | None
        ci: Pair | None = None
        se: float | None = None
        significant: bool
        scale: str | None = None

    class TaskBias(StrictModel):
        n: int
        mean: float
        ci: Pair

    class Bias(StrictModel):
        tasks: dict[str, TaskBias]

    class PairwiseDoc(StrictModel):
        alpha: float
        ranking: Annotated[list[Ranked], NonEmpty]
        systems: dict[str, System]
        pairs: list[PairRec]
        position_bias: Bias | None = None
        warnings: list = []
        skipped_rows: list = []
        skipped_systems: dict[str, dict] = {}

        @model_validator(mode="after")
        def _known(self):
            return ranked_systems_known(self)

    return PairwiseDoc


#: the kind ``pairwise-systems`` of :mod:`scoreband.report.sections`
REPORT_SECTION = ReportSection(pairwise_section, DEFINITIONS, report_schema)
