"""scoreband.monitor / `scoreband monitor` on tables: issue 45's targets on a real split
calibrator, the CLI and the API agreeing, --by, bad rows, the output policy, a triage rule's
stream, the report's section and the 'after the first week' workflow."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import scoreband
import scoreband.api as sb
from scoreband.decisions.eprocess import first_alarm, log_eprocess
from tests.conftest import invoke
from tests.monitor.sim import fit_split, streams, world

COLS = dict(target="human", median="judge", scale=(1, 5), pred_scale=(1, 5), method="split")


def _table(n, sd, rng, **extra) -> pd.DataFrame:
    m, y = world(n, sd, rng)
    return pd.DataFrame({"human": y, "judge": m, **extra})


def _calibrate(rng):
    """A split calibrator on 500 rows: with delta 0.05 where the API takes it."""
    delta = {"delta": 0.05} if "delta" in sb.config_fields() else {}
    return sb.calibrate(_table(500, 0.5, rng), **COLS, **delta)


def _drifting(rng, n=1500, change=300) -> pd.DataFrame:
    return pd.concat([_table(change, 0.5, rng), _table(n - change, 1.0, rng)],
                     ignore_index=True)


@pytest.mark.statistical
def test_issue_targets_on_split_calibrators():
    """Calibrators (split, alpha 0.1, delta 0.05) on 500 rows, 1,500-row streams at false
    alarm 0.05: no drift -> <= 10 % alarm (measured ~1 %); noise doubled after row 300 ->
    >= 90 % alarm by row 600, median delay <= 150 (measured ~30)."""
    rng = np.random.default_rng(45)
    alarms, detect, delays = [], [], []
    for _ in range(10):
        cal = fit_split(rng, delta=0.05)
        for change, out in ((None, alarms), (300, detect)):
            z = streams(cal, 30, 1500, change, rng)[0]
            at = first_alarm(log_eprocess(z, cal.alpha), 0.05)
            if change is None:
                out.extend(at >= 0)
            else:
                out.extend((at >= 300) & (at < 600))
                delays.extend(np.where(at >= 300, at - 300, np.inf))
    assert np.mean(alarms) <= 0.10
    assert np.mean(detect) >= 0.90
    assert np.median(delays) <= 150


def test_cli_and_api_give_the_same_alarm_row(tmp_path):
    rng = np.random.default_rng(10)
    fit = _calibrate(rng)
    cal = fit.save(tmp_path / "cal.json")
    _drifting(rng).to_csv(tmp_path / "stream.csv", index=False)
    res = scoreband.monitor(cal, tmp_path / "stream.csv")
    assert res.alarm_row is not None and 300 < res.alarm_row <= 600
    assert 250 <= res.streams["(all)"].change_row <= 330
    assert "scoreband recalibrate" in res.advice and "--target human" in res.advice
    r = invoke("monitor", cal, tmp_path / "stream.csv", "--out", tmp_path / "m.json",
               "--since-out", tmp_path / "since.csv")
    assert r.exit_code == 1, r.output
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["alarm_row"] == res.alarm_row
    assert len(doc["streams"]["(all)"]["path"]["log_e"]) == 1500
    since = pd.read_csv(tmp_path / "since.csv")
    assert len(since) == 1500 - res.streams["(all)"].change_row + 1
    # the since-rows recalibrate (the README's next step)
    r = invoke("recalibrate", cal, tmp_path / "since.csv", "--target", "human",
               "--out", tmp_path / "new.json")
    assert r.exit_code == 0, r.output


def test_since_out_keeps_every_cell_as_it_was_read(tmp_path):
    """--since-out writes the stream's rows as they were read (issue 43): a text cell such
    as `01` stays `01`, a number keeps its spelling, as every other output of scoreband."""
    rng = np.random.default_rng(10)
    cal = _calibrate(rng).save(tmp_path / "cal.json")
    df = _drifting(rng)
    df.insert(0, "code", [f"{i % 100:02d}" for i in range(len(df))])
    text = df.to_csv(index=False, float_format="%.10f")
    (tmp_path / "stream.csv").write_text(text)
    r = invoke("monitor", cal, tmp_path / "stream.csv", "--since-out", tmp_path / "since.csv")
    assert r.exit_code == 1, r.output
    lines, since = text.splitlines(), (tmp_path / "since.csv").read_text().splitlines()
    assert since[0] == lines[0] and 1 < len(since) < len(lines)
    assert since[1:] == lines[len(lines) - len(since) + 1:]  # the tail, byte for byte


def test_no_drift_exits_0_with_alarm_row_null(tmp_path):
    rng = np.random.default_rng(1)
    cal = _calibrate(rng).save(tmp_path / "cal.json")
    _table(800, 0.5, rng).to_csv(tmp_path / "s.csv", index=False)
    r = invoke("monitor", cal, tmp_path / "s.csv", "--out", tmp_path / "m.json",
               "--promise", 0.2)  # far above the miss rate: no alarm, whatever the draw
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "m.json").read_text())["alarm_row"] is None


def test_by_monitors_each_value_apart_and_bad_rows_are_skipped(tmp_path):
    rng = np.random.default_rng(2)
    fit = _calibrate(rng)
    old, new = _table(700, 0.5, rng), _table(700, 1.0, rng)
    df = pd.concat([old.assign(version="v1"), new.assign(version="v2")]).sample(
        frac=1, random_state=0).reset_index(drop=True)
    df["human"] = df["human"].astype(object)
    df.loc[3, "human"] = "n/a"
    df.loc[8, "version"] = None
    res = scoreband.monitor(fit, df, by="version")
    assert res.streams["v1"].alarm_row is None
    assert res.streams["v2"].alarm_row is not None
    assert res.alarm_row == res.streams["v2"].alarm_row
    assert [e.row for e in res.errors] == ["4", "9"]
    assert {e.column for e in res.errors} == {"human", "version"}
    assert 3 + 1 not in res.streams["v2"].rows and 3 + 1 not in res.streams["v1"].rows


def test_never_writes_over_its_stream(tmp_path):
    rng = np.random.default_rng(3)
    cal = _calibrate(rng).save(tmp_path / "cal.json")
    _table(100, 0.5, rng).to_csv(tmp_path / "s.csv", index=False)
    r = invoke("monitor", cal, tmp_path / "s.csv", "--out", tmp_path / "s.csv")
    assert r.exit_code == 2 and "never writes over" in r.output
    assert len(pd.read_csv(tmp_path / "s.csv")) == 100


def test_a_triage_rule_stream_end_to_end(tmp_path):
    """A rule trusts rows whose judge says it is sure; after the change the sure rows err
    often. Escalated rows carry no loss."""
    from scoreband.decisions.triage import fit_triage

    rng = np.random.default_rng(4)

    def rows(n, noise):
        hard = rng.uniform(size=n)
        y = np.clip(rng.normal(3, 1, n), 1, 5)
        return pd.DataFrame({"human": y, "judge": y + rng.normal(0, noise + hard, n),
                             "hard": hard})

    rule = fit_triage(rows(2000, 0.05), target="human", score="judge", scale=(1, 5),
                      tolerance=0.5, alpha=0.1, delta=0.1, uncertainty="hard", seed=0)
    path = rule.save(tmp_path / "rule.json")
    stream = pd.concat([rows(400, 0.05), rows(800, 0.6)], ignore_index=True)
    stream.to_csv(tmp_path / "s.csv", index=False)
    res = scoreband.monitor(path, tmp_path / "s.csv")
    assert res.kind == "triage-rule" and res.promise == 0.1
    assert res.escalated > 0
    assert res.alarm_row is not None and res.alarm_row > 400
    assert "scoreband triage" in res.advice and "--tolerance 0.5" in res.advice
    r = invoke("monitor", path, tmp_path / "s.csv", "--out", tmp_path / "m.json")
    assert r.exit_code == 1 and json.loads((tmp_path / "m.json").read_text())[
        "alarm_row"] == res.alarm_row
    calm = scoreband.monitor(path, stream.iloc[:400])
    assert calm.alarm_row is None


def test_the_report_draws_the_e_value_path(tmp_path):
    rng = np.random.default_rng(5)
    fit = _calibrate(rng)
    scoreband.monitor(fit, _drifting(rng, 600)).save(tmp_path / "m.json")
    r = invoke("report", tmp_path / "m.json", "--out", tmp_path / "r.html")
    assert r.exit_code == 0, r.output
    html = (tmp_path / "r.html").read_text()
    assert "Monitor: does the promise still hold?" in html and "<svg" in html


def test_refuses_bad_options(tmp_path):
    rng = np.random.default_rng(6)
    fit = _calibrate(rng)
    df = _table(50, 0.5, rng)
    with pytest.raises(scoreband.errors.InputError, match="false_alarm"):
        scoreband.monitor(fit, df, false_alarm=1.5)
    with pytest.raises(scoreband.errors.InputError, match="`by`"):
        scoreband.monitor(fit, df, by="nope")
