"""Trust or escalate in a report and in the demo: the figure (risk and accepted share against
the threshold, the chosen one marked), an HTML fragment and a report section in the shape of
:mod:`scoreband.report.html`'s sections."""

from __future__ import annotations

import html as _html
import math
from functools import cache
from pathlib import Path

import numpy as np

from scoreband.report.sections import ReportSection
from scoreband.textsafe import fig as _fig

__all__ = ["triage_figure", "triage_html", "triage_section", "write_triage_html",
           "REPORT_SECTION"]


def _doc(rule) -> dict:
    """A rule's JSON document (a :class:`TriageRule`, a dict read from rule.json, or its
    path)."""
    if isinstance(rule, dict):
        return rule
    if isinstance(rule, (str, Path)):
        from scoreband.json_io import read_json

        return read_json(rule, what="triage rule")
    from scoreband.json_io import to_jsonable

    return to_jsonable(rule.to_dict())


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def triage_figure(rule):
    """A matplotlib figure: on the calibration rows, the risk among accepted items (left
    axis, the risk allowed (``--risk``, ``alpha``) dashed) and the share accepted (right axis) against the
    threshold on the uncertainty; the chosen threshold marked (none when nothing could be
    trusted). ``rule``: a :class:`TriageRule`, its JSON document or its path."""
    from scoreband.report.blocks import pyplot

    doc = _doc(rule)
    plt = pyplot()
    c = doc["report"]["curve"]
    thr = np.array([_num(v) for v in c["threshold"]])
    share = np.array([_num(v) for v in c["accepted_share"]])
    risk = np.array([_num(v) for v in c["risk"]])
    fin = np.isfinite(thr)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(thr[fin], risk[fin], color="C3", lw=2, label="risk among accepted")
    ax.axhline(doc["risk"], color="C3", ls="--", lw=1,
               label=f"risk allowed (--risk) = {doc['risk']:g}")
    ax.set_xlabel(f"threshold on the uncertainty ({_fig(doc['uncertainty'])})")
    ax.set_ylabel(f"P(off by > {doc['tolerance']:g})", color="C3")
    ax.set_ylim(0, max(0.05, float(np.nanmax(risk[fin], initial=0)) * 1.1,
                       doc["risk"] * 1.5))
    ax2 = ax.twinx()
    ax2.plot(thr[fin], share[fin], color="C0", lw=2, label="accepted share")
    ax2.set_ylabel("share accepted", color="C0")
    ax2.set_ylim(0, 1.02)
    for name, g in doc["groups"].items():
        t = _num(g["threshold"])
        if math.isfinite(t):
            ax.axvline(t, color="k", lw=1)
            label = "" if name == "(all)" else f"{_fig(name)}: "
            ax.annotate(f"{label}{g['accepted_share']:.0%} kept", (t, ax.get_ylim()[1]),
                        xytext=(3, -12), textcoords="offset points", fontsize=8)
        elif t == math.inf and fin.any():
            ax.axvline(thr[fin].max(), color="k", lw=1)
    lines = ax.get_lines()[:2] + ax2.get_lines()[:1]
    ax.legend(lines, [ln.get_label() for ln in lines], loc="center right", fontsize=8)
    ax.set_title("trust or escalate (calibration rows)", fontsize=10)
    fig.tight_layout()
    return fig


def _verdict(doc: dict) -> str:
    share = doc.get("accepted_share")
    share = doc["report"].get("accepted_share") if share is None else share
    return (f"Keep {share:.0%} of the judge's scores as they are and escalate the rest: "
            f"{doc['guarantee']} Accepting every score: off by more than "
            f"{doc['tolerance']:g} for {doc['accept_all_risk']:.0%} of the calibration rows.")


def _rows(doc: dict) -> list[list[str]]:
    rows = []
    for name, g in doc["groups"].items():
        r = g.get("risk_on_calibration")
        aa = g.get("accept_all_risk")
        rows.append([name, str(g["n_calibration"]), f"{_num(g['threshold']):.4g}",
                     f"{g['accepted_share']:.1%}", "-" if r is None else f"{r:.3f}",
                     "-" if aa is None else f"{aa:.3f}", g.get("note") or ""])
    return rows


HEADER = ["group", "calibration rows", "threshold", "accepted", "risk among accepted",
          "accept-all risk", "note"]


def triage_section(rule) -> dict:
    """The report section of a rule, shaped as :mod:`scoreband.report.html`'s sections
    (``{"title", "verdict", "blocks"}``)."""
    from scoreband.report.blocks import fig_block, svg, table_block

    doc = _doc(rule)
    return {"title": f"trust or escalate: {doc['report'].get('table', '')}".rstrip(": "),
            "verdict": _verdict(doc),
            "blocks": [fig_block(svg(triage_figure(doc)),
                            "Risk among the accepted calibration rows and the share accepted "
                            "against the threshold; the vertical line is the threshold "
                            "Learn-then-Test chose."),
                       table_block(HEADER, _rows(doc), f"uncertainty {doc['uncertainty']}, map "
                                                  f"{doc['map_kind']}, delta {doc['delta']:g}")]}


def triage_html(rule) -> str:
    """A self-contained HTML fragment (``<section>``): the verdict, the figure as inline
    SVG and the per-group table."""
    from scoreband.report.blocks import svg

    doc = _doc(rule)
    esc = _html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in HEADER)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>"
                   for r in _rows(doc))
    return (f'<section class="triage"><h2>Trust or escalate</h2><p>{esc(_verdict(doc))}</p>'
            f"{svg(triage_figure(doc))}<table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></section>")


def write_triage_html(rule, out) -> Path:
    """A standalone page with :func:`triage_html` (``scoreband triage --html``)."""
    from scoreband.files import atomic_write_text

    page = ("<!doctype html><html><head><meta charset='utf-8'><title>trust or escalate"
            "</title><style>body{font-family:sans-serif;max-width:52em;margin:2em auto}"
            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em}"
            "</style></head><body>" + triage_html(rule) + "</body></html>")
    atomic_write_text(Path(out), page)
    return Path(out)


# ------------------------------------------------------------------ for scoreband report
#: the terms the report's triage section uses (for its definitions list)
DEFINITIONS = [
    ("trust or escalate", "A judge's score is kept (trusted) where its uncertainty is at most a "
                          "threshold, and sent to a human otherwise."),
    ("risk among accepted", "The share of trusted items whose score is off the human score by "
                            "more than the tolerance."),
    ("Learn-then-Test", "The threshold is the last of a fixed sequence of binomial tests of "
                        "'the risk at this threshold exceeds the risk allowed (--risk)' that "
                        "all reject at level delta: the chosen threshold's risk is at most the "
                        "risk allowed with probability "
                        "at least 1 - delta over the labeled rows."),
    ("tolerance-aware map", "Near each score, the human score most often within the tolerance "
                            "(kept monotone): the value a kept score is read as."),
]


@cache
def triage_model():
    """The pydantic model of the keys :func:`triage_section` reads from a rule JSON (the
    report's check of a rule file, :mod:`scoreband.report.schema`)."""
    from typing import Literal

    from pydantic import BaseModel, ConfigDict, model_validator

    from scoreband.decisions.rulefile import TRIAGE_RULE_VERSION as RULE_VERSION

    class _M(BaseModel):
        model_config = ConfigDict(strict=True, extra="allow")

    Threshold = float | Literal["inf", "-inf"]  # noqa: N806 - a type

    class Curve(_M):
        threshold: list[Threshold]
        accepted_share: list[float]
        risk: list[float | None]

        @model_validator(mode="after")
        def _same_length(self):
            n = {len(self.threshold), len(self.accepted_share), len(self.risk)}
            if len(n) > 1:
                raise ValueError("its lists threshold, accepted_share and risk differ in "
                                 "length")
            return self

    class Report(_M):
        curve: Curve
        accepted_share: float

    class Group(_M):
        threshold: Threshold
        accepted_share: float
        n_calibration: int
        risk_on_calibration: float | None = None
        accept_all_risk: float | None = None

    class TriageDoc(_M):
        format_version: Literal[RULE_VERSION]  # another version: fit the rule again
        risk: float
        delta: float
        tolerance: float
        uncertainty: str
        map_kind: str
        guarantee: str
        accept_all_risk: float
        groups: dict[str, Group]
        report: Report

    return TriageDoc


#: the kind ``triage`` of :mod:`scoreband.report.sections`
REPORT_SECTION = ReportSection(triage_section, DEFINITIONS, triage_model)
