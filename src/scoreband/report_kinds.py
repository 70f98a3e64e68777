"""The results kinds ``scoreband report`` renders, one
:func:`~scoreband.report.sections.register_kind` line each: its name, the module owning its section (its ``REPORT_SECTION``), what writes it.

It lives on the face part (loaded by ``import scoreband``) so that the report, below the
studies and the decision rules, never names their modules itself.
"""

from __future__ import annotations

from scoreband.report.sections import register_kind

register_kind("evaluate", "scoreband.report.evaluate", "evaluate",
              keys=("after", "theoretical_coverage"))
register_kind("demo", "scoreband.studies.demo", "demo")
register_kind("judge-study", "scoreband.studies.judge", "judge-study")
register_kind("roundtrip-study", "scoreband.studies.roundtrip", "roundtrip-study")
register_kind("stress", "scoreband.studies.stress", "stress")
register_kind("systems", "scoreband.report.systems", "systems")
register_kind("pairwise-systems", "scoreband.pairwise.report", "pairwise-systems")
register_kind("triage", "scoreband.decisions.report", "a triage rule",
              marker={"format": "scoreband-triage-rule"})
register_kind("pairwise-rule", "scoreband.pairwise.rule_report", "a pairwise rule",
              marker={"format": "scoreband-pairwise-rule"})
register_kind("monitor", "scoreband.decisions.monitor", "a monitor run",
              marker={"format": "scoreband-monitor"})
register_kind("cascade-rule", "scoreband.decisions.cascade_report", "a cascade rule",
              marker={"format": "scoreband-cascade-rule"})
register_kind("score-cascade-rule", "scoreband.decisions.cascade_report",
              "a score cascade rule", marker={"format": "scoreband-score-cascade-rule"})
