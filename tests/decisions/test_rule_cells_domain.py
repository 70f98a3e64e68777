"""Triage rules read cells as written, know their domain, check their file (issue 43:
groups 01/02/03 typed to 1/2/3 at fit and never matched at apply; a 1-5 rule trusting a
0-100 table; format_version 99 and damaged keys; all labels equal trusted whatever the
judge said)."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from scoreband.cli import app
from scoreband.decisions import fit_triage, load_rule
from scoreband.decisions.rulefile import check_rule_doc, read_key
from scoreband.decisions.triage import OUT_OF_DOMAIN
from scoreband.errors import InputError
from tests.conftest import runner

FIT = ["--target", "human", "--scale", "1,5", "--score", "judge", "--tolerance", "0.5",
       "--risk", "0.2", "--groups", "grp"]


def _table(n=900, seed=0, codes=("01", "02", "03")) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    y = rng.integers(1, 6, n).astype(float)
    judge = np.clip(np.round(y + rng.normal(0, 0.5, n)), 1, 5)
    return pd.DataFrame({"human": y, "judge": judge, "grp": rng.choice(list(codes), n),
                         "hard": rng.uniform(size=n)})


def _write(df: pd.DataFrame, path):
    """The table in the format its suffix names, group codes as text (``01`` kept)."""
    ext = path.suffix
    if ext == ".csv":
        df.to_csv(path, index=False)
    elif ext == ".tsv":
        df.to_csv(path, index=False, sep="\t")
    elif ext == ".jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_parquet(path, index=False)
    return path


def run(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in res.output and "unexpected" not in res.output, res.output
    return res


def said(res) -> str:
    return " ".join(res.output.split())


def _read(path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".jsonl":
        return pd.read_json(path, lines=True, dtype=False)
    return pd.read_csv(path, sep="\t" if path.suffix == ".tsv" else ",", dtype=str,
                       keep_default_na=False)


def _check_groups_matched(res, out, codes=("01", "02", "03")):
    assert res.exit_code == 0, res.output
    text = said(res)
    assert "no labeled rows" not in text and "no calibration rows" not in text, text
    t = _read(out)
    assert sorted({str(g) for g in t["triage_group"]}) == list(codes)
    trusted = t["trusted"].astype(str).str.lower() == "true"
    for g in codes:  # every group has its own threshold: some of its rows kept
        assert trusted[t["triage_group"].astype(str) == g].mean() > 0.2, (g, text)


@pytest.mark.parametrize("commands", ["one", "two"])
@pytest.mark.parametrize("ext", [".csv", ".tsv", ".jsonl", ".parquet"])
def test_group_codes_as_written_fit_and_apply(tmp_path, ext, commands):
    """Fit and apply in one command (on the labeled table), or fit then apply the saved
    rule to new rows: the group codes as written (01 kept) match either way."""
    df = _table()
    lab = _write(df if commands == "one" else df.iloc[:700], tmp_path / f"lab{ext}")
    new = lab if commands == "one" else _write(df.iloc[700:].drop(columns="human"),
                                               tmp_path / f"new{ext}")
    rule, out = tmp_path / "rule.json", tmp_path / f"out{ext}"
    if commands == "one":
        res = run("triage", lab, *FIT, "--out", rule, "--apply", new, "--apply-out", out)
    else:
        assert run("triage", lab, *FIT, "--out", rule).exit_code == 0
        res = run("triage", "--rule", rule, "--apply", new, "--apply-out", out)
    _check_groups_matched(res, out)
    assert sorted(json.loads(rule.read_text())["groups"]) == ["01", "02", "03"]


def test_float_groups_with_an_empty_cell_match_integer_groups(tmp_path):
    """Groups written 1.0 / 2.0 / 3.0 (a column with an empty cell, stored as floats) and
    applied to a table whose groups are 1 / 2 / 3: the same groups."""
    df = _table(codes=(1, 2, 3))
    fit = df.iloc[:700].copy()
    fit["grp"] = fit["grp"].astype(float)
    fit.loc[fit.index[0], "grp"] = np.nan  # an empty cell: the column is floats
    lab = _write(fit, tmp_path / "lab.parquet")
    new = _write(df.iloc[700:], tmp_path / "new.csv")
    rule, out = tmp_path / "rule.json", tmp_path / "out.csv"
    res = run("triage", lab, *FIT, "--out", rule)
    assert res.exit_code == 0, res.output
    assert sorted(json.loads(rule.read_text())["groups"]) == ["1.0", "2.0", "3.0"]
    res = run("triage", "--rule", rule, "--apply", new, "--apply-out", out)
    _check_groups_matched(res, out, codes=("1", "2", "3"))


def test_api_fit_on_typed_frame_applies_to_text_cells(tmp_path):
    df = _table(codes=(1, 2, 3))
    fit = df.iloc[:700].copy()
    fit["grp"] = fit["grp"].astype(float)  # 1.0, 2.0, 3.0
    rule = fit_triage(fit, target="human", score="judge", scale=(1, 5), tolerance=0.5,
                      alpha=0.2, groups="grp").rule
    new = df.iloc[700:].astype(str)  # "1", "2", "3" as a text read gives them
    out = rule.apply(new)
    assert out["trusted"].mean() > 0.3
    assert not any("no labeled rows" in w for w in rule.warnings)
    # the path: read as written (01 kept) at fit and at apply
    df2 = _table()
    p = _write(df2, tmp_path / "t.csv")
    r2 = fit_triage(p, target="human", score="judge", scale=(1, 5), tolerance=0.5,
                    alpha=0.2, groups="grp").rule
    assert sorted(r2.groups) == ["01", "02", "03"]
    assert r2.apply(p)["trusted"].mean() > 0.3


# ------------------------------------------------------------------ domain
def _rule(tmp_path, n=600, seed=0):
    df = _table(n, seed)
    lab = _write(df, tmp_path / "lab.csv")
    rule = tmp_path / "rule.json"
    res = run("triage", lab, *FIT[:-2], "--uncertainty", "hard", "--by", "column", "--out",
              rule)
    assert res.exit_code == 0, res.output
    return rule


@pytest.mark.parametrize("ext", [".csv", ".jsonl", ".parquet"])
def test_a_table_on_another_scale_is_refused(tmp_path, ext):
    rule = _rule(tmp_path)
    df = _table(600, seed=1).drop(columns="human")
    df["judge"] = (df["judge"] - 1) * 25  # the same judge's 0-100 scores
    new = _write(df, tmp_path / f"new{ext}")
    out = tmp_path / f"out{ext}"
    res = run("triage", "--rule", rule, "--apply", new, "--apply-out", out)
    assert res.exit_code != 0
    text = said(res)
    assert "'judge'" in text and "[1, 5]" in text and "outside" in text, text
    assert not out.exists()
    with pytest.raises(InputError, match="outside the range"):
        load_rule(rule).apply(df)


def test_rows_outside_the_domain_are_escalated_and_said(tmp_path):
    rule = _rule(tmp_path)
    df = _table(200, seed=2).drop(columns="human")
    df.loc[:3, "judge"] = 40.0  # four rows typed on another scale
    new, out = _write(df, tmp_path / "new.csv"), tmp_path / "out.csv"
    res = run("triage", "--rule", rule, "--apply", new, "--apply-out", out)
    assert res.exit_code == 0, res.output
    text = said(res)
    assert "4 of 200 rows lie outside" in text and "'judge'" in text, text
    assert "4 of them outside the rule's domain" in text
    t = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert (t["trusted"].iloc[:4] == "False").all()
    assert (t["triage_error"].iloc[:4] == OUT_OF_DOMAIN).all()
    assert (t["triage_error"].iloc[4:] == "").all()


@pytest.mark.parametrize("n", [1, 5, 13, 30])
def test_tables_drawn_like_the_labeled_rows_are_never_refused(tmp_path, n):
    """Small tables drawn like the labeled rows, continuous uncertainty column included:
    never refused over 200 draws; a row outside the range is escalated, not an error."""
    rule = load_rule(_rule(tmp_path, n=300))
    rng = np.random.default_rng(n)
    flagged = 0
    for _ in range(200):
        df = _table(n, seed=int(rng.integers(1 << 30))).drop(columns="human")
        out = rule.apply(df)  # raises if refused
        flagged += int((out["triage_error"] == OUT_OF_DOMAIN).sum())
    assert flagged / (200 * n) < 0.02


# ------------------------------------------------------------------ rule files
def test_format_version_and_damaged_keys_are_named(tmp_path):
    rule = _rule(tmp_path)
    doc = json.loads(rule.read_text())

    def refused(change, *words):
        d = json.loads(json.dumps(doc))
        change(d)
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(d))
        res = run("triage", "--rule", p, "--apply", tmp_path / "lab.csv", "--apply-out",
                  tmp_path / "o.csv")
        assert res.exit_code != 0
        text = said(res)
        # the console wraps a long temporary path anywhere, even inside the file's name
        assert "bad.json" in res.output.replace("\n", ""), text
        for w in words:
            assert w in text, (w, text)
        with pytest.raises(InputError):
            load_rule(p)

    refused(lambda d: d.update(format_version=99), "format_version 99", "version 1",
            "fit the rule again")
    refused(lambda d: d.pop("format_version"), "format_version", "fit the rule again")
    refused(lambda d: d["groups"]["(all)"].update(threshold="abc"), "'threshold'", "'abc'")
    refused(lambda d: d.update(tolerance=[0.5]), "'tolerance'")
    refused(lambda d: d["map"].pop("x"), "'map.x'")
    refused(lambda d: d["uncertainty_model"].update(name="magic"),
            "'uncertainty_model.name'", "'magic'")
    refused(lambda d: d.update(groups="all"), "'groups'")


def test_shared_rule_doc_check():
    kw = dict(fmt="scoreband-x", version=2, what="x rule", refit="scoreband x --out r.json")
    assert check_rule_doc({"format": "scoreband-x", "format_version": 2}, "r.json", **kw)
    for doc, words in (([1], "list"), ({"format": "other"}, "'other'"),
                       ({"format": "scoreband-x", "format_version": "2"}, "'2'"),
                       ({"format": "scoreband-x", "format_version": True}, "True")):
        with pytest.raises(InputError, match="r.json") as e:
            check_rule_doc(doc, "r.json", **kw)
        assert words in str(e.value) and "scoreband x --out r.json" in str(e.value)
    with pytest.raises(InputError, match="key 'a.b' is missing"):
        read_key({"a": {}}, "a.b", float, "r.json")
    with pytest.raises(InputError, match="key 'a' holds 'x'"):
        read_key({"a": "x"}, "a", float, "r.json")
    assert read_key({}, "a", float, "r.json", default=None) is None


# ------------------------------------------------------------------ degenerate labels
def test_all_labels_equal_is_refused_without_library_warnings(tmp_path):
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"human": np.full(400, 3.0), "judge": rng.integers(1, 6, 400)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InputError, match="same human score"):
            fit_triage(df, target="human", score="judge", scale=(1, 5), tolerance=0.5)
    lab = _write(df, tmp_path / "lab.csv")
    res = run("triage", lab, *FIT[:-2], "--out", tmp_path / "r.json")
    assert res.exit_code != 0 and "same human score" in said(res)
    assert "--target" in said(res) and "Warning" not in res.output


def test_per_group_rule_that_keeps_nothing_says_why(tmp_path):
    df = _table(300, codes=[f"g{i}" for i in range(10)])
    rule = fit_triage(df, target="human", score="judge", scale=(1, 5), tolerance=0.5,
                      alpha=0.1, groups="grp").rule
    assert all(v["accepted_share"] == 0 for v in rule.groups.values())
    note = " ".join(rule.warnings)
    assert "keeps nothing" in note and "calibration rows per group" in note
    assert "pooled" in note


# ------------------------------------------------------------------ text as data
HOSTILE = ["$5-$10 tier", "$\\undefinedcmd{1}$", "a_b^c"]


def test_group_names_are_drawn_as_written(tmp_path):
    import io

    from scoreband.decisions.report import triage_figure

    df = _table(900, codes=HOSTILE)
    lab = _write(df, tmp_path / "lab.csv")
    rule, html = tmp_path / "rule.json", tmp_path / "t.html"
    res = run("triage", lab, *FIT, "--out", rule, "--html", html)
    assert res.exit_code == 0, res.output
    res = run("report", rule, "--out", tmp_path / "r.html")
    assert res.exit_code == 0, res.output
    doc = json.loads(rule.read_text())
    assert sorted(doc["groups"]) == sorted(HOSTILE)
    thr = [v for v in doc["report"]["curve"]["threshold"] if isinstance(v, float)]
    for g in doc["groups"].values():  # every group marked on the figure
        g["threshold"] = thr[len(thr) // 2]
    f = triage_figure(doc)
    f.savefig(io.BytesIO(), format="svg")  # mathtext would fail here on \undefinedcmd
    shown = [t._preprocess_math(t.get_text()) for t in f.axes[0].texts]
    assert sorted(s.split(": ")[0] for s, _ in shown) == sorted(HOSTILE)
    assert not any(math for _, math in shown)
    labels = [ln.get_label() for ln in f.axes[0].get_lines()]
    assert "risk allowed (--risk) = 0.2" in labels and not any("alpha" in x for x in labels)


def test_report_names_the_damaged_key_of_a_rule(tmp_path):
    rule = _rule(tmp_path)
    doc = json.loads(rule.read_text())

    def refused(change, *words):
        d = json.loads(json.dumps(doc))
        change(d)
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(d))
        res = run("report", p, "--out", tmp_path / "r.html")
        assert res.exit_code != 0
        text = said(res)
        # the console wraps a long temporary path anywhere, even inside the file's name
        assert "bad.json" in res.output.replace("\n", ""), text
        for w in words:
            assert w in text, (w, text)

    refused(lambda d: d["groups"]["(all)"].update(threshold="abc"),
            "groups.(all).threshold", "'abc'")
    refused(lambda d: d["report"]["curve"].update(risk=[0.1]), "report.curve", "length")
    refused(lambda d: d.update(format_version=99), "format_version", "99")


@pytest.mark.parametrize("ext", [".csv", ".parquet"])
def test_apply_command_with_a_rule_reads_groups_and_checks_the_domain(tmp_path, ext):
    """`apply TABLE --calibrator RULE` runs the same stage: 01 kept, 0-100 refused."""
    df = _table()
    lab = _write(df.iloc[:700], tmp_path / f"lab{ext}")
    new = _write(df.iloc[700:].drop(columns="human"), tmp_path / f"new{ext}")
    rule, out = tmp_path / "rule.json", tmp_path / f"out{ext}"
    assert run("triage", lab, *FIT, "--out", rule).exit_code == 0
    _check_groups_matched(run("apply", new, "--calibrator", rule, "--out", out), out)
    big = df.iloc[700:].drop(columns="human")
    big["judge"] = (big["judge"] - 1) * 25
    res = run("apply", _write(big, tmp_path / f"big{ext}"), "--calibrator", rule, "--out",
              tmp_path / f"o2{ext}")
    assert res.exit_code != 0 and "outside the range" in said(res)
    assert not (tmp_path / f"o2{ext}").exists()
