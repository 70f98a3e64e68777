"""A cascade of judges with one guarantee (issue 44, item 2), on simulated tables: three
judges of increasing strength and cost (1, 5, 20 per item), binary verdicts (pairwise A / B),
each right with a probability that falls with the item's difficulty and stating a
confidence that is a noisy, over-confident reading of it.

Rules compared, each fitted on ``n`` labeled items per resplit and scored on a population of
200,000 items drawn the same way (its error among decided items is the realised risk):

* ``strong alone``: the strongest judge under scoreband's own single-judge rule
  (:func:`scoreband.decisions.risk.label_free_threshold`, ``stated=True``: what
  ``triage --pairwise --probs`` runs) at (risk, delta);
* ``cascade``: :func:`scoreband.decisions.cascade.fit_cascade` (the views ``own`` and
  ``joint`` - agreement - and the strongest stage alone, one chain at delta), with costs;
  ``cascade, own view only``: the same without the joint view (each judge's confidence
  alone: what agreement adds);
* ``paper, delta per stage``: the published cascade (Jung et al. 2025): each stage's
  published fixed-sequence threshold fitted on the items the earlier stages escalated, each
  at delta (no joint guarantee); ``paper, delta / 3``: the same at delta / 3 per stage
  (valid by Bonferroni).

Columns: decided share (mean over resplits), realised risk (mean), the share of resplits
whose realised risk exceeds the risk level ("fail", the guarantee allows delta), the share
the cheap / middle judge decides, expected judge cost per item (the strong judge alone costs
20 on every item), and that cost plus 100 per row sent to a human.

    python benchmarks/cascade.py [--resplits 200] [--n 500]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).parent))

from trust_or_escalate import published_threshold  # noqa: E402

from scoreband.decisions.cascade import (  # noqa: E402
    apply_cascade,
    cascade_cost,
    fit_cascade,
    stage_views,
)
from scoreband.decisions.risk import label_free_threshold  # noqa: E402

COSTS = (1.0, 5.0, 20.0)
#: a human answer's cost, for the last column (judge cost + human cost of the escalated)
HUMAN_COST = 100.0
#: per judge: error at the easiest and the hardest item, how sharply its stated confidence
#: follows its true one (> 1: over-confident) and the noise of that reading
JUDGES = {
    "informative": [(0.05, 0.45, 2.0, 0.6), (0.03, 0.35, 1.5, 0.5), (0.01, 0.25, 1.5, 0.4)],
    # confidences barely informative: agreement between judges carries the signal
    "agreement matters": [(0.05, 0.45, 1.0, 2.0), (0.03, 0.35, 1.0, 2.0),
                          (0.01, 0.25, 1.5, 1.0)],
    # the judges err together on a shared half of the hard items: agreement misleads there
    "correlated errors": [(0.05, 0.45, 2.0, 0.6), (0.03, 0.35, 1.5, 0.5),
                          (0.01, 0.25, 1.5, 0.4)],
}


def draw_world(name: str, n: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(conf, answers, label)``: (n, 3) stated confidences in [0.5, 1) (6 decimals),
    (n, 3) answers in {0, 1} and (n,) human labels of ``n`` items of world ``name``."""
    h = rng.uniform(size=n)
    label = rng.integers(0, 2, n)
    shared = (rng.uniform(size=n) < 0.25 * h) if name == "correlated errors" else None
    conf, ans = np.empty((n, 3)), np.empty((n, 3), int)
    for j, (lo, hi, temp, noise) in enumerate(JUDGES[name]):
        q = 1 - (lo + (hi - lo) * h)
        wrong = rng.uniform(size=n) > q
        if shared is not None:
            wrong = np.where(shared, rng.uniform(size=n) < 0.8, wrong)
        z = temp * np.log(q / (1 - q)) + rng.normal(0, noise, n)
        conf[:, j] = np.round(np.clip(1 / (1 + np.exp(-np.abs(z))), 0.5, 1 - 1e-6), 6)
        ans[:, j] = np.where(wrong, 1 - label, label)
    return conf, ans, label


def _views(conf, ans, label):
    out = {}
    for v, (U, V) in stage_views(conf, ans, 2).items():
        out[v] = (U, (V != label[:, None]).astype(float))
    return out


def _paper(conf, ans, label, alpha, delta):
    """The published cascade's thresholds (a confidence per stage), each fitted on the items
    the earlier stages left."""
    left = np.ones(len(label), bool)
    thr = []
    for j in range(conf.shape[1]):
        t = published_threshold(conf[left, j], (ans[left, j] != label[left]).astype(float),
                                alpha, delta) if left.sum() else np.inf
        thr.append(t)
        left &= ~(conf[:, j] >= t)
    return thr


def _paper_apply(conf, thr):
    ok = conf >= np.asarray(thr)[None, :]
    return np.where(ok.any(axis=1), np.argmax(ok, axis=1), -1)


def _score(stage, loss_by_stage, n_stages):
    d = stage >= 0
    loss = np.where(d, loss_by_stage[np.arange(len(stage)), np.maximum(stage, 0)], 0.0)
    risk = float(loss[d].mean()) if d.any() else 0.0
    return d.mean(), risk, [(stage == s).mean() for s in range(n_stages)]


def run(world: str, *, resplits: int, n: int, alpha: float, delta: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    cp, ap, lp = draw_world(world, 200_000, rng)
    pop = _views(cp, ap, lp)
    wrong_pop = (ap != lp[:, None]).astype(float)
    rows = {k: [] for k in ("strong alone", "cascade", "cascade, own view only",
                            "paper, delta per stage", "paper, delta / 3")}
    for _ in range(resplits):
        c, a, y = draw_world(world, n, rng)
        views = _views(c, a, y)
        lf = label_free_threshold(1 - c[:, 2], (a[:, 2] != y).astype(float), alpha, delta,
                                  stated=True)
        st = np.where(1 - cp[:, 2] <= lf["threshold"], 2, -1)
        d, r, by = _score(st, wrong_pop, 3)
        rows["strong alone"].append((d, r, by, COSTS[2]))
        for key, vs in (("cascade", views), ("cascade, own view only", {"own": views["own"]})):
            res = fit_cascade(vs, alpha, delta, costs=COSTS)
            st = apply_cascade(pop[res["view"]][0], res)
            d, r, by = _score(st, pop[res["view"]][1], 3)
            cols = res["stages"] or [0, 1, 2]
            pos = {c_: i for i, c_ in enumerate(cols)}
            rel = np.array([pos.get(int(s), -1) for s in range(3)])[np.maximum(st, 0)]
            rows[key].append((d, r, by, cascade_cost(np.where(st >= 0, rel, -1), len(cols),
                                                     COSTS, cols)))
        for key, dl in (("paper, delta per stage", delta), ("paper, delta / 3", delta / 3)):
            st = _paper_apply(cp, _paper(c, a, y, alpha, dl))
            d, r, by = _score(st, wrong_pop, 3)
            rows[key].append((d, r, by, cascade_cost(st, 3, COSTS)))
    return {k: {"decided": np.mean([x[0] for x in v]), "risk": np.mean([x[1] for x in v]),
                "fail": np.mean([x[1] > alpha for x in v]),
                "cheap": np.mean([x[2][0] for x in v]), "mid": np.mean([x[2][1] for x in v]),
                "cost": np.mean([x[3] for x in v]),
                "with_human": np.mean([x[3] + HUMAN_COST * (1 - x[0]) for x in v])}
            for k, v in rows.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--resplits", type=int, default=200)
    p.add_argument("--n", type=int, default=500)
    p.add_argument("--risk", type=float, default=0.1)
    p.add_argument("--delta", type=float, default=0.1)
    a = p.parse_args()
    t0 = time.time()
    print(f"n = {a.n} labeled items, risk {a.risk}, delta {a.delta}, {a.resplits} resplits; "
          f"costs {COSTS}")
    print("| world | rule | decided | realised risk | fail | cheap | middle | judge cost | "
          f"with human = {HUMAN_COST:g} |")
    print("|---|---|---|---|---|---|---|---|---|")
    for world in JUDGES:
        out = run(world, resplits=a.resplits, n=a.n, alpha=a.risk, delta=a.delta)
        for rule, v in out.items():
            print(f"| {world} | {rule} | {v['decided']:.3f} | {v['risk']:.3f} | "
                  f"{v['fail']:.3f} | {v['cheap']:.3f} | {v['mid']:.3f} | {v['cost']:.1f} | "
                  f"{v['with_human']:.1f} |",
                  flush=True)
    print(f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
