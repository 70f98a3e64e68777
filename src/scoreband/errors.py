"""Exceptions and per-row problem reports."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ScorebandError", "InputError", "NotFittedError", "CalibratorMismatch", "RowError",
           "ERROR_COLUMN", "error_column", "check_known_keys"]

#: The one registry of the columns where a row's failure is written. Every command that
#: writes a table adds its columns under one prefix and the reason a row failed in
#: ``<prefix>_error`` (empty when the row is fine), so a table passed through several commands
#: keeps each stage's reasons side by side; a reader of another tool's log keeps that tool's
#: own per-row error beside the values it read. Stage key -> column.
ERROR_COLUMN = {
    # stages of the row engine (commands that write a table)
    "apply": "band_error", "score": "band_error", "clip-s": "score_error",
    "judge": "judge_error", "roundtrip": "roundtrip_error", "triage": "triage_error",
    "pairwise": "pair_error",
    # a pairwise rule's verdicts (triage --pairwise --apply, apply --calibrator RULE): its
    # own column, so a rule applied to a judged pair table keeps the judge's pair_error
    "pairwise-rule": "verdict_error",
    # a cascade of judges (scoreband cascade): why a row's stages could not decide it
    "cascade": "cascade_error",
    # readers of other tools' files (scoreband.formats): the tool's per-row error
    "openai-batch": "batch_error", "inspect": "sample_error", "promptfoo": "result_error",
}


def error_column(stage: str) -> str:
    """The error column of ``stage`` (a key of :data:`ERROR_COLUMN`).

    >>> error_column("apply"), error_column("triage")
    ('band_error', 'triage_error')
    """
    try:
        return ERROR_COLUMN[stage]
    except KeyError:
        raise KeyError(f"no error column registered for stage {stage!r}; known: "
                       f"{', '.join(ERROR_COLUMN)}") from None


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


def check_known_keys(keys, known, what: str) -> None:
    """Refuse keys outside ``known``, naming them and every known one (``what``: "column
    key", "calibration option" ...).

    >>> check_known_keys({"median"}, ["median", "lo"], "column key")
    """
    bad = sorted(set(keys) - set(known))
    if bad:
        raise InputError(f"unknown {what}(s) {', '.join(bad)}; known: "
                         f"{', '.join(sorted(known))}")
