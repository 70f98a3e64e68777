"""PPI++ efficiency of ``systems`` at 30 labels per system, and which small-sample fix costs
what (the decisions issue: 0.92x / 0.97x the classical width at coverage 0.99 / 0.97 on two
held-out tables where the metric-human correlation is ~0.55; the theory says ~0.87x).

    python benchmarks/systems_efficiency.py [--reps 300] [--items 150] [--labels 30]

Simulation: 4 systems x ``items`` items; a human score on 1-5 (the mean of 3 raters' integer
ratings: item difficulty + system shift + noise) and a metric correlated ~0.55 with it within
a system; ``labels`` items labeled per system (the same items for every system). Each draw
is one table, cross-fitted as ``systems`` does (ridge + isotonic, 5 folds by item), then for
every system the interval of each variant on the same labels:

* ``current``: PPI++ as shipped (pooled unlabeled variance; the fitted-weight price, ddof 2
  and n - 2 df, below ``TUNED_PENALTY_BELOW`` = 30 labels only);
* ``n-2 price``: ddof 2 and n - 2 df at any count (as shipped before);
* ``unpooled``: the unlabeled rows' own variance of the metric (the pooling undone);
* ``ppi_py``: ``ppi_py.ppi_mean_ci`` (normal quantile, ddof 0, its own weight) on the same
  cross-fitted predictions;
* ``classical``: the labels alone (Student t, n - 1 df).

Coverage against the table's mean (what a held-out real table can measure: the mean of its
rows) and the population mean (known here); width ratio against ``classical``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from scipy import stats

from scoreband.system_level.ppi import ppi_arrays, t_crit
from scoreband.system_level.study import cross_fit

SHIFT = (0.0, 0.15, 0.3, 0.45)


def _table(rng, items: int):
    q = rng.normal(0, 0.55, items)
    ys, fs = [], []
    for s in SHIFT:
        raters = np.clip(np.round(3 + s + q[:, None] + rng.normal(0, 0.9, (items, 3))), 1, 5)
        y = raters.mean(1)
        fs.append(q + s + rng.normal(0, 0.45, items))
        ys.append(y)
    return np.array(ys), np.array(fs)


def _pop_means(n=400_000, seed=99):
    rng = np.random.default_rng(seed)
    q = rng.normal(0, 0.55, n)
    return np.array([np.clip(np.round(3 + s + q[:, None] + rng.normal(0, 0.9, (n, 3))), 1,
                             5).mean(1).mean() for s in SHIFT])


def _variants(y, f, fu, alpha):
    out = {}
    est, se, _, df = ppi_arrays(y, f, fu)
    out["current"] = (est, t_crit(alpha, df) * se)
    n, N = len(y), len(fu)
    # the fitted-weight price at any count (ddof 2, n - 2 df: shipped before this round)
    lam = float(_lam(y, f, fu, pooled=True))
    r = y - lam * f
    var_u = np.var(np.r_[f, fu], ddof=1)
    se1 = np.sqrt(np.var(r, ddof=2) / n + lam ** 2 * var_u / N)
    out["n-2 price"] = (lam * fu.mean() + r.mean(), t_crit(alpha, n - 2) * se1)
    # unpooled: the unlabeled rows' own variance of the metric (the pooling undone)
    lam2 = float(_lam(y, f, fu, pooled=False))
    r2 = y - lam2 * f
    se2 = np.sqrt(np.var(r2, ddof=1) / n + lam2 ** 2 * np.var(fu, ddof=1) / N)
    out["unpooled"] = (lam2 * fu.mean() + r2.mean(), t_crit(alpha, n - 1) * se2)
    try:
        from ppi_py import ppi_mean_ci

        lo, hi = ppi_mean_ci(y, f, fu, alpha=alpha)
        out["ppi_py"] = ((float(lo[0]) + float(hi[0])) / 2, (float(hi[0]) - float(lo[0])) / 2)
    except ImportError:
        pass
    out["classical"] = (y.mean(), t_crit(alpha, n - 1) * np.std(y, ddof=1) / np.sqrt(n))
    return out


def _lam(y, f, fu, pooled):
    n, N = len(y), len(fu)
    cov = np.cov(y, f, ddof=1)[0, 1]
    vu = np.var(np.r_[f, fu], ddof=1) if pooled else np.var(fu, ddof=1)
    return np.clip(cov / (np.var(f, ddof=1) + n / N * vu), 0, 1)


def run(reps: int, items: int, labels: int, alpha: float = 0.05, seed: int = 0) -> dict:
    rng = np.random.default_rng([seed, items, labels])
    mu = _pop_means()
    acc: dict[str, dict[str, list]] = {}
    corr = []
    for _ in range(reps):
        ys, fs = _table(rng, items)
        lab_items = rng.permutation(items)[:labels]
        labeled = np.zeros(items, bool)
        labeled[lab_items] = True
        k = len(SHIFT)
        X = fs.reshape(-1, 1)
        y01 = ((ys - 1) / 4).reshape(-1)
        lab_all = np.tile(labeled, k)
        f01, _ = cross_fit(X, np.where(lab_all, y01, 0.0), lab_all,
                           np.tile(np.arange(items), k).astype(str), 5, 0)
        f01 = f01.reshape(k, items)
        for s in range(k):
            y = (ys[s] - 1) / 4
            corr.append(np.corrcoef(ys[s], fs[s])[0, 1])
            v = _variants(y[labeled], f01[s][labeled], f01[s][~labeled], alpha)
            for name, (est, h) in v.items():
                a = acc.setdefault(name, {"table": [], "population": [], "half": []})
                a["table"].append(abs(est - y.mean()) <= h)
                a["population"].append(abs(est - (mu[s] - 1) / 4) <= h)
                a["half"].append(h)
    cl = np.array(acc["classical"]["half"])
    return {"items": items, "labels": labels, "reps": reps, "alpha": alpha,
            "metric_human_correlation": float(np.mean(corr)),
            "theory_width_ratio": float(np.sqrt(1 - np.mean(corr) ** 2 * (items - labels)
                                                / items)),
            "variants": {k: {"width_vs_classical": float(np.mean(np.array(v["half"]) / cl)),
                             "cover_table_mean": float(np.mean(v["table"])),
                             "cover_population_mean": float(np.mean(v["population"]))}
                         for k, v in acc.items()}}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--items", type=int, default=150)
    ap.add_argument("--labels", type=int, default=30)
    a = ap.parse_args()
    t = time.time()
    res = run(a.reps, a.items, a.labels)
    print(json.dumps(res, indent=1), f"\n{time.time() - t:.0f} s")
    _ = stats  # scipy imported for ppi_py's sake (loaded either way)
