"""Old import paths that keep working for one release (the house round 3 renames).

Each moved module leaves a file behind whose only line is ``__getattr__ = moved(__name__,
"scoreband.new.path")``: every public name still resolves, with a :class:`DeprecationWarning`
that names the new path. The library itself never imports an old path (a test checks), so the
warning reaches only code outside it.
"""

from __future__ import annotations

import importlib
import warnings

#: old module -> new module; the one list the tests and docs/ARCHITECTURE.md read
MOVED = {
    "scoreband.records": "scoreband.datatypes",
    "scoreband.bands": "scoreband.apply_stage",
    "scoreband.protocol": "scoreband.evaluation",
    "scoreband.io": "scoreband.tables",
    "scoreband.inference": "scoreband.system_level",
    "scoreband.inference.ppi": "scoreband.system_level.ppi",
    "scoreband.inference.active": "scoreband.system_level.active",
    "scoreband.inference.propose": "scoreband.system_level.propose",
    "scoreband.inference.systems": "scoreband.system_level.study",
    "scoreband.scorers.scoring": "scoreband.scorers.stages",
    "scoreband.scorers.backbone_scorer": "scoreband.scorers.train_backbone",
    "scoreband.judges.features": "scoreband.logprobs",
    "scoreband.conformal._core": "scoreband.conformal.core",
    "scoreband.studies.base": "scoreband.report.result",
    "scoreband.judges.extract": "scoreband.judge_stage",
}

#: names a former module offered that now live elsewhere than its one successor
_ELSEWHERE = {
    "scoreband.io": ("scoreband.columns", "scoreband.files", "scoreband.json_io"),
}


def moved(old: str, new: str):
    """A module ``__getattr__`` for ``old`` that forwards each name to ``new``, warning once
    per access that the path is deprecated."""

    def __getattr__(name: str):
        if name.startswith("__"):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        for where in (new, *_ELSEWHERE.get(old, ())):
            module = importlib.import_module(where)
            if hasattr(module, name):
                warnings.warn(f"{old} is deprecated: import {name} from {where}; the old path "
                              "goes in the next release", DeprecationWarning, stacklevel=2)
                return getattr(module, name)
        raise AttributeError(f"module {old!r} has no attribute {name!r}")

    return __getattr__
