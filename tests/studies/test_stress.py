"""scoreband stress: deterministic distortions, the balanced subset, the study's schema on
the world and on a user's table, and its bad input."""

import json

import numpy as np
import pandas as pd
import pytest

from scoreband.cli import app
from scoreband.errors import InputError
from scoreband.studies.stress import (
    DISTORTIONS,
    LEVELS,
    balanced_subset,
    distort,
    parse_distortions,
)
from tests.conftest import runner


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    return [rng.integers(0, 255, (64, 64, 3), dtype=np.uint8) for _ in range(4)]


@pytest.mark.parametrize("name", list(DISTORTIONS))
def test_distortions_are_deterministic_by_seed(images, name):
    a = distort(images, name, "strong", seed=3)
    b = distort(images, name, "strong", seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert all(x.shape == im.shape and x.dtype == np.uint8 for x, im in zip(a, images,
                                                                           strict=True))
    assert any(not np.array_equal(x, im) for x, im in zip(a, images, strict=True))
    clean = distort(images, name, "clean")
    assert all(np.array_equal(x, im) for x, im in zip(clean, images, strict=True))
    if name in ("noise", "cutout", "elastic"):  # random per item: another seed differs
        c = distort(images, name, "strong", seed=4)
        assert any(not np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_levels_grow_in_strength(images):
    diffs = [np.mean([np.abs(d.astype(int) - im).mean() for d, im in
                      zip(distort(images, "blur", lv), images, strict=True)])
             for lv in LEVELS]
    assert diffs == sorted(diffs) and diffs[0] == 0


def test_balanced_subset_flattens_the_histogram():
    rng = np.random.default_rng(1)
    y = np.clip(rng.beta(5, 1.5, 3000), 0, 1)  # skewed towards the top
    idx = balanced_subset(y)
    full = np.bincount(np.minimum((y * 10).astype(int), 9), minlength=10)
    sub = np.bincount(np.minimum((y[idx] * 10).astype(int), 9), minlength=10)
    assert sub.max() <= np.median(full[full > 0]) and sub.max() < full.max() / 2
    assert len(np.unique(idx)) == len(idx)


def test_unknown_names_are_clear_errors():
    with pytest.raises(InputError, match="unknown distortion 'fog'"):
        parse_distortions(["fog"])
    with pytest.raises(InputError, match="unknown level 'huge'"):
        parse_distortions(["blur"], ["huge"])
    for args, msg in ((["--distortions", "fog"], "unknown distortion 'fog'"),
                      (["--levels", "huge"], "unknown level 'huge'"),
                      (["--n", "60", "--k", "1,500"], "k = 500 is larger than the 30 "
                                                      "calibration items")):
        r = runner.invoke(app, ["stress", "--out", "/tmp/never-written", *args])
        assert r.exit_code == 2 and msg in " ".join(r.output.split()), r.output
        assert "Traceback" not in r.output


def test_stress_on_the_world_writes_the_schema(tmp_path):
    out = tmp_path / "st"
    r = runner.invoke(app, ["stress", "--out", str(out), "--n", "120", "--k", "1,2,4",
                            "--seeds", "2", "--distortions", "blur,cutout,contrast",
                            "--levels", "moderate,extreme"])
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "results.json").read_text())
    assert doc["study"] == "stress"
    lv = doc["distortions"]["blur"]["moderate"]
    assert set(lv["width"]) == {"mean", "median", "q25", "q75"}
    assert 0 <= lv["coverage"] <= 1 and "balanced" in lv and "median_score" in lv
    assert list(doc["distortions"]["cutout"]) == ["clean", "moderate", "extreme"]
    ds = doc["domain_shift"]
    for k in ("in_domain", "out_of_domain", "out_of_domain_weighted"):
        assert {"coverage", "width"} <= set(ds[k])
    assert {"unweighted", "weighted"} <= set(ds["mixture"])
    assert set(doc["captions"]) == {"short", "long"}
    assert {"1", "2", "4"} <= set(doc["k_sensitivity"])
    assert sum(v["auto"] for v in doc["k_sensitivity"].values()) == 1
    assert doc["findings"] and all("holds" in f for f in doc["findings"])
    for f in ("results.md", "widths_by_distortion.png", "k_curve.png", "domain_widths.png",
              "examples_by_level.png"):
        assert (out / f).is_file(), f
    assert "[x]" in r.output or "[ ]" in r.output  # findings printed as written


def _world_table(tmp_path) -> "pd.DataFrame":
    frames = []
    for style in ("photo", "painting"):
        d = tmp_path / style
        r = runner.invoke(app, ["world", "--out", str(d), "--n", "50", "--style", style,
                                "--seed", "3" if style == "photo" else "4"])
        assert r.exit_code == 0, r.output
        df = pd.read_csv(d / "world.csv")
        df["image"] = [f"{style}/{p}" for p in df["image"]]
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def test_stress_on_a_table_with_a_domain_column(tmp_path):
    df = _world_table(tmp_path)
    df.loc[3, "image"] = "photo/missing.png"  # a bad row is reported, the rest go on
    df.to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "st"
    r = runner.invoke(app, ["stress", str(tmp_path / "t.csv"), "--target", "human",
                            "--scale", "1,5", "--domain-col", "domain", "--in-domain",
                            "photo", "--k", "1,2", "--seeds", "2", "--distortions", "jpeg",
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "1 of 100 rows skipped" in " ".join(r.output.split())
    doc = json.loads((out / "results.json").read_text())
    assert doc["in_domain"] == "photo" and doc["domain_shift"]["n_out_of_domain"] == 50
    one = df[df["domain"] == "photo"]
    one.to_csv(tmp_path / "one.csv", index=False)
    r = runner.invoke(app, ["stress", str(tmp_path / "one.csv"), "--target", "human",
                            "--domain-col", "domain", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "has one value" in " ".join(r.output.split()), r.output


def test_score_prints_a_shift_alarm_for_out_of_domain_rows(tmp_path):
    for style, expect in (("photo", "no shift detected"), ("painting", "shift alarm")):
        d = tmp_path / style
        assert runner.invoke(app, ["world", "--out", str(d), "--n", "60", "--style",
                                   style]).exit_code == 0
        r = runner.invoke(app, ["score", str(d / "world.csv"), "--out", str(d / "s.csv")])
        assert r.exit_code == 0 and expect in r.output, r.output


def test_score_flags_images_unlike_the_models_world(tmp_path):
    from PIL import Image

    d = tmp_path / "w"
    assert runner.invoke(app, ["world", "--out", str(d), "--n", "20"]).exit_code == 0
    df = pd.read_csv(d / "world.csv")
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(d / "noise.png")
    Image.new("RGB", (64, 64), (128, 128, 128)).save(d / "grey.png")
    extra = pd.DataFrame({"image": ["noise.png", "grey.png"],
                          "caption": ["a red circle", "a red circle"]})
    pd.concat([df, extra], ignore_index=True).to_csv(d / "t.csv", index=False)
    r = runner.invoke(app, ["score", str(d / "t.csv"), "--out", str(d / "s.csv")])
    assert r.exit_code == 0, r.output
    ood = pd.read_csv(d / "s.csv")["band_ood"].fillna("").tolist()
    assert all("image unlike the model's world" in o for o in ood[-2:]), ood[-2:]
    assert sum("image unlike" in o for o in ood[:-2]) <= 1  # the world's own images pass
