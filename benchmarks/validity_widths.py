"""Issue 30's width budget: band widths and coverage on the paper's 24 judge cells and THumB,
for the methods the validity fixes touch, printed for whichever scoreband is imported. Run it
twice, once on the code before the fixes and once after, and compare (RESULTS.md):

    PYTHONPATH=OLD_CHECKOUT/src python benchmarks/validity_widths.py --judge-dir J \\
        --thumb-dir T --out before.json
    python benchmarks/validity_widths.py --judge-dir J --thumb-dir T --out after.json
    python benchmarks/validity_widths.py --compare before.json after.json

Data as in ``real_tables.py`` (never committed). Each calibrator is built with its split's
seed where the evaluation protocol passes one (after the fixes), else seed 0 (before).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import real_tables as rt  # noqa: E402

METHODS = ("split", "fitted", "cqr-rand", "chr")


def judges(root: Path, names, seeds: int) -> dict:
    out = {}
    for judge in names:
        for task in rt.TASKS:
            for dim in rt.DIMS:
                t = time.perf_counter()
                path = root / "model_logits" / judge / f"{task}_{dim}_logits.csv"
                cell = rt.judge_cell(path, seeds, methods=METHODS)
                out[f"{judge}/{task}/{dim}"] = {
                    m: {"coverage": v["coverage"], "width": v["width"]}
                    for m, v in cell.items() if m in METHODS}
                print(f"{judge}/{task}/{dim}: {time.perf_counter() - t:.0f} s",
                      file=sys.stderr, flush=True)
    return out


def thumb(root: Path, seeds: int) -> dict:
    from scoreband.conformal import make_calibrator
    from scoreband.datatypes import Predictions, Scale
    from scoreband.evaluation import evaluate_splits

    df, metrics = rt.thumb_table(root)
    scale = Scale(1, 5)
    y01 = scale.to01(df["human_score"].to_numpy(float))
    feat = Predictions(np.full(len(df), np.nan), features=df[metrics].to_numpy(float))
    out = {}
    for m in ("fitted", "chr", "cqr"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = evaluate_splits(feat, y01, lambda seed=0, m=m: make_calibrator(
                m, 0.1, scale=scale, seed=seed), seeds=seeds)
        out[f"features {m}"] = {"coverage": r["after"]["coverage"]["mean"],
                                "width": r["after"]["sharpness_native"]["mean"]}
    return out


def compare(a: Path, b: Path) -> None:
    A, B = json.loads(a.read_text()), json.loads(b.read_text())
    for part in ("judges", "thumb"):
        if part not in A:
            continue
        print(f"\n{part}: method  mean width before -> after (ratio), coverage before -> after,"
              " worst cell ratio")
        cells = A[part]
        rows = {}
        for cell, methods in cells.items():
            if part == "thumb":
                methods = {cell: methods}
            for m, v in methods.items():
                w = B[part][cell] if part == "thumb" else B[part][cell][m]
                rows.setdefault(m, []).append((v["width"], w["width"], v["coverage"],
                                               w["coverage"]))
        for m, r in rows.items():
            r = np.asarray(r)
            ratio = r[:, 1] / r[:, 0]
            print(f"  {m:16s} {r[:, 0].mean():.3f} -> {r[:, 1].mean():.3f} "
                  f"({r[:, 1].mean() / r[:, 0].mean():.3f}x), {r[:, 2].mean():.3f} -> "
                  f"{r[:, 3].mean():.3f}, worst {ratio.max():.3f}x over {len(r)} cell(s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge-dir", type=Path)
    ap.add_argument("--thumb-dir", type=Path)
    ap.add_argument("--judges", default="qwen,4omini,dsr1")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path)
    a = ap.parse_args()
    if a.compare:
        compare(*a.compare)
        return
    import scoreband

    doc = {"scoreband": str(Path(scoreband.__file__).parent), "seeds": a.seeds}
    if a.judge_dir:
        doc["judges"] = judges(a.judge_dir, a.judges.split(","), a.seeds)
    if a.thumb_dir:
        doc["thumb"] = thumb(a.thumb_dir, a.seeds)
    a.out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
