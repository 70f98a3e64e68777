"""The README's 'after the first week' section, run as written: the embedded world, a judge
whose noise doubles mid-stream, calibrate, monitor a trickle of audit labels, recalibrate on
the alarm, report."""

from __future__ import annotations

import json
import os
import shlex

from tests.conftest import invoke

#: the judge's scores, as the README gives them (a provider's silent model update after the
#: first 300 audit rows doubles the judge's noise)
JUDGE_PY = """\
import numpy as np, pandas as pd
df = pd.read_csv("w/world.csv")
rng = np.random.default_rng(0)
sd = np.where(np.arange(len(df)) < 800, 0.08, 0.16)   # noise doubles after audit row 300
df["judge"] = np.clip(1 + 4 * (df["true_score"] + rng.normal(0, sd)), 1, 5)
df.iloc[:500].to_csv("labeled.csv", index=False)      # the first week's labels
df.iloc[500:].to_csv("audit.csv", index=False)        # audit labels, in arrival order
"""

COMMANDS = """\
scoreband world --out w --n 1300 --seed 1
python judge.py
scoreband calibrate labeled.csv --target human --scale 1,5 --median judge --pred-scale 1,5 --method split --delta 0.05 --out cal.json
scoreband monitor cal.json audit.csv --target human --false-alarm 0.05 --out monitor.json --since-out since.csv
scoreband recalibrate cal.json since.csv --target human --out cal_new.json
scoreband report monitor.json --out monitor.html
"""


def test_after_the_first_week_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "judge.py").write_text(JUDGE_PY)
    codes = []
    for line in COMMANDS.splitlines():
        args = shlex.split(line)
        if args[0] == "python":
            exec(compile((tmp_path / args[1]).read_text(), args[1], "exec"), {})
            continue
        codes.append(invoke(*args[1:]).exit_code)
    assert codes == [0, 0, 1, 0, 0]  # monitor: exit 1, it alarmed
    doc = json.loads((tmp_path / "monitor.json").read_text())
    assert 300 < doc["alarm_row"] <= 800
    assert os.path.getsize(tmp_path / "cal_new.json") > 0
