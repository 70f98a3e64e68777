"""Reports define the paper's names they print, and a width figure says what it shows."""

import numpy as np

from scoreband.report.html import _definitions


def test_a_demo_report_defines_its_heads_and_what_a_no_means():
    terms = dict(_definitions([{"study": "demo"}]))
    for head in ("chained_ci", "unconstrained_pinball", "chained_pinball", "mc_dropout",
                 "claim marked no", "mean ± std"):
        assert head in terms, head
    assert "chained_ci" not in dict(_definitions([{"after": {}, "theoretical_coverage": {}}]))


def test_the_width_figure_names_its_head_and_split(tmp_path):
    from scoreband.report.figures import width_figure

    p = width_figure(tmp_path / "w.svg", {"clean": np.array([1.0, 2.0, 1.5])},
                     what="chained_ci head, CRC at alpha 0.1")
    assert "chained_ci head, CRC at alpha 0.1" in p.read_text()


def test_a_stress_report_says_what_a_claim_marked_no_means():
    assert "claim marked no" in dict(_definitions([{"study": "stress"}]))
