"""Calibrator files: versioned JSON, never pickle."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from scoreband._version import __version__
from scoreband.checksums import file_sha256
from scoreband.conformal.base import (
    Calibrator,
    calibrator_class,
    calibrator_from_state,
    delta_of,
    guarantee_of,
)
from scoreband.datatypes import Scale
from scoreband.errors import CalibratorMismatch, InputError
from scoreband.files import atomic_write_text
from scoreband.json_io import read_json

__all__ = ["save_calibrator", "load_calibrator", "FORMAT", "FORMAT_VERSION", "file_sha256",
           "content_checksum", "validate_calibrator_document", "guarantee_record",
           "calibrator_document", "calibrator_from_document"]

FORMAT = "scoreband.calibrator"
FORMAT_VERSION = 1


def save_calibrator(path, calibrator: Calibrator, *, scorer_fingerprint: str | None = None,
                    inputs: dict | None = None, extra: dict | None = None) -> Path:
    """Write a fitted calibrator as versioned JSON (atomically).

    ``inputs`` records how predictions were read (column names, prediction scale,
    ratings) so :func:`load_calibrator` users can apply it the same way. ``guarantee``
    states what the bands promise: alpha, delta (None: the marginal guarantee) and the
    guarantee in words (:func:`guarantee_record`).
    """
    doc = calibrator_document(calibrator, scorer_fingerprint=scorer_fingerprint,
                              inputs=inputs, extra=extra)
    path = Path(path)
    atomic_write_text(path, json.dumps(doc, indent=2, sort_keys=False, allow_nan=False))
    return path


def calibrator_document(calibrator: Calibrator, *, scorer_fingerprint: str | None = None,
                        inputs: dict | None = None, extra: dict | None = None) -> dict:
    """The calibrator file's document (:func:`save_calibrator` writes it as it is), with its
    checksum: what a triage rule embeds, built in memory (no file written and read back)."""
    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "library_version": __version__,
        "scale": calibrator.scale.to_dict(),
        "scorer_fingerprint": scorer_fingerprint,
        "inputs": inputs or {},
        "calibrator": calibrator.get_state(),
        "guarantee": guarantee_record(calibrator),
        **(extra or {}),
    }
    doc["checksum"] = content_checksum(doc)
    return doc


def guarantee_record(calibrator: Calibrator) -> dict:
    """What a calibrator's bands promise, as its file records it: ``alpha``, ``delta``
    (None: coverage >= 1 - alpha on average over calibration draws) and ``text``, the
    guarantee in words (:func:`~scoreband.conformal.base.guarantee_of`). The calibrator's
    state holds delta too (its config): this is the statement for a reader."""
    return {"alpha": calibrator.alpha, "delta": delta_of(calibrator),
            "text": guarantee_of(calibrator)}


def content_checksum(doc: dict) -> str:
    """``sha256:`` of the document's canonical JSON without its ``checksum`` field: an edit
    of any number in the file changes it."""
    body = {k: v for k, v in doc.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _number(v, name: str, *, lo: float | None = None, inf_ok: bool = True) -> None:
    if isinstance(v, str) and v in ("inf", "-inf") and inf_ok:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        raise CalibratorMismatch(f"{name} must be a number, got {v!r}")
    if not inf_ok and not math.isfinite(v):
        raise CalibratorMismatch(f"{name} must be finite, got {v!r}")
    if lo is not None and v < lo:
        raise CalibratorMismatch(f"{name} must be >= {lo:g}, got {v!r}")


def _check_params(method: str, params, where: str) -> None:
    """Types and ranges of one conformal step's parameters (nested groups included), as the
    method's class declares them (``param_ranges`` / ``check_params``)."""
    if not isinstance(params, dict):
        raise CalibratorMismatch(f"{where} must be an object, got {type(params).__name__}")
    if "marginal" in params and "groups" in params:  # Mondrian / cluster wrappers
        _check_params(method, params["marginal"], f"{where}.marginal")
        for g, p in (params["groups"] or {}).items():
            if p is not None:
                _check_params(method, p, f"{where}.groups.{g}")
        if params.get("pool") is not None:  # the pooled small groups (Mondrian)
            _check_params(method, params["pool"], f"{where}.pool")
        return
    try:
        cls = calibrator_class(method)
    except InputError:  # an unknown method is refused when the state is rebuilt
        cls = Calibrator
    cls.check_params(params, where, _number)


def _leaf_method(state: dict) -> str:
    while "base" in state or "winner" in (state.get("model") or {}):
        state = state["base"] if "base" in state else state["model"]["winner"]
    return state.get("method", "")


def validate_calibrator_document(doc: dict, path="calibrator") -> None:
    """Refuse (:class:`CalibratorMismatch`) a calibrator document that was edited after it
    was written (checksum) or whose parameters have the wrong type or range."""
    if "checksum" in doc and doc["checksum"] != content_checksum(doc):
        raise CalibratorMismatch(f"{path} was edited after it was written (its checksum does "
                                 "not match its content); recalibrate with `scoreband "
                                 "calibrate` rather than editing the file")
    # every key, type and range of the document (scoreband.schemas), then each method's
    # parameters, which depend on the method
    from scoreband.schemas import CalibratorDoc, validate  # lazy: loads pydantic

    validate(CalibratorDoc, doc, path, error=CalibratorMismatch,
             fix="recalibrate with `scoreband calibrate` rather than editing the file")
    state = doc["calibrator"]
    _check_params(_leaf_method(state), state.get("params"), "calibrator.params")
    cols = (doc.get("inputs") or {}).get("columns") or {}
    if cols.get("scale") and Scale.from_dict(cols["scale"]) != Scale.from_dict(doc["scale"]):
        raise CalibratorMismatch(f"{path}: its scale {doc['scale']} differs from the scale its "
                                 f"columns were read on {cols['scale']}; recalibrate")


def check_scorer(doc: dict, scorer_fingerprint: str | None, path) -> None:
    """Refuse predictions of another scorer than the one the calibrator document was fitted
    on (when both fingerprints are known)."""
    fp = doc.get("scorer_fingerprint")
    if scorer_fingerprint is not None and fp is not None and fp != scorer_fingerprint:
        raise CalibratorMismatch(
            f"{path} was calibrated for scorer {fp!r}, but these predictions come from "
            f"{scorer_fingerprint!r}; a calibrator is only valid for the scorer it was fitted on"
        )


def load_calibrator(path, *, scale: Scale | None = None,
                    scorer_fingerprint: str | None = None) -> tuple[Calibrator, dict]:
    """Read a calibrator file; returns ``(calibrator, document)``.

    Refuses (:class:`CalibratorMismatch`) a file of another format version, one written for
    another ``scale``, or for another scorer (when both fingerprints are known).
    """
    path = Path(path)
    doc = read_json(path, what="calibrator file",
                    missing="write one with `scoreband calibrate ... --out calibrator.json`",
                    fix="is it a scoreband calibrator? (calibrators are JSON, never pickle)")
    return calibrator_from_document(doc, path, scale=scale,
                                    scorer_fingerprint=scorer_fingerprint)


def calibrator_from_document(doc, path="the calibrator", *, scale: Scale | None = None,
                             scorer_fingerprint: str | None = None
                             ) -> tuple[Calibrator, dict]:
    """``(calibrator, document)`` from a calibrator file's document already read (``path``
    names it in messages), with every check :func:`load_calibrator` makes."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CalibratorMismatch(f"{path} is not a scoreband calibrator file (format != {FORMAT!r})")
    if doc.get("format_version") != FORMAT_VERSION:
        raise CalibratorMismatch(
            f"{path} has format version {doc.get('format_version')}, this scoreband "
            f"({__version__}) reads version {FORMAT_VERSION}; recalibrate with `scoreband calibrate`"
        )
    try:
        file_scale = Scale.from_dict(doc["scale"])
    except (KeyError, TypeError, ValueError) as e:
        raise CalibratorMismatch(f"{path} has no valid 'scale' ({e}); recalibrate") from None
    validate_calibrator_document(doc, path)
    if scale is not None and (scale.lo, scale.hi) != (file_scale.lo, file_scale.hi):
        raise CalibratorMismatch(
            f"{path} was calibrated on scale [{file_scale.lo:g}, {file_scale.hi:g}], but this "
            f"table uses [{scale.lo:g}, {scale.hi:g}]; recalibrate on this scale"
        )
    check_scorer(doc, scorer_fingerprint, path)
    try:
        cal = calibrator_from_state(doc["calibrator"], file_scale)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        raise CalibratorMismatch(f"{path} is malformed ({type(e).__name__}: {e}); recalibrate "
                                 "with `scoreband calibrate`") from None
    return cal, doc
