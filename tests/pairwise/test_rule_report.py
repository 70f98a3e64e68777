"""`scoreband report rule.json` renders a pairwise rule (the README: report renders triage
rules) from the rule file alone, data names escaped."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.conftest import runner


def test_report_renders_a_pairwise_rule(tmp_path):
    from scoreband.cli import app
    from scoreband.pairwise.selective import fit_pairwise_triage

    rng = np.random.default_rng(0)
    d = rng.normal(0, 1, 600)
    df = pd.DataFrame({"d": d, "human": np.where(d + rng.logistic(0, 0.4, 600) > 0, "A", "B"),
                       "task": np.where(np.arange(600) % 2, "<b>x</b>", "a|b")})
    rule = fit_pairwise_triage(df, label_col="human", features=["d"], groups="task")
    rule.save(tmp_path / "rule.json")
    r = runner.invoke(app, ["report", str(tmp_path / "rule.json"), "--out",
                            str(tmp_path / "r.html")])
    assert r.exit_code == 0, r.output
    page = (tmp_path / "r.html").read_text()
    assert "pairwise verdicts" in page and "Learn-then-Test" in page
    assert f"Decides {rule.report['decided_share']:.1%} of the labeled pairs" in page
    assert "<b>x</b>" not in page  # a data name is text, never markup
    # a rule whose first test did not reject says so
    rule.threshold = -np.inf
    rule.save(tmp_path / "none.json")
    r = runner.invoke(app, ["report", str(tmp_path / "none.json"), "--out",
                            str(tmp_path / "n.html")])
    assert r.exit_code == 0, r.output
    assert "Decides no pair" in (tmp_path / "n.html").read_text()
