import json

import numpy as np
import pandas as pd
import pytest

from scoreband.cli import app
from tests.conftest import EXAMPLE, EXAMPLE_FLAGS, runner

COMMON = ["--scale", "1,5", "--median", "median", "--pred-scale", "0,1"]


def run(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in res.output, res.output
    return res


def test_evaluate_writes_contract_json(tmp_path):
    out = tmp_path / "m.json"
    res = run("evaluate", EXAMPLE, "--ratings", "ratings", *COMMON, "--lo", "q05", "--hi", "q95",
              "--method", "crc", "--groups", "task", "--seeds", 3, "--out", out)
    assert res.exit_code == 0, res.output
    d = json.loads(out.read_text())
    assert d["method"] == "crc" and d["alpha"] == 0.1 and d["n"] == 2000 and d["seeds"] == 3
    for part in ("before", "after"):
        for k in ("coverage", "sharpness", "ups", "kendall_tau_c", "pearson"):
            assert set(d[part][k]) == {"mean", "std"}
    assert d["before"]["coverage"]["mean"] < 0.8 < d["after"]["coverage"]["mean"]
    assert set(d["groups"]) == {"colour", "shape", "counting", "spatial", "long_description"}
    assert set(d["groups"]["colour"]) == {"n", "coverage", "sharpness", "n_items", "ci"}
    g = d["groups"]["colour"]  # the interval counts each distinct item once
    assert g["n"] < g["n_items"] <= 2 * g["n"] + 50 and g["ci"][0] <= g["coverage"]["mean"] <= g["ci"][1]
    assert d["theoretical_coverage"]["low"] == pytest.approx(0.9)


def test_point_scorer_has_no_before(tmp_path):
    out = tmp_path / "m.json"
    res = run("evaluate", EXAMPLE, "--target", "human", *COMMON, "--seeds", 2, "--out", out)
    assert res.exit_code == 0, res.output
    assert "before" not in json.loads(out.read_text())


def test_split_by_keeps_rows_together(tmp_path):
    df = pd.read_csv(EXAMPLE).head(400)
    df["image_key"] = np.repeat(np.arange(100), 4)
    p = tmp_path / "t.parquet"
    df.to_parquet(p)
    res = run("evaluate", p, "--target", "human", *COMMON, "--split-by", "image_key",
              "--seeds", 2, "--out", tmp_path / "m.json")
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "m.json").read_text())["n"] == 400


def test_calibrate_then_apply_keeps_every_row(tmp_path):
    cal = tmp_path / "cal.json"
    res = run("calibrate", EXAMPLE, "--ratings", "ratings", *COMMON, "--lo", "q05", "--hi",
              "q95", "--method", "crc", "--adjust-boundary", "--out", cal)
    assert res.exit_code == 0, res.output
    df = pd.read_csv(EXAMPLE).head(50)
    df["median"] = df["median"].astype(object)
    df.loc[3, "median"] = "oops"
    df.loc[7, "q05"] = np.nan
    src = tmp_path / "new.jsonl"
    df.to_json(src, orient="records", lines=True)
    out = tmp_path / "banded.csv"
    res = run("apply", src, "--calibrator", cal, "--out", out)
    assert res.exit_code == 0, res.output
    b = pd.read_csv(out, keep_default_na=False)
    assert len(b) == 50 and list(b.columns[: len(df.columns)]) == list(df.columns)
    assert "median: not a number: 'oops'" in b.loc[3, "band_error"]
    assert "q05: missing value" in b.loc[7, "band_error"]
    assert b.loc[3, "band_lo"] == "" and b.loc[0, "band_error"] == ""
    ok = b.drop(index=[3, 7])
    lo, hi = ok["band_lo"].astype(float), ok["band_hi"].astype(float)
    assert (lo <= hi).all() and (lo >= 1).all() and (hi <= 5).all()
    # boundary adjusted onto thirds (three ratings per item)
    assert np.allclose(lo * 3, np.round(lo * 3), atol=1e-6)
    assert np.allclose(hi * 3, np.round(hi * 3), atol=1e-6)
    assert np.allclose(ok["band_lo01"].astype(float), (lo - 1) / 4)


def test_apply_refuses_other_scorer(tmp_path):
    cal = tmp_path / "cal.json"
    run("calibrate", EXAMPLE, "--target", "human", *COMMON, "--scorer-id", "A", "--out", cal)
    res = run("apply", EXAMPLE, "--calibrator", cal, "--scorer-id", "B", "--out",
              tmp_path / "o.csv")
    assert res.exit_code == 2 and "calibrated for scorer 'A'" in res.output


@pytest.mark.parametrize("args,msg", [
    (["--target", "nope", *COMMON], "available: id, image, task"),
    (["--target", "human", *COMMON, "--alpha", "1.5"], "Invalid value for '--alpha': 1.5 is not in (0, 1)"),
    (["--target", "human", *COMMON, "--method", "magic"], "unknown calibration method 'magic'; choose one of split, crc"),
    (["--target", "human", "--scale", "5,1", "--median", "median"], "A < B"),
    (["--target", "human", *COMMON, "--lo", "q05"], "both --lo and --hi"),
    (["--target", "human", *COMMON, "--method", "crc"], "pass --lo and --hi columns"),
])
def test_bad_input_is_a_clear_error(args, msg):
    res = run("evaluate", EXAMPLE, *args, "--seeds", 1)
    assert res.exit_code == 2, res.output
    assert msg in " ".join(res.output.split()), res.output


def test_empty_table(tmp_path):
    p = tmp_path / "e.csv"
    p.write_text("human,median\n")
    res = run("evaluate", p, "--target", "human", *COMMON)
    assert res.exit_code == 2 and "no rows" in " ".join(res.output.split())


def test_version():
    assert run("--version").output.startswith("scoreband ")


def test_unexpected_errors_are_one_line_and_debug_shows_the_traceback(tmp_path, monkeypatch):
    import scoreband.evaluation as protocol

    def boom(*a, **k):
        raise RuntimeError("something broke\nover two lines")

    monkeypatch.setattr(protocol, "evaluate_result", boom)
    args = ["evaluate", EXAMPLE, "--target", "human", *COMMON, "--seeds", 1]
    res = runner.invoke(app, [str(a) for a in args])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "unexpected RuntimeError: something broke over two lines" in " ".join(res.output.split())
    assert "--debug" in res.output
    res = runner.invoke(app, ["--debug", *[str(a) for a in args]])
    assert isinstance(res.exception, RuntimeError)


@pytest.mark.parametrize("scale", ["nan,5", "1,inf", "5,1", "a,b", "1"])
def test_bad_scale_is_a_clear_error(scale):
    res = run("evaluate", EXAMPLE, "--target", "human", "--scale", scale, "--median", "median")
    assert res.exit_code == 2 and "scale" in res.output, res.output


def test_out_that_is_a_folder_is_a_clear_error(tmp_path):
    res = run("evaluate", EXAMPLE, "--target", "human", *COMMON, "--seeds", 1, "--out", tmp_path)
    assert res.exit_code == 2 and "is a folder" in " ".join(res.output.split())


def test_train_refuses_a_finished_run_unless_asked(tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"x")
    (out / "MODEL_CARD.md").write_text("old")
    res = run("train", "--out", out, "--n-train", 40, "--n-val", 20, "--epochs", 1)
    assert res.exit_code == 2 and "finished model" in " ".join(res.output.split())
    assert (out / "MODEL_CARD.md").read_text() == "old"  # untouched
    res = run("train", "--out", out, "--resume")
    assert res.exit_code == 2 and "no checkpoint" in " ".join(res.output.split())
    res = run("train", "--out", out, "--resume", "--overwrite")
    assert res.exit_code == 2 and "not both" in res.output


def test_more_bad_options_are_clear_errors(tmp_path):
    (tmp_path / "f").write_text("x")
    table = tmp_path / "t.csv"
    pd.DataFrame({"image": ["a.png"], "caption": ["a red circle"],
                  "instruction": ["x"], "response": ["y"]}).to_csv(table, index=False)
    cases = [
        (["train", "--out", tmp_path / "m", "--n-train", 0, "--n-val", 0], "--n-train"),
        (["score", table, "--batch-size", 0, "--out", tmp_path / "o.csv"], "--batch-size"),
        (["score", table, "--batch-size", -5, "--out", tmp_path / "o.csv"], "--batch-size"),
        (["roundtrip", table, "--keep-images", tmp_path / "f", "--out", tmp_path / "r.csv"],
         "is a file"),
        (["judge", table, "--judge", "openai:m", "--base-url", "file:///etc",
          "--out", tmp_path / "j.csv"], "http"),
        (["judge", table, "--judge", "hf:./no/such/model", "--out", tmp_path / "j.csv"],
         "no such folder"),
        (["judge", table, "--judge", "openai:m", "--template", "Rate {foo}",
          "--out", tmp_path / "j.csv"], "unknown field"),
    ]
    for args, msg in cases:
        res = run(*args)
        out = " ".join(res.output.split())
        assert res.exit_code == 2 and msg in out, (args, res.output)
    assert not (tmp_path / "m" / "checkpoint").exists()
    assert not list(tmp_path.glob("*.partial.jsonl"))


def test_example_prints_a_copy_pasteable_command_and_provenance(tmp_path):
    out = tmp_path / "ex.csv"
    res = run("example", "--out", out)
    assert res.exit_code == 0
    cmd = next(ln for ln in res.output.splitlines() if ln.startswith("scoreband evaluate"))
    assert cmd.endswith("--groups task")  # the whole command on one line
    assert (tmp_path / "ex.csv.provenance.json").is_file()
    res = run(*cmd.split()[1:], "--seeds", 1)
    assert res.exit_code == 0, res.output


def test_cli_reference_is_generated_from_the_commands():
    from pathlib import Path

    from scoreband.cli.docs import options_markdown

    doc = Path(__file__).parents[2] / "docs" / "CLI.md"
    assert doc.read_text() == options_markdown(app), (
        "docs/CLI.md is out of date: python -m scoreband.cli.docs > docs/CLI.md")


def test_a_missing_extra_names_its_install_line(monkeypatch, tmp_path):
    """A command that needs an optional dependency that is not installed says which extra
    installs it (one line, exit 2), before any work."""
    import sys

    from scoreband.extras import install_hint

    monkeypatch.setitem(sys.modules, "albumentations", None)  # import raises, as if absent
    assert install_hint("transformers.models") == 'pip install "scoreband[hf]"'
    r = run("stress", "--out", str(tmp_path / "s"), "--n", "40")
    assert r.exit_code == 2, r.output
    assert 'pip install "scoreband[stress]"' in " ".join(r.output.split())
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())


def test_every_help_fits_80_columns_without_a_cut_word():
    """`--help` of every command at COLUMNS=80: no line over 80 characters, nothing cut
    short with an ellipsis (rich truncates a cell it cannot wrap)."""
    import typer.main

    names = sorted(c.name for c in typer.main.get_command(app).commands.values())
    assert "systems" in names and "demo" in names
    bad = {}
    for name in names:
        r = runner.invoke(app, [name, "--help"], env={"COLUMNS": "80", "TERM": "dumb"})
        assert r.exit_code == 0, (name, r.output)
        long = [line for line in r.output.splitlines() if len(line) > 80]
        cut = [line for line in r.output.splitlines() if "\u2026" in line]
        if long or cut:
            bad[name] = long[:2] + cut[:2]
    assert not bad, bad


def test_study_console_output_fits_80_columns():
    """judge-study's tables at COLUMNS=80: every line within 80 characters, no cell or
    header cut with an ellipsis (wide tables are split, repeating the row's name), and no
    word broken across lines in a header."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        r = runner.invoke(app, ["judge-study", "--n", "200", "--seeds", "1", "--out",
                                f"{d}/js"], env={"COLUMNS": "80", "TERM": "dumb"})
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert not [x for x in lines if len(x) > 80 and not x.startswith("[")], lines
    assert not [x for x in lines if "\u2026" in x]
    text = " ".join(r.output.split())
    assert "coverage" in text and "recommendation" in text and "covera " not in text


def test_apply_names_a_column_the_calibrator_brought(tmp_path):
    """A column the user never named on this command line came from the calibrator: the
    error says so, and how to name this table's column instead."""
    df = pd.read_csv(EXAMPLE)
    assert run("calibrate", EXAMPLE, "--ratings", "ratings", "--scale", "1,5", "--median",
               "median", "--pred-scale", "0,1", "--out", tmp_path / "c.json").exit_code == 0
    df.rename(columns={"median": "med"}).to_csv(tmp_path / "t.csv", index=False)
    r = run("apply", tmp_path / "t.csv", "--calibrator", tmp_path / "c.json", "--out",
            tmp_path / "o.csv")
    text = " ".join(r.output.split())
    assert r.exit_code == 2 and "the calibrator was fitted with --median = 'median'" in text
    r = run("apply", tmp_path / "nope.csv", "--calibrator", tmp_path / "c.json", "--out",
            tmp_path / "o.csv")
    e = run("evaluate", tmp_path / "nope.csv", "--target", "human", "--scale", "1,5",
            "--median", "m", "--out", tmp_path / "e.json")
    assert r.exit_code == e.exit_code == 2
    assert r.output.strip().splitlines()[-1] == e.output.strip().splitlines()[-1]


def _mostly_unreadable(tmp_path, bad: int):
    import pandas as pd

    from scoreband.api import example_table

    df = pd.read_csv(example_table()).head(1000).astype({"ratings": object})
    df.loc[: bad - 1, "ratings"] = "?"
    df.to_csv(tmp_path / "q.csv", index=False)
    return str(tmp_path / "q.csv")


ARGS = EXAMPLE_FLAGS


def test_skipped_rows_are_counted_by_reason_and_most_skipped_fails(tmp_path):
    """A column of '?' is one line with its count, not 20 rows and 'the output JSON' that
    was never asked for; more than half the rows skipped: files written, exit 1."""
    t = _mostly_unreadable(tmp_path, 650)
    r = runner.invoke(app, ["evaluate", t, *ARGS, "--seeds", "2", "--out",
                            str(tmp_path / "m.json")])
    text = " ".join(r.output.split())
    assert r.exit_code == 1, r.output
    assert "650 of 1000 rows skipped" in text and "650 rows (rows 1, 2, 3, ...)" in text
    assert "more than half" in text and (tmp_path / "m.json").exists()
    r = runner.invoke(app, ["calibrate", t, *ARGS, "--out", str(tmp_path / "c.json"),
                            "--split-by", "task"])
    assert r.exit_code == 1 and (tmp_path / "c.json").exists(), r.output
    t = _mostly_unreadable(tmp_path, 100)
    r = runner.invoke(app, ["evaluate", t, *ARGS, "--seeds", "2"])
    assert r.exit_code == 0 and "100 of 1000 rows skipped" in " ".join(r.output.split())
    assert "output JSON" not in r.output


def test_the_calibration_curve_says_where_it_is(tmp_path):
    """--html computes the curve: its splits print progress (one evaluate ran 23 minutes
    after 'split 10 of 10 done' without a line)."""
    from scoreband.api import example_table

    r = runner.invoke(app, ["evaluate", str(example_table()), *ARGS, "--seeds", "2",
                            "--html", str(tmp_path / "r.html")])
    assert r.exit_code == 0, r.output
    assert "calibration curve: 5 more alphas x 2 splits" in r.output
    assert "writing the HTML report" in r.output
    assert "coverage by level of the human score" in r.output


def test_help_never_breaks_a_method_name_at_its_hyphens():
    r = runner.invoke(app, ["evaluate", "--help"], env={"COLUMNS": "80", "TERM": "dumb"})
    assert r.exit_code == 0
    lines = [line.rstrip() for line in r.output.splitlines()]
    assert not [line for line in lines if line.endswith("-") and not line.endswith(" -")]
    assert "crc-cluster-mondrian" in r.output and "weighted-split" in r.output


@pytest.mark.parametrize("cmd", [["evaluate"], ["calibrate", "--out", "never.json"]])
def test_a_bad_scale_is_refused_before_the_table_is_read(cmd, tmp_path):
    r = runner.invoke(app, [*cmd[:1], str(tmp_path / "absent.csv"), *cmd[1:], "--scale", "1-4",
                            "--ratings", "r"])
    assert r.exit_code == 2 and "--scale" in r.output and "'A,B'" in r.output
    assert not (tmp_path / "never.json").exists()


def test_list_options_take_a_comma_list_or_repetition(tmp_path):
    import json

    from scoreband.api import example_table

    outs = []
    for feats in (["--features", "median,q05", "--features", "q95"],
                  ["--features", "median", "--features", "q05,q95"]):
        out = tmp_path / f"c{len(outs)}.json"
        r = runner.invoke(app, ["calibrate", str(example_table()), *ARGS, "--method", "cqr",
                                *feats, "--out", str(out)])
        assert r.exit_code == 0, r.output
        assert "fitting cqr on 2000 rows" in r.output  # a long fit says what it does
        outs.append(json.loads(out.read_text())["inputs"]["columns"]["features"])
    assert outs[0] == outs[1] == ["median", "q05", "q95"]


def test_a_path_naming_an_unknown_users_home_is_a_clean_error(tmp_path):
    """`--out ~nosuchuser/x`: Path.expanduser raises RuntimeError; the command says which
    path and the fix, exit 2, never 'unexpected RuntimeError'."""
    from scoreband.cli import app
    from tests.conftest import runner

    pd.DataFrame({"human": [1.0, 2.0], "judge": [1.1, 2.1]}).to_csv(tmp_path / "t.csv",
                                                                    index=False)
    r = runner.invoke(app, ["triage", str(tmp_path / "t.csv"), "--target", "human",
                            "--score", "judge", "--scale", "1,5", "--tolerance", "0.5",
                            "--out", "~nosuchuser0xyz/r.json"])
    text = " ".join(r.output.split())
    assert r.exit_code == 2 and "'~nosuchuser0xyz/r.json'" in text and "in full" in text, text
