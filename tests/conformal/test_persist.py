import json

import numpy as np
import pytest

from scoreband.conformal import (
    CRC,
    ClusterConservative,
    Mondrian,
    SplitConformal,
    load_calibrator,
    save_calibrator,
)
from scoreband.datatypes import Predictions, Scale
from scoreband.errors import CalibratorMismatch, NotFittedError
from tests.conftest import heteroscedastic


def _data(rng, n=600):
    m, lo, hi, y = heteroscedastic(rng, n)
    g = rng.choice(["x", "y", "z"], n)
    emb = rng.normal(size=(n, 3))
    return Predictions(m, lo=lo, hi=hi, embedding=emb), y, g


@pytest.mark.parametrize("make", [
    lambda s: SplitConformal(0.1, scale=s),
    lambda s: CRC(0.1, scale=s, selection="split"),
    lambda s: Mondrian(CRC(0.2, scale=s)),
    lambda s: Mondrian(SplitConformal(0.1, scale=s), by="difficulty", small_group="full"),
    lambda s: ClusterConservative(CRC(0.1, scale=s), n_clusters=3),
    lambda s: ClusterConservative(CRC(0.1, scale=s), n_clusters=2, rule="mondrian"),
])
def test_json_roundtrip_gives_identical_bands(tmp_path, rng, make):
    scale = Scale(1, 5, True)
    pred, y, g = _data(rng)
    cal = make(scale).fit(pred, y, groups=g)
    path = save_calibrator(tmp_path / "c.json", cal, scorer_fingerprint="abc")
    doc = json.loads(path.read_text())
    assert doc["format"] == "scoreband.calibrator" and doc["library_version"]
    back, _ = load_calibrator(path, scale=scale, scorer_fingerprint="abc")
    b1, b2 = cal.predict(pred, groups=g), back.predict(pred, groups=g)
    np.testing.assert_array_equal(b1.lo01, b2.lo01)
    np.testing.assert_array_equal(b1.hi01, b2.hi01)
    np.testing.assert_allclose(b2.lo, scale.from01(b1.lo01))


def test_mismatch_refused(tmp_path, rng):
    pred, y, _ = _data(rng)
    cal = SplitConformal(0.1, scale=Scale(1, 5, True)).fit(pred, y)
    path = save_calibrator(tmp_path / "c.json", cal, scorer_fingerprint="model-A")
    with pytest.raises(CalibratorMismatch, match=r"scale \[1, 5\].*\[0, 1\]"):
        load_calibrator(path, scale=Scale(0, 1))
    with pytest.raises(CalibratorMismatch, match="model-A"):
        load_calibrator(path, scorer_fingerprint="model-B")
    doc = json.loads(path.read_text())
    doc["format_version"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(CalibratorMismatch, match="format version 99"):
        load_calibrator(path)


def test_predict_before_fit_names_the_step():
    with pytest.raises(NotFittedError, match="call fit"):
        SplitConformal().predict(Predictions([0.5]))


def test_crc_needs_interval():
    from scoreband.errors import InputError

    with pytest.raises(InputError, match="pass `lo` and `hi` columns"):
        CRC().fit(Predictions([0.5] * 20), np.full(20, 0.5))


def test_cluster_conservative_is_at_least_as_wide(rng):
    pred, y, g = _data(rng, 2000)
    base = CRC(0.1).fit(pred, y)
    cons = ClusterConservative(CRC(0.1), n_clusters=4).fit(pred, y)
    assert cons.predict(pred).width01.mean() >= base.predict(pred).width01.mean() - 1e-9
    assert "chosen=" in repr(cons)


def test_small_group_policies(rng):
    from scoreband.conformal.mondrian import SmallGroupWarning
    from scoreband.errors import InputError

    pred, y, _ = _data(rng, 100)
    g = np.array(["big"] * 95 + ["tiny"] * 5)
    with pytest.warns(SmallGroupWarning, match=r"tiny \(n=5\)"):
        m = Mondrian(SplitConformal(0.1)).fit(pred, y, g)
    b = m.predict(pred, g)
    assert b.fallback[-5:].all() and not b.fallback[:95].any()
    with pytest.warns(SmallGroupWarning):
        b = Mondrian(SplitConformal(0.1), small_group="full").fit(pred, y, g).predict(pred, g)
    assert b.full_range[-5:].all() and (b.hi01[-5:] == 1).all()
    with pytest.raises(InputError, match="at least 9"):
        Mondrian(SplitConformal(0.1), small_group="error").fit(pred, y, g)


# ------------------------------------------------------------------ edited / broken files
def _saved(tmp_path, method="split"):
    import numpy as np

    from scoreband.conformal import CRC, SplitConformal, save_calibrator
    from scoreband.datatypes import Predictions, Scale

    rng = np.random.default_rng(0)
    m = rng.uniform(0.2, 0.8, 300)
    y = np.clip(m + rng.normal(0, 0.05, 300), 0, 1)
    pred = Predictions(m, lo=m - 0.05, hi=m + 0.05)
    cal = (SplitConformal if method == "split" else CRC)(0.1, scale=Scale(1, 5, True))
    # as `scoreband calibrate` writes it: with the scale the columns were read on
    return save_calibrator(tmp_path / "c.json", cal.fit(pred, y),
                           inputs={"columns": {"scale": Scale(1, 5, True).to_dict()}})


EDITS = {
    "q text": ("split", lambda d: d["calibrator"]["params"].__setitem__("q", "abc"), "number"),
    "q deleted": ("split", lambda d: d["calibrator"]["params"].pop("q"), "no 'q'"),
    "q negative": ("split", lambda d: d["calibrator"]["params"].__setitem__("q", -0.5), ">= 0"),
    "calibrator deleted": ("split", lambda d: d.pop("calibrator"), "missing key 'calibrator'"),
    "unknown config": ("split", lambda d: d["calibrator"]["config"].__setitem__("zz", 1),
                       "malformed"),
    "beta null": ("crc", lambda d: d["calibrator"]["params"].__setitem__("beta", None),
                  "number"),
    "omega negative": ("crc", lambda d: d["calibrator"]["params"].__setitem__("omega", -3),
                       ">= 0"),
    "scale edited": ("split", lambda d: d.__setitem__("scale", {"lo": 0, "hi": 10,
                                                                 "integer": True}), "scale"),
    "alpha out of range": ("split", lambda d: d["calibrator"].__setitem__("alpha", 1.5),
                           "alpha"),
}


@pytest.mark.parametrize("name", sorted(EDITS))
@pytest.mark.parametrize("keep_checksum", [True, False])
def test_edited_calibrator_is_refused(tmp_path, name, keep_checksum):
    import json

    from scoreband.conformal import load_calibrator
    from scoreband.errors import ScorebandError

    method, edit, msg = EDITS[name]
    path = _saved(tmp_path, method)
    doc = json.loads(path.read_text())
    edit(doc)
    if not keep_checksum:  # a file without a checksum (older scoreband) is still validated
        doc.pop("checksum")
    path.write_text(json.dumps(doc))
    with pytest.raises(ScorebandError, match="edited" if keep_checksum else msg):
        load_calibrator(path)


def test_pickle_renamed_json_is_refused(tmp_path):
    import pickle

    from scoreband.conformal import load_calibrator
    from scoreband.errors import InputError

    p = tmp_path / "c.json"
    p.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(InputError, match="not valid JSON.*never pickle"):
        load_calibrator(p)


def test_huge_finite_q_is_refused(tmp_path):
    import json

    from scoreband.conformal import load_calibrator
    from scoreband.errors import CalibratorMismatch

    path = _saved(tmp_path)
    doc = json.loads(path.read_text())
    doc.pop("checksum")
    doc["calibrator"]["params"]["q"] = 1e308  # a full-range band is stored as inf
    path.write_text(json.dumps(doc))
    with pytest.raises(CalibratorMismatch, match="above 1"):
        load_calibrator(path)



def test_model_folder_checksums_are_sha256sum_compatible_and_catch_edits(tmp_path):
    """SHA256SUMS is what `sha256sum -c` reads; an edited or missing file is refused by
    name, a folder without the file is not checked."""
    import shutil
    import subprocess

    from scoreband.checksums import verify_checksums, write_checksums
    from scoreband.errors import InputError

    (tmp_path / "config.json").write_text('{"a": 1}')
    (tmp_path / "w.bin").write_bytes(b"\0" * 100)
    write_checksums(tmp_path, ["config.json", "w.bin", "absent.bin"])
    verify_checksums(tmp_path)
    if shutil.which("sha256sum"):
        r = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    (tmp_path / "config.json").write_text('{"a": 2}')
    with pytest.raises(InputError, match="config.json was changed"):
        verify_checksums(tmp_path)
    (tmp_path / "config.json").unlink()
    with pytest.raises(InputError, match="config.json is listed in SHA256SUMS but missing"):
        verify_checksums(tmp_path)
    (tmp_path / "SHA256SUMS").unlink()
    verify_checksums(tmp_path)  # nothing to check against


def test_a_crc_file_with_the_former_exact_flag(tmp_path):
    """``exact: false`` (the bundled embedded calibrator, files written before
    ``selection``) loads as the default selection; ``exact: true`` is refused, naming the
    fix."""
    import json

    from scoreband.conformal.persist import content_checksum
    from scoreband.errors import CalibratorMismatch

    rng = np.random.default_rng(3)
    pred, y, _ = _data(rng, 200)
    path = save_calibrator(tmp_path / "c.json", CRC(0.1).fit(pred, y))
    doc = json.loads(path.read_text())
    doc["calibrator"]["config"].pop("selection")
    for flag in (False, True):
        doc["calibrator"]["config"]["exact"] = flag
        doc["checksum"] = content_checksum(doc)
        path.write_text(json.dumps(doc))
        if flag:
            with pytest.raises(CalibratorMismatch, match="exact: true.*crc-exact"):
                load_calibrator(path)
        else:
            assert load_calibrator(path)[0].selection == "auto"
