"""The HTML report's section for ``scoreband systems``: a verdict, a forest plot of every
system's estimate with its PPI++ and labels-alone intervals, the pairwise matrix and the
label plan."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from scoreband.report.blocks import fig_block, fmt, pyplot, svg, table_block
from scoreband.report.schema import NonEmpty, Pair, ScaleM, StrictModel
from scoreband.report.sections import ReportSection
from scoreband.textsafe import complement_text
from scoreband.textsafe import fig as label

__all__ = ["systems_section", "DEFINITIONS", "SystemsDoc", "REPORT_SECTION"]

DEFINITIONS = [
    ("PPI++ interval", "Prediction-powered confidence interval of a system's mean human "
                       "score: the metric's mean over every row of the system, corrected by "
                       "the mean error of the metric on the labeled rows (power-tuned weight "
                       "lambda in [0, 1]; lambda = 0 is the labels alone). A Student-t "
                       "interval that assumes the labeled rows are a random sample (or drawn "
                       "with the recorded inclusion probabilities); the metric's quality "
                       "changes its width, not its coverage; narrower when the metric tracks "
                       "the humans."),
    ("cross-fitting", "The metric-to-human map is fitted on other folds of the labeled rows "
                      "than the ones it corrects, so no label both fits and rectifies it."),
    ("effective labels", "How many labels drawn uniformly the labels-alone interval would "
                         "need to be as narrow as this interval: n x (classical width / PPI++ "
                         "width)^2; with labels drawn by a design, the design-weighted label "
                         "variance over the interval's squared standard error (the JSON's "
                         "design_effective_labels is Kish's count of the weights)."),
    ("paired difference", "Two systems compared on the items labeled for both, as the mean "
                          "of the per-item difference, when enough items are (see "
                          "pairing_reason); unpaired: the difference of the two means, their "
                          "variances added."),
    ("Holm-adjusted p-value", "The pairwise p-values adjusted so that the chance of any false "
                              "'A differs from B' over all pairs is at most alpha."),
    ("rank set", "The ranks a system can hold given the significant pairwise differences: "
                 "all rank sets hold together with probability at least 1 - alpha."),
]


def _forest(doc: dict) -> str:
    plt = pyplot()
    rank = doc["ranking"][::-1]
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(rank) + 1.2))
    for i, r in enumerate(rank):
        s = doc["systems"][r["system"]]
        c = s["classical"]
        ax.plot(c["ci"], [i - 0.15] * 2, color="0.6", lw=2)
        ax.plot(s["ci"], [i + 0.15] * 2, color="C0", lw=3)
        ax.plot([s["estimate"]], [i + 0.15], "o", color="C0")
        ax.plot([c["estimate"]], [i - 0.15], "o", color="0.6", ms=4)
    ax.set_yticks(range(len(rank)), [label(r["system"]) for r in rank])
    ax.set_xlabel(f"mean human score ({doc['scale']['lo']:g}-{doc['scale']['hi']:g})")
    ax.plot([], [], color="C0", lw=3, label=label(doc["method"]))
    ax.plot([], [], color="0.6", lw=2, label="labels alone")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return svg(fig)


def systems_section(doc: dict) -> dict:
    level = complement_text(doc['alpha'])
    best = doc["ranking"][0]
    sig = [p for p in doc["pairs"] if p["significant"]]
    surely_first = best["ranks"] == [1, 1]
    verdict = (f"{best['system']} has the highest estimated mean human score "
               f"({best['estimate']:.2f}, {level} interval {best['ci'][0]:.2f}-"
               f"{best['ci'][1]:.2f}); "
               + ("it is first with family-wise confidence " + level if surely_first else
                  f"it may rank {best['ranks'][0]}-{best['ranks'][1]}")
               + f"; {len(sig)} of {len(doc['pairs'])} pairs differ (Holm, alpha "
               f"{doc['alpha']:g}).")
    blocks = [fig_block(_forest(doc), f"Each system's mean human score: {doc['method']} interval "
                                 f"(blue) and the labels-alone interval (grey), {level}.")]
    rows = []
    for r in doc["ranking"]:
        s = doc["systems"][r["system"]]
        lo, hi = r["ranks"]
        rows.append([r["system"], f"{lo}" if lo == hi else f"{lo}-{hi}",
                     f"{s['n_labeled']} / {s['n_unlabeled']}", fmt(s["estimate"]),
                     f"{fmt(s['ci'][0])}-{fmt(s['ci'][1])}",
                     f"{fmt(s['classical']['ci'][0])}-{fmt(s['classical']['ci'][1])}",
                     fmt(s["effective_labels"], 0), fmt(s["lambda"], 2)])
    blocks.append(table_block(["system", "ranks", "labeled / unlabeled", "estimate",
                          f"{level} interval", "labels alone", "effective labels", "lambda"],
                         rows, "Systems"))
    names = [r["system"] for r in doc["ranking"]]
    cell = {}
    for p in doc["pairs"]:
        for a, b, sign in ((p["a"], p["b"], 1), (p["b"], p["a"], -1)):
            lo, hi = sorted((sign * p["ci"][0], sign * p["ci"][1]))
            mark = " *" if p["significant"] else ""
            cell[a, b] = f"{sign * p['estimate']:+.2f} [{lo:+.2f}, {hi:+.2f}]{mark}"
    blocks.append(table_block(["row - column", *names],
                         [[a, *(cell.get((a, b), "") for b in names)] for a in names],
                         f"Pairwise differences ({level} intervals; * Holm-adjusted p < "
                         f"{doc['alpha']:g}; paired on shared items where marked in the JSON)"))
    if doc.get("plan"):
        blocks.append(table_block(["system", f"labels for width {doc['plan']['width']:g} (PPI++)",
                              "labels alone"],
                             [[s, v["ppi++"] if v["ppi++"] is not None else "unreachable",
                               v["classical"]] for s, v in doc["plan"]["systems"].items()],
                             "Label plan"))
    if doc.get("warnings") or doc.get("skipped_rows"):
        blocks.append(table_block(["note"], [[w] for w in doc.get("warnings", [])]
                             + [[f"skipped: {e}"] for e in doc.get("skipped_rows", [])[:50]],
                             "Notes"))
    return {"title": "systems: which system is better", "verdict": verdict, "blocks": blocks}


# ------------------------------------------------------------------ the keys it reads
class Classical(StrictModel):
    estimate: float
    ci: Pair


class SystemM(StrictModel):
    estimate: float
    ci: Pair
    classical: Classical
    n_labeled: Any
    n_unlabeled: Any
    effective_labels: float | None
    lambda_: float | None = Field(alias="lambda")


class Ranked(StrictModel):
    system: str
    estimate: float
    ci: Pair
    ranks: Annotated[list[int], Field(min_length=2, max_length=2)]


class PairM(StrictModel):
    a: str
    b: str
    estimate: float
    ci: Pair
    significant: bool


class PlanSystem(StrictModel):
    ppi: int | None = Field(alias="ppi++")
    classical: Any


class Plan(StrictModel):
    width: float
    systems: dict[str, PlanSystem]


def ranked_systems_known(doc):
    """A ranking document's check (systems and pairwise-systems alike): every ranked system
    is one of its ``systems``. Returns the document (a pydantic after-validator)."""
    for r in doc.ranking:
        if r.system not in doc.systems:
            raise ValueError(f"ranking names system {r.system!r}, not in 'systems'")
    return doc


class SystemsDoc(StrictModel):
    alpha: float
    method: str
    scale: ScaleM
    ranking: Annotated[list[Ranked], NonEmpty]
    systems: dict[str, SystemM]
    pairs: list[PairM]
    plan: Plan | None = None
    warnings: list[Any] = []
    skipped_rows: list[Any] = []

    @model_validator(mode="after")
    def _known(self):
        return ranked_systems_known(self)



REPORT_SECTION = ReportSection(systems_section, DEFINITIONS, lambda: SystemsDoc)
