"""The ``scoreband`` command: thin modules over the Python API, one per command group.

Each command reads its options, builds the library call's arguments, calls one library
function and prints; the library validates and raises errors that name its parameters, which
:func:`scoreband.cli._app.guard` turns into one line naming the command's flags (exit 2).
"""

from __future__ import annotations

import sys

# command modules register themselves on ``app``, in the order --help lists them
# isort: off
from scoreband.cli import studies  # noqa: F401  (demo first: the main job)
from scoreband.cli import calibration  # noqa: F401
from scoreband.cli import models  # noqa: F401
from scoreband.cli import judges  # noqa: F401
from scoreband.cli import roundtrip  # noqa: F401
from scoreband.cli import systems  # noqa: F401
from scoreband.cli import decisions  # noqa: F401
from scoreband.cli import cascade  # noqa: F401
from scoreband.cli import monitor  # noqa: F401
from scoreband.cli import pairwise  # noqa: F401
from scoreband.cli import data  # noqa: F401
from scoreband.cli import report  # noqa: F401
# isort: on
from scoreband.cli._app import app, err

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the console script."""
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
