"""MLLM-as-a-Judge: the scoring-evaluation split ``score.json`` and its images."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.datasets.common import inside_root, standard_frame
from scoreband.datatypes import Scale
from scoreband.errors import InputError
from scoreband.json_io import read_json

__all__ = ["load_mllm_judge"]


def load_mllm_judge(root: Path, split: str, image_dir: Path) -> pd.DataFrame:
    f = next((root / n for n in ("score.json", "benchmark.json", "score.jsonl")
              if (root / n).exists()), None)
    if f is None:
        raise InputError(f"missing score.json (the scoring-evaluation split) under "
                         f"{str(root)!r}")
    if f.suffix == ".jsonl":
        items = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
    else:
        items = read_json(f, what="annotations")
    rows: dict = {k: [] for k in ("id", "image", "caption", "target", "n_ratings", "task",
                                  "instruction")}
    for i, it in enumerate(items):
        score = it.get("human_score", it.get("score"))
        task = it.get("category", it.get("dataset", it.get("task")))
        missing = [k for k, v in (("image_path", it.get("image_path")),
                                  ("instruction", it.get("instruction")),
                                  ("answer", it.get("answer", it.get("response"))),
                                  ("human_score", score), ("category", task)) if v is None]
        if missing:
            raise InputError(f"{f.name} item {i}: field(s) {missing} missing")
        rows["id"].append(str(it.get("id", f"mllm-judge-{i}")))
        rows["image"].append(inside_root(root, it["image_path"],
                                         f"{f.name} item {len(rows['image']) + 1}"))
        rows["caption"].append(str(it.get("answer", it.get("response"))))
        rows["instruction"].append(str(it["instruction"]))
        rows["target"].append(float(score))
        rows["n_ratings"].append(np.nan)
        rows["task"].append(str(task))
    df = standard_frame({k: v for k, v in rows.items() if k != "instruction"}, Scale(1, 5), "test")
    df.insert(3, "instruction", rows["instruction"])
    df.insert(4, "response", df["caption"])
    return df
