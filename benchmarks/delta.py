"""What ``--delta`` costs and buys (issue 45): split conformal at alpha 0.1, with the marginal
rank and with the training-conditional rank at delta 0.1, on the same calibration draws.

Simulated truth: prediction ``m ~ U(1, 5)``, target ``clip(m + N(0, 0.5), 1, 5)``. For each
``n`` (calibration rows), ``--draws`` calibration sets are drawn; each calibrator (fitted by
:class:`scoreband.conformal.SplitConformal`, the library's own path) is measured on
``--fresh`` fresh rows of its own. Printed per ``n``: the share of calibrators whose fresh
coverage falls below 1 - alpha (with a 95 % Clopper-Pearson interval; delta 0.1 promises at
most 0.10), the mean coverage and the mean band width of each rank, and the width ratio
(delta band / marginal band).

    python benchmarks/delta.py [--n 100,500] [--draws 200] [--fresh 20000] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from scoreband.conformal import SplitConformal, conditional_rank, conformal_rank
from scoreband.datatypes import Predictions, Scale
from scoreband.metrics import binomial_ci

SCALE = Scale(1, 5)


def draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows of the simulated truth on [0, 1]: (prediction, target)."""
    m = rng.uniform(1, 5, n)
    y = np.clip(m + rng.normal(0, 0.5, n), 1, 5)
    return SCALE.to01(m), SCALE.to01(y)


def run(n: int, draws: int, fresh: int, alpha: float, delta: float, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {d: {"coverage": [], "width": []} for d in (None, delta)}
    for _ in range(draws):
        m, y = draw(rng, n)
        mf, yf = draw(rng, fresh)
        for d in (None, delta):
            band = SplitConformal(alpha, delta=d).fit(Predictions(m), y).predict(Predictions(mf))
            out[d]["coverage"].append(float(np.mean((band.lo01 <= yf) & (yf <= band.hi01))))
            out[d]["width"].append(float(np.mean(band.hi01 - band.lo01)) * SCALE.width)
    res = {"n": n, "draws": draws, "fresh": fresh,
           "rank_marginal": conformal_rank(n, alpha),
           "rank_delta": conditional_rank(n, alpha, delta)}
    for d, name in ((None, "marginal"), (delta, "delta")):
        cov = np.asarray(out[d]["coverage"])
        k = int(np.sum(cov < 1 - alpha))
        res[name] = {"share_below": k / draws, "ci": binomial_ci(k, draws),
                     "coverage": float(cov.mean()), "width": float(np.mean(out[d]["width"]))}
    res["width_ratio"] = res["delta"]["width"] / res["marginal"]["width"]
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="100,500", help="calibration rows, a comma list")
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--fresh", type=int, default=20_000)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--delta", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(f"split conformal, alpha {a.alpha:g}, delta {a.delta:g}: {a.draws} calibration "
          f"draws, {a.fresh} fresh rows each")
    print(f"{'n':>5} {'rank':>9} {'share below (95 % CI)':>36} {'coverage':>15} "
          f"{'width (points)':>16} {'ratio':>6} {'s':>5}")
    for n in (int(v) for v in a.n.split(",")):
        t = time.perf_counter()
        r = run(n, a.draws, a.fresh, a.alpha, a.delta, a.seed)
        mg, dl = r["marginal"], r["delta"]
        share = (f"{mg['share_below']:.3f} ({mg['ci'][0]:.2f}-{mg['ci'][1]:.2f}) -> "
                 f"{dl['share_below']:.3f} ({dl['ci'][0]:.2f}-{dl['ci'][1]:.2f})")
        print(f"{n:>5} {r['rank_marginal']:>4}->{r['rank_delta']:<4} {share:>36} "
              f"{mg['coverage']:.3f}->{dl['coverage']:.3f} "
              f"{mg['width']:.3f}->{dl['width']:.3f} {r['width_ratio']:>6.3f} "
              f"{time.perf_counter() - t:>5.1f}")


if __name__ == "__main__":
    main()
