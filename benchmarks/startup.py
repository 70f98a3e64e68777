"""Start-up time of the commands a user runs on small tables (issue 34: ``apply``,
``calibrate`` and ``evaluate`` on small tables under 1.5 s at idle).

    python benchmarks/startup.py [--reps 5] [--rows 60] [--top 15]

Times whole processes (the ``scoreband`` console script, as a user starts it): ``--help``,
``calibrate`` and ``apply`` on the first 60 rows of ``scoreband example``'s table and
``evaluate --seeds 2`` (two random splits) on them; the median of ``--reps`` runs, with the CPU seconds of the
same runs and the load average (``/proc/loadavg``, what ``uptime`` prints) beside each
figure, since on a shared machine wall time is mostly waiting. Then ``python -X importtime``
of ``apply``: the ``--top`` modules by cumulative import time, and for each command which of
the heavy packages that should load only where used (scipy, sklearn, matplotlib, torch,
pydantic, rich, pyarrow ...) it imported, with their cumulative import time.

Prints only; no timed assertions anywhere in the tests.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: packages that the small-table paths should not need (pandas and numpy are needed)
HEAVY = ("scipy", "sklearn", "matplotlib", "torch", "pydantic", "rich", "pyarrow",
         "transformers", "PIL", "httpx", "jinja2", "numba", "statsmodels", "mapie")

_IMPORT = re.compile(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)")


def scoreband_cmd() -> list[str]:
    """The console script next to this interpreter (as a user starts it), else ``-m``."""
    exe = Path(sys.executable).with_name("scoreband")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "scoreband"]


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_once(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def small_table(work: Path, rows: int) -> Path:
    """The first ``rows`` rows of ``scoreband example``'s table."""
    full = work / "example.csv"
    subprocess.run(scoreband_cmd() + ["example", "--out", str(full)], check=True,
                   capture_output=True)
    out = work / f"small{rows}.csv"
    with open(full, newline="") as f, open(out, "w", newline="") as g:
        w = csv.writer(g)
        for i, row in enumerate(csv.reader(f)):
            if i > rows:
                break
            w.writerow(row)
    return out


def commands(table: Path, work: Path) -> dict:
    """name -> function(rep) giving the argv of that repetition (fresh output paths: a
    command never overwrites a file it did not create)."""
    sb = scoreband_cmd()
    cols = ["--ratings", "ratings", "--scale", "1,5", "--median", "median", "--lo", "q05",
            "--hi", "q95", "--pred-scale", "0,1", "--method", "crc"]
    cal = work / "cal.json"
    return {
        "--help": lambda i: sb + ["--help"],
        "calibrate": lambda i: sb + ["calibrate", str(table), *cols,
                                     "--out", str(cal if i == 0 else work / f"cal{i}.json")],
        "apply": lambda i: sb + ["apply", str(table), "--calibrator", str(cal),
                                 "--out", str(work / f"banded{i}.csv")],
        "evaluate --seeds 2": lambda i: sb + ["evaluate", str(table), *cols, "--seeds", "2",
                                               "--out", str(work / f"eval{i}.json")],
    }


def importtime(argv: list[str], cwd: Path) -> list[tuple[str, int, int, int]]:
    """``(module, self us, cumulative us, nesting level)`` of every import of one run of
    ``argv``."""
    code = "import sys; from scoreband.cli import main; sys.argv[0] = 'scoreband'; main()"
    # the subcommand and its arguments follow the script name
    py = [sys.executable, "-X", "importtime", "-c", code, *argv[len(scoreband_cmd()):]]
    r = subprocess.run(py, cwd=cwd, capture_output=True, text=True)
    out = []
    for line in r.stderr.splitlines():
        m = _IMPORT.match(line)
        if m:
            level = (len(m.group(3)) - 1) // 2
            out.append((m.group(4), int(m.group(1)), int(m.group(2)), level))
    return out


def heavy_loaded(imports) -> dict[str, int]:
    """Top-level heavy package -> its cumulative import time (us), where imported."""
    got: dict[str, int] = {}
    for mod, _, cum, _ in imports:
        top = mod.split(".")[0]
        if top in HEAVY:
            got[top] = max(got.get(top, 0), cum)
    return got


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rows", type=int, default=60)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="scoreband_startup_"))
    try:
        table = small_table(work, args.rows)
        cmds = commands(table, work)
        print(f"start-up, whole process, median of {args.reps} ({args.rows}-row table; "
              f"{os.cpu_count()} CPUs; target < 1.5 s at idle)")
        print(f"{'command':<22}{'wall s':>8}{'cpu s':>8}{'min wall':>10}   load average")
        for name, argv_of in cmds.items():
            walls, cpus = [], []
            for i in range(args.reps):
                w, c = run_once(argv_of(i), work)
                walls.append(w)
                cpus.append(c)
            print(f"{name:<22}{statistics.median(walls):>8.2f}{statistics.median(cpus):>8.2f}"
                  f"{min(walls):>10.2f}   {loadavg()}", flush=True)
        print()
        imports = {name: importtime(argv_of(100), work) for name, argv_of in cmds.items()}
        top = sorted(imports["apply"], key=lambda t: -t[2])[:args.top]
        print(f"python -X importtime, apply: top {args.top} by cumulative time "
              f"(load average {loadavg()})")
        print(f"{'cumulative ms':>14}{'self ms':>9}  module")
        for mod, self_us, cum, _ in top:
            print(f"{cum / 1e3:>14.1f}{self_us / 1e3:>9.1f}  {mod}")
        print()
        print("heavy packages imported (cumulative import ms; each should load only where used)")
        for name, imps in imports.items():
            got = heavy_loaded(imps)
            total = sum(c for _, _, c, level in imps if level == 0)
            listed = ", ".join(f"{k} {v / 1e3:.0f}" for k, v in
                               sorted(got.items(), key=lambda kv: -kv[1])) or "none"
            print(f"  {name:<20} all imports {total / 1e3:6.0f} ms; {listed}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
