"""Benchmark loaders on small fixture files written here in each benchmark's real format."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from scoreband.cli import app
from scoreband.datasets import list_benchmarks, load_benchmark, load_generic
from scoreband.datatypes import Scale
from scoreband.errors import InputError
from tests.conftest import runner


def _png(colour=(200, 0, 0)) -> bytes:
    b = io.BytesIO()
    Image.new("RGB", (12, 10), colour).save(b, format="PNG")
    return b.getvalue()


def test_polaris_hub_parquet_layout(tmp_path):
    root = tmp_path / "polaris"
    (root / "data").mkdir(parents=True)
    t = pa.table({
        "refs": [["a dog", "a brown dog"], ["two cats"], ["a car"]],
        "cand": ["a dog running", "a cat", "a red car"],
        "img": [{"bytes": _png(), "path": "x.jpg"}] * 3,
        "human_score": pa.array([0.75, 0.25, 1.0], pa.float32()),
    })
    pq.write_table(t.slice(0, 2), root / "data" / "test-00000-of-00002.parquet")
    pq.write_table(t.slice(2, 1), root / "data" / "test-00001-of-00002.parquet")
    df, b = load_benchmark("polaris", root, "test")
    assert len(df) == 3 and b.scale == Scale(0, 1)
    np.testing.assert_allclose(df["target01"], [0.75, 0.25, 1.0])
    assert df.loc[0, "references"] == "a dog;a brown dog"
    assert all(Image.open(p).size == (12, 10) for p in df["image"])
    assert df["n_ratings"].isna().all()  # not published per item
    with pytest.raises(InputError, match="no validation split"):
        load_benchmark("polaris", root, "validation")


def test_nebula_save_to_disk_layout(tmp_path):
    root = tmp_path / "nebula" / "test"
    root.mkdir(parents=True)
    t = pa.table({"refs": [["a"]], "cand": ["b"], "img": [{"bytes": _png(), "path": None}],
                  "human_score": [0.5]})
    with pa.ipc.new_stream(str(root / "data-00000-of-00001.arrow"), t.schema) as w:
        w.write_table(t)
    df, _ = load_benchmark("nebula", tmp_path / "nebula", "test")
    assert df.loc[0, "caption"] == "b" and df.loc[0, "target"] == 0.5


def test_flickr8k_expert(tmp_path):
    root = tmp_path / "f8k"
    (root / "Flicker8k_Dataset").mkdir(parents=True)
    (root / "Flickr8k.token.txt").write_text(
        "1000_a.jpg#0\tA child climbs stairs .\n1000_a.jpg#1\tA girl in pink .\n"
        "2000_b.jpg#0\tA black dog .\n")
    (root / "ExpertAnnotations.txt").write_text(
        "1000_a.jpg\t1000_a.jpg#0\t4\t4\t3\n1000_a.jpg\t2000_b.jpg#0\t1\t1\t2\n")
    df, b = load_benchmark("flickr8k-expert", root)
    assert b.scale == Scale(1, 4) and list(df["n_ratings"]) == [3, 3]
    assert df.loc[0, "ratings"] == "4;4;3" and df.loc[0, "target"] == pytest.approx(11 / 3)
    assert df.loc[1, "caption"] == "A black dog ."             # a caption of another image
    assert df.loc[0, "references"] == "A girl in pink ."       # the rated one left out
    assert df.loc[1, "references"] == "A child climbs stairs .;A girl in pink ."
    np.testing.assert_allclose(df["target01"], [(11 / 3 - 1) / 3, (4 / 3 - 1) / 3])
    (root / "ExpertAnnotations.txt").unlink()
    with pytest.raises(InputError, match="missing ExpertAnnotations.txt"):
        load_benchmark("flickr8k-expert", root)


def test_vicr_composite_evalmuse_mllm_judge(tmp_path):
    v = tmp_path / "vicr"
    v.mkdir()
    pd.DataFrame({"image": ["a.jpg", "b.jpg"], "caption": ["x", "y"],
                  "ratings": ["5;4;4;5", "1;2"]}).to_csv(v / "test.csv", index=False)
    df, _ = load_benchmark("vicr", v, "test")
    assert list(df["n_ratings"]) == [4, 2] and df.loc[0, "target"] == 4.5

    c = tmp_path / "composite"
    c.mkdir()
    pd.DataFrame({"image": ["c.jpg"], "caption": ["z"], "ratings": ["3;4"],
                  "source": ["coco"]}).to_csv(c / "composite.csv", index=False)
    df, _ = load_benchmark("composite", c)
    assert df.loc[0, "task"] == "coco" and df.loc[0, "target01"] == pytest.approx(0.625)

    e = tmp_path / "evalmuse"
    e.mkdir()
    (e / "val_list.json").write_text(json.dumps([
        {"prompt_id": "p1", "prompt": "a cat on a mat", "img_path": "imgs/1.png",
         "total_score": [5, 4, 3], "type": "animal"},
        {"prompt": "a dog", "img_path": "imgs/2.png", "total_score": 2.0}]))
    df, b = load_benchmark("evalmuse", e, "val")
    assert b.scale == Scale(0, 1) and df.loc[0, "target"] == pytest.approx(0.75)
    assert df.loc[0, "n_ratings"] == 3 and np.isnan(df.loc[1, "n_ratings"])
    assert df.loc[1, "target"] == pytest.approx(0.25)

    m = tmp_path / "mllm"
    m.mkdir()
    (m / "score.json").write_text(json.dumps([
        {"image_path": "i/1.jpg", "instruction": "Describe.", "answer": "A cat.",
         "human_score": 4, "category": "COCO"}]))
    df, _ = load_benchmark("mllm-judge", m)
    assert df.loc[0, "instruction"] == "Describe." and df.loc[0, "response"] == "A cat."
    assert df.loc[0, "task"] == "COCO" and df.loc[0, "target01"] == 0.75
    (m / "score.json").write_text(json.dumps([{"image_path": "i/1.jpg"}]))
    with pytest.raises(InputError, match="missing"):
        load_benchmark("mllm-judge", m)


def test_registry_and_generic(tmp_path):
    assert "flickr8k-expert" in list_benchmarks()
    with pytest.raises(InputError, match="available: composite"):
        load_benchmark("coco", tmp_path)
    pd.DataFrame({"img": ["a.png"], "text": ["t"], "r": ["1;2;3"], "cat": ["k"]}).to_csv(
        tmp_path / "g.csv", index=False)
    df = load_generic(tmp_path / "g.csv", image_col="img", text_col="text", ratings="r",
                      task_col="cat", scale=Scale(1, 5))
    assert df.loc[0, "target"] == 2 and df.loc[0, "n_ratings"] == 3 and df.loc[0, "task"] == "k"
    with pytest.raises(InputError, match="not in the table"):
        load_generic(tmp_path / "g.csv", image_col="image", text_col="text", ratings="r",
                     scale=Scale(1, 5))


def test_prepare_cli_then_score(tmp_path):
    """A prepared benchmark table goes straight into `scoreband score`."""
    root = tmp_path / "f8k"
    (root / "Flicker8k_Dataset").mkdir(parents=True)
    from scoreband.world import make_dataset

    ds = make_dataset(3, 0)
    lines, ann = [], []
    for i in range(3):
        Image.fromarray(ds.images[i]).save(root / "Flicker8k_Dataset" / f"{i}.jpg")
        lines.append(f"{i}.jpg#0\t{ds.captions[i]}")
        ann.append(f"{i}.jpg\t{i}.jpg#0\t3\t4\t4")
    (root / "Flickr8k.token.txt").write_text("\n".join(lines))
    (root / "ExpertAnnotations.txt").write_text("\n".join(ann))
    r = runner.invoke(app, ["datasets", "prepare", "flickr8k-expert", str(root), "--out",
                                 str(tmp_path / "f8k.csv")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["score", str(tmp_path / "f8k.csv"), "--out",
                                 str(tmp_path / "s.csv")])
    assert r.exit_code == 0, r.output
    assert pd.read_csv(tmp_path / "s.csv")["band_median"].notna().all()
