"""The published fixed-sequence rule of "Trust or Escalate" (Jung et al., ICLR 2025) as a
reference, side by side with scoreband's label-free pairwise threshold (issue 44, item 1).

Reference rule (``published_threshold``): the judge's confidence ``c = max p``; 5,000
thresholds ``lambda`` evenly spaced on [0, 1], tested from 1 down; at each, the pairs with
``c >= lambda`` and the exact binomial test of ``H: risk > alpha`` at level ``delta``
(``P(Binom(n, alpha) <= k) <= delta``); thresholds with fewer than 30 pairs above them are
skipped; the sequence stops at the first non-rejection and the last rejected ``lambda`` is
kept. scoreband: :func:`scoreband.decisions.risk.label_free_threshold` with
``stated=True`` (what ``triage --pairwise --probs PA,PB`` runs).

Tables (each split at random 250 calibration / 250 test pairs, 20+ splits; "decided" and
"agreement" on the test pairs; "risk > alpha" the share of splits whose population risk
at the chosen threshold exceeds alpha, where the population is known):

* simulated strong VLM judges (``vlm_judge``): ~85 % agreement, ~40 % of pairs at p >= 0.99
  that still err a few percent of the time (confidently wrong), the rest spread out;
* a THumB-like table: THumB 1.0 MSCOCO's real human scores (``--thumb``, read by path,
  never committed: /work/data/thumb/mscoco/mscoco_THumB-1.0.jsonl from
  github.com/jungokasai/THumB) made into caption pairs (human preference from the score
  difference, ties dropped) and a simulated judge that sees the human gap with noise and
  states an over-confident probability.

    python benchmarks/trust_or_escalate.py [--splits 40] [--thumb PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.stats import binom

sys.path.insert(0, str(Path(__file__).parents[1] / "src"))

from scoreband.decisions.risk import label_free_threshold  # noqa: E402

PUBLISHED_GRID = 5000
PUBLISHED_MIN_PAIRS = 30


def published_threshold(conf, loss, alpha: float, delta: float, grid: int = PUBLISHED_GRID,
                        min_pairs: int = PUBLISHED_MIN_PAIRS) -> float:
    """The confidence threshold of the published fixed-sequence rule (a pair is decided
    when ``conf >= threshold``); +inf when the first test does not reject."""
    conf, loss = np.asarray(conf, float), np.asarray(loss, float)
    lam = np.linspace(0, 1, grid)[::-1]
    order = np.argsort(-conf, kind="stable")
    cs = conf[order]
    cum = np.concatenate([[0.0], np.cumsum(loss[order])])
    n = np.searchsorted(-cs, -lam, side="right")  # pairs with conf >= lambda
    k = cum[n]
    p = np.where(n > 0, binom.cdf(k, n, alpha), 1.0)
    best = np.inf
    for i in np.flatnonzero(n >= min_pairs):
        if p[i] > delta:
            break
        best = lam[i]
    return float(best)


def vlm_judge(n: int, rng, pile: float = 0.4, pile_error: float = 0.07, decimals: int = 6):
    """``(u, wrong)`` for ``n`` pairs of a simulated strong VLM judge: a share ``pile`` of
    verdicts stated at 1 - 10^-U(2, 6) (p >= 0.99) erring ``pile_error`` of the time
    whatever the stated value (confidently wrong), the rest stated at 1 / (1 + e^-U(0, 4.6))
    and right with probability 0.5 + 0.45 (c - 0.5) / 0.49 (~86 % agreement in all);
    probabilities rounded to ``decimals`` (exact ties near 1, as logprob-derived probabilities have)."""
    top = rng.uniform(size=n) < pile
    stated = np.where(top, 10 ** -rng.uniform(2, 6, n),
                      1 / (1 + np.exp(rng.uniform(0, 4.6, n))))
    c = np.round(1 - stated, decimals)
    acc = np.where(top, 1 - pile_error, 0.5 + 0.45 * (c - 0.5) / 0.49)
    return 1 - c, (rng.uniform(size=n) > acc).astype(float)


def graded_judge(n: int, rng, pile: float = 0.6, lo: float = 0.01, hi: float = 0.3):
    """An adversarial judge for the label-free start: its pile at p >= 0.99 errs from
    ``lo`` (stated 1e-6) to ``hi`` (stated 1e-2), so the order inside the pile matters."""
    top = rng.uniform(size=n) < pile
    t = rng.uniform(size=n)
    stated = np.where(top, 10 ** -(2 + 4 * t), 1 / (1 + np.exp(rng.uniform(0, 4.6, n))))
    c = np.round(1 - stated, 6)
    acc = np.where(top, 1 - (hi - (hi - lo) * t), 0.55 + 0.4 * (c - 0.5) / 0.49)
    return 1 - c, (rng.uniform(size=n) > acc).astype(float)


def thumb_judge(path: Path):
    """A generator of THumB-like pairs: the real caption pairs of THumB 1.0 MSCOCO (human
    preference from the human scores, ties dropped), a judge seeing the human gap with
    N(0, 0.8) noise and stating sigmoid(4 * seen gap) (over-confident), rounded to 6
    decimals. Returns a function ``(n, rng) -> (u, wrong)`` drawing pairs with
    replacement, and the pair count."""
    import pandas as pd

    h = pd.read_json(path, lines=True)
    h["seg_id"] = h["seg_id"].astype(str)
    gaps = []
    for _, g in h.groupby("seg_id"):
        s = g["human_score"].to_numpy(float)
        i, j = np.triu_indices(len(s), 1)
        gaps.append(s[i] - s[j])
    gap = np.concatenate(gaps)
    gap = gap[gap != 0]

    def draw(n, rng):
        d = rng.choice(gap, n)
        seen = d + rng.normal(0, 0.8, n)
        c = np.round(1 / (1 + np.exp(-4 * np.abs(seen))), 6)
        return 1 - c, (np.sign(seen) != np.sign(d)).astype(float)

    return draw, len(gap)


def compare(draw, *, alpha: float, delta: float, splits: int, n_cal: int = 250,
            n_test: int = 250, seed: int = 0) -> dict:
    """Mean decided share / agreement on the test pairs, and the share of splits whose
    population risk (200,000 pairs) at the chosen threshold exceeds alpha, per rule."""
    rng = np.random.default_rng(seed)
    up, lp = draw(200_000, rng)
    o = np.argsort(up)
    up, lp = up[o], lp[o]
    cum = np.concatenate([[0.0], np.cumsum(lp)])
    out = {k: {"decided": [], "agreement": [], "over": []} for k in ("published", "scoreband")}
    for _ in range(splits):
        u, wrong = draw(n_cal + n_test, rng)
        cal, test = np.arange(n_cal), np.arange(n_cal, n_cal + n_test)
        thr_pub = 1 - published_threshold(1 - u[cal], wrong[cal], alpha, delta)
        thr_sb = label_free_threshold(u[cal], wrong[cal], alpha, delta,
                                      stated=True)["threshold"]
        for name, thr in (("published", thr_pub), ("scoreband", thr_sb)):
            d = u[test] <= thr + 1e-12
            m = int(np.searchsorted(up, thr + 1e-12, side="right"))
            out[name]["decided"].append(d.mean())
            if d.any():
                out[name]["agreement"].append(1 - wrong[test][d].mean())
            out[name]["over"].append((cum[m] / m if m else 0.0) > alpha)
    return {k: {"decided": float(np.mean(v["decided"])),
                "agreement": float(np.mean(v["agreement"])) if v["agreement"] else None,
                "risk_over_alpha": float(np.mean(v["over"]))} for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--splits", type=int, default=40)
    ap.add_argument("--thumb", type=Path,
                    default=Path("/work/data/thumb/mscoco/mscoco_THumB-1.0.jsonl"))
    a = ap.parse_args()
    tables = {
        "VLM judge (40 % at p >= 0.99 erring 7 %)": vlm_judge,
        "VLM judge, pile errs 10 %": lambda n, r: vlm_judge(n, r, pile_error=0.10),
        "VLM judge, 4-decimal probabilities": lambda n, r: vlm_judge(n, r, decimals=4),
        "graded pile (order inside the pile matters)": graded_judge,
    }
    if a.thumb.exists():
        draw, m = thumb_judge(a.thumb)
        tables[f"THumB-like ({m} real caption pairs, simulated judge)"] = draw
    print("| table | risk | published: decided / agreement / risk > alpha | "
          "scoreband: decided / agreement / risk > alpha |\n|---|---|---|---|")
    for name, draw in tables.items():
        for alpha in (0.15, 0.2):
            r = compare(draw, alpha=alpha, delta=0.1, splits=a.splits)
            cells = [f"{v['decided']:.3f} / "
                     + ("-" if v["agreement"] is None else f"{v['agreement']:.3f}")
                     + f" / {v['risk_over_alpha']:.2f}" for v in r.values()]
            print(f"| {name} | {alpha} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
