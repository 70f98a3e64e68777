"""Calibration speed and memory: scoreband vs MAPIE, CRC omega-grid fit, memory scaling.

    python benchmarks/calibration_speed.py [--n 1000000]

Prints ratios measured in this one run (no timed assertions anywhere in the tests).
Targets (issue 2): split CP fit + apply >= 3x faster than MAPIE's SplitConformalRegressor
on the same prefit predictions; CRC fit over the default 151-omega grid < 2 s at n = 10^6;
peak memory linear in n. Issue 25: split CP within 2x of its numpy floor, and the same
comparison for CRC (one omega) and CHR (its conformal step on a fitted classifier).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from scoreband.conformal import CRC, SplitConformal
from scoreband.datatypes import Predictions


def best_of(fn, reps=3):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)


def data(n, seed=0):
    rng = np.random.default_rng(seed)
    m = rng.uniform(0.1, 0.9, n)
    sd = rng.uniform(0.02, 0.15, n)
    y = np.clip(m + rng.normal(0, 1, n) * sd, 0, 1)
    return m, np.clip(m - sd, 0, 1), np.clip(m + sd, 0, 1), y


def split_scoreband(m, y, mt):
    cal = SplitConformal(0.1).fit(Predictions(m), y)
    return cal.predict(Predictions(mt))


def split_mapie(m, y, mt):
    from mapie.regression import SplitConformalRegressor
    from sklearn.base import BaseEstimator, RegressorMixin

    class Prefit(RegressorMixin, BaseEstimator):
        def fit(self, X, y):
            self.fitted_ = True
            return self

        def predict(self, X):
            return X[:, 0]

    r = SplitConformalRegressor(Prefit().fit(None, None), confidence_level=0.9, prefit=True)
    r.conformalize(m[:, None], y)
    return r.predict_interval(mt[:, None])


def split_floor(m, y, mt, alpha=0.1):
    """The bare numpy floor of split CP: residuals, one partition, two subtractions."""
    r = np.abs(y - m)
    k = min(int(np.ceil((len(r) + 1) * (1 - alpha))) - 1, len(r) - 1)
    q = np.partition(r, k)[k]
    return mt - q, mt + q


def crc_floor(m, lo, hi, y, alpha=0.1, omega=1.0):
    """The floor of CRC's conformal step at one omega: the scaled interval's residuals
    (max of the two one-sided misses), one partition, the band."""
    a, b = m - omega * (m - lo), m + omega * (hi - m)
    r = np.maximum(a - y, y - b)
    k = min(int(np.ceil((len(r) + 1) * (1 - alpha))) - 1, len(r) - 1)
    q = np.partition(r, k)[k]
    return a - q, b + q


def chr_data(n, seed=0):
    """A judge-like table: 5 score-token log-prob features, targets the means of 3 ratings
    on 1-5 (13 achievable values), on [0, 1]."""
    rng = np.random.default_rng(seed)
    y = rng.integers(1, 6, (n, 3)).mean(1)
    logits = -((np.arange(1, 6)[None, :] - (y + rng.normal(0, 0.8, n))[:, None]) ** 2)
    X = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    return Predictions(np.full(n, np.nan), features=X, n_ratings=np.full(n, 3.0)), (y - 1) / 4


def chr_floor(W, b, Zc, yc, Zt, centers, alpha=0.1):
    """The floor of a histogram method's conformal step in bare numpy: the histograms
    (one matmul and a softmax), each item's classes by probability (one argsort) and their
    running mass (one cumsum), the calibration scores, one partition, the bands' ends.
    (Highest-density sets: CHR's contiguous growth does the same passes in another order.)"""
    def hist(Z):
        e = np.exp(Z @ W.T + b)
        return e / e.sum(1, keepdims=True)

    P = hist(Zc)
    order = np.argsort(-P, axis=1)
    mass = np.take_along_axis(P, order, 1)
    cum = np.cumsum(mass, 1)
    cls = np.abs(centers[None, :] - yc[:, None]).argmin(1)
    pos = np.argmax(order == cls[:, None], axis=1)
    scores = cum[np.arange(len(yc)), pos]
    k = min(int(np.ceil((len(scores) + 1) * (1 - alpha))) - 1, len(scores) - 1)
    q = np.partition(scores, k)[k]
    Pt = hist(Zt)
    ot = np.argsort(-Pt, axis=1)
    ct = np.cumsum(np.take_along_axis(Pt, ot, 1), 1)
    last = np.minimum((ct < q).sum(1), Pt.shape[1] - 1)
    rows = np.arange(len(Pt))
    return (np.minimum.accumulate(ot, 1)[rows, last], np.maximum.accumulate(ot, 1)[rows, last])


def peak_mib(fn) -> float:
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def chr_vs_floor(n: int) -> None:
    """CHR's conformal step (``conformalize`` on n items, ``predict`` on n more) on a
    classifier fitted once on 20,000 items, against :func:`chr_floor` on the same model."""
    import warnings

    from scoreband.conformal import CHR
    from scoreband.conformal.learned import standardise
    from scoreband.datatypes import Scale

    tr, ytr = chr_data(20_000, 0)
    pc, yc = chr_data(n, 1)
    pt, _ = chr_data(n, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = CHR(0.1, scale=Scale(1, 5, integer=True), randomize=False).fit(tr, ytr)
    t_chr = best_of(lambda: cal.conformalize(pc, yc).predict(pt), reps=2)
    m = cal.model_
    W, b = np.asarray(m["coef"]), np.asarray(m["intercept"], dtype=float)
    Zc, Zt = standardise(pc.features, m), standardise(pt.features, m)
    centers = cal._classes().centers
    t_floor = best_of(lambda: chr_floor(W, b, Zc, yc, Zt, centers), reps=2)
    print(f"CHR conformal step (conformalize + predict, n={n:,} each, 13 classes) against "
          f"its floor: {t_chr * 1000:.0f} ms vs {t_floor * 1000:.0f} ms, ratio "
          f"{t_chr / t_floor:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    n = ap.parse_args().n
    m, lo, hi, y = data(n)
    mt = data(n, seed=1)[0]

    t_sb = best_of(lambda: split_scoreband(m, y, mt))
    try:
        t_mp = best_of(lambda: split_mapie(m, y, mt))
        sb_lo = split_scoreband(m, y, mt).lo01
        mp_lo = split_mapie(m, y, mt)[1][:, 0, 0]
        agree = float(np.max(np.abs(np.clip(mp_lo, 0, 1) - sb_lo)))
        print(f"split CP fit+apply, n={n:,}: scoreband {t_sb:.3f} s, MAPIE {t_mp:.3f} s, "
              f"speed-up {t_mp / t_sb:.1f}x (target >= 3x); max |lo diff| {agree:.1e}")
    except ImportError:
        print(f"split CP fit+apply, n={n:,}: scoreband {t_sb:.3f} s (MAPIE not installed)")

    t_floor = best_of(lambda: split_floor(m, y, mt))
    print(f"split CP fit+apply against the numpy floor (residuals, one partition, two "
          f"subtractions): {t_sb * 1000:.1f} ms vs {t_floor * 1000:.1f} ms, ratio "
          f"{t_sb / t_floor:.2f} (target <= 2)")
    pred = Predictions(m, lo=lo, hi=hi)
    t_crc1 = best_of(lambda: CRC(0.1, omegas=[1.0]).fit(pred, y).predict(pred))
    t_crcf = best_of(lambda: crc_floor(m, lo, hi, y))
    print(f"CRC at one omega, fit+apply, against its floor: {t_crc1 * 1000:.1f} ms vs "
          f"{t_crcf * 1000:.1f} ms, ratio {t_crc1 / t_crcf:.2f}")
    chr_vs_floor(n)
    t_crc = best_of(lambda: CRC(0.1).fit(pred, y), reps=2)
    print(f"CRC fit, 151-omega grid, n={n:,}: {t_crc:.2f} s (target < 2 s)")

    small = n // 10
    ps = Predictions(m[:small], lo=lo[:small], hi=hi[:small])
    mem_small = peak_mib(lambda: CRC(0.1).fit(ps, y[:small]))
    mem_big = peak_mib(lambda: CRC(0.1).fit(pred, y))
    print(f"CRC fit peak traced memory: n={small:,} {mem_small:.1f} MiB, n={n:,} "
          f"{mem_big:.1f} MiB, ratio {mem_big / mem_small:.1f} for 10x n (linear: ~10)")
    mem_s = peak_mib(lambda: split_scoreband(m[:small], y[:small], mt[:small]))
    mem_b = peak_mib(lambda: split_scoreband(m, y, mt))
    print(f"split CP peak traced memory: {mem_s:.1f} MiB -> {mem_b:.1f} MiB, ratio "
          f"{mem_b / mem_s:.1f} for 10x n; {mem_b * 2**20 / n:.0f} bytes per item")


if __name__ == "__main__":
    main()
