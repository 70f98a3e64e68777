"""The stress study's section of the HTML report and the keys it reads
(:mod:`scoreband.studies.stress` registers them as its ``REPORT_SECTION``)."""

from __future__ import annotations

from functools import cache
from typing import Annotated

from scoreband.report.blocks import fig_block, findings_block, fmt, lines_figure, table_block

__all__ = ["stress_section", "report_schema"]


def stress_section(doc: dict) -> dict:
    """The stress study's section of the HTML report."""
    target = 1 - doc["alpha"]
    d = doc["distortions"]
    cov = {n: (list(range(len(per))), [v["coverage"] for v in per.values()])
           for n, per in d.items()}
    wid = {n: (list(range(len(per))), [v["width"]["mean"] for v in per.values()])
           for n, per in d.items()}
    levels = list(next(iter(d.values())))
    held = sum(f["holds"] for f in doc["findings"])
    verdict = (f"Calibrated on clean in-domain items, {target:.0%} bands cover "
               f"{next(iter(d.values()))['clean']['coverage']:.3f} of clean test items; "
               f"{held} of {len(doc['findings'])} findings hold (below).")
    blocks = [findings_block(doc["findings"]),
              fig_block(lines_figure(cov, xlabel="level", ylabel="coverage", target=target,
                                 xticks=levels),
                   "Coverage under each distortion by level (calibrated on clean items)."),
              fig_block(lines_figure(wid, xlabel="level", ylabel="mean width (native scale)",
                                 xticks=levels),
                   "Mean band width under each distortion by level.")]
    ks = doc["k_sensitivity"]
    kk = sorted(ks, key=int)
    blocks.append(fig_block(lines_figure({"coverage": ([int(k) for k in kk],
                                                   [ks[k]["coverage"] for k in kk])},
                                     xlabel="clusters k", ylabel="coverage", target=target,
                                     logx=True),
                       "k-sensitivity of the cluster-conservative rule (auto k = "
                       + ", ".join(k for k in kk if ks[k]["auto"]) + ")."))
    ds = doc.get("domain_shift")
    if ds:
        rows = [[k.replace("_", " "), fmt(ds[k]["coverage"]), fmt(ds[k]["width"])]
                for k in ("in_domain", "out_of_domain", "out_of_domain_weighted")]
        rows += [[f"mixture {k}", fmt(ds["mixture"][k]["coverage"]),
                  fmt(ds["mixture"][k]["width"])] for k in ("unweighted", "weighted")]
        blocks.append(table_block(["setting", "coverage", "width"], rows, "Domain shift"))
    return {"title": "stress study", "verdict": verdict, "blocks": blocks}


@cache
def report_schema():
    """The keys :func:`stress_section` reads (pydantic, loaded when a report is checked)."""
    from pydantic import model_validator

    from scoreband.report.schema import Finding, NonEmpty, StrictModel

    class Width(StrictModel):
        mean: float

    class LevelM(StrictModel):
        coverage: float
        width: Width

    class KPoint(StrictModel):
        coverage: float
        auto: bool

    class CoverWidth(StrictModel):
        coverage: float
        width: float

    class Mixture(StrictModel):
        unweighted: CoverWidth
        weighted: CoverWidth

    class DomainShift(StrictModel):
        in_domain: CoverWidth
        out_of_domain: CoverWidth
        out_of_domain_weighted: CoverWidth
        mixture: Mixture

    class StressDoc(StrictModel):
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

    return StressDoc
