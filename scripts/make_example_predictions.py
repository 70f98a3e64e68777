"""Generate the example predictions table shipped with scoreband (seeded, deterministic).

    python scripts/make_example_predictions.py [--out src/scoreband/data/example_predictions.csv]

What it holds: 2,000 image-caption items of five task categories, each rated by three
simulated annotators on a 1-5 Likert scale, and the output of a simulated quantile scorer on
[0, 1]: a median and an uncalibrated 90 % interval (q05, q95) that is informative (wider where
the scorer errs more) but too narrow, as uncalibrated heads are; plus a 4-d embedding for
clustering. Regenerating with the same seed reproduces the file byte for byte.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

TASKS = {  # task: (annotator noise sd, scorer noise sd) on [0, 1]
    "colour": (0.06, 0.05),
    "shape": (0.08, 0.07),
    "counting": (0.12, 0.14),
    "spatial": (0.14, 0.18),
    "long_description": (0.10, 0.11),
}


def make(n: int = 2000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    names = list(TASKS)
    task = rng.choice(names, size=n)
    ann_sd = np.array([TASKS[t][0] for t in task])
    sc_sd = np.array([TASKS[t][1] for t in task])
    quality = rng.beta(1.6, 1.3, size=n)
    ratings = np.clip(np.rint(1 + 4 * (quality[:, None] + rng.normal(0, 1, (n, 3)) *
                                       ann_sd[:, None])), 1, 5).astype(int)
    y01 = (ratings.mean(1) - 1) / 4
    # per-item difficulty the scorer partly perceives
    difficulty = sc_sd * rng.lognormal(0, 0.35, n)
    median = np.clip(y01 + rng.normal(0, 1, n) * difficulty, 0, 1)
    half = 1.0 * difficulty * rng.lognormal(0, 0.2, n)  # ~0.6x the calibrated half width
    q05 = np.clip(median - half, 0, 1)
    q95 = np.clip(median + half, 0, 1)
    emb = rng.normal(0, 0.3, (n, 4)) + np.eye(5)[[names.index(t) for t in task]][:, :4]
    df = pd.DataFrame({
        "id": [f"item{i:05d}" for i in range(n)],
        "image": [f"images/{i:05d}.png" for i in range(n)],
        "task": task,
        "ratings": [";".join(map(str, r)) for r in ratings],
        "human": np.round(ratings.mean(1), 6),
        "median": np.round(median, 6),
        "q05": np.round(q05, 6),
        "q95": np.round(q95, 6),
    })
    for j in range(4):
        df[f"emb_{j}"] = np.round(emb[:, j], 6)
    return df


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] /
                                          "src/scoreband/data/example_predictions.csv"))
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    make(a.n, a.seed).to_csv(a.out, index=False)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
