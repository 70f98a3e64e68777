"""The row jobs (scoreband.jobs): one registry, one run; the API's and the CLI's apply are that
run, and apply reads its calibrator file once."""

import importlib

import pandas as pd
import pytest

import scoreband.api as sb
from scoreband.errors import ERROR_COLUMN, InputError
from scoreband.jobs import JOBS, RayEngine, get_job, run
from tests.conftest import invoke

COLS = dict(ratings="ratings", scale="1,5", median="median", lo="q05", hi="q95",
            pred_scale="0,1")


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    d = tmp_path_factory.mktemp("jobs")
    df = sb.read_table(sb.example_table())
    sb.calibrate(df.iloc[:1000], **COLS, method="crc").save(d / "cal.json")
    df.iloc[1000:1300].to_csv(d / "new.csv", index=False)
    return d


def test_every_job_names_a_stage_that_exists_and_a_registered_error_column():
    names = set(JOBS.names())
    assert {"apply", "score", "judge", "judge-pairwise", "roundtrip", "triage",
            "pairwise-rule"} <= names
    for name in names:
        job = get_job(name)
        module, fn = job.stage.split(":")
        assert callable(getattr(importlib.import_module(module), fn)), job.stage
        assert job.error_column in ERROR_COLUMN.values(), name
    with pytest.raises(InputError, match="unknown row job 'nope'"):
        get_job("nope")


def test_api_apply_file_equals_api_apply_and_the_cli(fitted, tmp_path):
    new = sb.read_table(fitted / "new.csv")
    whole = sb.apply(new, fitted / "cal.json").table
    res = sb.apply_file(fitted / "new.csv", fitted / "cal.json", tmp_path / "api.csv")
    assert res.rows == 300 and res.banded == 300
    r = invoke("apply", fitted / "new.csv", "--calibrator", fitted / "cal.json", "--out",
               tmp_path / "cli.csv")
    assert r.exit_code == 0, r.output
    a, b = pd.read_csv(tmp_path / "api.csv"), pd.read_csv(tmp_path / "cli.csv")
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_series_equal(a["band_lo"], whole["band_lo"], check_dtype=False)
    # the CLI's run records its provenance; the API's apply_file writes only the table
    assert (tmp_path / "cli.csv.provenance.json").exists()
    assert not (tmp_path / "api.csv.provenance.json").exists()


def test_apply_reads_the_calibrator_file_once(fitted, tmp_path, monkeypatch):
    """Every opening of the calibrator file: one read for the API's apply_file, and for the
    CLI's apply one read plus the sha256 its provenance records (before: the rule sniff, the
    stage's read, and on Ray a third read and a temp file per actor)."""
    import builtins
    import io

    cal, opened = fitted / "cal.json", []
    real = builtins.open

    def counted(file, *a, **kw):
        if str(file) == str(cal):
            opened.append(a[0] if a else kw.get("mode", "r"))
        return real(file, *a, **kw)

    monkeypatch.setattr(builtins, "open", counted)
    monkeypatch.setattr(io, "open", counted)
    sb.apply_file(fitted / "new.csv", cal, tmp_path / "a.csv")
    assert len(opened) == 1
    opened.clear()
    r = invoke("apply", fitted / "new.csv", "--calibrator", cal, "--out", tmp_path / "b.csv")
    assert r.exit_code == 0, r.output
    assert len(opened) == 2  # the calibrator's read, the provenance's sha256


def test_run_refuses_what_it_cannot_do(fitted, tmp_path):
    opts = sb.apply_options(fitted / "cal.json")
    with pytest.raises(InputError, match="`engine` 'spark'"):
        run("apply", fitted / "new.csv", tmp_path / "o.csv", options=opts, engine="spark")
    with pytest.raises(InputError, match="Ray engine runs on the table as it is"):
        run("apply", fitted / "new.csv", tmp_path / "o.csv", options=opts,
            engine=RayEngine(), df=pd.DataFrame())
    assert not (tmp_path / "o.csv").exists()


def test_a_python_job_never_writes_over_its_input(fitted, tmp_path):
    """The CLI's file policy holds from Python too: `out` naming the table (or the
    calibrator) is refused before any row is computed, and the file is left as it was."""
    table, cal = fitted / "new.csv", fitted / "cal.json"
    before, cal_before = table.read_bytes(), cal.read_bytes()
    with pytest.raises(InputError, match="never writes over one of its own inputs"):
        run("apply", table, table, options={"calibrator": str(cal)})
    with pytest.raises(InputError, match="never writes over one of its own inputs"):
        sb.apply_file(table, cal, cal)
    assert table.read_bytes() == before and cal.read_bytes() == cal_before


def test_the_package_face_has_score_and_judge_and_the_round_trip_package_stays_a_package():
    import scoreband
    import scoreband.roundtrip.metric  # noqa: F401 - the subpackage, imported

    assert callable(scoreband.score) and callable(scoreband.judge)
    assert not callable(scoreband.roundtrip) and callable(sb.roundtrip)
