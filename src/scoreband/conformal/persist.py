"""Calibrator files: versioned JSON, never pickle."""

from __future__ import annotations

import json
from pathlib import Path

from scoreband import __version__
from scoreband.conformal.base import Calibrator, calibrator_from_state
from scoreband.errors import CalibratorMismatch, InputError
from scoreband.files import atomic_write_text, file_sha256
from scoreband.records import Scale

__all__ = ["save_calibrator", "load_calibrator", "FORMAT", "FORMAT_VERSION", "file_sha256"]

FORMAT = "scoreband.calibrator"
FORMAT_VERSION = 1


def save_calibrator(path, calibrator: Calibrator, *, scorer_fingerprint: str | None = None,
                    inputs: dict | None = None, extra: dict | None = None) -> Path:
    """Write a fitted calibrator as versioned JSON (atomically).

    ``inputs`` records how predictions were read (column names, prediction scale,
    ratings) so :func:`load_calibrator` users can apply it the same way.
    """
    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "library_version": __version__,
        "scale": calibrator.scale.to_dict(),
        "scorer_fingerprint": scorer_fingerprint,
        "inputs": inputs or {},
        "calibrator": calibrator.get_state(),
        **(extra or {}),
    }
    path = Path(path)
    atomic_write_text(path, json.dumps(doc, indent=2, sort_keys=False, allow_nan=False))
    return path


def load_calibrator(path, *, scale: Scale | None = None,
                    scorer_fingerprint: str | None = None) -> tuple[Calibrator, dict]:
    """Read a calibrator file; returns ``(calibrator, document)``.

    Refuses (:class:`CalibratorMismatch`) a file of another format version, one written for
    another ``scale``, or for another scorer (when both fingerprints are known).
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"calibrator file {str(path)!r} does not exist; write one with "
                         "`scoreband calibrate ... --out calibrator.json`")
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise InputError(f"{path} is not valid JSON ({e}); is it a scoreband calibrator?") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CalibratorMismatch(f"{path} is not a scoreband calibrator file (format != {FORMAT!r})")
    if doc.get("format_version") != FORMAT_VERSION:
        raise CalibratorMismatch(
            f"{path} has format version {doc.get('format_version')}, this scoreband "
            f"({__version__}) reads version {FORMAT_VERSION}; recalibrate with `scoreband calibrate`"
        )
    file_scale = Scale.from_dict(doc["scale"])
    if scale is not None and (scale.lo, scale.hi) != (file_scale.lo, file_scale.hi):
        raise CalibratorMismatch(
            f"{path} was calibrated on scale [{file_scale.lo:g}, {file_scale.hi:g}], but this "
            f"table uses [{scale.lo:g}, {scale.hi:g}]; recalibrate on this scale"
        )
    fp = doc.get("scorer_fingerprint")
    if scorer_fingerprint is not None and fp is not None and fp != scorer_fingerprint:
        raise CalibratorMismatch(
            f"{path} was calibrated for scorer {fp!r}, but these predictions come from "
            f"{scorer_fingerprint!r}; a calibrator is only valid for the scorer it was fitted on"
        )
    return calibrator_from_state(doc["calibrator"], file_scale), doc
