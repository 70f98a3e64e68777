"""Exceptions and per-row problem reports."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ScorebandError", "InputError", "NotFittedError", "CalibratorMismatch", "RowError"]


class ScorebandError(Exception):
    """Base class of every error scoreband raises on purpose."""


class InputError(ScorebandError, ValueError):
    """Bad user input: the message says what was expected, what arrived, and the fix."""


class NotFittedError(ScorebandError, RuntimeError):
    """A step was called before the step it needs (e.g. ``predict`` before ``fit``)."""


class CalibratorMismatch(ScorebandError):
    """A calibrator file was written for another scale, scorer or format version."""


@dataclass(frozen=True)
class RowError:
    """One bad row of a batch: reported and skipped, never silently dropped."""

    row: str
    column: str
    reason: str
    position: int | None = None  # 0-based position in the input table

    def __str__(self) -> str:
        return f"row {self.row}, column {self.column!r}: {self.reason}"
