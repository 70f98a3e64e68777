import numpy as np
import pytest
import torch

from scoreband.scorers.scorer import Scorer
from scoreband.scorers.train import TrainConfig, group_batches, train_scorer
from scoreband.world import make_dataset

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data():
    return make_dataset(96, seed=0, n_annotators=3), make_dataset(32, seed=1, n_annotators=3)


def test_group_batches_single_cluster_and_complete(rng):
    labels = rng.integers(0, 4, 203)
    batches = group_batches(labels, 16, rng)
    for b in batches:
        assert len(set(labels[b])) == 1 and len(b) <= 16
    assert sorted(np.concatenate(batches).tolist()) == list(range(203))


def test_short_training_writes_a_loadable_scorer_and_resumes(tmp_path, data):
    train, val = data
    cfg = TrainConfig(epochs=1, head_epochs=3, clusters=2, patience=5)
    rep = train_scorer(train, val, tmp_path / "m", cfg)
    assert rep["stage1"]["epoch"] == 1
    # resume: a second call with more epochs continues from the checkpoint
    rep2 = train_scorer(train, val, tmp_path / "m", TrainConfig(epochs=2, head_epochs=3,
                                                                clusters=2, patience=5))
    assert [h["epoch"] for h in rep2["stage1"]["history"]] == [1, 2]
    scorer = Scorer.load(tmp_path / "m")
    pred = scorer.predict(val.images, val.captions)
    assert pred.quantiles.shape == (32, 11)
    assert (np.diff(pred.quantiles, axis=1) >= -1e-12).all()
    mc = scorer.mc_dropout(val.images[:8], val.captions[:8], passes=5)
    assert (mc.lo <= mc.median).all() and (mc.median <= mc.hi).all()
    assert scorer.fingerprint.startswith("sha256:")


def test_quantile_head_training_lowers_the_loss(tmp_path, data):
    train, val = data
    rep = train_scorer(train, val, tmp_path / "m", TrainConfig(epochs=1, head_epochs=15,
                                                               clusters=1, patience=15))
    # the CI-loss head starts from the point head (deltas near zero: a wide lower side);
    # training must lower its validation loss below that of the initial head
    from scoreband.scorers.heads import ChainedQuantileHead
    from scoreband.scorers.losses import centered_interval_loss

    scorer = Scorer.load(tmp_path / "m")
    heads = scorer.heads
    with torch.no_grad():
        h = torch.from_numpy(scorer.represent(val.images, val.captions)[0])
        init = ChainedQuantileHead(scorer.backbone.dim)
        init.init_from_point(heads.point)
        y = torch.tensor(val.y01, dtype=torch.float32)
        before = float(centered_interval_loss(init(h), y))
        after = float(centered_interval_loss(heads.heads["chained_ci"](h), y))
    assert after < before
    assert rep["heads"]["chained_ci"]["val_crossings"] == 0


def test_a_run_killed_and_resumed_equals_an_uninterrupted_one(tmp_path, data):
    from safetensors.torch import load_file

    from scoreband.errors import InputError

    train, val = data
    cfg = TrainConfig(epochs=3, head_epochs=3, clusters=2, patience=5)
    train_scorer(train, val, tmp_path / "whole", cfg)

    class Killed(Exception):
        pass

    def kill(stage, epoch, *_):
        if stage == "point" and epoch == 2:  # after epoch 2 was checkpointed
            raise Killed

    with pytest.raises(Killed):
        train_scorer(train, val, tmp_path / "cut", cfg, on_epoch=kill)
    with pytest.raises(InputError, match="lr: 0.001 there, 0.002 now"):
        train_scorer(train, val, tmp_path / "cut", TrainConfig(epochs=3, head_epochs=3,
                                                               clusters=2, patience=5, lr=2e-3))
    train_scorer(train, val, tmp_path / "cut", cfg)
    a = load_file(str(tmp_path / "whole" / "model.safetensors"))
    b = load_file(str(tmp_path / "cut" / "model.safetensors"))
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_train_killed_mid_epoch_five_times_resumes_bit_identical(tmp_path):
    """`scoreband train` SIGKILLed five times at random moments of the point stage (inside
    an epoch or while its checkpoint is written) and then resumed ends with exactly the
    weights of an uninterrupted run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from safetensors.torch import load_file

    knobs_file = tmp_path / "knobs.json"
    knobs_file.write_text('{"patience": 20, "n_cal": 200, "n_heldout": 100}')
    args = ["--n-train", "200", "--n-val", "60", "--epochs", "9", "--head-epochs", "3",
            "--clusters", "2", "--config", str(knobs_file)]

    def run(out, *extra):
        return subprocess.Popen([sys.executable, "-m", "scoreband.cli", "train", "--out",
                                 str(out), *args, *extra], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)

    assert run(tmp_path / "whole").wait(timeout=600) == 0
    state = tmp_path / "cut" / "checkpoint" / "state.json"
    rng = np.random.default_rng(1)
    epochs = []
    for _ in range(5):
        p = run(tmp_path / "cut")
        before = state.stat().st_mtime_ns if state.exists() else 0
        deadline = time.time() + 300
        while time.time() < deadline and p.poll() is None:  # an epoch was checkpointed
            if state.exists() and state.stat().st_mtime_ns != before:
                break
            time.sleep(0.01)
        time.sleep(float(rng.uniform(0.0, 0.4)))  # then somewhere in the next epoch
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        import json

        epochs.append(json.loads(state.read_text())["stage1"]["epoch"])
    assert p.returncode != 0 and epochs[-1] < 9  # the last run was killed in the point stage
    assert run(tmp_path / "cut").wait(timeout=600) == 0
    for f in ("model.safetensors",):
        a, b = load_file(str(tmp_path / "whole" / f)), load_file(str(tmp_path / "cut" / f))
        assert a.keys() == b.keys()
        for k in a:
            assert torch.equal(a[k], b[k]), k


@pytest.mark.parametrize("freeze", [True, False])
def test_backbone_trainer_resumes_bit_identical(tmp_path, freeze):
    """The same loop trains heads on a registered backbone (a tiny CLIP here), frozen or
    fine-tuned: killed after epoch 2 and resumed, it ends with the uninterrupted weights."""
    from PIL import Image
    from safetensors.torch import load_file
    from tiny_models import tiny_clip

    from scoreband.backbones import load_backbone
    from scoreband.datatypes import Scale
    from scoreband.scorers.pairs import LazyImages
    from scoreband.scorers.train_backbone import BackboneTrainConfig, train_backbone_scorer

    clip = tiny_clip(tmp_path / "clip")
    rng = np.random.default_rng(0)

    def data(n, off):
        paths = []
        for i in range(n):
            paths.append(tmp_path / f"img{off + i}.png")
            Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(paths[-1])
        return {"images": LazyImages(paths), "texts": [f"a red circle {i}" for i in range(n)],
                "y01": rng.uniform(0, 1, n), "image_ids": [f"i{off + i}" for i in range(n)],
                "scale": Scale(1, 5), "n_ratings": 3}

    tr, va = data(40, 0), data(24, 100)
    cfg = BackboneTrainConfig(epochs=4, head_epochs=2, clusters=1, patience=10,
                              freeze_backbone=freeze, batch_size=8)

    class Killed(Exception):
        pass

    def kill(stage, epoch, *_):
        if stage == "point" and epoch == 2:
            raise Killed

    bb = load_backbone(f"hf:{clip}")
    train_backbone_scorer(bb, tr, va, tmp_path / "whole", cfg)
    with pytest.raises(Killed):
        train_backbone_scorer(load_backbone(f"hf:{clip}"), tr, va, tmp_path / "cut", cfg,
                              on_epoch=kill)
    rep = train_backbone_scorer(load_backbone(f"hf:{clip}"), tr, va, tmp_path / "cut", cfg)
    assert [h["epoch"] for h in rep["stage1"]["history"]] == [1, 2, 3, 4]
    f = "model.safetensors"  # the heads and, when fine-tuned, the backbone (backbone.*)
    a, b = load_file(str(tmp_path / "whole" / f)), load_file(str(tmp_path / "cut" / f))
    assert any(k.startswith("backbone.") for k in a) == (not freeze)
    for k in a:
        assert torch.equal(a[k], b[k]), (f, k)
