"""The embedded synthetic world: scenes, captions with known alignment, annotators, renderer.

Everything is seeded and deterministic; nothing is downloaded.
"""

from scoreband.world.dataset import WorldDataset, make_dataset
from scoreband.world.scenes import COLOURS, SHAPES, TASKS, Obj, Scene, sample_scene

__all__ = ["Obj", "Scene", "sample_scene", "make_dataset", "WorldDataset", "COLOURS",
           "SHAPES", "TASKS"]
