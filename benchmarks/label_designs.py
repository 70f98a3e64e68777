"""Label designs in `systems`: the decisions issue's two cases, before and after this round.

    python benchmarks/label_designs.py [--reps 60] [--draws 1000]

1. The newcomer's case: a THumB-like table (5 captioning systems x 500 images, a metric
   correlated ~0.5 with the 1-5 human score), 50 labels per system, `--propose-labels 30`
   (by image), the proposed rows labeled and passed back with their probabilities. Width of
   each system's 95 % interval against the 50 labels' own, and coverage of the table's mean:
   ``one Hajek`` (certain and drawn labels in one weighted mean, as before) and ``combined``
   (each kind its own estimate, inverse-variance combined: what `systems` does now).
2. A user's own Poisson design: probabilities spanning 20x, no floor, rising / falling with
   the metric or unrelated to it; 3 systems x 300 items, alpha 0.1, 20 / 50 / 100 expected
   labels; coverage of the table's mean with Kish's degrees of freedom and PPI++ at any count
   (before) and with the small-count rules of ``active`` (now).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import scoreband.system_level.active as active
from scoreband.system_level.active import active_arrays, active_mean
from scoreband.system_level.ppi import t_crit
from scoreband.system_level.simulate import (
    newcomer_trial,
    spread_design,
    spread_tables,
)
from scoreband.system_level.study import cross_fit


def newcomer(reps: int, adaptive: bool) -> dict:
    """The seeded test's draws (tests/system_level/test_prior_and_proposed.py, seed 90)."""
    rng = np.random.default_rng(90)
    res = {"alone": [], "combined": [], "one Hajek": []}
    cover = {"alone": [], "combined": [], "one Hajek": []}
    for r in range(reps):
        trial = newcomer_trial(rng, r, adaptive=adaptive)
        truth, alone, both, prop = trial["truth"], trial["alone"], trial["both"], trial["table"]
        # one Hajek mean over certain and drawn labels (before): the same cross-fitted map
        lab = prop.human.notna().to_numpy()
        y01 = ((prop.human.to_numpy() - 1) / 4)
        f01, _ = cross_fit(prop[["metric"]].to_numpy(float), np.nan_to_num(y01), lab,
                           prop.image.astype(str).to_numpy())
        for s in truth.index:
            m = (prop.system == s).to_numpy()
            e = active_mean(np.nan_to_num(y01[m]), f01[m], prop.inclusion_prob.to_numpy()[m],
                            lab[m], 0.05)
            ci = {"alone": alone[s]["ci"], "combined": both[s]["ci"],
                  "one Hajek": [1 + 4 * e.ci[0], 1 + 4 * e.ci[1]]}
            for k, (lo, hi) in ci.items():
                res[k].append(hi - lo)
                cover[k].append(lo <= truth[s] <= hi)
    return {k: (float(np.mean(v)), float(np.max(np.array(v) / np.array(res["alone"]))),
                float(np.mean(cover[k]))) for k, v in res.items()}


def user_designs(draws: int) -> dict:
    out = {}
    for mode in ("unrelated", "rising", "falling"):
        rng = np.random.default_rng(["unrelated", "rising", "falling"].index(mode) + 70)
        for n in (20, 50, 100):  # the seeded test's draws (test_small_designs.py)
            y, f = spread_tables(rng, (draws, 3, 300))
            pi = spread_design(rng, mode, f, n)
            lab = rng.random(pi.shape) < pi
            ok = lab.sum(-1) >= 2
            row = {}
            for name, limits in (("before", (np.inf, 0)), ("now", None)):
                saved = active.SPREAD_LIMIT, active.MIN_PPI_EFFECTIVE
                if limits:
                    active.SPREAD_LIMIT, active.MIN_PPI_EFFECTIVE = limits
                try:
                    est, se, _, df, _ = active_arrays(y, f, pi, lab)
                finally:
                    active.SPREAD_LIMIT, active.MIN_PPI_EFFECTIVE = saved
                h = t_crit(0.1, df) * se
                row[name] = (float(np.mean((np.abs(est - y.mean(-1)) <= h)[ok])),
                             float(np.mean(2 * h[ok])))
            w = np.where(lab, 1 / pi, 0.0)
            row["kish"] = float(np.median(w.sum(-1) ** 2 / np.maximum((w ** 2).sum(-1),
                                                                     1e-300)))
            out[(mode, n)] = row
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--draws", type=int, default=1000)
    a = ap.parse_args()
    t = time.time()
    # the metric's errors have one spread here, so the proposal draws uniformly (forcing the
    # design, adaptive=False, gives probabilities within 0.066-0.067: the same numbers)
    print(f"newcomer (50 prior + 30 proposed, 5 x 500, {a.reps} tables): mean width, max "
          "ratio to the 50 alone, coverage")
    for k, (w, r, c) in newcomer(a.reps, True).items():
        print(f"  {k:10s} {w:.3f}  {r:.3f}  {c:.3f}")
    print(f"user's 20x Poisson design, 3 x 300, alpha 0.1, {a.draws} draws: coverage "
          "(width) before / now, median Kish labels")
    for (mode, n), row in user_designs(a.draws).items():
        print(f"  {mode:9s} {n:3d}: {row['before'][0]:.3f} ({row['before'][1]:.3f}) / "
              f"{row['now'][0]:.3f} ({row['now'][1]:.3f})  kish {row['kish']:.1f}")
    print(f"{time.time() - t:.0f} s")
