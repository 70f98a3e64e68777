"""The bad-input corpus: every command, fed what users really feed it. Each case ends in a
clear error (exit 2, the message names the file / row / column / option and the reason, no
traceback) or in flagged rows with every good row still done (exit 0; exit 1 when no row
could be done)."""

import json
import shutil

import pandas as pd
import pytest
from PIL import Image

from scoreband.cli import app
from scoreband.scorers.scorer import bundled_model_dir
from tests.conftest import EXAMPLE_FLAGS, EXAMPLE_INTERVAL, copy_world, runner
from tests.golden.cases import judge_table

EX = EXAMPLE_FLAGS
CRC = [*EX, *EXAMPLE_INTERVAL, "--method", "crc"]


def _calibrator(w, name, edit, keep_checksum=False):
    """An edited calibrator; without its checksum (as a hand-written file would be) the
    schema check has to catch the edit."""
    doc = json.loads((w / "split.json").read_text())
    edit(doc)
    if not keep_checksum:
        doc.pop("checksum", None)
    (w / name).write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def w(tmp_path_factory, world_dir):
    """One workspace of good and bad files for the whole corpus."""
    w = tmp_path_factory.mktemp("bad")
    assert runner.invoke(app, ["example", "--out", str(w / "ex.csv")]).exit_code == 0
    ex = pd.read_csv(w / "ex.csv")
    ex.head(300).to_csv(w / "small.csv", index=False)
    ex.head(0).to_csv(w / "header.csv", index=False)
    (w / "empty.csv").write_text("")
    for name, knobs in {"calfrac0": {"cal_frac": 0}, "calfrac1": {"cal_frac": 1},
                        "idcol": {"id_col": "nope"}, "small": {"small_group": "magic"},
                        "unknown": {"cal_frak": 0.5}}.items():
        (w / f"knobs_{name}.json").write_text(json.dumps(knobs))
    (w / "knobs_bad.toml").write_text("cal_frac = [")
    (w / "notes.xyz").write_text("a,b\n1,2\n")
    (w / "bad.parquet").write_bytes(b"PAR1 not really parquet")
    (w / "dup.csv").write_text("median,median,ratings\n0.5,0.6,4;4;5\n")
    (w / "adir").mkdir()
    bad = ex.head(300).copy()
    bad["median"] = bad["median"].astype(object)
    bad.loc[3, "median"] = 7.0                      # outside the prediction scale
    bad.loc[4, "median"] = "abc"                    # not a number
    bad.loc[5, "ratings"] = "4;x;5"                 # bad rating
    bad.loc[6, "ratings"] = "4;9;5"                 # rating outside the scale
    bad.loc[7, "q05"], bad.loc[7, "q95"] = 0.9, 0.1  # lo > hi
    bad.to_csv(w / "badrows.csv", index=False)
    for args, name in (([*EX, "--method", "split"], "split.json"), (CRC, "crc.json")):
        r = runner.invoke(app, ["calibrate", str(w / "small.csv"), *args, "--out",
                                str(w / name)])
        assert r.exit_code == 0, r.output
    _calibrator(w, "q_text.json", lambda d: d["calibrator"]["params"].update(q="abc"))
    _calibrator(w, "q_gone.json", lambda d: d["calibrator"]["params"].pop("q"))
    _calibrator(w, "no_cal.json", lambda d: d.pop("calibrator"))
    _calibrator(w, "q_neg.json", lambda d: d["calibrator"]["params"].update(q=-0.5))
    _calibrator(w, "q_huge.json", lambda d: d["calibrator"]["params"].update(q=1e308))
    _calibrator(w, "scale_edit.json", lambda d: d.update(scale={"lo": 0, "hi": 10,
                                                                "integer": True}))
    _calibrator(w, "edited.json", lambda d: d["calibrator"]["params"].update(q=0.01),
                keep_checksum=True)
    _calibrator(w, "version.json", lambda d: d.update(format_version=99))
    _calibrator(w, "extra_key.json", lambda d: d["calibrator"]["config"].update(bogus=1))
    crc = json.loads((w / "crc.json").read_text())
    crc.pop("checksum", None)
    crc["calibrator"]["params"]["omega"] = -3
    (w / "omega.json").write_text(json.dumps(crc))
    crc["calibrator"]["params"]["omega"] = json.loads((w / "crc.json").read_text())[
        "calibrator"]["params"]["omega"]
    crc["calibrator"]["params"]["beta"] = None
    (w / "beta_null.json").write_text(json.dumps(crc))
    import pickle

    (w / "pickle.json").write_bytes(pickle.dumps({"q": 1}))
    # images and a world table
    copy_world(world_dir, w / "world", 12)
    wt = pd.read_csv(w / "world" / "world.csv")
    wt.loc[0, "image"] = "images/missing.png"
    (w / "world" / "trunc.png").write_bytes((w / "world" / wt.loc[1, "image"]).read_bytes()[:40])
    wt.loc[1, "image"] = "trunc.png"
    (w / "world" / "text.png").write_text("not an image")
    wt.loc[2, "image"] = "text.png"
    wt["caption"] = wt["caption"].astype(object)
    wt.loc[3, "caption"] = ""
    wt.to_csv(w / "world" / "rows.csv", index=False)
    allbad = wt.head(3).copy()
    allbad.to_csv(w / "world" / "allbad.csv", index=False)
    # model folders
    for name in ("badcfg", "emptycfg", "trunc", "edited", "swapped"):
        shutil.copytree(bundled_model_dir(), w / name)
    # well-formed edits that only the folder's SHA256SUMS reveals
    cfg = json.loads((w / "edited" / "config.json").read_text())
    cfg["levels"] = cfg["levels"][::-1]
    (w / "edited" / "config.json").write_text(json.dumps(cfg))
    from safetensors.torch import load_file, save_file

    sd = load_file(str(w / "swapped" / "model.safetensors"))
    k = sorted(sd)[0]
    sd[k] = sd[k] * 1.01
    save_file(sd, str(w / "swapped" / "model.safetensors"))
    (w / "badcfg" / "config.json").write_text("{not json")
    (w / "emptycfg" / "config.json").write_text("{}")
    st = (w / "trunc" / "model.safetensors").read_bytes()
    (w / "trunc" / "model.safetensors").write_bytes(st[: len(st) // 3])
    (w / "afile").write_text("x")
    judge_table(200).to_csv(w / "judged.csv", index=False)
    Image.new("RGB", (8, 8)).save(w / "tiny.png")
    _bad_results(w)
    return w


def _bad_results(w):
    """Results files edited by hand: what `report` must name (file and key), never crash on."""
    r = runner.invoke(app, ["evaluate", str(w / "small.csv"), *CRC, "--groups", "task",
                            "--seeds", "2", "--out", str(w / "ev.json")])
    assert r.exit_code == 0, r.output
    ev = json.loads((w / "ev.json").read_text())
    variants = {
        "res_array.json": [ev], "res_alpha_text.json": {**ev, "alpha": "0.1"},
        "res_empty_after.json": {**ev, "after": {}},
        "res_empty_group.json": {**ev, "groups": {"colour": {}}},
        "res_no_scale.json": {k: v for k, v in ev.items() if k != "scale"},
        "res_null_mean.json": {**ev, "after": {**ev["after"], "coverage": {"mean": None}}},
        "res_curve_text.json": {**ev, "calibration_curve": [{"nominal": "x", "coverage": 1}]},
        "res_study_bogus.json": {"study": "bogus"},
        "res_study_list.json": {"study": ["stress"]},
        "res_judge_empty.json": {"study": "judge-study"},
        "res_stress_empty.json": {"study": "stress", "alpha": 0.1, "distortions": {},
                                  "findings": [], "k_sensitivity": {}},
        "res_string.json": "results",
    }
    for name, doc in variants.items():
        (w / name).write_text(json.dumps(doc))


def _case(cmd, args, code=2, msg="", marks=()):
    return pytest.param(cmd, args, code, msg, id=f"{cmd}:{' '.join(args)[:60]}", marks=marks)


CASES = [
    # ---------------------------------------------------------------- evaluate
    _case("evaluate", ["{w}/missing.csv", *EX], 2, "missing.csv"),
    _case("evaluate", ["{w}/adir", *EX], 2, "adir"),
    _case("evaluate", ["{w}/empty.csv", *EX], 2, "empty.csv"),
    _case("evaluate", ["{w}/header.csv", *EX], 2, "no rows"),
    _case("evaluate", ["{w}/notes.xyz", *EX], 2, ".xyz"),
    _case("evaluate", ["{w}/bad.parquet", *EX], 2, "bad.parquet"),
    _case("evaluate", ["{w}/dup.csv", *EX], 2, "median"),
    _case("evaluate", ["{w}/ex.csv", *EX[:2], "--scale", "nan,5", *EX[4:]], 2, "--scale"),
    _case("evaluate", ["{w}/ex.csv", *EX[:2], "--scale", "1,inf", *EX[4:]], 2, "--scale"),
    _case("evaluate", ["{w}/ex.csv", *EX[:2], "--scale", "5,1", *EX[4:]], 2, "--scale"),
    _case("evaluate", ["{w}/ex.csv", *EX[:2], "--scale", "abc", *EX[4:]], 2, "--scale"),
    _case("evaluate", ["{w}/ex.csv", *EX[:2], "--scale", "1", *EX[4:]], 2, "--scale"),
    _case("evaluate", ["{w}/ex.csv", *EX[2:]], 2, "--target"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--target", "median"], 2, "not both"),
    _case("evaluate", ["{w}/ex.csv", *EX[:6], "--median", "nope", "--pred-scale", "0,1"], 2,
          "'nope' is not in the table"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--lo", "q05"], 2, "--lo and --hi"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--method", "magic"], 2, "unknown calibration"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--alpha", "0"], 2, "alpha"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--alpha", "1.5"], 2, "alpha"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--seeds", "0"], 2, "--seeds"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--config", "{w}/knobs_calfrac0.json"], 2,
          "cal_frac is 0; expected a share in (0, 1)"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--config", "{w}/knobs_calfrac1.json"], 2,
          "cal_frac is 1; expected a share in (0, 1)"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--config", "{w}/knobs_unknown.json"], 2,
          "unknown key 'cal_frak'; known: cal_frac, curve, small_group, id_col"),
    _case("calibrate", ["{w}/ex.csv", *EX, "--out", "{w}/c_bad.json", "--config",
                        "{w}/knobs_bad.toml"], 2, "cannot be read"),
    _case("calibrate", ["{w}/ex.csv", *EX, "--out", "{w}/c_bad.json", "--config",
                        "{w}/knobs_calfrac0.json"], 2, "unknown key 'cal_frac'; known: "
          "small_group, id_col"),
    _case("evaluate", ["{w}/ex.csv", *CRC[:-1], "crc-cluster", "--clusters", "abc"], 2,
          "--clusters"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--map", "magic"], 2, "map"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--groups", "nope"], 2, "--groups"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--method", "cqr", "--features", "nope*"], 2,
          "nope"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--split-by", "nope"], 2, "--split-by"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--n-ratings", "3"], 2, "--n-ratings"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--out", "{w}/adir"], 2, "adir"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--config", "{w}/knobs_idcol.json"], 2,
          "`id_col` column 'nope' is not in the table"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--config", "{w}/knobs_small.json"], 2,
          "small_group is 'magic'; expected full | pool-together | error"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--method", "crc"], 2, "--lo and --hi"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--method", "weighted-split"], 2, "--embedding"),
    _case("evaluate", ["{w}/ex.csv", *EX, "--method", "r2ccp"], 2, "--features"),
    _case("evaluate", ["{w}/badrows.csv", *CRC, "--seeds", "2"], 0, "rows skipped"),
    _case("evaluate", ["{w}/ex.csv", *EX[:2], "--scale", "1,4", *EX[4:]], 0, "outside"),
    _case("evaluate", ["{w}/judged.csv", "--target", "human", "--scale", "1,5", "--median",
                       "judge_expected", "--adjust-boundary", "--n-ratings", "2"], 2, "grid"),
    _case("evaluate", ["{w}/ex.csv", *EX[:2], "--scale", "1,4", *EX[4:]], 0,
          "outside the scale [1, 4]; check --scale"),
    # ---------------------------------------------------------------- calibrate
    _case("calibrate", ["{w}/ex.csv", *EX], 2, "--out"),
    _case("calibrate", ["{w}/ex.csv", *EX, "--out", "{w}/adir"], 2, "adir"),
    _case("calibrate", ["{w}/ex.csv", *EX, "--out", "{w}/afile/c.json"], 2, "afile"),
    _case("calibrate", ["{w}/ex.csv", *EX, "--method", "crc", "--out", "{w}/c.json"], 2,
          "--lo and --hi"),
    _case("calibrate", ["{w}/ex.csv", *EX, "--method", "chr", "--out", "{w}/c.json"], 2,
          "--features"),
    _case("calibrate", ["{w}/badrows.csv", *CRC, "--out", "{w}/c2.json"], 0, "rows skipped"),
    _case("calibrate", ["{w}/header.csv", *EX, "--out", "{w}/c.json"], 2, "no rows"),
    _case("calibrate", ["{w}/ex.csv", *EX, "--mondrian", "--groups", "nope", "--out",
                        "{w}/c.json"], 2, "--groups"),
    _case("calibrate", ["{w}/ex.csv", *EX, "--method", "magic", "--out", "{w}/c.json"], 2,
          "unknown calibration"),
    _case("calibrate", ["{w}/ex.csv", *EX, "--alpha", "-1", "--out", "{w}/c.json"], 2,
          "alpha"),
    # ---------------------------------------------------------------- apply
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/missing.json", "--out", "{w}/b.csv"], 2,
          "does not exist"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/ex.csv", "--out", "{w}/b.csv"], 2,
          "JSON"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/pickle.json", "--out", "{w}/b.csv"], 2,
          "pickle"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/q_text.json", "--out", "{w}/b.csv"],
          2, "calibrator"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/q_gone.json", "--out", "{w}/b.csv"],
          2, "calibrator"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/no_cal.json", "--out", "{w}/b.csv"],
          2, "calibrator"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/q_neg.json", "--out", "{w}/b.csv"],
          2, "calibrator"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/q_huge.json", "--out", "{w}/b.csv"],
          2, "calibrator"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/scale_edit.json", "--out",
                    "{w}/b.csv"], 2, "differs from the scale"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/version.json", "--out", "{w}/b.csv"],
          2, "version"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/extra_key.json", "--out",
                    "{w}/b.csv"], 2, "malformed"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/edited.json", "--out", "{w}/b.csv"],
          2, "edited after it was written"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/omega.json", "--out", "{w}/b.csv"],
          2, "calibrator"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/beta_null.json", "--out",
                    "{w}/b.csv"], 2, "calibrator"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/split.json", "--median", "nope",
                    "--out", "{w}/b.csv"], 2, "'nope' is not in the table"),
    _case("apply", ["{w}/badrows.csv", "--calibrator", "{w}/split.json", "--out",
                    "{w}/b.csv"], 0, "left without a band"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/split.json", "--scorer-id", "other",
                    "--out", "{w}/b.csv"], 0, "banded"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/split.json", "--out", "{w}/adir"], 2,
          "adir"),
    _case("apply", ["{w}/ex.csv", "--calibrator", "{w}/split.json", "--n-ratings", "0",
                    "--out", "{w}/b.csv"], 2, "--n-ratings"),
    _case("apply", ["{w}/header.csv", "--calibrator", "{w}/split.json", "--out",
                    "{w}/b.csv"], 2, "no rows"),
    # ---------------------------------------------------------------- score
    _case("score", ["{w}/world/world.csv", "--batch-size", "0", "--out", "{w}/s.csv"], 2,
          "--batch-size"),
    _case("score", ["{w}/world/world.csv", "--batch-size", "-5", "--out", "{w}/s.csv"], 2,
          "--batch-size"),
    _case("score", ["{w}/world/world.csv", "--image-col", "nope", "--out", "{w}/s.csv"], 2,
          "--image-col"),
    _case("score", ["{w}/world/world.csv", "--text-col", "nope", "--out", "{w}/s.csv"], 2,
          "--text-col"),
    _case("score", ["{w}/world/rows.csv", "--out", "{w}/s.csv"], 0, "4 of 12 rows not scored"),
    _case("score", ["{w}/world/allbad.csv", "--out", "{w}/s2.csv"], 1, "3 of 3 rows"),
    _case("score", ["{w}/world/world.csv", "--model", "{w}/missing", "--out", "{w}/s.csv"], 2,
          "missing"),
    _case("score", ["{w}/world/world.csv", "--model", "{w}/badcfg", "--out", "{w}/s.csv"], 2,
          "config.json"),
    _case("score", ["{w}/world/world.csv", "--model", "{w}/emptycfg", "--out", "{w}/s.csv"],
          2, "config.json"),
    _case("score", ["{w}/world/world.csv", "--model", "{w}/trunc", "--out", "{w}/s.csv"], 2,
          "safetensors"),
    _case("score", ["{w}/world/world.csv", "--model", "{w}/edited", "--out", "{w}/s.csv"], 2,
          "config.json was changed after the model was written"),
    _case("score", ["{w}/world/world.csv", "--model", "{w}/swapped", "--out", "{w}/s.csv"],
          2, "model.safetensors was changed"),
    _case("score", ["{w}/world/world.csv", "--scorer", "magic", "--out", "{w}/s.csv"], 2,
          "clip-s"),
    _case("score", ["{w}/world/world.csv", "--backbone", "hf:{w}/missing", "--out",
                    "{w}/s.csv"], 2, "--backbone"),
    _case("score", ["{w}/world/world.csv", "--out", "{w}/adir"], 2, "adir"),
    _case("score", ["{w}/world/world.csv", "--model", "{w}/afile", "--out", "{w}/s.csv"], 2,
          "afile"),
    # ---------------------------------------------------------------- train
    _case("train", ["--n-train", "0", "--out", "{w}/m"], 2, "--n-train"),
    _case("train", ["--n-val", "0", "--out", "{w}/m"], 2, "--n-val"),
    _case("train", ["--backbone", "magic", "--out", "{w}/m"], 2, "unknown backbone"),
    _case("train", ["--backbone", "hf:", "--out", "{w}/m"], 2, "names nothing"),
    _case("train", ["--backbone", "hf:{w}/x", "--out", "{w}/m"], 2, "TRAIN_TABLE"),
    _case("train", ["{w}/world/world.csv", "--backbone", "embedded:default", "--target",
                    "human", "--out", "{w}/m"], 2, "--scale"),
    _case("train", ["{w}/world/world.csv", "--backbone", "embedded:default", "--scale", "1,5",
                    "--out", "{w}/m"], 2, "--target"),
    _case("train", ["--resume", "--overwrite", "--out", "{w}/m"], 2, "not both"),
    _case("train", ["--out", "{w}/afile"], 2, "is a file"),
    _case("train", ["--resume", "--out", "{w}/m3"], 2, "checkpoint"),
    _case("train", ["--clusters", "abc", "--out", "{w}/m4"], 2, "--clusters"),
    _case("train", ["--batch-size", "0", "--out", "{w}/m"], 2, "--batch-size"),
    # ---------------------------------------------------------------- judge
    _case("judge", ["{w}/world/world.csv", "--judge", "magic", "--out", "{w}/j.csv"], 2,
          "unknown judge"),
    _case("judge", ["{w}/world/world.csv", "--judge", "hf:", "--out", "{w}/j.csv"], 2,
          "names nothing"),
    _case("judge", ["{w}/world/world.csv", "--judge", "hf:{w}/missing", "--out",
                    "{w}/j.csv"], 2, "missing"),
    _case("judge", ["{w}/world/world.csv", "--judge", "openai:m", "--scale", "1,2.5", "--out",
                    "{w}/j.csv"], 2, "--scale"),
    _case("judge", ["{w}/world/world.csv", "--judge", "openai:m", "--scale", "5,1", "--out",
                    "{w}/j.csv"], 2, "--scale"),
    _case("judge", ["{w}/world/world.csv", "--judge", "openai:m", "--template",
                    "Rate {nothing}", "--out", "{w}/j.csv"], 2, "nothing"),
    _case("judge", ["{w}/world/world.csv", "--judge", "openai:m", "--template",
                    "@{w}/missing.txt", "--out", "{w}/j.csv"], 2, "file not found"),
    _case("judge", ["{w}/world/world.csv", "--judge", "openai:m", "--rubric",
                    "@{w}/missing.txt", "--out", "{w}/j.csv"], 2, "file not found"),
    _case("judge", ["{w}/world/world.csv", "--judge", "openai:m", "--base-url",
                    "file:///etc", "--out", "{w}/j.csv"], 2, "--base-url"),
    _case("judge", ["{w}/world/world.csv", "--judge", "openai:m", "--base-url",
                    "ftp://x", "--out", "{w}/j.csv"], 2, "--base-url"),
    _case("judge", ["{w}/world/world.csv", "--judge", "openai:m", "--instruction-col",
                    "nope", "--out", "{w}/j.csv"], 2, "--instruction-col"),
    _case("judge", ["{w}/world/world.csv", "--judge", "hf:{w}/afile", "--dtype", "int8",
                    "--out", "{w}/j.csv"], 2, "int8"),
    # ---------------------------------------------------------------- judge-study
    _case("judge-study", ["{w}/judged.csv", "--target", "human"], 2, "NAME=COLUMNS"),
    _case("judge-study", ["{w}/judged.csv", "--judge", "logp_*", "--target", "human"], 2,
          "NAME=COLUMNS"),
    _case("judge-study", ["{w}/judged.csv", "--judge", "a=logp_1,logp_2", "--target",
                          "human"], 2, "K = 5"),
    _case("judge-study", ["{w}/judged.csv", "--judge", "a=nope*", "--target", "human"], 2,
          "nope"),
    _case("judge-study", ["{w}/judged.csv", "--judge", "a=logp_*", "--target", "human",
                          "--task-col", "nope"], 2, "nope"),
    _case("judge-study", ["{w}/judged.csv", "--judge", "a=logp_*", "--target", "human",
                          "--map-method", "magic"], 2, "--map-method"),
    _case("judge-study", ["{w}/judged.csv", "--judge", "a=logp_*"], 2, "--target"),
    # ---------------------------------------------------------------- roundtrip
    _case("roundtrip", ["{w}/world/world.csv", "--generator", "magic", "--out", "{w}/r.csv"],
          2, "unknown generator"),
    _case("roundtrip", ["{w}/world/world.csv", "--encoder", "magic", "--out", "{w}/r.csv"],
          2, "unknown encoder"),
    _case("roundtrip", ["{w}/world/world.csv", "--n-gen", "0", "--out", "{w}/r.csv"], 2,
          "--n-gen"),
    _case("roundtrip", ["{w}/world/world.csv", "--keep-images", "{w}/afile", "--out",
                        "{w}/r.csv"], 2, "--keep-images"),
    _case("roundtrip", ["{w}/world/world.csv", "--captioner", "magic", "--out",
                        "{w}/r.csv"], 2, "--captioner"),
    _case("roundtrip", ["{w}/world/world.csv", "--references", "nope", "--out", "{w}/r.csv"],
          2, "nope"),
    _case("roundtrip", ["{w}/world/world.csv", "--image-col", "nope", "--out", "{w}/r.csv"],
          2, "--image-col"),
    _case("roundtrip", ["{w}/world/world.csv", "--generator", "diffusers:{w}/missing",
                        "--out", "{w}/r.csv"], 2, "missing"),
    _case("roundtrip", ["{w}/world/rows.csv", "--out", "{w}/r2.csv"], 0, "not scored"),
    _case("roundtrip", ["{w}/world/allbad.csv", "--out", "{w}/r3.csv"], 1, "no row"),
    # ---------------------------------------------------------------- roundtrip-study
    _case("roundtrip-study", ["--generator", "magic", "--out", "{w}/rs"], 2,
          "unknown generator"),
    _case("roundtrip-study", ["{w}/world/world.csv", "--image-col", "nope", "--out",
                              "{w}/rs"], 2, "--image-col"),
    _case("roundtrip-study", ["--encoder", "hf:", "--out", "{w}/rs"], 2, "names nothing"),
    # ---------------------------------------------------------------- stress
    _case("stress", ["--distortions", "fog", "--out", "{w}/st"], 2, "fog"),
    _case("stress", ["--levels", "huge", "--out", "{w}/st"], 2, "huge"),
    # --k is checked before any scoring
    _case("stress", ["--n", "60", "--k", "1,200", "--out", "{w}/st"], 2, "larger than"),
    _case("stress", ["--k", "a,b", "--out", "{w}/st"], 2, "--k"),
    _case("stress", ["{w}/world/world.csv", "--target", "human", "--domain-col", "domain",
                     "--out", "{w}/st"], 2, "one value"),
    _case("stress", ["{w}/world/world.csv", "--target", "human", "--domain-col", "nope",
                     "--out", "{w}/st"], 2, "nope"),
    _case("stress", ["--model", "{w}/missing", "--out", "{w}/st"], 2, "missing"),
    # ---------------------------------------------------------------- report, data, root
    _case("report", ["{w}/missing.json"], 2, "not a readable"),
    _case("report", ["{w}/split.json", "--out", "{w}/r.html"], 2, "not a scoreband results"),
    _case("report", ["{w}/ex.csv", "--out", "{w}/r.html"], 2, "not a readable"),
    _case("report", ["{w}/res_array.json", "--out", "{w}/r.html"], 2,
          ("res_array.json: not a scoreband results file (evaluate, demo, judge-study,",
           "a score cascade rule): a JSON array")),
    _case("report", ["{w}/res_alpha_text.json", "--out", "{w}/r.html"], 2,
          "res_alpha_text.json: field 'alpha': Input should be a valid number (got '0.1')"),
    _case("report", ["{w}/res_empty_after.json", "--out", "{w}/r.html"], 2,
          "res_empty_after.json: missing key 'after.coverage'"),
    _case("report", ["{w}/res_empty_group.json", "--out", "{w}/r.html"], 2,
          "res_empty_group.json: missing key 'groups.colour.n'"),
    _case("report", ["{w}/res_no_scale.json", "--out", "{w}/r.html"], 2,
          "res_no_scale.json: missing key 'scale'"),
    _case("report", ["{w}/res_null_mean.json", "--out", "{w}/r.html"], 2,
          "res_null_mean.json: field 'after.coverage.mean'"),
    _case("report", ["{w}/res_curve_text.json", "--out", "{w}/r.html"], 2,
          "field 'calibration_curve.0.nominal'"),
    _case("report", ["{w}/res_study_bogus.json", "--out", "{w}/r.html"], 2,
          "its key 'study' is 'bogus'"),
    _case("report", ["{w}/res_study_list.json", "--out", "{w}/r.html"], 2, "its key 'study'"),
    _case("report", ["{w}/res_judge_empty.json", "--out", "{w}/r.html"], 2,
          "res_judge_empty.json: missing key 'alpha'"),
    _case("report", ["{w}/res_stress_empty.json", "--out", "{w}/r.html"], 2,
          "res_stress_empty.json: field 'distortions'"),
    _case("report", ["{w}/res_string.json", "--out", "{w}/r.html"], 2, "a JSON string"),
    _case("world", ["--style", "magic", "--out", "{w}/ww"], 2, "--style"),
    _case("world", ["--p-corrupt", "2", "--out", "{w}/ww"], 2, "--p-corrupt"),
    _case("world", ["--out", "{w}/afile"], 2, "afile"),
    _case("example", ["--out", "{w}/adir"], 2, "adir"),
    _case("datasets", ["prepare", "magic", "{w}", "--out", "{w}/d.csv"], 2, "magic"),
    _case("datasets", ["prepare", "polaris", "{w}/missing", "--out", "{w}/d.csv"], 2,
          "missing"),
    _case("datasets", ["prepare", "polaris", "{w}/adir", "--out", "{w}/d.csv"], 2, "adir"),
    _case("magic", [], 2, "magic"),
]


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 120, len(CASES)


@pytest.mark.parametrize("cmd,args,code,msg", CASES)
def test_bad_input(w, tmp_path, cmd, args, code, msg):
    argv = [cmd, *[a.replace("{w}", str(w)) for a in args]]
    r = runner.invoke(app, argv)
    text = " ".join(r.output.split())
    assert "Traceback" not in r.output and r.exception is None or isinstance(
        r.exception, SystemExit), (r.output, r.exception)
    assert r.exit_code == code, f"exit {r.exit_code}: {text}"
    for part in msg if isinstance(msg, tuple) else (msg,):  # a tuple: each part, in any order
        assert part.replace("{w}", str(w)) in text, text
    if code == 2:
        assert "error" in text.lower() or "usage" in text.lower(), text
