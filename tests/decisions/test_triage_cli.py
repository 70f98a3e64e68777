"""scoreband triage and its Python twin: files, rows, errors."""

import json

import numpy as np
import pandas as pd
import pytest

from scoreband.cli import app
from scoreband.decisions import Triage, fit_triage, load_rule
from scoreband.errors import InputError, NotFittedError
from tests.conftest import runner


def run(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in res.output, res.output
    return res


def said(res) -> str:
    """The output as one line: the console wraps long paths wherever it likes."""
    return " ".join(res.output.split())


def _table(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    y = np.clip(np.round(rng.normal(3, 1, n) * 3) / 3, 1, 5)
    hard = rng.uniform(size=n)
    lp = np.log(rng.dirichlet(np.ones(5), n))
    df = pd.DataFrame({"id": [f"r{i}" for i in range(n)], "human": y,
                       "judge": y + rng.normal(0, 0.05 + 0.8 * hard), "hard": hard,
                       "task": rng.choice(["a", "b"], n), "note": "x"})
    for j in range(5):
        df[f"logp_{j + 1}"] = lp[:, j]
    return df


@pytest.fixture
def files(tmp_path):
    df = _table()
    lab, unl = tmp_path / "labeled.csv", tmp_path / "unlabeled.csv"
    df.iloc[:1000].to_csv(lab, index=False)
    df.iloc[1000:].drop(columns="human").to_csv(unl, index=False)
    return lab, unl


FIT = ["--target", "human", "--scale", "1,5", "--score", "judge", "--tolerance", 0.5,
       "--risk", 0.1, "--delta", 0.1]


def test_fit_and_apply_keep_every_row_and_column(files, tmp_path):
    lab, unl = files
    rule, out = tmp_path / "rule.json", tmp_path / "triaged.csv"
    res = run("triage", lab, *FIT, "--uncertainty", "hard", "--features", "logp_*",
              "--out", rule, "--apply", unl, "--apply-out", out)
    assert res.exit_code == 0, res.output
    d = json.loads(rule.read_text())
    for k in ("threshold", "accepted_share", "risk", "delta", "tolerance", "uncertainty",
              "guarantee", "accept_all_risk"):
        assert k in d, k
    assert d["risk"] == 0.1 and d["tolerance"] == 0.5 and 0 < d["accepted_share"] < 1
    assert "at most 10 % of the time" in d["guarantee"]
    src, got = pd.read_csv(unl), pd.read_csv(out)
    assert len(got) == len(src) and list(got.columns[:len(src.columns)]) == list(src.columns)
    assert list(got.columns[len(src.columns):]) == ["triage_score", "triage_uncertainty",
                                                    "trusted", "triage_error"]
    assert set(got.trusted.unique()) <= {True, False} and got.trusted.any()
    assert got.trusted.mean() == pytest.approx(d["accepted_share"], abs=0.1)
    assert got.triage_score.between(1, 5).all()
    # a saved rule applied later gives the same decisions
    again = tmp_path / "again.parquet"
    res = run("triage", "--rule", rule, "--apply", unl, "--apply-out", again)
    assert res.exit_code == 0, res.output
    assert (pd.read_parquet(again).trusted.to_numpy() == got.trusted.to_numpy()).all()
    # and a rerun may replace its own output
    res = run("triage", "--rule", rule, "--apply", unl, "--apply-out", out)
    assert res.exit_code == 0, res.output


def test_outputs_never_replace_inputs(files, tmp_path):
    lab, unl = files
    res = run("triage", lab, *FIT, "--out", lab)
    assert res.exit_code == 2 and "same file" in said(res)
    res = run("triage", lab, *FIT, "--out", tmp_path / "r.json", "--apply", unl,
              "--apply-out", unl)
    assert res.exit_code == 2 and "same file" in said(res)
    res = run("triage", lab, *FIT, "--out", tmp_path / "r.json", "--apply", unl,
              "--apply-out", tmp_path / "r.json")
    assert res.exit_code == 2 and "same path" in said(res)
    assert pd.read_csv(unl).shape == (500, 10)  # untouched


def test_bad_rows_are_reported_and_skipped(files, tmp_path):
    lab, unl = files
    df = pd.read_csv(lab)
    df["judge"] = df["judge"].astype(object)
    df.loc[3, "judge"] = "n/a"
    df.loc[7, "human"] = 9
    df.to_csv(lab, index=False)
    u = pd.read_csv(unl)
    u.loc[2, "judge"] = None
    u.to_csv(unl, index=False)
    rule, out = tmp_path / "rule.json", tmp_path / "t.csv"
    res = run("triage", lab, *FIT, "--id-col", "id", "--out", rule, "--apply", unl,
              "--apply-out", out)
    assert res.exit_code == 0, res.output
    assert "2 of 1000 rows skipped" in said(res) and "r3" in said(res)
    assert "outside the scale" in said(res)
    got = pd.read_csv(out)
    assert not got.trusted[2] and "missing value" in got.triage_error[2]
    assert np.isnan(got.triage_score[2])
    assert json.loads(rule.read_text())["n_skipped_rows"] == 2


def test_clear_errors(files, tmp_path):
    lab, unl = files
    res = run("triage", lab, "--target", "human", "--scale", "1,5", "--score", "judge",
              "--out", tmp_path / "r.json")
    assert res.exit_code == 2 and "--tolerance" in said(res)
    res = run("triage", lab, *FIT[:4], "--score", "nope", "--tolerance", 0.5,
              "--out", tmp_path / "r.json")
    assert res.exit_code == 2 and "'nope' is not in the table" in said(res)
    res = run("triage", lab, *FIT, "--by", "column", "--out", tmp_path / "r.json")
    assert res.exit_code == 2 and "--uncertainty" in said(res)
    res = run("triage", lab, *FIT, "--out", tmp_path / "r.json", "--apply", unl)
    assert res.exit_code == 2 and "--apply-out" in said(res)
    res = run("triage", "--rule", tmp_path / "missing.json", "--apply", unl,
              "--apply-out", tmp_path / "o.csv")
    assert res.exit_code == 2 and "does not exist" in said(res)
    small = tmp_path / "small.csv"
    pd.read_csv(lab).head(30).to_csv(small, index=False)
    res = run("triage", small, *FIT, "--out", tmp_path / "r.json")
    assert res.exit_code == 2 and "label more rows" in said(res)


def test_groups_small_group_escalates_everything(files, tmp_path):
    lab, unl = files
    df = pd.read_csv(lab)
    df.loc[:15, "task"] = "tiny"
    df.to_csv(lab, index=False)
    rule, out = tmp_path / "rule.json", tmp_path / "t.csv"
    res = run("triage", lab, *FIT, "--uncertainty", "hard", "--groups", "task", "--out", rule,
              "--apply", unl, "--apply-out", out)
    assert res.exit_code == 0, res.output
    assert "'tiny'" in said(res) and "escalated" in said(res)
    d = json.loads(rule.read_text())
    assert set(d["groups"]) == {"a", "b", "tiny"} and d["groups"]["tiny"]["threshold"] == "-inf"
    got = pd.read_csv(out)
    assert "triage_group" in got.columns


def test_python_twin_and_row_order(files):
    lab, unl = files
    df = pd.read_csv(lab)
    est = Triage(target="human", score="judge", scale=(1, 5), tolerance=0.5, alpha=0.1,
                 delta=0.1, uncertainty="hard")
    with pytest.raises(NotFittedError):
        est.predict(df)
    est.fit(df)
    trusted = est.predict(pd.read_csv(unl))
    assert trusted.dtype == bool and 0 < trusted.mean() < 1
    # the split is drawn from each row's identity: a sorted table gives the same rule
    sorted_rule = fit_triage(df.sort_values("human"), target="human", score="judge",
                             scale=(1, 5), tolerance=0.5, uncertainty="hard").rule
    assert sorted_rule.threshold == est.rule_.threshold
    with pytest.raises(InputError, match="tolerance"):
        fit_triage(df, target="human", score="judge", scale=(1, 5), tolerance=5)


def test_saved_rule_round_trip(files, tmp_path):
    lab, unl = files
    rule = fit_triage(pd.read_csv(lab), target="human", score="judge", scale="1,5",
                      tolerance=0.5, features="logp_*", by="knn-miss-features").rule
    p = rule.save(tmp_path / "r.json")
    back = load_rule(p)
    new = pd.read_csv(unl)
    a, b = rule.apply(new), back.apply(new)
    assert (a.trusted == b.trusted).all()
    assert np.allclose(a.triage_uncertainty, b.triage_uncertainty)
    assert back.uncertainty.name == "knn-miss-features"


def test_band_width_of_a_calibrator(files, tmp_path):
    from scoreband import api

    lab, unl = files
    df = pd.read_csv(lab)
    other = _table(seed=5)  # the calibrator sees other rows than the rule's
    cal = api.calibrate(other, target="human", scale="1,5", features=["judge", "hard"],
                        median="judge", method="cqr")
    rule = fit_triage(df, target="human", score="judge", scale=(1, 5), tolerance=0.5,
                      calibrator=cal, by="band-width").rule
    assert rule.uncertainty.name == "band-width"
    p = rule.save(tmp_path / "r.json")
    out = load_rule(p).apply(pd.read_csv(unl))
    assert out.trusted.any()
    # rows the calibrator cannot band (a score off its scale) are escalated, with the reason
    no_band = out.triage_uncertainty.isna()
    assert no_band.any() and not out.trusted[no_band].any()
    assert out.triage_error[no_band].str.contains("outside the prediction scale").all()
    assert (out.triage_error[~no_band] == "").all()


def test_cli_and_api_draw_the_same_split(files, tmp_path):
    lab, _ = files
    rule = tmp_path / "rule.json"
    res = run("triage", lab, *FIT, "--uncertainty", "hard", "--out", rule)
    assert res.exit_code == 0, res.output
    api_rule = fit_triage(pd.read_csv(lab), target="human", score="judge", scale=(1, 5),
                          tolerance=0.5, uncertainty="hard").rule
    assert json.loads(rule.read_text())["threshold"] == pytest.approx(api_rule.threshold)


def test_apply_with_a_rule_file_is_triage_rule(files, tmp_path):
    """`apply --calibrator RULE` triages, byte for byte as `triage --rule RULE --apply`."""
    lab, unl = files
    rule, a, b = tmp_path / "rule.json", tmp_path / "a.csv", tmp_path / "b.csv"
    assert run("triage", lab, *FIT, "--uncertainty", "hard", "--out", rule).exit_code == 0
    res = run("triage", "--rule", rule, "--apply", unl, "--apply-out", a)
    assert res.exit_code == 0, res.output
    res = run("apply", unl, "--calibrator", rule, "--out", b)
    assert res.exit_code == 0, res.output
    assert a.read_bytes() == b.read_bytes()
    assert "trusted" in pd.read_csv(b).columns
    res = run("apply", unl, "--calibrator", rule, "--out", tmp_path / "c.csv",
              "--n-ratings", 3)
    assert res.exit_code != 0 and "--n-ratings" in said(res)
    assert not (tmp_path / "c.csv").exists()
