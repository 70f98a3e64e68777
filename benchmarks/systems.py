"""`scoreband systems` on a real table: THumB 1.0 (MSCOCO, 500 images x 4 captioning systems
with a human score on 1-5) joined with billboard's per-caption metrics, labels hidden at
random, and the speed target on a synthetic 10 systems x 10^5 rows.

    python benchmarks/systems.py --thumb-dir DIR [--reps 200] [--labels 30,50,100]
        [--scores RefCLIPS,CLIPS] [--out systems.json]

``--thumb-dir``: the folder real_tables.py reads (``mscoco/mscoco_THumB-1.0.jsonl`` from
github.com/jungokasai/THumB and ``results/mscoco/*.csv`` from github.com/jungokasai/billboard;
not committed: no licence).

Protocol: the truth is each system's mean human score over all of its 500 captions, and each
difference of those means. Each resampling keeps the human scores of n images chosen at random
(the same images for every system) and hides the rest; `systems_study` (the code behind the
command) then estimates every system and pair, paired on the image. Reported over the
resamplings: coverage of the true means and differences, the PPI++ width over the
labels-alone width, the within-system correlation of the mapped metric with the human
score, the pairs decided (Holm, alpha 0.05) and how many of those have the wrong sign.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from real_tables import thumb_table  # noqa: E402

from scoreband.system_level.study import systems_study  # noqa: E402


def resample(df: pd.DataFrame, scores, n: int, reps: int, seed: int = 0) -> dict:
    truth = df.groupby("SYS")["human_score"].mean()
    images = df["seg_id"].unique()
    rng = np.random.default_rng(seed)
    cov_m, cov_d, ratio, decided, wrong, n_pairs = [], [], [], 0, 0, 0
    for _ in range(reps):
        keep = set(rng.choice(images, n, replace=False))
        t = df.assign(human=np.where(df["seg_id"].isin(keep), df["human_score"], np.nan))
        doc = systems_study(t, system_col="SYS", scores=scores, target="human", scale="1,5",
                            item_col="seg_id").doc
        for s, v in doc["systems"].items():
            cov_m.append(v["ci"][0] <= truth[s] <= v["ci"][1])
            ratio.append((v["ci"][1] - v["ci"][0])
                         / (v["classical"]["ci"][1] - v["classical"]["ci"][0]))
        for p in doc["pairs"]:
            d = truth[p["a"]] - truth[p["b"]]
            cov_d.append(p["ci"][0] <= d <= p["ci"][1])
            n_pairs += 1
            if p["significant"]:
                decided += 1
                wrong += np.sign(p["estimate"]) != np.sign(d)
    return {"labels_per_system": n, "reps": reps, "coverage_means": float(np.mean(cov_m)),
            "coverage_differences": float(np.mean(cov_d)),
            "width_ratio_to_classical": float(np.mean(ratio)),
            "pairs_decided": decided / n_pairs, "wrong_sign_of_decided":
            (wrong / decided) if decided else 0.0}


def within_correlation(df, scores) -> dict:
    """Pearson correlation of the (all-label) fitted map with the human score inside each
    system: the quantity the PPI++ gain depends on."""
    from scoreband.conformal.pointfit import fit_point_model, predict_point_model

    y01 = (df["human_score"].to_numpy(float) - 1) / 4
    X = df[scores].to_numpy(float)
    f = predict_point_model(fit_point_model(X, y01), X)
    return {s: float(np.corrcoef(f[df.SYS == s], y01[df.SYS == s])[0, 1])
            for s in sorted(df.SYS.unique())}


def speed(k: int = 10, n: int = 10_000, labels: int = 100, repeats: int = 3) -> float:
    rng = np.random.default_rng(0)
    q = rng.uniform(1, 5, n)
    frames = []
    for j in range(k):
        h = np.clip(q + 0.1 * j + rng.normal(0, 0.5, n), 1, 5)
        frames.append(pd.DataFrame({"sys": f"s{j}", "item": np.arange(n),
                                    "m": h + rng.normal(0, 0.5, n),
                                    "human": np.where(np.arange(n) < labels, h, np.nan)}))
    df = pd.concat(frames, ignore_index=True)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        systems_study(df, system_col="sys", scores=["m"], target="human", scale="1,5",
                      item_col="item", plan=0.2)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--thumb-dir", type=Path)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--labels", default="30,50,100")
    ap.add_argument("--scores", default="RefCLIPS,CLIPS,BERTScore,CIDEr")
    ap.add_argument("--out", type=Path, default=Path("systems.json"))
    a = ap.parse_args()
    secs = speed()
    print(f"speed: 10 systems x 10^5 rows (1,000 labels), whole study with plan: {secs:.2f} s "
          "(target < 5 s)")
    doc: dict = {"speed_seconds": secs}
    if a.thumb_dir:
        df, _ = thumb_table(a.thumb_dir)
        scores = a.scores.split(",")
        doc["thumb"] = {"n_rows": len(df), "systems": sorted(df.SYS.unique()),
                        "scores": scores, "within_correlation": within_correlation(df, scores),
                        "truth": df.groupby("SYS")["human_score"].mean().to_dict(), "runs": []}
        print(f"THumB: {len(df)} captions, systems {doc['thumb']['systems']}; true means "
              + ", ".join(f"{s} {v:.3f}" for s, v in doc["thumb"]["truth"].items()))
        print("within-system correlation of the mapped metrics with the human score: "
              + ", ".join(f"{s} {v:.2f}" for s, v in doc["thumb"]["within_correlation"].items()))
        print(f"{'labels':>6s} {'cov means':>9s} {'cov diffs':>9s} {'width/classical':>15s} "
              f"{'pairs decided':>13s} {'wrong sign':>10s}")
        for n in map(int, a.labels.split(",")):
            r = resample(df, scores, n, a.reps)
            doc["thumb"]["runs"].append(r)
            print(f"{n:6d} {r['coverage_means']:9.3f} {r['coverage_differences']:9.3f} "
                  f"{r['width_ratio_to_classical']:15.3f} {r['pairs_decided']:13.3f} "
                  f"{r['wrong_sign_of_decided']:10.3f}", flush=True)
    from scoreband.json_io import write_json

    write_json(a.out, doc)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
