"""End-to-end coverage of ``systems_study`` (cross-fitted map, PPI++, pairs) in the audit's
scenarios; a measurement script, not a test (minutes):

    python tests/system_level/measure_coverage.py [--reps 300] [--scenario few|one|independent]

few: 4 systems, metric biases -0.8 .. +1.2 on a 1-5 scale, 5 / 10 / 40 labels per system on
the same items, 300 items, nominal 0.90; one: the same with one system at 6 labels and the
others at 100; independent: 160 prompts x 4 systems, 30 labels per system drawn
independently, nominal 0.95, pair coverage by the number of prompts labeled for both.
Truth: each system's mean over all of its rows, and the differences of those means.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

from scoreband.system_level.study import systems_study

BIASES = np.linspace(-0.8, 1.2, 4)


def table(rng, n_items, labels, shift=(0.0, 0.3, 0.6, 0.9), bias=BIASES, noise=0.6,
          independent=False):
    """One row per (system, item); ``labels``: labels per system (an int or one per system);
    the labeled items are the same for every system unless ``independent``."""
    labels = np.broadcast_to(labels, len(shift))
    q = rng.uniform(1.5, 4.0, n_items)
    shared = rng.permutation(n_items)
    frames = []
    for k, (s, b) in enumerate(zip(shift, bias, strict=True)):
        h = np.clip(np.round(q + s + rng.normal(0, 0.6, n_items)), 1, 5)
        m = h + rng.normal(0, noise, n_items) + b
        lab = np.zeros(n_items, bool)
        lab[(rng.permutation(n_items) if independent else shared)[:labels[k]]] = True
        frames.append(pd.DataFrame({"system": f"s{k}", "item": np.arange(n_items),
                                    "metric": m, "truth": h,
                                    "human": np.where(lab, h, np.nan)}))
    return pd.concat(frames, ignore_index=True)


def run(df, alpha):
    doc = systems_study(df, system_col="system", scores=["metric"], target="human",
                        scale="1,5", item_col="item", alpha=alpha).doc
    truth = df.groupby("system")["truth"].mean()
    means = [(s, v["ci"][0] <= truth[s] <= v["ci"][1]) for s, v in doc["systems"].items()]
    pairs = [(p, p["ci"][0] <= truth[p["a"]] - truth[p["b"]] <= p["ci"][1])
             for p in doc["pairs"]]
    return means, pairs


def few(reps, seed=0):
    out = {}
    for n in (5, 10, 40):
        rng = np.random.default_rng([seed, n])
        cm, cd = [], []
        for _ in range(reps):
            means, pairs = run(table(rng, 300, n), 0.10)
            cm += [c for _, c in means]
            cd += [c for _, c in pairs]
        out[n] = {"means": float(np.mean(cm)), "pairs": float(np.mean(cd)),
                  "se_means": float(np.sqrt(0.09 / len(cm)))}
    return out


def one(reps, seed=1):
    rng = np.random.default_rng(seed)
    cov = []
    for _ in range(reps):
        means, _ = run(table(rng, 300, (6, 100, 100, 100)), 0.10)
        cov += [c for s, c in means if s == "s0"]
    return {"s0 (6 labels)": float(np.mean(cov)), "reps": reps}


def independent(reps, seed=2):
    rng = np.random.default_rng(seed)
    cov, by, counts = [], {}, []
    for _ in range(reps):
        _, pairs = run(table(rng, 160, 30, independent=True), 0.05)
        for p, c in pairs:
            cov.append(c)
            k = p.get("n_labeled_both", p.get("n_items"))
            counts.append(k)
            by.setdefault(p.get("pairing", "paired" if p["paired"] else "unpaired"),
                          []).append(c)
    return {"pairs": float(np.mean(cov)), "n": len(cov),
            "by_pairing": {k: [float(np.mean(v)), len(v)] for k, v in by.items()},
            "count_field_examples": counts[:6]}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--scenario", default="few")
    a = ap.parse_args()
    t = time.time()
    res = {"few": few, "one": one, "independent": independent}[a.scenario](a.reps)
    print(json.dumps(res, indent=1), f"{time.time() - t:.0f} s")
