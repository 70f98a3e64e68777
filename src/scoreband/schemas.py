"""Declared schemas of the files scoreband reads back: calibrators and model folders.

Every key, its type and its range are declared here once (pydantic models, ``extra="forbid"``:
an unknown key is refused, naming it); :func:`validate` turns pydantic's report into one
:class:`~scoreband.errors.CalibratorMismatch` / :class:`~scoreband.errors.InputError` that
names the file, the field (``inputs.n_ratings``), what arrived and the fix. Files are read
with :func:`scoreband.json_io.read_json`, which bounds their size and nesting depth before
parsing.

The per-method parameters of a calibrator (``calibrator.params``) are checked by
:func:`scoreband.conformal.persist.validate_calibrator_document`, which knows each method.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import typing
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from scoreband.datatypes import Scale
from scoreband.errors import InputError

__all__ = ["ScaleDoc", "ColumnsDoc", "InputsDoc", "GuaranteeDoc", "CalibratorDoc",
           "EmbeddedModelDoc", "BackboneModelDoc", "validate"]


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)


Finite = Annotated[float, Field(allow_inf_nan=False)]


class ScaleDoc(_Doc):
    lo: Finite
    hi: Finite
    integer: bool = False

    @model_validator(mode="after")
    def _ordered(self):
        if not self.lo < self.hi:
            raise ValueError(f"lo ({self.lo:g}) must be below hi ({self.hi:g})")
        return self


def columns_doc(source: type | None = None) -> type[BaseModel]:
    """``ColumnsDoc``, generated from :class:`scoreband.columns.ColumnSpec`'s fields (their
    one definition; ``source``: another dataclass, for the test that a new field shows up):
    a scale field becomes a :class:`ScaleDoc`, a list of column names a ``list[str]``;
    defaults as the dataclass's (a tuple as a list)."""
    from scoreband.columns import ColumnSpec

    source = source or ColumnSpec
    hints = typing.get_type_hints(source)
    spec = {}
    for f in dataclasses.fields(source):
        tp = hints[f.name]
        if tp is Scale:
            tp = ScaleDoc
        elif tp == (Scale | None):
            tp = ScaleDoc | None
        elif typing.get_origin(tp) is collections.abc.Sequence:
            tp = list[str]
        default = f.default
        if default is dataclasses.MISSING:
            default = ...
        elif isinstance(default, tuple):
            default = list(default)
        spec[f.name] = (tp, default)
    return create_model("ColumnsDoc", __base__=_Doc, __module__=__name__,
                        __doc__="How the calibration table's columns were read "
                                "(``scoreband.columns.ColumnSpec``, whose fields generate "
                                "this model).", **spec)


ColumnsDoc = columns_doc()


class CalibrationSetDoc(_Doc):
    """Where a model folder's calibrator came from (regenerated for the shift alarm)."""

    n: Annotated[int, Field(ge=1)]
    seed: int | None = None
    n_annotators: Annotated[int, Field(ge=1)] | None = None
    source: str | None = None


class InputsDoc(_Doc):
    """What :func:`scoreband.api.apply` needs to read new rows the way calibration did."""

    columns: ColumnsDoc | None = None
    adjust_boundary: bool = False
    n_ratings: Annotated[float, Field(ge=1, le=10_000, allow_inf_nan=False)] | None = None
    #: the calibration items' rater counts differed (``n_ratings`` is then None)
    ratings_varied: bool = False
    n_calibration: Annotated[int, Field(ge=0)] | None = None
    skipped_rows: Annotated[int, Field(ge=0)] | None = None
    head: str | None = None
    pred_scale: tuple[Finite, Finite] | None = None
    calibration_set: CalibrationSetDoc | None = None
    recalibration: dict[str, Any] | None = None
    notes: list[str] | None = None  #: what was done to the data (rounded targets snapped)
    #: the range of each prediction input and the group labels (:mod:`scoreband.domain`)
    domain: dict[str, Any] | None = None


class CalibratorStateDoc(BaseModel):
    """The fitted calibrator (``Calibrator.get_state``); its parameters are method-specific
    and checked per method."""

    model_config = ConfigDict(extra="forbid")

    method: str
    alpha: Annotated[float, Field(gt=0, lt=1)]
    config: dict[str, Any] = {}
    params: Any = None
    model: Any = None
    base: CalibratorStateDoc | None = None  #: a wrapper's inner calibrator (Mondrian, map)
    map: dict[str, Any] | None = None  #: a monotone map's fitted knots


CalibratorStateDoc.model_rebuild()


class GuaranteeDoc(_Doc):
    """What the bands promise (``persist.guarantee_record``); absent in files written
    before it was recorded (their delta is None: the marginal guarantee)."""

    alpha: Annotated[float, Field(gt=0, lt=1)]
    #: None: coverage >= 1 - alpha on average over calibration draws; else with probability
    #: >= 1 - delta over the calibration draw
    delta: Annotated[float, Field(gt=0, lt=1)] | None = None
    text: str


class CalibratorDoc(_Doc):
    format: Literal["scoreband.calibrator"]
    format_version: Literal[1]
    library_version: str
    scale: ScaleDoc
    scorer_fingerprint: str | None = None
    inputs: InputsDoc = InputsDoc()
    calibrator: CalibratorStateDoc
    guarantee: GuaranteeDoc | None = None
    checksum: Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")] | None = None


class EmbeddedConfigDoc(_Doc):
    image_size: Annotated[int, Field(ge=8, le=1024)] = 64
    patch: Annotated[int, Field(ge=1, le=256)] = 16
    dim: Annotated[int, Field(ge=1, le=8192)] = 64
    depth: Annotated[int, Field(ge=1, le=64)] = 2
    heads: Annotated[int, Field(ge=1, le=256)] = 4
    mlp: Annotated[int, Field(ge=1, le=65536)] = 128
    dropout: Annotated[float, Field(ge=0, lt=1)] = 0.1
    max_len: Annotated[int, Field(ge=1, le=4096)] = 40
    vocab_size: Annotated[int, Field(ge=0)] = 0

    @model_validator(mode="after")
    def _shapes(self):
        if self.image_size % self.patch:
            raise ValueError(f"image_size {self.image_size} is not a multiple of patch "
                             f"{self.patch}")
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} is not a multiple of heads {self.heads}")
        return self


_LEVELS = Annotated[list[Annotated[float, Field(gt=0, lt=1)]], Field(min_length=3)]


class EmbeddedModelDoc(_Doc):
    """``config.json`` of an embedded scorer folder (``scoreband train``)."""

    format: Literal["scoreband.scorer"] = "scoreband.scorer"
    format_version: Literal[1] = 1
    backbone_name: str = "embedded:default"
    backbone: EmbeddedConfigDoc
    vocab: Annotated[list[str], Field(min_length=3)]
    heads: Annotated[list[str], Field(min_length=1)]
    levels: _LEVELS
    training: dict[str, Any] | None = None

    @field_validator("vocab")
    @classmethod
    def _unique(cls, v):
        if len(set(v)) != len(v):
            raise ValueError("the vocabulary lists a word twice")
        return v

    @model_validator(mode="after")
    def _vocab_size(self):
        if self.backbone.vocab_size and self.backbone.vocab_size != len(self.vocab):
            raise ValueError(f"backbone.vocab_size {self.backbone.vocab_size} differs from "
                             f"the {len(self.vocab)} words of vocab")
        return self


class BackboneModelDoc(_Doc):
    """``config.json`` of quantile heads on a registered backbone (``scoreband train TABLE
    --backbone ...``)."""

    format: Literal["scoreband.backbone-scorer"]
    format_version: Literal[1] = 1
    backbone_name: Annotated[str, Field(min_length=1)]
    backbone_fingerprint: str
    dim: Annotated[int, Field(ge=1, le=65536)]
    dropout: Annotated[float, Field(ge=0, lt=1)] = 0.1
    fine_tuned: bool = False
    levels: _LEVELS
    provenance: dict[str, Any] = {}
    training: dict[str, Any] | None = None


class ScorerDoc(_Doc):
    """``config.json`` of a scorer folder, version 2 (:mod:`scoreband.scorers.scorer`): a
    registered backbone (or an embedded architecture with its weights in the file) and the
    head set."""

    format: Literal["scoreband.scorer"]
    format_version: Literal[2]
    backbone_name: Annotated[str, Field(min_length=1)]
    backbone_fingerprint: str | None = None
    backbone_in_file: bool = False
    backbone: EmbeddedConfigDoc | None = None
    vocab: Annotated[list[str], Field(min_length=3)] | None = None
    dim: Annotated[int, Field(ge=1, le=65536)]
    dropout: Annotated[float, Field(ge=0, lt=1)] = 0.1
    heads: Annotated[list[str], Field(min_length=1)]
    levels: _LEVELS
    provenance: dict[str, Any] = {}
    training: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _parts(self):
        if self.backbone_in_file and self.backbone is not None and self.vocab is None:
            raise ValueError("an embedded backbone in the file needs its vocab")
        if self.backbone is None and self.backbone_fingerprint is None:
            raise ValueError("a registered backbone needs its backbone_fingerprint")
        if self.backbone is not None and self.backbone.dim != self.dim:
            raise ValueError(f"dim {self.dim} differs from backbone.dim {self.backbone.dim}")
        unknown = [h for h in self.heads
                   if h not in ("chained_ci", "chained_pinball", "unconstrained_pinball")]
        if unknown:
            raise ValueError(f"unknown head(s) {unknown}")
        return self


def _where(loc) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def validate(model: type[BaseModel], doc: Any, path, *, error=InputError, fix: str = ""):
    """``model.model_validate(doc)``, with the first problem as one ``error`` naming the
    file, the field and what arrived (``fix`` is appended)."""
    try:
        return model.model_validate(doc)
    except ValidationError as e:
        first = e.errors()[0]
        where = _where(first["loc"])
        if first["type"] == "extra_forbidden":
            msg = f"unknown key {where!r}"
        elif first["type"] == "missing":
            msg = f"missing key {where!r}"
        else:
            got = first.get("input")
            shown = repr(got)[:60] if not isinstance(got, (dict, list)) else type(got).__name__
            msg = f"field {where!r}: {first['msg'].rstrip('.')} (got {shown})"
        more = f" (and {e.error_count() - 1} more problem(s))" if e.error_count() > 1 else ""
        raise error(f"{path}: {msg}{more}" + (f"; {fix}" if fix else "")) from None

