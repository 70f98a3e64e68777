"""Streaming apply at scale: rows/s and peak resident memory (VmHWM of a fresh process) of
``scoreband.api.apply_file`` on Parquet tables of 10^5, 10^6 and 10^7 rows, beside the
in-memory size of each table and the pyarrow floor: a fresh process that reads the same
table with pyarrow (record batches), computes the same band columns with the same calibrator
(``predict`` on the three prediction columns, the flag and error columns as empty text) and
writes them with every input column through one ``ParquetWriter`` - no checks, no row
errors, no pandas. Cost should grow linearly, memory should not; apply / floor is printed per
size (target: <= 2x at 10^7).

    python benchmarks/engine_scale.py [--rows 100000,1000000,10000000] [--dir /tmp/x]

Writes nothing into the repository (tables and outputs go to --dir, a temp folder by default).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import scoreband.api as sb
from scoreband.engine import ChunkWriter

COLS = dict(ratings="ratings", scale="1,5", median="median", lo="q05", hi="q95",
            pred_scale="0,1")


def make_table(path: Path, n: int, chunk: int = 100_000) -> int:
    base = sb.read_table(sb.example_table())[["id", "median", "q05", "q95", "task"]]
    rng = np.random.default_rng(0)
    with ChunkWriter(path) as w:
        done = 0
        while done < n:
            m = min(chunk, n - done)
            part = base.sample(m, replace=True, random_state=int(rng.integers(1 << 30)))
            part = part.reset_index(drop=True)
            part["id"] = [f"r{i}" for i in range(done, done + m)]
            w.write(part)
            done += m
    per_row = base.memory_usage(deep=True).sum() / len(base)
    return int(per_row * n)


def run_child(src: Path, cal: Path, out: Path) -> tuple[float, int]:
    code = ("import time, scoreband.api as sb; t = time.perf_counter(); "
            f"sb.apply_file({str(src)!r}, {str(cal)!r}, {str(out)!r}); "
            "print(time.perf_counter() - t); "
            "print([ln for ln in open('/proc/self/status') if ln.startswith('VmHWM')][0])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = r.stdout.split("\n")
    return float(lines[0]), int(lines[1].split()[1]) * 1024


FLOOR = """
import time, numpy as np, pyarrow as pa, pyarrow.parquet as pq
from scoreband.conformal import load_calibrator
from scoreband.datatypes import Predictions
t = time.perf_counter()
cal, _ = load_calibrator(CAL)
w = None
for b in pq.ParquetFile(SRC).iter_batches(batch_size=100_000):
    m, lo, hi = (b.column(c).to_numpy() for c in ("median", "q05", "q95"))
    band = cal.predict(Predictions(median=m, lo=lo, hi=hi))
    empty = pa.array(np.full(len(m), "", dtype="U1"))
    cols = [band.lo, band.median, band.hi, band.lo01, band.hi01, empty, empty]
    names = ["band_lo", "band_median", "band_hi", "band_lo01", "band_hi01", "band_flag",
             "band_error"]
    t2 = pa.Table.from_batches([b])
    for n, c in zip(names, cols):
        t2 = t2.append_column(n, pa.array(c))
    w = w or pq.ParquetWriter(OUT, t2.schema)
    w.write_table(t2)
w.close()
print(time.perf_counter() - t)
print([ln for ln in open("/proc/self/status") if ln.startswith("VmHWM")][0])
"""


def run_floor(src: Path, cal: Path, out: Path) -> tuple[float, int]:
    code = f"SRC, CAL, OUT = {str(src)!r}, {str(cal)!r}, {str(out)!r}\n" + FLOOR
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = r.stdout.split("\n")
    return float(lines[0]), int(lines[1].split()[1]) * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="100000,1000000,10000000")
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    d = Path(a.dir or tempfile.mkdtemp(prefix="scoreband-engine-"))
    d.mkdir(parents=True, exist_ok=True)
    df = sb.read_table(sb.example_table())
    sb.calibrate(df, **COLS, method="crc").save(d / "cal.json")
    print(f"{'rows':>12} {'table in memory':>16} {'apply s':>9} {'rows/s':>11} {'peak RSS':>10}"
          f" {'floor s':>8} {'floor RSS':>10} {'apply/floor':>12}")
    for n in (int(x) for x in a.rows.split(",")):
        src = d / f"t{n}.parquet"
        t0 = time.perf_counter()
        mem = make_table(src, n)
        made = time.perf_counter() - t0
        secs, peak = run_child(src, d / "cal.json", d / f"o{n}.parquet")
        fsecs, fpeak = run_floor(src, d / "cal.json", d / f"f{n}.parquet")
        print(f"{n:>12,} {mem / 1e6:>13.0f} MB {secs:>9.2f} {n / secs:>11,.0f} "
              f"{peak / 1e6:>7.0f} MB {fsecs:>8.2f} {fpeak / 1e6:>7.0f} MB "
              f"{secs / fsecs:>11.2f}x   (table made in {made:.0f} s)", flush=True)
        for f in (src, d / f"o{n}.parquet", d / f"f{n}.parquet"):
            f.unlink()


if __name__ == "__main__":
    main()
