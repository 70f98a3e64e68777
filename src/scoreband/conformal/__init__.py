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
from scoreband.conformal.learned import CQR, R2CCP
from scoreband.conformal.mondrian import ClusterConservative, Mondrian
from scoreband.conformal.persist import load_calibrator, save_calibrator
from scoreband.conformal.split import SplitConformal, absolute_residual_interval

__all__ = [
    "Calibrator", "SplitConformal", "CRC", "CQR", "R2CCP", "Mondrian", "ClusterConservative",
    "absolute_residual_interval", "crc_residuals", "crc_interval", "crc_select",
    "quantiles_crossed", "boundary_adjust", "adjust_band", "conformal_rank",
    "conformal_quantile", "min_calibration_size", "coverage_bounds", "expected_coverage",
    "check_alpha", "calibrator_from_state", "list_methods", "save_calibrator",
    "load_calibrator", "DEFAULT_OMEGAS", "make_calibrator", "METHODS",
]

#: Method names accepted by :func:`make_calibrator` and the CLI's ``--method``.
METHODS = ("split", "crc", "crc-exact", "crc-cluster", "crc-cluster-mondrian", "cqr", "r2ccp")


def make_calibrator(method: str, alpha: float = 0.1, *, scale=None, mondrian: str | None = None,
                    n_clusters="auto", small_group: str = "marginal", seed: int = 0) -> Calibrator:
    """Build a calibrator by name.

    Parameters
    ----------
    method : one of :data:`METHODS`
    mondrian : None, ``"given"`` (per group label) or ``"difficulty"`` (Easy/Medium/Hard)
    n_clusters : k for the cluster rules (``"auto"``: elbow + silhouette)
    """
    if method == "split":
        cal = SplitConformal(alpha, scale=scale)
    elif method in ("crc", "crc-exact"):
        cal = CRC(alpha, scale=scale, exact=method == "crc-exact", seed=seed)
    elif method in ("crc-cluster", "crc-cluster-mondrian"):
        rule = "mondrian" if method.endswith("mondrian") else "conservative"
        return ClusterConservative(CRC(alpha, scale=scale), n_clusters=n_clusters, rule=rule,
                                   small_group=small_group, seed=seed)
    elif method in ("cqr", "r2ccp"):
        cal = (CQR if method == "cqr" else R2CCP)(alpha, scale=scale, seed=seed)
    else:
        from scoreband.errors import InputError

        raise InputError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    if mondrian:
        cal = Mondrian(cal, by=mondrian, small_group=small_group)
    return cal

