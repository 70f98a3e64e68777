"""Deprecated: moved to :mod:`scoreband.report.result` (this path goes in the next release)."""

from scoreband._deprecated import moved

__getattr__ = moved(__name__, "scoreband.report.result")
