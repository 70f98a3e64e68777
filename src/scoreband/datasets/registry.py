"""The registry of benchmarks: each one's name, scale, splits, expected file layout, loader
and what is known of its annotators; :func:`load_benchmark` reads one split of one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from scoreband.datasets.composite import load_composite
from scoreband.datasets.evalmuse import load_evalmuse
from scoreband.datasets.flickr8k_expert import load_flickr8k_expert
from scoreband.datasets.mllm_judge import load_mllm_judge
from scoreband.datasets.polaris import polaris_like
from scoreband.datasets.vicr import load_vicr
from scoreband.datatypes import Scale
from scoreband.errors import InputError

__all__ = ["BENCHMARKS", "Benchmark", "load_benchmark", "list_benchmarks"]


@dataclass(frozen=True)
class Benchmark:
    name: str
    scale: Scale
    splits: tuple[str, ...]
    layout: str
    loader: object
    annotators: str

    def describe(self) -> str:
        return (f"{self.name}: scale {self.scale.lo:g}-{self.scale.hi:g}; splits "
                f"{', '.join(self.splits)}; annotators: {self.annotators}\n  expects: "
                f"{self.layout}")


BENCHMARKS: dict[str, Benchmark] = {
    "vicr": Benchmark("vicr", Scale(1, 5), ("train", "val", "test"),
                      "{split}.csv (image, caption, ratings ';'-separated 1-5 or rating) and "
                      "images/", load_vicr, "per row from the ratings column (4.4 on average)"),
    "polaris": Benchmark("polaris", Scale(0, 1), ("train", "validation", "test"),
                         "the hub layout data/{split}-*.parquet or a save_to_disk folder "
                         "{split}/ (refs, cand, img, human_score)", polaris_like("polaris"),
                         "not published per item (3.0 on average): no achievable grid"),
    "nebula": Benchmark("nebula", Scale(0, 1), ("train", "validation", "test"),
                        "as Polaris: data/{split}-*.parquet or {split}/ (refs, cand, img, "
                        "human_score)", polaris_like("nebula"),
                        "not published per item: no achievable grid"),
    "evalmuse": Benchmark("evalmuse", Scale(0, 1), ("train", "val"),
                          "{split}_list.json (prompt, img_path, total_score: the 1-5 scores or "
                          "their mean, type) and the images at img_path", load_evalmuse,
                          "the length of total_score when it is a list"),
    "flickr8k-expert": Benchmark("flickr8k-expert", Scale(1, 4), ("test",),
                                 "ExpertAnnotations.txt, Flickr8k.token.txt, Flicker8k_Dataset/",
                                 load_flickr8k_expert, "3 experts"),
    "composite": Benchmark("composite", Scale(1, 5), ("test",),
                           "composite.csv (image, caption, ratings ';'-separated 1-5, source, "
                           "references) and images/ (the AMT release converted to this table)",
                           load_composite, "per row from the ratings column"),
    "mllm-judge": Benchmark("mllm-judge", Scale(1, 5), ("test",),
                            "score.json (image_path, instruction, answer, human_score 1-5, "
                            "category: 14 task categories) and the images at image_path",
                            load_mllm_judge, "not published per item"),
}


def list_benchmarks() -> list[str]:
    return sorted(BENCHMARKS)


def load_benchmark(name: str, root, split: str | None = None,
                   image_dir=None) -> tuple[pd.DataFrame, Benchmark]:
    """Load one split of a benchmark into the standard table (see the module docstring)."""
    if name not in BENCHMARKS:
        raise InputError(f"unknown benchmark {name!r}; available: {', '.join(list_benchmarks())}"
                         " (or the generic loader: scoreband.datasets.load_generic)")
    b = BENCHMARKS[name]
    split = split or b.splits[-1]
    if split not in b.splits:
        raise InputError(f"{name} has the splits {', '.join(b.splits)}; got {split!r}")
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{name}: {str(root)!r} is not a folder")
    image_dir = Path(image_dir) if image_dir else root / ".scoreband-images"
    df = b.loader(root, split, image_dir)
    return df, b
