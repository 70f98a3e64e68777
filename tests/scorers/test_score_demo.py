"""End to end at a small size: train a tiny scorer, score a table with bad rows, run the demo."""

import json

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from scoreband.cli import app
from scoreband.scorers.calibrate import calibrate_model
from scoreband.scorers.train import TrainConfig, train_scorer
from scoreband.world import make_dataset
from tests.conftest import runner

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("model")
    train_scorer(make_dataset(120, 1, n_annotators=3), make_dataset(40, 2, n_annotators=3), d,
                 TrainConfig(epochs=1, head_epochs=3, clusters=2, patience=3))
    calibrate_model(d, n=120)
    return d


def test_score_keeps_every_row_and_flags_bad_ones(tmp_path, model_dir):
    df = make_dataset(5, 3).to_frame(tmp_path / "imgs")
    (tmp_path / "imgs" / "text.png").write_text("not an image")
    raw = open(df.loc[0, "image"], "rb").read()
    (tmp_path / "imgs" / "trunc.png").write_bytes(raw[: len(raw) // 2])
    Image.new("RGB", (80, 40), "red").save(tmp_path / "imgs" / "wide.jpg")
    extra = pd.DataFrame({
        "id": ["a", "b", "c", "d", "e", "f"],
        "image": ["imgs/text.png", "imgs/trunc.png", "missing.png", df.loc[0, "image"],
                  df.loc[0, "image"], "imgs/wide.jpg"],  # relative to the table's folder
        "caption": ["a red star", "a red star", "a red star", "  ",
                    "a " + "very " * 60 + "red star", "a red circle"],
    })
    table = pd.concat([df, extra], ignore_index=True)
    src = tmp_path / "pairs.parquet"
    table.to_parquet(src)
    out = tmp_path / "scored.csv"
    res = runner.invoke(app, ["score", str(src), "--model", str(model_dir), "--out", str(out)])
    assert res.exit_code == 0, res.output
    s = pd.read_csv(out, keep_default_na=False)
    assert len(s) == 11 and list(s.columns[: len(table.columns)]) == list(table.columns)
    err = dict(zip(s["id"], s["band_error"], strict=True))
    assert "not a readable image" in err["a"]
    assert "could not be decoded" in err["b"]
    assert "not found" in err["c"]
    assert "empty caption" in err["d"]
    assert err["e"] == "" and s.loc[s["id"] == "e", "band_truncated"].item() in (True, "True")
    assert err["f"] == ""
    ok = s[s["band_error"] == ""]
    lo, m, hi = (ok[c].astype(float) for c in ("band_lo", "band_median", "band_hi"))
    assert ((1 <= lo) & (lo <= m) & (m <= hi) & (hi <= 5)).all()  # the calibrator's 1-5
    for c in ("band_lo", "band_median", "band_hi"):  # and the same on [0, 1]
        np.testing.assert_allclose(ok[c + "01"].astype(float), (ok[c].astype(float) - 1) / 4)
    assert s["scorer_fingerprint"].str.startswith("sha256:").all()


def test_demo_end_to_end_small(tmp_path, model_dir):
    from scoreband.studies.demo import METRICS, ROWS, run

    result = run(n_test=60, seeds=2, model=str(model_dir), mc_passes=3)
    result.write(tmp_path / "demo")
    doc = result.doc
    assert doc["study"] == "demo"
    saved = json.loads((tmp_path / "demo" / "results.json").read_text())
    for s in ("clean", "noisy", "ood_painting"):
        for row in ROWS:
            for part in ("before", "after"):
                assert set(saved[s][row][part]) >= set(METRICS)
                assert set(saved[s][row][part]["coverage"]) == {"mean", "std"}
    assert doc["clean"]["chained_ci"]["after"]["coverage"]["mean"] > 0.5
    for png in ("widths.png", "examples.png"):
        with Image.open(tmp_path / "demo" / png) as im:
            im.load()
            assert im.size[0] > 300 and np.asarray(im).std() > 5
    assert "| chained_ci |" in (tmp_path / "demo" / "results.md").read_text()


def test_bundled_model_loads_and_matches_its_calibrator():
    from scoreband.backbones import list_backbones, resolve_backbone
    from scoreband.conformal import load_calibrator
    from scoreband.errors import InputError
    from scoreband.scorers.scorer import Scorer, bundled_model_dir

    assert "embedded:default" in list_backbones()
    with pytest.raises(InputError, match="available: embedded:default"):
        resolve_backbone("embedded:nope")
    with pytest.raises(InputError, match="unknown backbone .foo.; choose one of"):
        resolve_backbone("foo")
    scorer = Scorer.load("embedded:default")
    _, doc = load_calibrator(bundled_model_dir() / "calibrator.json",
                             scorer_fingerprint=scorer.fingerprint)
    assert doc["scorer_fingerprint"] == scorer.fingerprint
    ds = make_dataset(16, seed=11)
    preds = scorer.predict_heads(ds.images, ds.captions)
    assert (np.diff(preds["chained_ci"].quantiles, axis=1) >= 0).all()
    assert (bundled_model_dir() / "MODEL_CARD.md").exists()


def test_score_resumes_from_its_journal(tmp_path):
    """An interrupted run's journal is reused: the rows it holds are not scored again and the
    output equals an uninterrupted run's."""
    from scoreband.scorers.stages import score_table
    from scoreband.world import make_dataset

    ds = make_dataset(12, 4)
    df = ds.to_frame(tmp_path / "img")
    df["image"] = [str(p) for p in df["image"]]
    journal = tmp_path / "out.partial.jsonl"
    full, bad, _ = score_table(df, batch_size=5, journal=journal)
    lines = journal.read_text().splitlines()
    assert len(lines) == 12
    # as after a kill during the second batch: the first batch journaled, a torn line
    journal.write_text("\n".join(lines[:5]) + "\n" + lines[5][:20])
    again, bad2, _ = score_table(df, batch_size=5, journal=journal)
    assert again.attrs["reused_rows"] == 5 and bad2 == bad
    for c in ("band_median", "band_lo", "band_hi"):
        np.testing.assert_array_equal(again[c].to_numpy(), full[c].to_numpy())


def test_captions_outside_the_models_vocabulary_are_flagged(tmp_path):
    from scoreband.scorers.stages import score_table
    from scoreband.world import make_dataset

    ds = make_dataset(3, 5)
    df = ds.to_frame(tmp_path / "img")
    df["image"] = [str(p) for p in df["image"]]
    df.loc[1, "caption"] = "a dog playing frisbee on the beach"
    df.loc[2, "caption"] = "123 !!"
    out, bad, _ = score_table(df)
    assert out.loc[0, "band_ood"] == ""
    assert "'dog'" in out.loc[1, "band_ood"] and "'frisbee'" in out.loc[1, "band_ood"]
    assert "no words" in out.loc[2, "band_ood"]
    assert bad == 0  # flagged, still scored


@pytest.mark.parametrize("damage", ["truncated", "bad header", "config not json",
                                    "config empty"])
def test_a_damaged_model_folder_is_a_clear_error(tmp_path, damage):
    import shutil

    from scoreband.cli import app
    from scoreband.scorers.scorer import bundled_model_dir
    from scoreband.world import make_dataset

    m = tmp_path / "model"
    shutil.copytree(bundled_model_dir(), m, ignore=shutil.ignore_patterns("checkpoint"))
    w, c = m / "model.safetensors", m / "config.json"
    if damage == "truncated":
        w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])
    elif damage == "bad header":
        w.write_bytes(b"\xff" * 8 + w.read_bytes()[8:])
    elif damage == "config not json":
        c.write_text("{not json")
    else:
        c.write_text("{}")
    df = make_dataset(2, 1).to_frame(tmp_path / "img")
    df.to_csv(tmp_path / "t.csv", index=False)
    r = runner.invoke(app, ["score", str(tmp_path / "t.csv"), "--model", str(m),
                            "--out", str(tmp_path / "o.csv")])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    said = "".join(r.output.split())  # the console folds a long path anywhere
    assert ("safetensors" in said) if "header" in damage or damage == "truncated" \
        else ("config" in said)


def test_a_version_1_embedded_folder_loads_as_the_same_scorer(tmp_path):
    """The embedded format before version 2 (the bundled model's own files until now):
    same weights, same fingerprint (its calibrators still match), same predictions."""
    import json
    import shutil

    from scoreband.checksums import write_checksums
    from scoreband.scorers.scorer import Scorer, bundled_model_dir
    from scoreband.world import make_dataset

    old = tmp_path / "v1"
    shutil.copytree(bundled_model_dir(), old)
    meta = json.loads((old / "config.json").read_text())
    v1 = {k: meta[k] for k in ("backbone_name", "backbone", "vocab", "heads", "levels",
                               "training")}
    (old / "config.json").write_text(json.dumps({"format": "scoreband.scorer",
                                                 "format_version": 1, **v1}))
    write_checksums(old, ["config.json", "model.safetensors"])
    new, was = Scorer.load("embedded:default"), Scorer.load(old)
    assert was.fingerprint == new.fingerprint and meta["format_version"] == 2
    ds = make_dataset(20, 3)
    np.testing.assert_array_equal(was.predict(ds.images, ds.captions).quantiles,
                                  new.predict(ds.images, ds.captions).quantiles)


def test_the_embedded_scorer_through_onnx_runtime_equals_eager(tmp_path, monkeypatch):
    """``runtime="onnx"`` (score --runtime onnx): the encoder exported and run by ONNX
    Runtime gives eager torch's quantiles and embeddings within 1e-5; where it cannot run
    (the extra missing) the scorer warns and stays eager; a bad name is refused."""
    import warnings

    import scoreband.backbones.embedded as emb
    from scoreband.errors import InputError
    from scoreband.scorers.scorer import Scorer

    pytest.importorskip("onnxruntime")
    ds = make_dataset(40, 5)
    eager = Scorer.load("embedded:default").predict_heads(ds.images, ds.captions)
    fast = Scorer.load("embedded:default", runtime="onnx")
    assert fast.runtime == "onnx"
    got = fast.predict_heads(ds.images, ds.captions)
    for k in eager:
        np.testing.assert_allclose(got[k].quantiles, eager[k].quantiles, atol=1e-5)
    np.testing.assert_allclose(got["chained_ci"].embedding, eager["chained_ci"].embedding,
                               atol=1e-5)

    def missing(model):
        raise ImportError("no onnxruntime", name="onnxruntime")

    monkeypatch.setattr(emb, "_onnx_session", missing)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert Scorer.load("embedded:default", runtime="onnx").runtime == "eager"
    assert any('pip install "scoreband[onnx]"' in str(x.message) for x in w)
    with pytest.raises(InputError, match="choose eager or onnx"):
        Scorer.load("embedded:default", runtime="tensorrt")
    monkeypatch.undo()
    df = make_dataset(6, 3).to_frame(tmp_path / "imgs")
    df.to_csv(tmp_path / "pairs.csv", index=False)
    out = tmp_path / "scored.csv"
    r = runner.invoke(app, ["score", str(tmp_path / "pairs.csv"), "--runtime", "onnx",
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    prov = json.loads((tmp_path / "scored.csv.provenance.json").read_text())
    assert prov["components"]["backbone"]["runtime"] == "onnx"
