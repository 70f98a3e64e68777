import numpy as np

from scoreband.world import make_dataset
from scoreband.world.scenes import TASKS


def test_world_is_deterministic_by_seed():
    a, b = make_dataset(30, seed=4), make_dataset(30, seed=4)
    assert a.captions == b.captions
    np.testing.assert_array_equal(a.images, b.images)
    np.testing.assert_array_equal(a.ratings, b.ratings)
    c = make_dataset(30, seed=5)
    assert a.captions != c.captions


def test_world_shapes_scales_and_variants():
    d = make_dataset(200, seed=0, n_annotators=5)
    assert d.images.shape == (200, 64, 64, 3) and d.images.dtype == np.uint8
    assert d.ratings.shape == (200, 5) and d.ratings.min() >= 1 and d.ratings.max() <= 5
    assert set(d.tasks) == set(TASKS)
    assert ((0 <= d.true01) & (d.true01 <= 1)).all()
    # uncorrupted captions have true score 1, corrupted ones lower
    clean = np.array([len(c) == 0 for c in d.corruptions])
    assert (d.true01[clean] == 1).all() and (d.true01[~clean] < 1).all()
    # more annotators: the mean rating is closer to the truth
    one = make_dataset(400, seed=1, n_annotators=1)
    five = make_dataset(400, seed=1, n_annotators=5)
    err1 = np.abs(one.y01 - one.true01).mean()
    err5 = np.abs(five.y01 - five.true01).mean()
    assert err5 < err1


def test_painting_style_differs():
    a = make_dataset(10, seed=2)
    b = make_dataset(10, seed=2, style="painting")
    assert a.captions == b.captions
    assert np.abs(a.images.astype(int) - b.images.astype(int)).mean() > 10


def test_to_frame_writes_pngs(tmp_path):
    from PIL import Image

    df = make_dataset(3, seed=0).to_frame(tmp_path / "img")
    assert list(df.columns[:4]) == ["id", "image", "caption", "task"]
    assert Image.open(df.loc[0, "image"]).size == (64, 64)
