"""Few-label recalibration for a new domain: keep a calibrator's fitted model (CQR's
quantile regressor, CHR's histogram, CRC's omega, ``auto``'s choice, a monotone map) and redo
only the conformal step on ``m`` labeled items of the new domain.

Why it is valid: the conformal step needs its items exchangeable with the items it is applied
to, nothing else; the model may come from anywhere (here: the old domain). With ``m`` new
items the split-conformal guarantee holds for the new domain:
``1 - alpha <= E[coverage] <= 1 - alpha + 1 / (m + 1)`` (the upper bound for continuous
scores), and the coverage conditional on the ``m`` labels is distributed as
``Beta(k, m + 1 - k)`` with ``k = ceil((m + 1)(1 - alpha))`` (Vovk 2012; Angelopoulos and
Bates 2021, section 3.2), which gives the label planner: how many labels make the coverage
fall more than ``slack`` below target with probability at most ``delta``.

A calibrator fitted with ``delta`` (a training-conditional guarantee) keeps it: its
conformal step on the ``m`` new labels takes the later rank of
:func:`~scoreband.conformal.core.conditional_rank`, so the coverage is at least ``1 - alpha``
with probability at least ``1 - delta`` over the labels; that needs ``(1 - alpha)^m <=
delta`` (22 labels at alpha = delta = 0.1, 29 at delta 0.05) - with fewer, every band would be
the whole scale, and recalibration is refused.

Pure functions (scipy's beta distribution); :func:`scoreband.api.recalibrate` applies them.
"""

from __future__ import annotations

import math

from scoreband.conformal.core import (
    _exact,
    check_alpha,
    check_delta,
    conditional_rank,
    conformal_rank,
    min_calibration_size,
)
from scoreband.errors import InputError

__all__ = ["min_labels", "coverage_guarantee", "labels_for_slack", "label_plan",
           "conditional_plan"]


def min_labels(alpha: float, delta: float | None = None) -> int:
    """The fewest labeled items for which the conformal quantile is finite:
    ``ceil(1 / alpha) - 1`` (9 at alpha = 0.1); with a calibrator's ``delta``, the fewest for
    which the training-conditional rank is (``(1 - alpha)^m <= delta``).

    >>> min_labels(0.1), min_labels(0.05), min_labels(0.2)
    (9, 19, 4)
    >>> min_labels(0.1, 0.1), min_labels(0.1, 0.05)
    (22, 29)
    """
    a = check_alpha(alpha)
    m = max(1, min_calibration_size(a))
    d = check_delta(delta)
    if d is None:
        return m
    m = max(m, math.floor(math.log(d) / math.log1p(-a)))  # a start just below the answer
    while conditional_rank(m, a, d) > m:
        m += 1
    return m


def coverage_guarantee(m: int, alpha: float, delta: float = 0.1,
                       calibrator_delta: float | None = None) -> dict:
    """What ``m`` labeled items guarantee at level ``alpha``: the bounds on the expected
    coverage, and the coverage reached with probability ``1 - delta`` over the labels.
    With ``calibrator_delta`` (a calibrator fitted with ``delta``), the rank is the
    training-conditional one and that delta is the probability the guarantee is given at
    (``delta`` is then not used): ``with_probability.coverage`` is then at least ``1 - alpha``.

    >>> g = coverage_guarantee(50, 0.1)
    >>> g["expected_low"], round(g["expected_high"], 4), round(g["with_probability"]["coverage"], 3)
    (0.9, 0.9196, 0.846)
    >>> g = coverage_guarantee(100, 0.1, calibrator_delta=0.1)
    >>> g["rank"], round(g["expected_low"], 4), round(g["with_probability"]["coverage"], 3)
    (95, 0.9406, 0.909)
    """
    a = check_alpha(alpha)
    d = check_delta(calibrator_delta)
    need = min_labels(a, d)
    if m < need:
        why = ("(ceil(1/alpha) - 1)" if d is None else
               f"for the calibrator's training-conditional guarantee at delta = {d:g} "
               "((1 - alpha)^m <= delta; with fewer every band is the whole scale)")
        raise InputError(f"{m} labeled rows are too few for alpha = {a:g}: the conformal step "
                         f"needs at least {need} {why}; label more rows of the new domain")
    # exact integer ranks: a float ceil is one too high at alpha 0.45, m = 99
    k = conformal_rank(m, a) if d is None else conditional_rank(m, a, d)
    from scipy import stats  # lazy: apply and calibrate load this module, not scipy.stats

    dist = stats.beta(k, m + 1 - k)
    p_fail = delta if d is None else d
    return {"m": int(m), "alpha": a, "rank": int(k), "delta": d,
            "expected_low": 1 - a if d is None else k / (m + 1),
            "expected_high": min(1.0, (k + 1) / (m + 1)) if d is not None
            else min(1.0, 1 - a + 1 / (m + 1)),
            "with_probability": {"probability": 1 - p_fail,
                                 "coverage": float(dist.ppf(p_fail))}}


def labels_for_slack(alpha: float, slack: float, delta: float = 0.1) -> int:
    """The fewest labeled items ``m`` from which on the coverage is at least
    ``1 - alpha - slack`` with probability ``1 - delta`` over the labels, for ``m`` and every
    larger number (the Beta quantile rises with ``m`` in a saw-tooth, as
    ``k = ceil((m + 1)(1 - alpha))`` steps: some smaller ``m`` pass too, then fail again).

    >>> labels_for_slack(0.1, 0.05), labels_for_slack(0.1, 0.02)
    (60, 380)
    >>> round(coverage_guarantee(99, 0.45)["with_probability"]["coverage"], 4)  # k = 55
    0.4861
    """
    import numpy as np

    a = check_alpha(alpha)
    if not 0 < slack < 1 - a:
        raise InputError(f"`plan` slack must lie in (0, {1 - a:g}), got {slack:g}")
    if not 0 < delta < 1:
        raise InputError(f"`delta` must lie in (0, 1), got {delta:g}")
    from scipy import stats

    z = stats.norm.ppf(1 - delta)
    guess = z * z * a * (1 - a) / slack**2  # the normal approximation
    m = np.arange(min_labels(a), int(10 * guess) + 10 * math.ceil(1 / a) + 100)
    keep = 1 - _exact(a)  # k = ceil((m + 1)(1 - alpha)) in integers, as conformal_rank
    k = -((-(m + 1) * keep.numerator) // keep.denominator)
    ok = stats.beta.ppf(delta, k, m + 1 - k) >= 1 - a - slack
    bad = np.flatnonzero(~ok)
    return int(m[0] if len(bad) == 0 else m[bad[-1]] + 1)


def label_plan(alpha: float, slacks=(0.01, 0.02, 0.05, 0.1), delta: float = 0.1) -> list[dict]:
    """Labels needed for each slack (see :func:`labels_for_slack`)."""
    a = check_alpha(alpha)
    return [{"slack": s, "coverage_at_least": 1 - a - s, "probability": 1 - delta,
             "labels": labels_for_slack(a, s, delta)} for s in slacks if 0 < s < 1 - a]


def conditional_plan(alpha: float, delta: float, labels=(50, 100, 200, 500)) -> list[dict]:
    """For a calibrator with a training-conditional guarantee (``delta``): the guarantee
    holds from :func:`min_labels` on; more labels only narrow the bands. Per number of labels:
    the rank taken, the marginal rank, and the quantile level each stands for (``rank / m``).

    >>> [(r["labels"], r["rank"], r["marginal_rank"]) for r in conditional_plan(0.1, 0.1, (100,))]
    [(22, 22, 21), (100, 95, 91)]
    """
    a, d = check_alpha(alpha), check_delta(delta)
    if d is None:
        raise InputError("conditional_plan needs the calibrator's delta in (0, 1)")
    ms = sorted({min_labels(a, d), *(int(m) for m in labels if m >= min_labels(a, d))})
    return [{"labels": m, "rank": conditional_rank(m, a, d),
             "marginal_rank": min(conformal_rank(m, a), m + 1),
             "level": conditional_rank(m, a, d) / m, "marginal_level": conformal_rank(m, a) / m,
             "probability": 1 - d} for m in ms]
