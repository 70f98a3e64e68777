"""Conformal calibration: model-agnostic, on arrays of predictions and targets.

Every method is an estimator: ``fit(pred, y01, groups=None)`` returns self, ``predict(pred)``
returns a :class:`~scoreband.datatypes.Band`. The maths lives in small pure functions beside
each class.
"""

import importlib
import pkgutil

from scoreband.conformal.auto import Auto
from scoreband.conformal.base import (
    METHODS,
    Calibrator,
    calibrator_class,
    calibrator_from_state,
    delta_of,
    list_methods,
)
from scoreband.conformal.boundary import adjust_band, boundary_adjust
from scoreband.conformal.chr import CHR
from scoreband.conformal.cluster import ClusterConservative
from scoreband.conformal.core import (
    check_alpha,
    conditional_rank,
    conformal_quantile,
    conformal_rank,
    coverage_bounds,
    expected_coverage,
    min_calibration_size,
)
from scoreband.conformal.cqr import CQR
from scoreband.conformal.crc import (
    CRC,
    DEFAULT_OMEGAS,
    crc_interval,
    crc_residuals,
    crc_select,
    quantiles_crossed,
)
from scoreband.conformal.fitted import Fitted
from scoreband.conformal.mapping import MAP_KINDS, Mapped, MonotoneMap
from scoreband.conformal.marginal import Marginal
from scoreband.conformal.mondrian import Mondrian
from scoreband.conformal.persist import load_calibrator, save_calibrator
from scoreband.conformal.r2ccp import R2CCP
from scoreband.conformal.split import SplitConformal, absolute_residual_interval
from scoreband.conformal.weighted import WeightedSplit, shift_test
from scoreband.errors import InputError

__all__ = [
    "Calibrator", "SplitConformal", "Fitted", "CRC", "CQR", "R2CCP", "CHR", "Marginal", "Auto",
    "Mapped", "MonotoneMap", "MAP_KINDS", "WeightedSplit", "shift_test", "Mondrian", "ClusterConservative", "n_conformal",
    "absolute_residual_interval", "crc_residuals", "crc_interval", "crc_select",
    "quantiles_crossed", "boundary_adjust", "adjust_band", "conformal_rank", "conditional_rank",
    "conformal_quantile", "min_calibration_size", "coverage_bounds", "expected_coverage",
    "check_alpha", "calibrator_from_state", "list_methods", "save_calibrator",
    "load_calibrator", "DEFAULT_OMEGAS", "make_calibrator", "METHODS",
]

# Every module of this package is imported, so that a method in a module of its own (a class
# with ``@register`` and its declarations, see scoreband.conformal.base) registers itself.
for _m in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_m.name}")


def make_calibrator(method: str, alpha: float = 0.1, *, scale=None, mondrian: str | None = None,
                    n_clusters="auto", small_group: str = "full", seed: int = 0,
                    map: str | None = None, randomize: bool | None = None,
                    adjust_boundary: bool = False, delta: float | None = None) -> Calibrator:
    """Build a calibrator by name.

    Parameters
    ----------
    method : one of :data:`METHODS`
    mondrian : None, ``"given"`` (per group label), ``"difficulty"`` (Easy/Medium/Hard) or
        ``"predicted"`` (bins of the point score fitted on a held-out share:
        :class:`~scoreband.conformal.mondrian.Mondrian`)
    n_clusters : k for the cluster rules (``"auto"``: elbow + silhouette)
    map : None / ``"none"``, or ``"isotonic"`` / ``"linear"``: a monotone map from a raw point
        metric to the target scale, fitted on its own share of the calibration items
    randomize : randomised tie-breaking (smoothed conformal p-values) for ``split``, ``cqr``,
        ``chr``, ``marginal`` and ``auto``'s candidates; None: each method's default (on for
        ``chr`` and ``auto``, off for the others)
    small_group : a Mondrian group with fewer than ``ceil(1/alpha) - 1`` calibration items:
        ``"full"`` (default: the whole scale, flagged - the only band valid for such a group
        on its own), ``"pool-together"`` (the small groups calibrated as one pooled group:
        valid for them together, not for each) or ``"error"``
    adjust_boundary : ``auto`` compares widths after snapping to the achievable targets
    delta : None (the marginal guarantee), or the training-conditional level: coverage
        ``>= 1 - alpha`` with probability ``>= 1 - delta`` over the calibration draw, from
        the rank of :func:`~scoreband.conformal.core.conditional_rank` (per group with
        ``mondrian``); a method without an exact finite-sample rank refuses it, saying why
    """
    if small_group not in ("full", "pool-together", "error"):
        raise InputError(f"unknown `small_group` {small_group!r}; choose full, pool-together "
                         "or error")
    if map not in (None, "none", *MAP_KINDS):
        raise InputError(f"unknown map {map!r}; choose one of none, {', '.join(MAP_KINDS)}")

    def wrap(c: Calibrator) -> Calibrator:
        return c if map in (None, "none") else Mapped(c, kind=map, seed=seed)

    cal = METHODS.create(method, alpha, scale=scale, wrap=wrap, seed=seed,
                         randomize=randomize, adjust_boundary=adjust_boundary,
                         n_clusters=n_clusters, small_group=small_group, delta=delta)
    if mondrian and not calibrator_class(method).grouped:
        cal = Mondrian(cal, by=mondrian, small_group=small_group)
    if delta is not None:
        if delta_of(cal) is None:  # a builder that does not pass delta on to its method
            raise InputError(f"`delta`: method {method} does not take a training-conditional "
                             "level (its builder does not pass it to the conformal step); "
                             "drop `delta` or choose split, cqr, chr, r2ccp or crc")
        cal.check_delta_allowed()
    return cal


def n_conformal(cal: Calibrator) -> int | None:
    """How many items the fitted calibrator's conformal step used (the marginal step for the
    group wrappers): the n behind its coverage guarantee."""
    p = cal.params_ or {}
    if "marginal" in p and isinstance(p["marginal"], dict):
        p = p["marginal"]
    n = p.get("n")
    return None if n is None else int(n)
