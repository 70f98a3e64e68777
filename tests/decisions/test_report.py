"""The triage figure, HTML fragment, report section and the demo's accepted share."""

import numpy as np

from scoreband.decisions import accepted_share, fit_triage_arrays, triage_figure, triage_html
from scoreband.decisions.report import triage_model, triage_section, write_triage_html
from scoreband.decisions.uncertainty import Signals
from scoreband.json_io import to_jsonable
from scoreband.schemas import validate


def _rule():
    rng = np.random.default_rng(0)
    sd = rng.uniform(0.05, 0.8, 1200)
    y = rng.uniform(1, 5, 1200)
    s = y + rng.normal(0, sd)
    return fit_triage_arrays(s, y, scale=(1, 5), tolerance=0.5, alpha=0.1, delta=0.1,
                             signals=Signals(s, column=sd), by="column")


def test_figure_html_and_section(tmp_path):
    rule = _rule()
    fig = triage_figure(rule)
    assert len(fig.axes) == 2
    html = triage_html(rule)
    assert html.startswith('<section class="triage">') and "<svg" in html
    assert f"{rule.report['accepted_share']:.1%}" in html
    doc = to_jsonable(rule.to_dict())
    validate(triage_model(), doc, "rule.json", fix="")
    sec = triage_section(doc)
    assert set(sec) == {"title", "verdict", "blocks"} and "escalate" in sec["verdict"]
    page = write_triage_html(rule, tmp_path / "t.html")
    assert "<svg" in page.read_text()


def test_accepted_share_for_the_demo():
    rng = np.random.default_rng(1)
    sd = rng.uniform(0.05, 0.8, 600)
    y = rng.uniform(1, 5, 600)
    s = y + rng.normal(0, sd)
    r = accepted_share(y, s, scale=(1, 5), tolerance=0.5, alpha=0.2, uncertainty=sd)
    assert 0 < r["accepted_share"] < 1 and r["uncertainty"] in ("column", "knn-miss",
                                                                "knn-abs", "fitted-abs")
    assert r["risk_among_accepted"] <= 0.2 + 0.05 and r["n_labeled"] == 600
