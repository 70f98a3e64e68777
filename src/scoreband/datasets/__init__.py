"""Loaders for the public human-rating benchmarks BEiTScore++ reports on (and the MLLM-as-a-Judge
benchmark), each turning the files of a local copy into one standard table:

``id, image, caption, target, target01, n_ratings, ratings, references, task, split``

* ``image``: a path (images stored inside Parquet / arrow files are written once as PNGs to
  ``image_dir``); ``target`` on the benchmark's native scale, ``target01`` on [0, 1];
  ``n_ratings``: annotators behind the target where the benchmark publishes them (the
  achievable grid of boundary adjustment), else empty; ``ratings``: the individual ratings,
  ';'-separated, where published; ``references``: ';'-separated reference captions;
  ``task``: the category column where the benchmark has one.

Nothing is downloaded: each loader documents the file layout it expects under ROOT and
names the missing file when it is not there. ``scoreband datasets prepare NAME ROOT`` writes
the table; ``scoreband train/score/evaluate`` then take it like any other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.datatypes import Scale
from scoreband.errors import InputError
from scoreband.files import atomic_path
from scoreband.images import decode_image
from scoreband.json_io import read_json
from scoreband.tables import read_table

__all__ = ["BENCHMARKS", "Benchmark", "load_benchmark", "list_benchmarks", "load_generic"]

COLUMNS = ["id", "image", "caption", "target", "target01", "n_ratings", "ratings",
           "references", "task", "split"]


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


def _need(path: Path, what: str) -> Path:
    if not path.exists():
        raise InputError(f"missing {path.name} ({what}) under {str(path.parent)!r}")
    return path


def _frame(rows: dict, scale: Scale, split: str) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    for c in COLUMNS:
        if c not in df.columns:
            df[c] = "" if c in ("ratings", "references", "task") else np.nan
    df["target01"] = scale.to01(df["target"].to_numpy(float))
    df["split"] = split
    return df[COLUMNS]


def _inside(root: Path, rel, where: str) -> str:
    """``root / rel`` for a path the benchmark's own files name, refused when it leaves the
    benchmark folder (an absolute path, ``..``, a symlink out): such a file would then be
    read, and by ``judge``, uploaded."""
    rel = str(rel)
    p = root / rel
    try:
        ok = not Path(rel).is_absolute() and p.resolve().is_relative_to(root.resolve())
    except (OSError, ValueError):
        ok = False
    if not ok:
        raise InputError(f"{where}: image path {rel[:120]!r} leaves the benchmark folder "
                         f"{str(root)!r}; paths in a benchmark's files must be relative and "
                         "inside it")
    return str(p)


def _save_images(blobs, image_dir: Path, prefix: str) -> list[str]:
    """Write image bytes (or HF image structs) once as PNG files named by their content
    (a changed source never pairs new captions with old images); returns the paths."""
    import hashlib

    image_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for i, b in enumerate(blobs):
        data = b.get("bytes") if isinstance(b, dict) else b
        if not isinstance(data, (bytes, bytearray)):
            raise InputError(f"{prefix} row {i}: the image column holds no bytes")
        f = image_dir / f"{prefix}-{hashlib.sha256(data).hexdigest()[:24]}.png"
        if not f.exists():
            try:
                im = decode_image(bytes(data))
            except ValueError as e:
                raise InputError(f"{prefix} row {i}: {e}") from None
            with atomic_path(f) as tmp:
                im.save(tmp, format="PNG")
        out.append(str(f))
    return out


def _split_files(root: Path, split: str) -> list[Path]:
    """Parquet shards of a split in the Hugging Face hub layout (data/{split}-*.parquet) or
    a save_to_disk folder ({split}/*.arrow)."""
    files = sorted((root / "data").glob(f"{split}-*.parquet"))
    if files:
        return files
    d = root / split
    if d.is_dir() and (list(d.glob("*.arrow")) or list(d.glob("*.parquet"))):
        return [d]
    raise InputError(f"no {split} split under {str(root)!r}: expected data/{split}-*.parquet "
                     f"(the hub layout) or a save_to_disk folder {split}/ with .arrow files")


def _read_hf(root: Path, split: str) -> pd.DataFrame:
    parts = [read_table(f) for f in _split_files(root, split)]
    return pd.concat(parts, ignore_index=True)


# ------------------------------------------------------------------ Polaris / Nebula
def _polaris_like(name: str):
    def load(root: Path, split: str, image_dir: Path) -> pd.DataFrame:
        df = _read_hf(root, split)
        for c in ("cand", "img", "human_score"):
            if c not in df.columns:
                raise InputError(f"{name} {split}: column {c!r} missing (have "
                                 f"{', '.join(df.columns)})")
        imgs = _save_images(df["img"].tolist(), image_dir, f"{name}-{split}")
        refs = [";".join(map(str, r)) if r is not None else "" for r in df.get(
            "refs", pd.Series([None] * len(df)))]
        return _frame({"id": [f"{name}-{split}-{i}" for i in range(len(df))], "image": imgs,
                       "caption": df["cand"].astype(str), "target": df["human_score"],
                       "references": refs}, Scale(0, 1), split)
    return load


# ------------------------------------------------------------------ VICR
def _vicr(root: Path, split: str, image_dir: Path) -> pd.DataFrame:
    f = _need(root / f"{split}.csv", f"VICR {split} split")
    df = pd.read_csv(f)
    need = {"image", "caption"}
    if not need <= set(df.columns) or not ({"ratings"} & set(df.columns) or
                                           {"rating"} & set(df.columns)):
        raise InputError(f"{f.name}: expected columns image, caption and ratings (';'-separated "
                         f"1-5) or rating; have {', '.join(df.columns)}")
    rows = {"id": [f"vicr-{split}-{i}" for i in range(len(df))],
            "image": [_inside(root, Path("images") / str(p), f"{f.name} row {i + 1}")
                      for i, p in enumerate(df["image"])],
            "caption": df["caption"].astype(str)}
    if "ratings" in df.columns:
        r = [[float(x) for x in str(c).split(";") if x.strip()] for c in df["ratings"]]
        rows.update(target=[np.mean(x) for x in r], n_ratings=[len(x) for x in r],
                    ratings=[";".join(f"{v:g}" for v in x) for x in r])
    else:
        rows.update(target=df["rating"], n_ratings=df.get("n_ratings", np.nan))
    return _frame(rows, Scale(1, 5), split)


# ------------------------------------------------------------------ EvalMuse-40K
def _evalmuse(root: Path, split: str, image_dir: Path) -> pd.DataFrame:
    f = _need(root / f"{split}_list.json", f"EvalMuse-40K {split} annotations")
    items = read_json(f, what="annotations")
    rows: dict = {k: [] for k in ("id", "image", "caption", "target", "n_ratings", "ratings",
                                  "task")}
    for i, it in enumerate(items):
        try:
            s = it["total_score"]
            prompt, img = it["prompt"], it["img_path"]
        except KeyError as e:
            raise InputError(f"{f.name} item {i}: field {e} missing (expected prompt, img_path, "
                             "total_score)") from None
        # total_score: the annotators' 1-5 scores (a list) or their mean; to [0, 1]
        vals = [float(v) for v in (s if isinstance(s, list) else [s]) if v is not None]
        rows["id"].append(str(it.get("prompt_id", f"evalmuse-{split}-{i}")))
        rows["image"].append(_inside(root, img, f"{f.name} item {len(rows['image']) + 1}"))
        rows["caption"].append(str(prompt))
        rows["target"].append((np.mean(vals) - 1) / 4 if vals else np.nan)
        rows["n_ratings"].append(len(vals) if isinstance(s, list) else np.nan)
        rows["ratings"].append(";".join(f"{(v - 1) / 4:g}" for v in vals)
                               if isinstance(s, list) else "")
        rows["task"].append(str(it.get("type", "")))
    return _frame(rows, Scale(0, 1), split)


# ------------------------------------------------------------------ Flickr8K-Expert
def _flickr8k_expert(root: Path, split: str, image_dir: Path) -> pd.DataFrame:
    ann = _need(root / "ExpertAnnotations.txt", "the expert judgments")
    tok = _need(root / "Flickr8k.token.txt", "the captions")
    img_dir = next((root / d for d in ("Flicker8k_Dataset", "Flickr8k_Dataset", "images")
                    if (root / d).is_dir()), None)
    if img_dir is None:
        raise InputError(f"missing the image folder Flicker8k_Dataset/ under {str(root)!r}")
    caps: dict[str, str] = {}
    by_image: dict[str, list[str]] = {}
    for line in tok.read_text(encoding="utf-8").splitlines():
        if "\t" not in line:
            continue
        cid, text = line.split("\t", 1)
        caps[cid] = text.strip()
        by_image.setdefault(cid.split("#")[0], []).append(cid)
    rows: dict = {k: [] for k in ("id", "image", "caption", "target", "n_ratings", "ratings",
                                  "references")}
    for n, line in enumerate(ann.read_text().splitlines()):
        parts = line.split()
        if len(parts) != 5:
            raise InputError(f"ExpertAnnotations.txt line {n + 1}: expected image id, caption id "
                             f"and 3 expert scores, got {len(parts)} fields")
        img, cid, *scores = parts
        if cid not in caps:
            raise InputError(f"ExpertAnnotations.txt line {n + 1}: caption {cid} is not in "
                             "Flickr8k.token.txt")
        r = [int(s) for s in scores]
        rows["id"].append(f"{img}|{cid}")
        rows["image"].append(_inside(img_dir, img, f"ExpertAnnotations.txt line {n + 1}"))
        rows["caption"].append(caps[cid])
        rows["target"].append(float(np.mean(r)))
        rows["n_ratings"].append(3)
        rows["ratings"].append(";".join(map(str, r)))
        # references: the image's own captions, without the rated one
        rows["references"].append(";".join(caps[c] for c in by_image.get(img, []) if c != cid))
    return _frame(rows, Scale(1, 4), "test")


# ------------------------------------------------------------------ Composite
def _composite(root: Path, split: str, image_dir: Path) -> pd.DataFrame:
    f = _need(root / "composite.csv", "the Composite ratings")
    df = pd.read_csv(f)
    need = {"image", "caption", "ratings"}
    if not need <= set(df.columns):
        raise InputError(f"composite.csv: expected columns image, caption, ratings (';'-"
                         f"separated 1-5), optional source and references; have "
                         f"{', '.join(df.columns)}")
    r = [[float(x) for x in str(c).split(";") if x.strip()] for c in df["ratings"]]
    return _frame({"id": [f"composite-{i}" for i in range(len(df))],
                   "image": [_inside(root, Path("images") / str(p), f"{f.name} row {i + 1}")
                             for i, p in enumerate(df["image"])],
                   "caption": df["caption"].astype(str), "target": [np.mean(x) for x in r],
                   "n_ratings": [len(x) for x in r],
                   "ratings": [";".join(f"{v:g}" for v in x) for x in r],
                   "references": df["references"].fillna("") if "references" in df else "",
                   "task": df["source"].astype(str) if "source" in df else ""},
                  Scale(1, 5), "test")


# ------------------------------------------------------------------ MLLM-as-a-Judge
def _mllm_judge(root: Path, split: str, image_dir: Path) -> pd.DataFrame:
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
        rows["image"].append(_inside(root, it["image_path"],
                                     f"{f.name} item {len(rows['image']) + 1}"))
        rows["caption"].append(str(it.get("answer", it.get("response"))))
        rows["instruction"].append(str(it["instruction"]))
        rows["target"].append(float(score))
        rows["n_ratings"].append(np.nan)
        rows["task"].append(str(task))
    df = _frame({k: v for k, v in rows.items() if k != "instruction"}, Scale(1, 5), "test")
    df.insert(3, "instruction", rows["instruction"])
    df.insert(4, "response", df["caption"])
    return df


BENCHMARKS: dict[str, Benchmark] = {
    "vicr": Benchmark("vicr", Scale(1, 5), ("train", "val", "test"),
                      "{split}.csv (image, caption, ratings ';'-separated 1-5 or rating) and "
                      "images/", _vicr, "per row from the ratings column (4.4 on average)"),
    "polaris": Benchmark("polaris", Scale(0, 1), ("train", "validation", "test"),
                         "the hub layout data/{split}-*.parquet or a save_to_disk folder "
                         "{split}/ (refs, cand, img, human_score)", _polaris_like("polaris"),
                         "not published per item (3.0 on average): no achievable grid"),
    "nebula": Benchmark("nebula", Scale(0, 1), ("train", "validation", "test"),
                        "as Polaris: data/{split}-*.parquet or {split}/ (refs, cand, img, "
                        "human_score)", _polaris_like("nebula"),
                        "not published per item: no achievable grid"),
    "evalmuse": Benchmark("evalmuse", Scale(0, 1), ("train", "val"),
                          "{split}_list.json (prompt, img_path, total_score: the 1-5 scores or "
                          "their mean, type) and the images at img_path", _evalmuse,
                          "the length of total_score when it is a list"),
    "flickr8k-expert": Benchmark("flickr8k-expert", Scale(1, 4), ("test",),
                                 "ExpertAnnotations.txt, Flickr8k.token.txt, Flicker8k_Dataset/",
                                 _flickr8k_expert, "3 experts"),
    "composite": Benchmark("composite", Scale(1, 5), ("test",),
                           "composite.csv (image, caption, ratings ';'-separated 1-5, source, "
                           "references) and images/ (the AMT release converted to this table)",
                           _composite, "per row from the ratings column"),
    "mllm-judge": Benchmark("mllm-judge", Scale(1, 5), ("test",),
                            "score.json (image_path, instruction, answer, human_score 1-5, "
                            "category: 14 task categories) and the images at image_path",
                            _mllm_judge, "not published per item"),
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


def load_generic(table, *, image_col: str, text_col: str, scale: Scale,
                 target: str | None = None, ratings: str | None = None,
                 task_col: str | None = None, references: str | None = None,
                 n_ratings: int | None = None, split: str = "") -> pd.DataFrame:
    """Any table with a column mapping, into the standard table."""
    df = read_table(table)
    missing = [c for c in (image_col, text_col, target, ratings, task_col, references)
               if c and c not in df.columns]
    if missing:
        raise InputError(f"columns {missing} are not in the table; available: "
                         f"{', '.join(map(str, df.columns))}")
    if bool(target) == bool(ratings):
        raise InputError("give exactly one of target= (mean rating) and ratings= (';'-separated)")
    rows = {"id": df["id"].astype(str) if "id" in df else [str(i) for i in range(len(df))],
            "image": df[image_col].astype(str), "caption": df[text_col].astype(str)}
    if ratings:
        r = [[float(x) for x in str(c).split(";") if x.strip()] for c in df[ratings]]
        rows.update(target=[np.mean(x) if x else np.nan for x in r],
                    n_ratings=[len(x) for x in r],
                    ratings=[";".join(f"{v:g}" for v in x) for x in r])
    else:
        rows.update(target=df[target].astype(float),
                    n_ratings=n_ratings if n_ratings else np.nan)
    if task_col:
        rows["task"] = df[task_col].astype(str)
    if references:
        rows["references"] = df[references].fillna("").astype(str)
    return _frame(rows, scale, split)
