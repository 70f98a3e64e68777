"""A cascade of score judges on real judge tables: a cheap judge, then a strong one, then a
human, with one guarantee (`scoreband triage --cascade`), against each judge alone (score
triage) and the per-stage cascade (each stage its own delta: not jointly valid).

    python benchmarks/score_cascade.py --judge-dir DIR [--resplits 20] [--labeled 1000]
        [--cheap qwen] [--strong dsr1] [--costs 1,10] [--out score_cascade.json]

Data: as benchmarks/real_tables.py (``model_logits/<judge>/<Task>_<dim>_logits.csv`` of the
"Analyzing Uncertainty of LLM-as-a-Judge" release, commit cc9a9cf; nothing is committed).
The qwen and dsr1 files hold the same rows in the same order (their expert means agree cell
for cell; checked here), so the two judges score the same items.

Protocol per table and resplit s: the rows are shuffled with seed s; ``--labeled`` rows are
labeled (half train each judge's map and stated error, half calibrate), the rest are test
rows. Each judge's score is the expected score of its 1..5 log-probs, its features the
log-probs; tolerance 0.5 on 1-5, delta 0.1, alpha 0.1 and 0.2. Reported: the share of test
rows decided by a judge, the realised risk among them (|m - y| > 0.5), the share of
resplits where it exceeds alpha, the share the cheap judge decides and the judge cost per
row (the cheap judge runs on every row; the strong one where the cheap one did not decide).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.decisions.score_cascade import fit_score_cascade
from scoreband.decisions.triage import fit_triage, losses
from scoreband.logprobs import expected_score

TASKS = ("Summeval", "Dialsumm")
DIMS = ("coherence", "consistency", "fluency", "relevance")
TOL, DELTA = 0.5, 0.1


def table(root: Path, judges, task, dim) -> pd.DataFrame | None:
    cols, y = {}, None
    for j in judges:
        p = root / "model_logits" / j / f"{task}_{dim}_logits.csv"
        if not p.exists():
            return None
        df = pd.read_csv(p)
        lp = np.maximum(df.iloc[:, :5].to_numpy(float), -50.0)
        if y is not None and not np.allclose(y, df.iloc[:, 5].to_numpy(float)):
            return None  # not the same rows
        y = df.iloc[:, 5].to_numpy(float)
        cols[f"{j}_score"] = expected_score(lp)
        for k in range(5):
            cols[f"{j}_lp{k + 1}"] = lp[:, k]
    return pd.DataFrame({"human": y, **cols})


def one(df, cheap, strong, alpha, labeled, seed, costs):
    idx = np.random.default_rng(seed).permutation(len(df))
    lab, test = df.iloc[idx[:labeled]], df.iloc[idx[labeled:]]
    y = test["human"].to_numpy(float)
    out = {}
    singles = {}
    for j in (cheap, strong):
        rule = fit_triage(lab, target="human", score=f"{j}_score", scale=(1, 5), tolerance=TOL,
                          alpha=alpha, delta=DELTA, features=f"{j}_lp*",
                          by="knn-miss-features").rule
        t = rule.apply(test)
        kept = t["trusted"].to_numpy(bool)
        singles[j] = kept
        m = t["triage_score"].to_numpy(float)
        out[j] = (kept.mean(), losses(m[kept], y[kept], TOL).mean() if kept.any() else np.nan,
                  costs[0] if j == cheap else costs[1])
    # the per-stage cascade: each judge's own rule at delta (jointly valid at 2 delta)
    first = singles[cheap]
    second = ~first & singles[strong]
    out["per-stage"] = (float((first | second).mean()), np.nan,
                        costs[0] + costs[1] * (1 - first.mean()))
    res = fit_score_cascade(lab, [f"{cheap}={cheap}_score:{cheap}_lp*",
                                  f"{strong}={strong}_score:{strong}_lp*"],
                            target="human", scale=(1, 5), tolerance=TOL, alpha=alpha,
                            delta=DELTA, costs={cheap: costs[0], strong: costs[1]})
    t = res.rule.apply(test)
    d = t["trusted"].to_numpy(bool)
    m = t["triage_score"].to_numpy(float)
    by_cheap = (t["decided_by"] == cheap).to_numpy()
    # the judges run on a row: the strong one alone when the rule uses only it (own view)
    strong_only = res.rule.view == "own" and res.rule.stages == [1]
    cost = costs[1] if strong_only else costs[0] + costs[1] * (1 - by_cheap.mean())
    cost = cost if res.rule.stages else 0.0  # a rule deciding nothing runs no judge
    out["cascade"] = (d.mean(), losses(m[d], y[d], TOL).mean() if d.any() else np.nan,
                      cost, by_cheap.mean(), res.rule.view)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge-dir", type=Path, required=True)
    ap.add_argument("--resplits", type=int, default=20)
    ap.add_argument("--labeled", type=int, default=1000)
    ap.add_argument("--cheap", default="qwen")
    ap.add_argument("--strong", default="dsr1")
    ap.add_argument("--costs", default="1,10")
    ap.add_argument("--tables", default="")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    costs = [float(x) for x in a.costs.split(",")]
    rows, t0 = [], time.time()
    for task in TASKS:
        for dim in DIMS:
            name = f"{task}/{dim}"
            if a.tables and name not in a.tables.split(","):
                continue
            df = table(a.judge_dir, [a.cheap, a.strong], task, dim)
            if df is None:
                continue
            for alpha in (0.1, 0.2):
                runs = [one(df, a.cheap, a.strong, alpha, a.labeled, s, costs)
                        for s in range(a.resplits)]
                row = {"table": name, "alpha": alpha}
                for k in (a.cheap, a.strong, "per-stage", "cascade"):
                    v = np.array([r[k][:3] for r in runs], float)
                    row[f"{k} decided"] = v[:, 0].mean()
                    row[f"{k} cost"] = v[:, 2].mean()
                    if k != "per-stage":
                        row[f"{k} over"] = float(np.mean(np.nan_to_num(v[:, 1]) > alpha))
                row["cascade by cheap"] = float(np.mean([r["cascade"][3] for r in runs]))
                row["cascade risk"] = float(np.nanmean([r["cascade"][1] for r in runs]))
                rows.append(row)
                print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                                  for k, v in row.items()}), flush=True)
    res = pd.DataFrame(rows)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(res.round(3).to_string(index=False))
        for alpha, g in res.groupby("alpha"):
            print(f"alpha {alpha}: mean decided {a.cheap} {g[f'{a.cheap} decided'].mean():.3f}, "
                  f"{a.strong} {g[f'{a.strong} decided'].mean():.3f}, best single "
                  f"{g[[f'{a.cheap} decided', f'{a.strong} decided']].max(axis=1).mean():.3f}, "
                  f"cascade {g['cascade decided'].mean():.3f} (cost "
                  f"{g['cascade cost'].mean():.2f} vs {a.strong} alone {costs[1]:.0f}), "
                  f"per-stage {g['per-stage decided'].mean():.3f}")
    print(f"{time.time() - t0:.0f} s")
    if a.out:
        res.to_json(a.out, orient="records", indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
