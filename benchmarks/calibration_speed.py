"""Calibration speed and memory: scoreband vs MAPIE, CRC omega-grid fit, memory scaling.

    python benchmarks/calibration_speed.py [--n 1000000]

Prints ratios measured in this one run (no timed assertions anywhere in the tests).
Targets (issue 2): split CP fit + apply >= 3x faster than MAPIE's SplitConformalRegressor
on the same prefit predictions; CRC fit over the default 151-omega grid < 2 s at n = 10^6;
peak memory linear in n.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from scoreband.conformal import CRC, SplitConformal
from scoreband.records import Predictions


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


def peak_mib(fn) -> float:
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


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
