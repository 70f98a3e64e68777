"""What the kill / resume tests share: a run killed with SIGKILL at random points of the
work left, read off its journal."""

from __future__ import annotations

import os
import signal
import time


def journal_lines(journal) -> int:
    """The rows a journal holds (one line each); 0 before it exists."""
    try:
        with open(journal, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def kill_five_times(start, journal, rows: int, rng):
    """Start the run (``start()`` -> Popen, in its own session) five times, each killed once
    the journal holds a random 10-40 % of the rows still to do (so no run can finish first
    however fast the machine is); returns the journal's size after each kill and the last
    process (waited for)."""
    sizes = []
    for _ in range(5):
        p = start()
        done = journal_lines(journal)
        target = done + max(1, int((rows - done) * rng.uniform(0.1, 0.4)))
        deadline = time.time() + 120
        while time.time() < deadline and p.poll() is None and journal_lines(journal) < target:
            time.sleep(0.01)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        sizes.append(journal.stat().st_size if journal.exists() else 0)
    return sizes, p
