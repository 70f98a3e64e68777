"""The results files every report test reads: evaluate, judge-study and stress, made once
for the package (the studies take tens of seconds)."""

import pytest
from typer.testing import CliRunner

from scoreband.cli import app

runner = CliRunner()
EXAMPLE_ARGS = ["--ratings", "ratings", "--scale", "1,5", "--median", "median", "--lo", "q05",
                "--hi", "q95", "--pred-scale", "0,1", "--method", "crc", "--groups", "task"]


@pytest.fixture(scope="package")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    assert runner.invoke(app, ["example", "--out", str(d / "ex.csv")]).exit_code == 0
    r = runner.invoke(app, ["evaluate", str(d / "ex.csv"), *EXAMPLE_ARGS, "--seeds", "3",
                            "--out", str(d / "ev.json"), "--html", str(d / "ev.html")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["judge-study", "--n", "300", "--seeds", "2", "--out",
                            str(d / "js")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["stress", "--n", "80", "--k", "1,2", "--seeds", "2",
                            "--distortions", "blur,contrast", "--out", str(d / "st")])
    assert r.exit_code == 0, r.output
    return d
