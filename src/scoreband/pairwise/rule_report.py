"""The HTML report's section for a pairwise rule (``triage --pairwise --out rule.json``):
its guarantee in words, what it decides, and how it was calibrated, read from the rule file
alone (``scoreband report rule.json``)."""

from __future__ import annotations

import math
from functools import cache

from scoreband.report.blocks import fmt, table_block
from scoreband.report.sections import ReportSection

__all__ = ["pair_rule_section", "DEFINITIONS", "REPORT_SECTION"]

DEFINITIONS = [
    ("selective verdict", "A pair is given a verdict (A, B or tie) only where the verdict "
                          "model is confident enough; the others are left to a human."),
    ("error among decided", "The share of decided pairs whose verdict differs from the human "
                            "preference: at most the rule's risk with probability at least "
                            "1 - delta over the draw of the labeled pairs (Learn-then-Test, "
                            "fixed-sequence binomial tests)."),
    ("prediction set", "The verdicts {A, B, tie} the human preference may take for a pair, "
                       "holding it with probability at least 1 - set alpha (conformal, LAC "
                       "or APS; per group where the rule has groups)."),
]


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _share(v) -> str:
    x = _num(v)
    return "-" if not math.isfinite(x) else f"{x:.1%}"


def pair_rule_section(doc: dict) -> dict:
    """``{"title", "verdict", "blocks"}`` of a pairwise rule's JSON document."""
    rep = doc.get("report") or {}
    decided = doc.get("decided_share", rep.get("decided_share"))
    thr = _num(doc.get("threshold"))
    verdict = (f"Decides {_share(decided)} of the labeled pairs. {doc['guarantee']}"
               if thr != -math.inf else
               "Decides no pair: the first test did not reject at this risk with these "
               f"labels. {doc['guarantee']}")
    err = rep.get("error_among_decided_on_calibration")
    rows = [
        ["risk (alpha) / delta", f"{fmt(doc['risk'])} / {fmt(doc['delta'])}"],
        ["labeled pairs (training / threshold calibration)",
         f"{rep.get('n_labeled', '-')} ({rep.get('n_training', '-')} / "
         f"{rep.get('n_threshold_calibration', rep.get('n_calibration', '-'))})"],
        ["how pairs are ordered", str(doc.get("order", "-"))
         + (f"; {rep['threshold_calibration']}" if rep.get("threshold_calibration") else "")],
        ["threshold on the uncertainty", "-inf (none decided)" if thr == -math.inf
         else fmt(thr)],
        ["decided share (labeled pairs)", _share(decided)],
        ["error among decided (labeled pairs)", "-" if err is None else fmt(err)],
        ["accuracy deciding every pair", "-" if rep.get("accuracy_deciding_all") is None
         else fmt(rep["accuracy_deciding_all"])],
        [f"prediction sets ({str(doc.get('set_method', '')).upper()}, set alpha "
         f"{fmt(doc.get('set_alpha'))})",
         f"coverage {fmt(rep.get('set_coverage_on_calibration'))}, mean size "
         f"{fmt(rep.get('set_size_on_calibration'))} of {len(doc.get('classes') or [])}"],
    ]
    if rep.get("sets_fitted") is False:
        rows[-1][1] = ("not fitted: too few labeled pairs for the sets' model, every set "
                       "holds every verdict")
    labels = rep.get("labels") or {}
    if labels:
        rows.append(["human labels", ", ".join(f"{k} {v}" for k, v in labels.items())])
    if doc.get("groups_col"):
        rows.append(["sets per group of", str(doc["groups_col"])])
    blocks = [table_block(["", "value"], rows, "as fitted: every number is from the rule "
                                                "file")]
    warnings = [str(w) for w in doc.get("warnings") or []]
    if warnings:
        blocks.append(table_block(["warning"], [[w] for w in warnings], ""))
    return {"title": "pairwise verdicts", "verdict": verdict, "blocks": blocks}


@cache
def pair_rule_model():
    """The pydantic model of the keys :func:`pair_rule_section` reads."""
    from pydantic import BaseModel, ConfigDict

    class _M(BaseModel):
        model_config = ConfigDict(strict=True, extra="allow")

    class PairRuleDoc(_M):
        risk: float
        delta: float
        guarantee: str
        threshold: float | str
        set_alpha: float
        set_method: str
        report: dict

    return PairRuleDoc


#: the kind ``pairwise-rule`` of :mod:`scoreband.report.sections`
REPORT_SECTION = ReportSection(pair_rule_section, DEFINITIONS, pair_rule_model)
