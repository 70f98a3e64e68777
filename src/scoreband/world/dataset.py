"""Embedded benchmarks: rendered scenes, captions with a true score, simulated annotators."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

if TYPE_CHECKING:
    import pandas as pd

from scoreband.datatypes import Scale
from scoreband.files import atomic_path
from scoreband.world.scenes import (
    COLOURS,
    SHAPES,
    TASKS,
    caption_with_score,
    render,
    sample_scene,
)

__all__ = ["ANNOTATOR_NOISE", "LIKERT", "WorldDataset", "make_dataset", "simulate_ratings"]

#: 1-5 Likert scale of the simulated annotators
LIKERT = Scale(1, 5, integer=True)
#: task-dependent annotator noise (sd on the [0, 1] scale)
ANNOTATOR_NOISE = {"colour": 0.07, "shape": 0.08, "counting": 0.14, "spatial": 0.18,
                   "long_description": 0.11}


def simulate_ratings(true01, tasks, n_annotators: int, rng: np.random.Generator) -> np.ndarray:
    """Integer 1-5 ratings: round(1 + 4 (s + noise)), noise sd depending on the task."""
    sd = np.array([ANNOTATOR_NOISE[t] for t in tasks])
    raw = 1 + 4 * (np.asarray(true01)[:, None] + rng.normal(0, 1, (len(sd), n_annotators))
                   * sd[:, None])
    return np.clip(np.rint(raw), 1, 5).astype(int)


@dataclass
class WorldDataset:
    """A generated benchmark. ``images`` is (n, H, W, 3) uint8; ``ratings`` is (n, r)."""

    name: str
    ids: list[str]
    images: np.ndarray
    captions: list[str]
    tasks: np.ndarray
    true01: np.ndarray
    ratings: np.ndarray
    style: str
    corruptions: list[list[str]]
    #: (n, 16) per 4x4 grid cell: 1 + index of the colour / shape of the object centred
    #: there, 0 when empty. Known facts of the world, used as an auxiliary training target.
    cell_colour: np.ndarray | None = None
    cell_shape: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def y01(self) -> np.ndarray:
        """Mean rating, normalised to [0, 1]."""
        return LIKERT.to01(self.ratings.mean(axis=1))

    @property
    def n_ratings(self) -> int:
        return self.ratings.shape[1]

    def subset(self, idx) -> WorldDataset:
        idx = np.asarray(idx)
        return WorldDataset(self.name, [self.ids[i] for i in idx], self.images[idx],
                            [self.captions[i] for i in idx], self.tasks[idx], self.true01[idx],
                            self.ratings[idx], self.style, [self.corruptions[i] for i in idx],
                            None if self.cell_colour is None else self.cell_colour[idx],
                            None if self.cell_shape is None else self.cell_shape[idx])

    def to_frame(self, image_dir: str | Path | None = None) -> pd.DataFrame:
        """A table with one row per item; images are written as PNGs when ``image_dir``."""
        paths = None
        if image_dir is not None:
            image_dir = Path(image_dir)
            image_dir.mkdir(parents=True, exist_ok=True)
            paths = []
            for i, im in zip(self.ids, self.images, strict=True):
                p = image_dir / f"{i}.png"
                with atomic_path(p) as tmp:
                    Image.fromarray(im).save(tmp, format="PNG")
                paths.append(str(p))
        import pandas as pd

        return pd.DataFrame({
            "id": self.ids,
            "image": paths if paths is not None else [""] * len(self),
            "caption": self.captions,
            "task": self.tasks,
            "ratings": [";".join(map(str, r)) for r in self.ratings],
            "human": self.ratings.mean(axis=1),
            "true_score": self.true01,
            "domain": self.style,
        })


def make_dataset(n: int, seed: int = 0, *, style: str = "photo", n_annotators: int = 1,
                 image_size: int = 64, tasks=TASKS, name: str | None = None,
                 p_corrupt: float = 0.6) -> WorldDataset:
    """Generate ``n`` items: scene, image, caption for a random task, ratings.

    Deterministic given the arguments. ``n_annotators`` > 1 gives the multi-annotator
    ("clean") variant; ``style="painting"`` the out-of-domain style; ``p_corrupt=0`` gives
    only correct captions (reference captions, e.g. the "matched" side of the round-trip
    validation study).
    """
    rng = np.random.default_rng(seed)
    images = np.empty((n, image_size, image_size, 3), dtype=np.uint8)
    captions, task_list, true, corr = [], [], [], []
    cell_colour = np.zeros((n, 16), dtype=np.int64)
    cell_shape = np.zeros((n, 16), dtype=np.int64)
    colour_idx = {c: i + 1 for i, c in enumerate(COLOURS)}
    shape_idx = {s: i + 1 for i, s in enumerate(SHAPES)}
    tasks = tuple(tasks)
    for i in range(n):
        scene = sample_scene(rng)
        for o in scene.objects:
            cell = min(int(o.y * 4), 3) * 4 + min(int(o.x * 4), 3)
            cell_colour[i, cell] = colour_idx[o.colour]
            cell_shape[i, cell] = shape_idx[o.shape]
        task = tasks[int(rng.integers(len(tasks)))]
        text, score, applied = caption_with_score(scene, task, rng, p_corrupt)
        # a separate stream per item: the same seed gives the same scenes and captions in
        # either style
        images[i] = render(scene, image_size, style, np.random.default_rng([seed, i]))
        captions.append(text)
        task_list.append(task)
        true.append(score)
        corr.append(applied)
    true01 = np.array(true)
    tasks_arr = np.array(task_list)
    ratings = simulate_ratings(true01, tasks_arr, n_annotators, rng)
    name = name or f"world-{style}-r{n_annotators}-s{seed}"
    return WorldDataset(name, [f"{name}-{i:05d}" for i in range(n)], images, captions,
                        tasks_arr, true01, ratings, style, corr, cell_colour, cell_shape)
