"""What the HTML report reads from a results file: the shared pieces of the models, and the
check that runs a kind's model.

``scoreband report`` renders files a user hands it: they may have been edited, cut, or be
some other JSON. Each kind's model (its ``REPORT_SECTION.schema``, in the module that owns
the section: :mod:`scoreband.report.sections`) lists the keys its section reads and their
types (strict: ``"0.1"`` is not a number, ``true`` is not a count); every other key is
allowed and ignored. :func:`check_results` turns the first problem into one
:class:`~scoreband.errors.InputError` that names the file and the key
(``ev.json: field 'after.coverage.mean': Input should be a valid number (got '0.9')``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scoreband.errors import InputError
from scoreband.schemas import validate

__all__ = ["check_results", "model_of", "StrictModel", "Pair", "NonEmpty", "Stat", "Measured",
           "ScaleM", "Finding", "FIX"]

FIX = "give a results file as scoreband wrote it (evaluate --out, OUT/results.json of a study)"


class StrictModel(BaseModel):
    """Strict types for the keys a section reads; every other key allowed."""

    model_config = ConfigDict(strict=True, extra="allow")


Pair = Annotated[list[float], Field(min_length=2, max_length=2)]
NonEmpty = Field(min_length=1)


class Stat(StrictModel):
    """A mean (and spread) over resplits; null when it could not be measured."""

    mean: float | None
    std: float | None = None


class Measured(StrictModel):
    """A mean that a figure or a verdict uses: never null."""

    mean: float
    std: float | None = None


class ScaleM(StrictModel):
    lo: float
    hi: float


class Finding(StrictModel):
    claim: str
    holds: bool
    value: float


def model_of(kind: str) -> type[BaseModel] | None:
    """The model of the keys ``kind``'s section reads (None: the kind declares none)."""
    from scoreband.report.sections import section_of

    schema = section_of(kind).schema
    return None if schema is None else schema()


def check_results(doc: Any, kind: str, path) -> None:
    """Raise an InputError naming ``path`` and the key when ``doc`` (a results document of
    ``kind``) lacks a key its report section reads, or holds the wrong type there."""
    model = model_of(kind)
    if model is None:
        return
    try:
        validate(model, doc, path, fix=FIX)
    except ValidationError as e:  # raised inside a validator of a kind's model
        raise InputError(f"{path}: {e.errors()[0]['msg']}; {FIX}") from None
