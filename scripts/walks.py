"""The three walks of issue 42 through the house, measured by running them: which library
files a command's work passes through ("rooms"), on which parts of docs/ARCHITECTURE.md's
table, and how often a call climbs back up (a function of a lower part calling one of a
higher part: a callback, or a module loaded by name).

    python scripts/walks.py                      # this checkout
    PYTHONPATH=/path/to/old/src python scripts/walks.py   # another version of the code,
                                                 # placed on this checkout's table of parts

Each walk runs in this process through the CLI (typer's test runner) on the bundled example
table, traced with ``sys.setprofile``; the cli/ files themselves are not counted as rooms.
The parts come from this checkout's docs/ARCHITECTURE.md (tests/test_architecture.py reads
it the same way), so two versions are measured against one map.
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _parts():
    """The table of parts, as tests/test_architecture.py reads it from this checkout's page."""
    sys.path.insert(0, str(ROOT))
    from tests.test_architecture import PARTS

    return PARTS


def trace(args: list[str]) -> list[tuple[str, str]]:
    """The (caller, callee) file pairs of every call between two scoreband files while
    ``scoreband ARGS`` runs (paths relative to the package)."""
    from typer.testing import CliRunner

    import scoreband
    from scoreband.cli import app

    pkg = str(Path(scoreband.__file__).parent) + "/"
    calls: list[tuple[str, str]] = []

    def prof(frame, event, arg):
        if event != "call":
            return
        callee, back = frame.f_code.co_filename, frame.f_back
        if not callee.startswith(pkg) or back is None:
            return
        caller = back.f_code.co_filename
        if caller.startswith(pkg) and caller != callee:
            calls.append((caller[len(pkg):], callee[len(pkg):]))

    sys.setprofile(prof)
    try:
        res = CliRunner().invoke(app, args)
    finally:
        sys.setprofile(None)
    if res.exit_code != 0:
        raise SystemExit(f"scoreband {' '.join(args)} failed:\n{res.output}")
    return calls


def measure(calls, parts) -> dict:
    order = {p: i for i, p in enumerate(parts.files)}

    def rank(rel):
        p = parts.part_of(rel)
        return order.get(p, -1), p

    rooms = {c for pair in calls for c in pair if not c.startswith("cli/")}
    climbs = Counter((a, b) for a, b in calls if rank(a)[0] < rank(b)[0]
                     and not a.startswith("cli/"))
    return {"rooms": len(rooms), "parts": len({rank(r)[1] for r in rooms}),
            "climbs": sum(climbs.values()), "climb_edges": len(climbs),
            "examples": [f"{a} -> {b}" for a, b in list(climbs)[:4]]}


def main() -> None:
    import pandas as pd

    from scoreband.api import example_table

    parts = _parts()
    d = Path(tempfile.mkdtemp(prefix="walks-"))
    ex = pd.read_csv(example_table())
    ex.to_csv(d / "ex.csv", index=False)
    cols = ["--ratings", "ratings", "--scale", "1,5", "--median", "median", "--pred-scale",
            "0,1"]
    walks = {
        "evaluate": [["evaluate", str(d / "ex.csv"), *cols, "--seeds", "2"]],
        "calibrate -> apply": [
            ["calibrate", str(d / "ex.csv"), *cols, "--out", str(d / "cal.json")],
            ["apply", str(d / "ex.csv"), "--calibrator", str(d / "cal.json"), "--out",
             str(d / "banded.csv")]],
        "triage": [["triage", str(d / "ex.csv"), "--target", "human", "--scale", "1,5",
                    "--score", "median", "--tolerance", "0.5", "--risk", "0.2", "--out",
                    str(d / "rule.json"), "--apply", str(d / "ex.csv"), "--apply-out",
                    str(d / "triaged.csv")]],
    }
    print("| walk | rooms (library files) | parts | climbs back up (calls) | climb edges |")
    print("|---|---|---|---|---|")
    for name, cmds in walks.items():
        calls = [c for args in cmds for c in trace(args)]
        m = measure(calls, parts)
        print(f"| {name} | {m['rooms']} | {m['parts']} | {m['climbs']} | {m['climb_edges']} |")
        for e in m["examples"]:
            print(f"|   e.g. | {e} | | | |")


if __name__ == "__main__":
    main()
