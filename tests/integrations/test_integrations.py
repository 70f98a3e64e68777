"""scoreband inside other tools: the torchmetrics Metric gives the numbers of `score`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from scoreband.cli import app
from tests.conftest import copy_world, runner

torch = pytest.importorskip("torch")


def test_calibrated_score_metric_equals_the_score_command(tmp_path, world_dir):
    from scoreband.integrations.torchmetrics import CalibratedScore

    copy_world(world_dir, tmp_path / "w", 12)
    df = pd.read_csv(tmp_path / "w" / "world.csv")
    r = runner.invoke(app, ["score", str(tmp_path / "w" / "world.csv"), "--out",
                            str(tmp_path / "scored.csv")])
    assert r.exit_code == 0, r.output
    ref = pd.read_csv(tmp_path / "scored.csv")
    paths = [str(tmp_path / "w" / p) for p in df["image"]]
    metric = CalibratedScore()
    metric.update(paths[:5], list(df["caption"][:5]))          # paths
    pil = [Image.open(p) for p in paths[5:9]]
    metric.update(pil, list(df["caption"][5:9]))               # PIL images
    arr = torch.from_numpy(np.stack([np.asarray(Image.open(p).convert("RGB"))
                                     for p in paths[9:]])).permute(0, 3, 1, 2)
    metric.update(arr, list(df["caption"][9:]))                # a uint8 tensor batch
    out = metric.compute()
    for key in ("median", "lo", "hi"):
        np.testing.assert_allclose(out["score" if key == "median" else f"band_{key}"].numpy(),
                                   ref[f"band_{key}"].to_numpy(), atol=1e-6)
    m = ref["band_median"].to_numpy()
    assert float(out["mean"]) == pytest.approx(m.mean())
    lo, hi = out["mean_ci"].tolist()
    assert lo < m.mean() < hi
    assert out["out_of_domain"].dtype == torch.bool and len(out["out_of_domain"]) == 12
    metric.reset()
    with pytest.raises(ValueError, match="2 images for 1 captions"):
        metric.update(paths[:2], ["a red circle"])
