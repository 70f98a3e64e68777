"""What the HTML report reads from each kind of results file, declared once.

``scoreband report`` renders files a user hands it: they may have been edited, cut, or be
some other JSON. Each kind's model lists the keys its section reads and their types
(strict: ``"0.1"`` is not a number, ``true`` is not a count); every other key is allowed and
ignored. :func:`check_results` turns the first problem into one
:class:`~scoreband.errors.InputError` that names the file and the key
(``ev.json: field 'after.coverage.mean': Input should be a valid number (got '0.9')``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from scoreband.errors import InputError
from scoreband.schemas import validate

__all__ = ["check_results", "MODELS"]

FIX = "give a results file as scoreband wrote it (evaluate --out, OUT/results.json of a study)"


class _M(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


Pair = Annotated[list[float], Field(min_length=2, max_length=2)]
NonEmpty = Field(min_length=1)


class Stat(_M):
    """A mean (and spread) over resplits; null when it could not be measured."""

    mean: float | None
    std: float | None = None


class Measured(_M):
    """A mean that a figure or a verdict uses: never null."""

    mean: float
    std: float | None = None


class ScaleM(_M):
    lo: float
    hi: float


class Finding(_M):
    claim: str
    holds: bool
    value: float


# ------------------------------------------------------------------ evaluate
class TheoreticalM(_M):
    low: float
    high: float


class MetricsM(_M):
    coverage: Stat | None = None
    sharpness: Stat | None = None
    sharpness_native: Stat | None = None
    ups: Stat | None = None
    kendall_tau_c: Stat | None = None
    pearson: Stat | None = None
    spearman: Stat | None = None


class WidthQuantiles(_M):
    q00: float
    q05: float
    q25: float
    q50: float
    q75: float
    q95: float
    q100: float


class AfterM(MetricsM):
    coverage: Measured
    sharpness_native: Measured
    width_quantiles: WidthQuantiles | None = None
    constant_width: bool | None = None


class GroupM(_M):
    n: float
    n_items: float | None = None
    ci: Pair | None = None
    coverage: Measured
    sharpness: Measured


class CurvePoint(_M):
    nominal: float
    coverage: float
    ci: Pair | None = None


class LevelsM(_M):
    target: dict[str, GroupM] | None = None
    predicted: dict[str, GroupM] | None = None


class ErrorBin(_M):
    error_lo: float
    error_hi: float
    n: float
    width_mean: float
    width_q25: float
    width_q75: float


class WidthErrorM(_M):
    bins: list[ErrorBin]
    error: list[float]
    width: list[float]


class EvaluateDoc(_M):
    alpha: float
    method: str
    n: float
    seeds: float
    scale: ScaleM
    theoretical_coverage: TheoreticalM
    after: AfterM
    before: MetricsM | None = None
    groups: dict[str, GroupM] | None = None
    calibration_curve: list[CurvePoint] | None = None
    coverage_by_level: LevelsM | None = None
    width_vs_error: WidthErrorM | None = None


# ------------------------------------------------------------------ demo
class Before(_M):
    coverage: Measured
    sharpness: Measured


class After(_M):
    coverage: Measured
    sharpness: Measured
    ups: Stat
    kendall_tau_c: Stat


class DemoHead(_M):
    before: Before
    after: After


class DemoMeta(_M):
    alpha: float
    n_test: float | None = None
    findings: list[Finding]


class _ShiftAfter(_M):
    coverage: Measured


class _ShiftHead(_M):
    after: _ShiftAfter


class DemoShift(_M):
    chained_ci: _ShiftHead


DemoSet = Annotated[dict[str, DemoHead], NonEmpty]


class DemoDoc(_M):
    meta: DemoMeta = Field(alias="_meta")
    clean: Annotated[dict[str, DemoHead], NonEmpty]
    ood_painting_shift: DemoShift

    @model_validator(mode="after")
    def _sets(self):
        if "chained_ci" not in self.clean:
            raise ValueError("'clean' has no head 'chained_ci'")
        heads = set(self.clean)
        for name, v in (self.model_extra or {}).items():
            if name in ("study", "provenance"):
                continue
            s = _DEMO_SET.validate_python(v, strict=True)
            if set(s) != heads:
                raise ValueError(f"test set {name!r} has heads {sorted(s)}, 'clean' has "
                                 f"{sorted(heads)}")
        return self


_DEMO_SET = TypeAdapter(DemoSet)


# ------------------------------------------------------------------ judge-study
class PlainBand(_M):
    coverage: Measured
    width: Measured


class JudgeMethod(_M):
    plain: PlainBand
    boundary: PlainBand


class JudgeTask(_M):
    n: float
    coverage: float
    mean_width: float
    pearson: float | None
    rsg: float | None
    recommendation: str


class JudgeDoc(_M):
    alpha: float
    k: int
    n: float
    threshold: float
    simulated: bool = False
    methods: dict[str, dict[str, JudgeMethod]]
    reliability_map: dict[str, Annotated[dict[str, JudgeTask], NonEmpty]]


# ------------------------------------------------------------------ roundtrip-study
class Validation(_M):
    gap: float
    auroc: float
    gap_ci: Pair
    auroc_ci: Pair


class RoundtripMethod(_M):
    coverage: Stat
    width: Stat
    coverage_boundary: Stat
    width_boundary: Stat
    ups: Stat


class RoundtripCalibration(_M):
    alpha: float
    n: float
    split: RoundtripMethod
    crc: RoundtripMethod


class RoundtripDoc(_M):
    simulated: bool = False
    generator: Any
    encoder: Any
    n_gen: Any
    validation: Validation
    calibration: RoundtripCalibration | None = None


# ------------------------------------------------------------------ stress
class Width(_M):
    mean: float


class LevelM(_M):
    coverage: float
    width: Width


class KPoint(_M):
    coverage: float
    auto: bool


class CoverWidth(_M):
    coverage: float
    width: float


class Mixture(_M):
    unweighted: CoverWidth
    weighted: CoverWidth


class DomainShift(_M):
    in_domain: CoverWidth
    out_of_domain: CoverWidth
    out_of_domain_weighted: CoverWidth
    mixture: Mixture


class StressDoc(_M):
    alpha: float
    distortions: Annotated[dict[str, Annotated[dict[str, LevelM], NonEmpty]], NonEmpty]
    findings: list[Finding]
    k_sensitivity: dict[str, KPoint]
    domain_shift: DomainShift | None = None

    @model_validator(mode="after")
    def _keys(self):
        first = next(iter(self.distortions))
        if "clean" not in self.distortions[first]:
            raise ValueError(f"distortion {first!r} has no level 'clean'")
        bad = [k for k in self.k_sensitivity if not k.strip().isdigit()]
        if bad:
            raise ValueError(f"k_sensitivity: keys are cluster counts, got {bad[0]!r}")
        return self


# ------------------------------------------------------------------ systems
class Classical(_M):
    estimate: float
    ci: Pair


class SystemM(_M):
    estimate: float
    ci: Pair
    classical: Classical
    n_labeled: Any
    n_unlabeled: Any
    effective_labels: float | None
    lambda_: float | None = Field(alias="lambda")


class Ranked(_M):
    system: str
    estimate: float
    ci: Pair
    ranks: Annotated[list[int], Field(min_length=2, max_length=2)]


class PairM(_M):
    a: str
    b: str
    estimate: float
    ci: Pair
    significant: bool


class PlanSystem(_M):
    ppi: int | None = Field(alias="ppi++")
    classical: Any


class Plan(_M):
    width: float
    systems: dict[str, PlanSystem]


class SystemsDoc(_M):
    alpha: float
    method: str
    scale: ScaleM
    ranking: Annotated[list[Ranked], NonEmpty]
    systems: dict[str, SystemM]
    pairs: list[PairM]
    plan: Plan | None = None
    warnings: list[Any] = []
    skipped_rows: list[Any] = []

    @model_validator(mode="after")
    def _known(self):
        for r in self.ranking:
            if r.system not in self.systems:
                raise ValueError(f"ranking names system {r.system!r}, not in 'systems'")
        return self


MODELS: dict[str, type[BaseModel]] = {
    "evaluate": EvaluateDoc, "demo": DemoDoc, "judge-study": JudgeDoc,
    "roundtrip-study": RoundtripDoc, "stress": StressDoc, "systems": SystemsDoc}


def _triage_model() -> type[BaseModel]:
    from scoreband.decisions.report import triage_model  # the decisions package's own

    return triage_model()


MODELS["triage"] = _triage_model()


def check_results(doc: Any, kind: str, path) -> None:
    """Raise an InputError naming ``path`` and the key when ``doc`` (a results document of
    ``kind``) lacks a key its report section reads, or holds the wrong type there."""
    try:
        validate(MODELS[kind], doc, path, fix=FIX)
    except ValidationError as e:  # raised inside a validator of this module
        raise InputError(f"{path}: {e.errors()[0]['msg']}; {FIX}") from None
