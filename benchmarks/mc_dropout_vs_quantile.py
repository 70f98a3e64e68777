"""Single-pass quantile head vs MC dropout (25 passes): throughput and UPS on one batch.

    python benchmarks/mc_dropout_vs_quantile.py [--model embedded:default] [--n 1000]

Target (issue 3): >= 20x the throughput of MC dropout at equal or better UPS. Both are
calibrated with CRC on a separate in-domain calibration set before UPS is measured, so the
comparison is of calibrated bands, as in source 000.
"""

from __future__ import annotations

import argparse
import time

import torch

from scoreband import metrics as M
from scoreband.conformal import CRC
from scoreband.scorers.scorer import Scorer
from scoreband.world import make_dataset


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="embedded:default")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--passes", type=int, default=25)
    a = ap.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    scorer = Scorer.load(a.model)
    cal = make_dataset(a.n, 201, n_annotators=5)
    test = make_dataset(a.n, 202, n_annotators=5)

    t = time.perf_counter()
    q = scorer.predict(test.images, test.captions, head="chained_ci")
    t_q = time.perf_counter() - t
    t = time.perf_counter()
    mc = scorer.mc_dropout(test.images, test.captions, passes=a.passes)
    t_mc = time.perf_counter() - t

    qc = scorer.predict(cal.images, cal.captions, head="chained_ci")
    mcc = scorer.mc_dropout(cal.images, cal.captions, passes=a.passes)
    y, yc = test.y01, cal.y01
    bq = CRC(0.1).fit(qc, yc).predict(q)
    bm = CRC(0.1).fit(mcc, yc).predict(mc)
    ups_q = M.ups(bq.median01, bq.lo01, bq.hi01, y)
    ups_m = M.ups(bm.median01, bm.lo01, bm.hi01, y)
    print(f"n={a.n}: quantile head {a.n / t_q:,.0f} pairs/s, MC dropout x{a.passes} "
          f"{a.n / t_mc:,.0f} pairs/s, throughput ratio {t_mc / t_q:.1f}x (target >= 20x)")
    print(f"UPS after CRC: quantile head {ups_q:.3f}, MC dropout {ups_m:.3f} "
          f"(target: quantile >= MC); coverage {M.coverage(bq.lo01, bq.hi01, y):.3f} vs "
          f"{M.coverage(bm.lo01, bm.hi01, y):.3f}; width {M.sharpness(bq.lo01, bq.hi01):.3f} "
          f"vs {M.sharpness(bm.lo01, bm.hi01):.3f}")
    print("note: the quantile timing includes the image-only embedding pass used for "
          "clustering (two encoder passes per pair)")


if __name__ == "__main__":
    main()
