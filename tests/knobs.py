"""A command's rarely used knobs as the `--config FILE` they are given in."""

from __future__ import annotations

import json
from pathlib import Path


def knobs(path: Path, **values) -> str:
    """Write ``values`` as a JSON knobs file at ``path``; its path, for ``--config``."""
    Path(path).write_text(json.dumps(values), encoding="utf-8")
    return str(path)
