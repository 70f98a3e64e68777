"""Mondrian by predicted level on real judge tables: coverage by predicted level and by the
expert level, and width, before (marginal) and after (--mondrian-by predicted).

    python benchmarks/mondrian_predicted.py --judge-dir DIR [--judges qwen,4omini] [--seeds 20]

Protocol of benchmarks/real_tables.py: 50/50 resplits, alpha 0.1, bands snapped to the means
of 3 ratings, native 1-5 scale; point score = the expected score of the judge's log-probs.
"""
import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_tables import LIKERT  # noqa: E402

from scoreband.conformal import make_calibrator  # noqa: E402
from scoreband.datatypes import Predictions  # noqa: E402
from scoreband.evaluation import evaluate_splits  # noqa: E402
from scoreband.logprobs import expected_score  # noqa: E402


def cell(path, method, by, seeds):
    df = pd.read_csv(path)
    lp = df.iloc[:, :5].to_numpy(float)
    y = df.iloc[:, 5].to_numpy(float)
    pred = Predictions(LIKERT.to01(expected_score(lp)), features=lp,
                       n_ratings=np.full(len(y), 3.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = evaluate_splits(pred, LIKERT.to01(y), lambda seed=0: make_calibrator(
            method, 0.1, scale=LIKERT, adjust_boundary=True, mondrian=by, seed=seed),
            seeds=seeds, adjust_boundary=True, n_ratings=np.full(len(y), 3.0))
    lv = res["coverage_by_level"]
    return {"n": len(y), "coverage": res["after"]["coverage"]["mean"],
            "width": res["after"]["sharpness_native"]["mean"],
            "pred": {g: (v["coverage"]["mean"], v["n_items"],
                         v["sharpness"]["mean"] * 4) for g, v in lv["predicted"].items()},
            "target": {g: (v["coverage"]["mean"], v["n_items"]) for g, v in lv["target"].items()}}


def fmt(d, w=False):
    return " ".join(f"{g}:{v[0]:.2f}" + (f"/{v[2]:.1f}" if w else "") + f"(n{v[1]})"
                    for g, v in d.items())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--judge-dir", type=Path, required=True)
    ap.add_argument("--judges", default="qwen,4omini")
    ap.add_argument("--tasks", default="Summeval")
    ap.add_argument("--dims", default="coherence,consistency,fluency,relevance")
    ap.add_argument("--methods", default="split")
    ap.add_argument("--seeds", type=int, default=20)
    a = ap.parse_args()
    for judge in a.judges.split(","):
        for task in a.tasks.split(","):
            for dim in a.dims.split(","):
                path = a.judge_dir / "model_logits" / judge / f"{task}_{dim}_logits.csv"
                for method in a.methods.split(","):
                    for by in (None, "predicted"):
                        r = cell(path, method, by, a.seeds)
                        tag = "predicted" if by else "marginal "
                        worst = min(v[0] for v in r["pred"].values() if v[1] >= 20)
                        print(f"{judge}/{task}/{dim} {method} {tag} n={r['n']} "
                              f"cov={r['coverage']:.3f} width={r['width']:.2f} "
                              f"worst-pred-level={worst:.2f}", flush=True)
                        print(f"    by predicted level (cov/width): {fmt(r['pred'], True)}")
                        print(f"    by expert level: {fmt(r['target'])}", flush=True)


if __name__ == "__main__":
    main()
