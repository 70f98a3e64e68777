"""The monitor (``scoreband monitor``) against MAPIE 1.6's online tests on issue 45's world:
predictions m ~ U(1, 5), targets clip(m + N(0, 0.5)) on 1-5, split calibrators (alpha 0.1,
delta 0.05) fitted on 500 rows, streams of 1,500 rows, false alarm 0.05; the noise doubles
after row 300 in the drifting streams.

    python benchmarks/monitor.py [--calibrators 10] [--streams 20] [--mapie-streams 5]

Prints, for each test: the share of unchanged streams that alarm (false alarms), the share
of drifting streams that alarm by row 600 (detection) and the median delay after row 300.
* scoreband: the restarted betting e-process on the band's misses (decisions.eprocess);
* MAPIE RiskMonitoring (Podkopaev & Ramdas 2022): a time-uniform lower bound on the running
  miss rate against the threshold 0.1 given (its online level test_level / 2, so
  test_level = 0.1 puts it at 0.05);
* MAPIE OnlineMartingaleTest (jumper martingale, Vovk): tests exchangeability of the
  conformity scores |y - m| of the stream, at test_level 0.05 (fewer streams: a Python loop).
Targets (issue 45): false alarms <= 10 %, detection by row 600 >= 90 %, median delay <= 150.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.monitor.sim

from scoreband.decisions.eprocess import first_alarm, log_eprocess  # noqa: E402
from tests.monitor.sim import fit_split, streams  # noqa: E402

CHANGE, LENGTH, GAMMA = 300, 1500, 0.05


def _risk_monitoring(z: np.ndarray) -> int:
    from mapie.exchangeability_testing import RiskMonitoring

    mon = RiskMonitoring(risk="accuracy", test_level=2 * GAMMA, threshold=0.1, warn=False)
    mon.update(z.astype(int), np.zeros(len(z), dtype=int))  # its risk: 1{y_true != y_pred}
    lb = mon.online_risk_lower_bound_sequence_history
    hit = np.flatnonzero(lb > 0.1)
    return int(hit[0]) if len(hit) else -1


def _martingale(scores: np.ndarray) -> int:
    from mapie.exchangeability_testing import OnlineMartingaleTest

    omt = OnlineMartingaleTest(task="regression", test_level=GAMMA, warn=False, burn_in=1,
                               random_state=0)
    for i, s in enumerate(scores):
        p = omt.compute_p_value(current_conformity_score=float(s),
                                conformity_score_history=np.asarray(
                                    omt.conformity_score_history, dtype=float))
        omt.update_simple_jumper_martingale(p)
        omt.conformity_score_history.append(float(s))
        omt.pvalue_history.append(float(p))
        if omt.current_martingale_value >= omt.reject_threshold:
            return i
    return -1


def _row(name: str, null_at, drift_at) -> None:
    null_at, drift_at = np.asarray(null_at), np.asarray(drift_at)
    delay = np.where(drift_at >= CHANGE, drift_at - CHANGE, np.inf)
    early = np.mean((drift_at >= 0) & (drift_at < CHANGE))
    print(f"{name:<34} {np.mean(null_at >= 0):>12.3f} "
          f"{np.mean((drift_at >= CHANGE) & (drift_at < 2 * CHANGE)):>12.3f} "
          f"{np.median(delay):>12.0f} {early:>10.3f}   ({len(null_at)} streams each)")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calibrators", type=int, default=10)
    ap.add_argument("--streams", type=int, default=20, help="per calibrator and setting")
    ap.add_argument("--mapie-streams", type=int, default=5,
                    help="per calibrator and setting, for the martingale test")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    rng = np.random.default_rng(a.seed)
    t0 = time.perf_counter()
    got = {k: ([], []) for k in ("scoreband", "risk", "martingale")}
    for _ in range(a.calibrators):
        cal = fit_split(rng, delta=0.05)
        for j, change in enumerate((None, CHANGE)):
            z, scores, _, _ = streams(cal, a.streams, LENGTH, change, rng)
            got["scoreband"][j].extend(first_alarm(log_eprocess(z, cal.alpha), GAMMA))
            got["risk"][j].extend(_risk_monitoring(r) for r in z)
            got["martingale"][j].extend(_martingale(s) for s in scores[:a.mapie_streams])
    print(f"{'test (false alarm 0.05)':<34} {'false alarm':>12} {'by row 600':>12} "
          f"{'med. delay':>12} {'before 300':>10}")
    _row("scoreband monitor (e-process)", *got["scoreband"])
    _row("MAPIE RiskMonitoring (thr 0.1)", *got["risk"])
    _row("MAPIE OnlineMartingaleTest", *got["martingale"])
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
