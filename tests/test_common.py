"""The contract every registered calibration method keeps, looped over the registry:
fit -> save -> load -> apply gives exactly the bands of ``predict``, in Python and through the
CLI (``calibrate`` + ``apply``), and ``evaluate``'s bands are those of calibrate + apply on the
same split.

A method added to the registry without a case here fails ``test_every_method_has_a_case``.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from scoreband.cli import app
from scoreband.columns import ColumnSpec, load_inputs
from scoreband.conformal import (
    METHODS,
    list_methods,
    load_calibrator,
    make_calibrator,
    save_calibrator,
)
from scoreband.conformal.randomness import frame_keys
from scoreband.metrics import coverage, sharpness
from scoreband.protocol import split_indices
from scoreband.records import Predictions, Scale

SCALE = Scale(1, 5, integer=True)
runner = CliRunner()


def judge_table(n: int = 400, seed: int = 0) -> pd.DataFrame:
    """Shaped like a real judge table: targets are means of 3 ratings on 1-5 (ties, skew
    towards the top), five score-token log-probs, the expected score, an uncalibrated interval,
    an embedding and a task."""
    rng = np.random.default_rng(seed)
    quality = rng.beta(4, 2, n) * 4 + 1
    ratings = np.clip(np.rint(quality[:, None] + rng.normal(0, 0.7, (n, 3))), 1, 5)
    human = ratings.mean(1)
    noisy = quality + rng.normal(0, 0.6, n)
    k = np.arange(1, 6)
    lp = -0.5 * ((k[None, :] - noisy[:, None]) / 0.8) ** 2
    lp -= np.log(np.exp(lp).sum(1, keepdims=True))
    df = pd.DataFrame(lp, columns=[f"logp_{i}" for i in k])
    df["judge_expected"] = np.exp(lp) @ k
    spread = rng.uniform(0.2, 0.8, n)
    df["lo"] = np.clip(df["judge_expected"] - spread, 1, 5)
    df["hi"] = np.clip(df["judge_expected"] + spread, 1, 5)
    task = rng.choice(["coherence", "fluency", "relevance"], n)
    centers = {"coherence": 0.0, "fluency": 3.0, "relevance": 6.0}
    for j in range(2):
        df[f"emb_{j}"] = [centers[t] + rng.normal() for t in task]
    df["task"] = task
    df["human"] = human
    df["ratings"] = [";".join(str(int(v)) for v in r) for r in ratings]
    df["clip_score"] = 0.1 + 0.3 * ((noisy - 1) / 4).clip(0, 1) ** 1.5  # another scale
    return df


# Each case: the method, extra make_calibrator arguments, the CLI flags that mean the same, and
# the columns it reads.
BASE = ["--target", "human", "--scale", "1,5", "--n-ratings", "3"]
PRED = ["--median", "judge_expected"]
INTERVAL = PRED + ["--lo", "lo", "--hi", "hi"]
FEATURES = PRED + ["--features", "logp_*"]
CASES = {
    "split": ("split", {}, PRED),
    "crc": ("crc", {}, INTERVAL),
    "crc-exact": ("crc-exact", {}, INTERVAL),
    "crc-same": ("crc-same", {}, INTERVAL),
    "crc-cluster": ("crc-cluster", {"n_clusters": 3}, INTERVAL + ["--embedding", "emb_*",
                                                                 "--clusters", "3"]),
    "crc-cluster-mondrian": ("crc-cluster-mondrian", {"n_clusters": 3},
                             INTERVAL + ["--embedding", "emb_0,emb_1", "--clusters", "3"]),
    "cqr": ("cqr", {}, FEATURES),
    "fitted": ("fitted", {}, FEATURES),
    "fitted-median-only": ("fitted", {}, PRED),
    "chr": ("chr", {}, FEATURES),
    "chr-no-randomize": ("chr", {"randomize": False}, FEATURES + ["--no-randomize"]),
    "cqr-randomize": ("cqr", {"randomize": True}, FEATURES + ["--randomize"]),
    "split-randomize": ("split", {"randomize": True}, PRED + ["--randomize"]),
    "marginal-randomize": ("marginal", {"randomize": True}, PRED + ["--randomize"]),
    "r2ccp": ("r2ccp", {}, FEATURES),
    "marginal": ("marginal", {}, PRED),
    "auto": ("auto", {}, FEATURES + ["--lo", "lo", "--hi", "hi"]),
    "auto-boundary": ("auto", {"adjust_boundary": True}, FEATURES + ["--adjust-boundary"]),
    "mondrian-split": ("split", {"mondrian": "given"}, PRED + ["--mondrian", "--groups",
                                                               "task"]),
    "mondrian-chr": ("chr", {"mondrian": "given"}, FEATURES + ["--mondrian", "--groups",
                                                               "task"]),
    "difficulty-crc": ("crc", {"mondrian": "difficulty"}, INTERVAL + ["--mondrian"]),
    "weighted-split": ("weighted-split", {}, PRED + ["--embedding", "emb_*"]),
    "isotonic-split": ("split", {"map": "isotonic"}, ["--median", "clip_score", "--map",
                                                      "isotonic"]),
    "linear-auto": ("auto", {"map": "linear"}, ["--median", "clip_score", "--features",
                                                "logp_*", "--map", "linear"]),
}


SWITCHES = ("--mondrian", "--randomize", "--no-randomize", "--adjust-boundary")


def _spec_from_flags(flags: list[str]) -> ColumnSpec:
    """The ColumnSpec the CLI builds from these flags (for the library side of a case)."""
    opts = dict(zip(flags[::2], flags[1::2], strict=False))
    get = opts.get
    return ColumnSpec(
        scale=SCALE, target="human", median=get("--median"), lo=get("--lo"), hi=get("--hi"),
        features=get("--features"), embedding=get("--embedding"), groups=get("--groups"),
        raw_predictions="--map" in opts)


def _library_band(name, df_cal, df_test):
    method, kw, flags = CASES[name]
    spec = _spec_from_flags([f for f in flags if f not in SWITCHES])
    spec = spec.resolved(df_cal.columns)
    cal_in = load_inputs(df_cal, spec, n_ratings=3)
    test_in = load_inputs(df_test, spec, require_target=False)
    # the rows' identities, as the commands take them (randomised tie-breaking): every cell
    # of the row as the command reads it (apply reads a table without the target columns)
    cal_in.pred.keys = frame_keys(df_cal.iloc[cal_in.rows])
    test_in.pred.keys = frame_keys(df_test.drop(columns=["human", "ratings"],
                                                errors="ignore").iloc[test_in.rows])
    cal = make_calibrator(method, 0.1, scale=SCALE, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal.fit(cal_in.pred, cal_in.y01, groups=cal_in.groups)
        band = cal.predict(test_in.pred, groups=test_in.groups)
    return cal, band, test_in


@pytest.fixture(scope="module")
def halves():
    df = judge_table(400)
    cal, test = split_indices(len(df), 0.5, np.random.default_rng(0))
    return df.iloc[cal].reset_index(drop=True), df.iloc[test].reset_index(drop=True)


def test_every_method_has_a_case():
    used = set()
    for method, kw, _ in CASES.values():
        cal = make_calibrator(method, 0.1, scale=SCALE, **kw)
        while cal is not None:
            used.add(cal.method)
            cal = getattr(cal, "base", None)
    assert set(list_methods()) <= used, set(list_methods()) - used
    assert {m for m, _, _ in CASES.values()} == set(METHODS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_fit_save_load_apply_equals_predict(tmp_path, halves, name):
    df_cal, df_test = halves
    cal, band, test_in = _library_band(name, df_cal, df_test)
    path = save_calibrator(tmp_path / "c.json", cal)
    loaded, _ = load_calibrator(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = loaded.predict(test_in.pred, groups=test_in.groups)
    np.testing.assert_array_equal(again.lo01, band.lo01)
    np.testing.assert_array_equal(again.hi01, band.hi01)
    np.testing.assert_allclose(again.median01, band.median01, rtol=0, atol=1e-12)
    assert again.method == band.method
    assert (again.sets01 is None) == (band.sets01 is None)
    if band.sets01 is not None:
        assert again.sets01 == band.sets01
    assert band.width01.mean() < 1.0  # a real band, not the whole scale


@pytest.mark.parametrize("name", sorted(CASES))
def test_cli_calibrate_apply_equals_library(tmp_path, halves, name):
    df_cal, df_test = halves
    method, kw, flags = CASES[name]
    df_cal.to_csv(tmp_path / "cal.csv", index=False)
    df_test.drop(columns=["human", "ratings"]).to_csv(tmp_path / "test.csv", index=False)
    res = runner.invoke(app, ["calibrate", str(tmp_path / "cal.csv"), *BASE, "--method", method,
                              *flags, "--out", str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    saved = json.loads((tmp_path / "c.json").read_text())["inputs"]["columns"]
    assert all(len(c) > 1 for c in saved["features"] + saved["embedding"]), saved
    res = runner.invoke(app, ["apply", str(tmp_path / "test.csv"), "--calibrator",
                              str(tmp_path / "c.json"), "--out", str(tmp_path / "out.csv")])
    assert res.exit_code == 0, res.output
    out = pd.read_csv(tmp_path / "out.csv")
    _, band, _ = _library_band(name, df_cal, df_test)
    if kw.get("adjust_boundary"):
        from scoreband.conformal import adjust_band

        band = adjust_band(band, 3)
    np.testing.assert_allclose(out["band_lo01"], band.lo01, atol=1e-12)
    np.testing.assert_allclose(out["band_hi01"], band.hi01, atol=1e-12)
    np.testing.assert_allclose(out["band_lo"], band.lo, atol=1e-9)
    assert len(out) == len(df_test) and out["band_error"].isna().all()
    if band.sets01 is not None:
        assert out["band_sets"].notna().all()


@pytest.mark.parametrize("name", ["split", "crc", "chr", "auto", "isotonic-split"])
def test_evaluate_is_calibrate_plus_apply_on_the_same_split(tmp_path, name):
    df = judge_table(400, seed=3)
    method, kw, flags = CASES[name]
    df.to_csv(tmp_path / "all.csv", index=False)
    extra = ["--adjust-boundary"] if "--adjust-boundary" in flags else []
    res = runner.invoke(app, ["evaluate", str(tmp_path / "all.csv"), *BASE, "--method", method,
                              *flags, *extra, "--seeds", "1", "--out", str(tmp_path / "m.json")])
    assert res.exit_code == 0, res.output
    ev = json.loads((tmp_path / "m.json").read_text())
    cal, test = split_indices(len(df), 0.5, np.random.default_rng(0))
    df.iloc[cal].to_csv(tmp_path / "cal.csv", index=False)
    df.iloc[test].to_csv(tmp_path / "test.csv", index=False)
    assert runner.invoke(app, ["calibrate", str(tmp_path / "cal.csv"), *BASE, "--method",
                               method, *flags, "--out", str(tmp_path / "c.json")]).exit_code == 0
    assert runner.invoke(app, ["apply", str(tmp_path / "test.csv"), "--calibrator",
                               str(tmp_path / "c.json"), "--out",
                               str(tmp_path / "o.csv")]).exit_code == 0
    out = pd.read_csv(tmp_path / "o.csv")
    y01 = SCALE.to01(out["human"].to_numpy())
    assert ev["after"]["coverage"]["mean"] == pytest.approx(
        coverage(out["band_lo01"], out["band_hi01"], y01), abs=1e-12)
    assert ev["after"]["sharpness"]["mean"] == pytest.approx(
        sharpness(out["band_lo01"], out["band_hi01"]), abs=1e-12)


def test_features_are_saved_as_column_names(tmp_path, halves):
    df_cal, df_test = halves
    df_cal.to_csv(tmp_path / "cal.csv", index=False)
    res = runner.invoke(app, ["calibrate", str(tmp_path / "cal.csv"), *BASE, *FEATURES,
                              "--method", "cqr", "--out", str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    cols = json.loads((tmp_path / "c.json").read_text())["inputs"]["columns"]
    assert cols["features"] == [f"logp_{k}" for k in range(1, 6)]
    # a table without one of those columns: a clear error naming it, exit 2, nothing written
    df_test.drop(columns=["logp_3"]).to_csv(tmp_path / "t.csv", index=False)
    res = runner.invoke(app, ["apply", str(tmp_path / "t.csv"), "--calibrator",
                              str(tmp_path / "c.json"), "--out", str(tmp_path / "o.csv")])
    assert res.exit_code == 2 and "logp_3" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o.csv").exists()


def test_feature_order_follows_the_saved_names_not_the_table(tmp_path, halves):
    df_cal, df_test = halves
    cal, band, test_in = _library_band("cqr", df_cal, df_test)
    shuffled = df_test[list(reversed(df_test.columns))]
    spec = ColumnSpec(scale=SCALE, median="judge_expected",
                      features=[f"logp_{k}" for k in range(1, 6)])
    again = cal.predict(load_inputs(shuffled, spec, require_target=False).pred)
    np.testing.assert_array_equal(again.lo01, band.lo01)


def test_library_predictions_outside_the_scale_are_flagged(tmp_path, halves):
    df_cal, df_test = halves
    df_cal.to_csv(tmp_path / "cal.csv", index=False)
    assert runner.invoke(app, ["calibrate", str(tmp_path / "cal.csv"), *BASE, *PRED,
                               "--out", str(tmp_path / "c.json")]).exit_code == 0
    t = df_test.copy()
    t.loc[0, "judge_expected"] = 7.5
    t.to_csv(tmp_path / "t.csv", index=False)
    res = runner.invoke(app, ["apply", str(tmp_path / "t.csv"), "--calibrator",
                              str(tmp_path / "c.json"), "--out", str(tmp_path / "o.csv")])
    assert res.exit_code == 0, res.output
    out = pd.read_csv(tmp_path / "o.csv")
    assert "outside the prediction scale" in out.loc[0, "band_error"]
    assert np.isnan(out.loc[0, "band_lo"]) and out["band_lo"].iloc[1:].notna().all()


def test_predictions_object_roundtrip_keeps_n_ratings():
    p = Predictions([0.5, 0.6], n_ratings=[3, 3])
    assert p.take([1]).n_ratings.tolist() == [3.0]


@pytest.mark.parametrize("args,msg", [
    (["--median", "clip_score", "--map", "isotonic", "--method", "split"], "at least 10 items"),
    (["--median", "judge_expected", "--map", "cubic"], "unknown map"),
    (["--median", "judge_expected", "--features", "logp_*", "--method", "chr",
      "--lo", "lo"], "both --lo and --hi"),
])
def test_real_table_bad_input_is_a_clear_error(tmp_path, args, msg):
    df = judge_table(40 if "--map" in args and "isotonic" in args else 400)
    df.to_csv(tmp_path / "t.csv", index=False)
    if "at least 10 items" in msg:
        df.iloc[:20].to_csv(tmp_path / "t.csv", index=False)
    res = runner.invoke(app, ["calibrate", str(tmp_path / "t.csv"), *BASE, *args,
                              "--out", str(tmp_path / "c.json")])
    assert res.exit_code == 2, res.output
    assert msg in " ".join(res.output.split()) and "Traceback" not in res.output
    assert not (tmp_path / "c.json").exists()


def test_auto_on_a_point_column_alone_weighs_split_against_a_fitted_score(tmp_path):
    from scoreband.conformal import Auto

    df = judge_table(400)
    df.to_csv(tmp_path / "t.csv", index=False)
    res = runner.invoke(app, ["calibrate", str(tmp_path / "t.csv"), *BASE, "--median",
                              "judge_expected", "--method", "auto", "--out",
                              str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    state = json.loads((tmp_path / "c.json").read_text())
    assert set(state["calibrator"]["model"]["widths"]) == {"split", "fitted", "marginal"}
    with pytest.raises(Exception, match="at least two methods"):
        Auto(0.1, candidates=["split"]).fit(Predictions(np.linspace(0, 1, 400)),
                                            np.linspace(0, 1, 400))


def test_nan_features_are_reported_rows(tmp_path):
    df = judge_table(400)
    df.loc[3, "logp_2"] = np.nan
    df.loc[5, "logp_4"] = -np.inf
    df.to_csv(tmp_path / "t.csv", index=False)
    res = runner.invoke(app, ["calibrate", str(tmp_path / "t.csv"), *BASE, *FEATURES,
                              "--method", "chr", "--out", str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "2 of 400 rows skipped" in out and "logp_2" in out and "logp_4" in out


def test_conformal_core_imports_no_heavy_library():
    import subprocess
    import sys

    code = ("import sys, scoreband.conformal, scoreband.metrics, scoreband.conformal.persist; "
            "print(sorted(m for m in ('torch', 'pandas', 'sklearn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_no_import_cycles_in_the_package():
    import ast
    from pathlib import Path

    import scoreband

    root = Path(scoreband.__file__).parent
    mods = {}
    for f in root.rglob("*.py"):
        name = ".".join(("scoreband", *f.relative_to(root).with_suffix("").parts))
        mods[name.removesuffix(".__init__")] = f
    graph = {m: set() for m in mods}
    for m, f in mods.items():
        for node in ast.walk(ast.parse(f.read_text())):  # module-level and lazy imports alike
            if isinstance(node, ast.ImportFrom) and node.module in mods:
                graph[m].add(node.module)
                graph[m].update(f"{node.module}.{a.name}" for a in node.names
                                if f"{node.module}.{a.name}" in mods)
            elif isinstance(node, ast.Import):
                graph[m].update(a.name for a in node.names if a.name in mods)
        graph[m].discard(m)

    def reaches(src, dst, seen):
        for nxt in graph[src]:
            if nxt == dst:
                return True
            if nxt not in seen:
                seen.add(nxt)
                if reaches(nxt, dst, seen):
                    return True
        return False

    cyclic = sorted(m for m in graph if reaches(m, m, set()))
    assert not cyclic, cyclic
