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

Pure functions (scipy's beta distribution); :func:`scoreband.api.recalibrate` applies them.
"""

from __future__ import annotations

import math

from scoreband.conformal.core import _exact, check_alpha, conformal_rank, min_calibration_size
from scoreband.errors import InputError

__all__ = ["min_labels", "coverage_guarantee", "labels_for_slack", "label_plan"]


def min_labels(alpha: float) -> int:
    """The fewest labeled items for which the conformal quantile is finite:
    ``ceil(1 / alpha) - 1`` (9 at alpha = 0.1).

    >>> min_labels(0.1), min_labels(0.05), min_labels(0.2)
    (9, 19, 4)
    """
    return max(1, min_calibration_size(alpha))


def coverage_guarantee(m: int, alpha: float, delta: float = 0.1) -> dict:
    """What ``m`` labeled items guarantee at level ``alpha``: the bounds on the expected
    coverage, and the coverage reached with probability ``1 - delta`` over the labels.

    >>> g = coverage_guarantee(50, 0.1)
    >>> g["expected_low"], round(g["expected_high"], 4), round(g["with_probability"]["coverage"], 3)
    (0.9, 0.9196, 0.846)
    """
    a = check_alpha(alpha)
    if m < min_labels(a):
        raise InputError(f"{m} labeled rows are too few for alpha = {a:g}: the conformal step "
                         f"needs at least {min_labels(a)} (ceil(1/alpha) - 1)")
    k = conformal_rank(m, a)  # exact: a float ceil is one too high at alpha 0.45, m = 99
    from scipy import stats  # lazy: apply and calibrate load this module, not scipy.stats

    dist = stats.beta(k, m + 1 - k)
    return {"m": int(m), "alpha": a, "expected_low": 1 - a,
            "expected_high": min(1.0, 1 - a + 1 / (m + 1)),
            "with_probability": {"probability": 1 - delta,
                                 "coverage": float(dist.ppf(delta))}}


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
