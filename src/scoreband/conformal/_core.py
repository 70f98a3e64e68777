"""Deprecated: moved to :mod:`scoreband.conformal.core` (this path goes in the next release)."""

from scoreband._deprecated import moved

__getattr__ = moved(__name__, "scoreband.conformal.core")
