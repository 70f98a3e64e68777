"""Conformal calibration: model-agnostic, on arrays of predictions and targets.

Every method is an estimator: ``fit(pred, y01, groups=None)`` returns self, ``predict(pred)``
returns a :class:`~scoreband.records.Band`. The maths lives in small pure functions beside
each class.
"""

from scoreband.conformal._core import (
    check_alpha,
    conformal_quantile,
    conformal_rank,
    coverage_bounds,
    expected_coverage,
    min_calibration_size,
)
from scoreband.conformal.auto import Auto
from scoreband.conformal.base import Calibrator, calibrator_from_state, list_methods
from scoreband.conformal.boundary import adjust_band, boundary_adjust
from scoreband.conformal.crc import (
    CRC,
    DEFAULT_OMEGAS,
    crc_interval,
    crc_residuals,
    crc_select,
    quantiles_crossed,
)
from scoreband.conformal.learned import CHR, CQR, R2CCP, Marginal
from scoreband.conformal.mapping import MAP_KINDS, Mapped, MonotoneMap
from scoreband.conformal.mondrian import ClusterConservative, Mondrian
from scoreband.conformal.persist import load_calibrator, save_calibrator
from scoreband.conformal.split import SplitConformal, absolute_residual_interval
from scoreband.conformal.weighted import WeightedSplit, shift_test

__all__ = [
    "Calibrator", "SplitConformal", "CRC", "CQR", "R2CCP", "CHR", "Marginal", "Auto",
    "Mapped", "MonotoneMap", "MAP_KINDS", "WeightedSplit", "shift_test", "Mondrian", "ClusterConservative", "n_conformal",
    "absolute_residual_interval", "crc_residuals", "crc_interval", "crc_select",
    "quantiles_crossed", "boundary_adjust", "adjust_band", "conformal_rank",
    "conformal_quantile", "min_calibration_size", "coverage_bounds", "expected_coverage",
    "check_alpha", "calibrator_from_state", "list_methods", "save_calibrator",
    "load_calibrator", "DEFAULT_OMEGAS", "make_calibrator", "METHODS",
]

#: Method names accepted by :func:`make_calibrator` and the CLI's ``--method``.
METHODS = ("split", "crc", "crc-exact", "crc-same", "crc-cluster", "crc-cluster-mondrian",
           "cqr", "chr", "r2ccp", "marginal", "auto", "weighted-split")


def make_calibrator(method: str, alpha: float = 0.1, *, scale=None, mondrian: str | None = None,
                    n_clusters="auto", small_group: str = "marginal", seed: int = 0,
                    map: str | None = None, randomize: bool | None = None,
                    adjust_boundary: bool = False) -> Calibrator:
    """Build a calibrator by name.

    Parameters
    ----------
    method : one of :data:`METHODS`
    mondrian : None, ``"given"`` (per group label) or ``"difficulty"`` (Easy/Medium/Hard)
    n_clusters : k for the cluster rules (``"auto"``: elbow + silhouette)
    map : None / ``"none"``, or ``"isotonic"`` / ``"linear"``: a monotone map from a raw point
        metric to the target scale, fitted on its own share of the calibration items
    randomize : randomised tie-breaking (smoothed conformal p-values) for ``split``, ``cqr``,
        ``chr``, ``marginal`` and ``auto``'s candidates; None: each method's default (on for
        ``chr`` and ``auto``, off for the others)
    adjust_boundary : ``auto`` compares widths after snapping to the achievable targets
    """
    from scoreband.errors import InputError

    if method not in METHODS:
        raise InputError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    if map not in (None, "none", *MAP_KINDS):
        raise InputError(f"unknown map {map!r}; choose one of none, {', '.join(MAP_KINDS)}")

    def mapped(c: Calibrator) -> Calibrator:
        return c if map in (None, "none") else Mapped(c, kind=map, seed=seed)

    if method.startswith("crc-cluster"):
        rule = "mondrian" if method.endswith("mondrian") else "conservative"
        return ClusterConservative(mapped(CRC(alpha, scale=scale)), n_clusters=n_clusters,
                                   rule=rule, small_group=small_group, seed=seed)
    rnd = {} if randomize is None else {"randomize": bool(randomize)}
    if method == "split":
        cal = SplitConformal(alpha, scale=scale, seed=seed, **rnd)
    elif method.startswith("crc"):
        selection = {"crc": "auto", "crc-exact": "split", "crc-same": "same"}[method]
        cal = CRC(alpha, scale=scale, selection=selection, seed=seed)
    elif method == "chr":
        cal = CHR(alpha, scale=scale, seed=seed, **rnd)
    elif method == "auto":
        cal = Auto(alpha, scale=scale, seed=seed, adjust_boundary=adjust_boundary, **rnd)
    elif method == "weighted-split":
        cal = WeightedSplit(alpha, scale=scale)
    elif method == "r2ccp":  # continuous density scores: no ties to break
        cal = R2CCP(alpha, scale=scale, seed=seed)
    else:
        cal = {"cqr": CQR, "marginal": Marginal}[method](alpha, scale=scale, seed=seed, **rnd)
    cal = mapped(cal)
    if mondrian:
        cal = Mondrian(cal, by=mondrian, small_group=small_group)
    return cal


def n_conformal(cal: Calibrator) -> int | None:
    """How many items the fitted calibrator's conformal step used (the marginal step for the
    group wrappers): the n behind its coverage guarantee."""
    p = cal.params_ or {}
    if "marginal" in p and isinstance(p["marginal"], dict):
        p = p["marginal"]
    n = p.get("n")
    return None if n is None else int(n)
