"""The report section of a cascade rule (``scoreband report cascade.json``): a cascade of
answer / pair judges (``scoreband cascade --rule-out``, ``triage --pairwise --cascade``) or of
score judges (``triage --cascade``). Every number is read from the rule file."""

from __future__ import annotations

import math
from functools import cache

from scoreband.report.blocks import fmt, table_block
from scoreband.report.sections import ReportSection

__all__ = ["cascade_section", "DEFINITIONS", "REPORT_SECTION"]

DEFINITIONS = [
    ("cascade", "Judges in order, cheapest first: a row is decided by the first judge whose "
                "stated error is at most the rule's threshold, and goes to a human when none "
                "is."),
    ("one guarantee", "Among all the rows any judge decides, the error is at most the rule's "
                      "risk with probability at least 1 - delta over the draw of the labeled "
                      "rows: one Learn-then-Test chain over every stage, no stage spending its "
                      "own delta."),
    ("joint view", "A judge's stated error given the judges before it: where they agree it "
                   "is smaller (agreement as an uncertainty)."),
]


def _share(v) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return "-"
    return "-" if not math.isfinite(x) else f"{x:.1%}"


def cascade_section(doc: dict) -> dict:
    """``{"title", "verdict", "blocks"}`` of a cascade rule's JSON document."""
    rep = doc.get("report") or {}
    judges = [str(j.get("name", "?")) for j in doc.get("judges") or [] if isinstance(j, dict)]
    scores = doc.get("format") == "scoreband-score-cascade-rule"
    guarantee = str(doc.get("guarantee") or rep.get("guarantee") or "")
    decided = rep.get("decided_share")
    verdict = (f"Judges decide {_share(decided)} of the labeled rows. {guarantee}"
               if doc.get("stages") else
               f"No judge decides: no configuration passed the test with these labels. "
               f"{guarantee}")
    costs = doc.get("costs") or [None] * len(judges)
    shares = rep.get("shares_on_calibration") or {}
    stages = [judges[i] for i in doc.get("stages") or [] if 0 <= i < len(judges)]
    rows = [[name, "-" if c is None else fmt(c), "yes" if name in stages else "no",
             _share(shares.get(name))] for name, c in zip(judges, costs, strict=False)]
    human = doc.get("human_cost") or 0
    rows.append(["human", fmt(human) if human or doc.get("costs") else "-", "-",
                 _share(shares.get("human"))])
    cost = rep.get("judge_cost_per_row")
    caption = (f"risk {fmt(doc.get('risk'))}, delta {fmt(doc.get('delta'))}"
               + (f", tolerance {fmt(doc.get('tolerance'))}" if scores else "")
               + f"; stated error: {rep.get('uncertainty', doc.get('view', '-'))}"
               + ("" if cost is None else f"; judge cost per row {fmt(cost)}"))
    blocks = [table_block(["stage", "cost per row", "may decide", "share of labeled rows"],
                          rows, caption)]
    return {"title": "cascade of score judges" if scores else "cascade of judges",
            "verdict": verdict, "blocks": blocks}


@cache
def cascade_model():
    """The pydantic model of the keys :func:`cascade_section` reads."""
    from pydantic import BaseModel, ConfigDict

    class _M(BaseModel):
        model_config = ConfigDict(strict=True, extra="allow")

    class Judge(_M):
        name: str

    class CascadeDoc(_M):
        risk: float
        delta: float
        judges: list[Judge]
        stages: list[int]
        report: dict

    return CascadeDoc


#: the kinds ``cascade-rule`` and ``score-cascade-rule`` of :mod:`scoreband.report.sections`
REPORT_SECTION = ReportSection(cascade_section, DEFINITIONS, cascade_model)
