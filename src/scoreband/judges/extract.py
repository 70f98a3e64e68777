"""Deprecated: moved to :mod:`scoreband.judge_stage` (this path goes in the next release)."""

from scoreband._deprecated import moved

__getattr__ = moved(__name__, "scoreband.judge_stage")
