"""The report's sections are plugins: each results kind is one line of the registry naming
the module that renders it; the report knows no format."""

import pytest

from scoreband.report import html
from scoreband.report.sections import KINDS, ReportSection, kind_of, register_kind, section_of


def test_every_kind_names_a_module_with_its_section_and_schema():
    assert KINDS.names() == ["evaluate", "demo", "judge-study", "roundtrip-study", "stress",
                             "systems", "pairwise-systems", "triage", "pairwise-rule",
                             "monitor", "cascade-rule", "score-cascade-rule"]
    for kind in KINDS.names():
        s = section_of(kind)
        assert isinstance(s, ReportSection) and callable(s.build), kind
        assert s.schema is not None and s.schema().model_fields, kind


def test_kinds_are_told_apart_and_the_error_lists_them():
    assert kind_of({"after": {}, "theoretical_coverage": {}}) == "evaluate"
    assert kind_of({"format": "scoreband-triage-rule"}) == "triage"
    assert kind_of({"format": "scoreband-pairwise-rule"}) == "pairwise-rule"
    assert kind_of({"format": "scoreband-cascade-rule"}) == "cascade-rule"
    assert kind_of({"format": "scoreband-score-cascade-rule"}) == "score-cascade-rule"
    assert kind_of({"study": "pairwise-systems"}) == "pairwise-systems"
    with pytest.raises(ValueError, match=r"\(evaluate, demo, .*pairwise-systems, a triage "
                                         r"rule, a pairwise rule, a monitor run, a cascade rule or a score "
                                         r"cascade rule\): its key 'study' is 'bogus'"):
        kind_of({"study": "bogus"})


def test_the_report_renders_a_kind_it_was_never_told_about(monkeypatch, tmp_path):
    """A new study: its module (here a stand-in) and one registry line."""
    import sys
    import types

    mod = types.ModuleType("scoreband_test_study")
    mod.REPORT_SECTION = ReportSection(
        lambda doc: {"title": "toy study", "verdict": f"answer {doc['answer']}",
                     "blocks": []}, [("toy term", "what it means")])
    monkeypatch.setitem(sys.modules, "scoreband_test_study", mod)
    monkeypatch.setattr(KINDS, "_entries", dict(KINDS._entries))
    register_kind("toy", "scoreband_test_study", "toy")
    page = html.render_report([{"study": "toy", "answer": 42}])
    assert "toy study" in page and "answer 42" in page and "toy term" in page
