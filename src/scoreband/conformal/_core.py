"""Deprecated: the former, private name of :mod:`scoreband.conformal.core`.

``from scoreband.conformal._core import split_at`` still works for one release, with a
:class:`DeprecationWarning`; import from :mod:`scoreband.conformal.core` (or, for the
public functions, from :mod:`scoreband.conformal`) instead.
"""

from __future__ import annotations

import sys
import warnings

from scoreband.conformal import core as _public

__all__: list[str] = []


def __getattr__(name: str):
    if name.startswith("__") or not hasattr(_public, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    caller = sys._getframe(1).f_globals.get("__name__", "")
    if not caller.startswith(("scoreband.", "importlib")):
        # the warning is for code outside the library (scoreband's own modules that still
        # use the old path are being moved over); ``from ... import`` asks importlib first
        warnings.warn(f"scoreband.conformal._core is deprecated: import {name} from "
                      "scoreband.conformal.core; the old path goes in the next release",
                      DeprecationWarning, stacklevel=2)
    return getattr(_public, name)
