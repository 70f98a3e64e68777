"""The simulated truth of issue 45's monitor targets, vectorised: predictions m ~ U(1, 5),
targets clip(m + N(0, sd), 1, 5) on the 1-5 scale, a split calibrator (alpha 0.1) fitted on
500 rows, and streams whose noise doubles after a change row. Shared by the statistical
tests and ``benchmarks/monitor.py``."""

from __future__ import annotations

import numpy as np

from scoreband.conformal import make_calibrator
from scoreband.datatypes import Predictions, Scale
from scoreband.metrics import covered

SCALE = Scale(1.0, 5.0)


def world(n: int, sd, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(m, y)``: n predictions and their targets on 1-5 (``sd`` a number or (n,))."""
    m = rng.uniform(1.0, 5.0, n)
    return m, np.clip(m + rng.normal(0.0, 1.0, n) * sd, 1.0, 5.0)


def fit_split(rng: np.random.Generator, n: int = 500, alpha: float = 0.1,
              delta: float | None = 0.05):
    """A split calibrator fitted on n rows of the unchanged world (delta: training-
    conditional, None: marginal)."""
    m, y = world(n, 0.5, rng)
    cal = make_calibrator("split", alpha, scale=SCALE, delta=delta)
    return cal.fit(Predictions(median=SCALE.to01(m)), SCALE.to01(y))


def streams(cal, n_streams: int, length: int, change: int | None,
            rng: np.random.Generator, sd: float = 0.5, factor: float = 2.0):
    """``(misses, scores, m, y)``, each (n_streams, length): whether the calibrator's band
    misses the target, the conformity score |y - m|; the noise is ``sd`` before row
    ``change`` (0-based; None: never changes) and ``factor * sd`` from it on."""
    sds = np.full(length, sd)
    if change is not None:
        sds[change:] = factor * sd
    m, y = world(n_streams * length, np.tile(sds, n_streams), rng)
    band = cal.predict(Predictions(median=SCALE.to01(m)))
    miss = ~covered(band.lo01, band.hi01, SCALE.to01(y))
    shape = (n_streams, length)
    return (miss.reshape(shape).astype(float), np.abs(y - m).reshape(shape),
            m.reshape(shape), y.reshape(shape))
