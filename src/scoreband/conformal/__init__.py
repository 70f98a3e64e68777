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
from scoreband.conformal.learned import CHR, CQR, R2CCP, Fitted, Marginal
from scoreband.conformal.mapping import MAP_KINDS, Mapped, MonotoneMap
from scoreband.conformal.mondrian import ClusterConservative, Mondrian
from scoreband.conformal.persist import load_calibrator, save_calibrator
from scoreband.conformal.split import SplitConformal, absolute_residual_interval
from scoreband.conformal.weighted import WeightedSplit, shift_test
from scoreband.errors import InputError
from scoreband.registry import Registry

__all__ = [
    "Calibrator", "SplitConformal", "Fitted", "CRC", "CQR", "R2CCP", "CHR", "Marginal", "Auto",
    "Mapped", "MonotoneMap", "MAP_KINDS", "WeightedSplit", "shift_test", "Mondrian", "ClusterConservative", "n_conformal",
    "absolute_residual_interval", "crc_residuals", "crc_interval", "crc_select",
    "quantiles_crossed", "boundary_adjust", "adjust_band", "conformal_rank",
    "conformal_quantile", "min_calibration_size", "coverage_bounds", "expected_coverage",
    "check_alpha", "calibrator_from_state", "list_methods", "save_calibrator",
    "load_calibrator", "DEFAULT_OMEGAS", "make_calibrator", "METHODS",
]

#: Calibration methods by the name :func:`make_calibrator` and the CLI's ``--method`` take.
#: Each factory gets ``(alpha, scale=, seed=, randomize=, adjust_boundary=, n_clusters=,
#: small_group=, wrap=)`` and keeps what it uses; ``wrap`` applies the optional monotone map.
METHODS = Registry("calibration method")


def _rnd(randomize):
    return {} if randomize is None else {"randomize": bool(randomize)}


def _register_methods() -> None:
    def simple(cls, **fixed):
        def make(alpha, *, scale=None, seed=0, randomize=None, wrap=lambda c: c, **_):
            extra = {k: v for k, v in fixed.items()}
            if "randomize" in fixed:
                extra = {k: v for k, v in fixed.items() if k != "randomize"} | _rnd(randomize)
            return wrap(cls(alpha, scale=scale, seed=seed, **extra))
        return make

    def crc(selection):
        def make(alpha, *, scale=None, seed=0, wrap=lambda c: c, **_):
            return wrap(CRC(alpha, scale=scale, selection=selection, seed=seed))
        return make

    def cluster(rule):
        def make(alpha, *, scale=None, seed=0, n_clusters="auto", small_group="marginal",
                 wrap=lambda c: c, **_):
            return ClusterConservative(wrap(CRC(alpha, scale=scale)), n_clusters=n_clusters,
                                       rule=rule, small_group=small_group, seed=seed)
        return make

    def auto(alpha, *, scale=None, seed=0, randomize=None, adjust_boundary=False,
             wrap=lambda c: c, **_):
        return wrap(Auto(alpha, scale=scale, seed=seed, adjust_boundary=adjust_boundary,
                         **_rnd(randomize)))

    def weighted(alpha, *, scale=None, wrap=lambda c: c, **_):
        return wrap(WeightedSplit(alpha, scale=scale))

    def r2ccp(alpha, *, scale=None, seed=0, wrap=lambda c: c, **_):
        # continuous density scores: no ties to break
        return wrap(R2CCP(alpha, scale=scale, seed=seed))

    reg = METHODS.register
    reg("split", factory=simple(SplitConformal, randomize=True),
        help="absolute residual around the point prediction")
    reg("crc", factory=crc("auto"), help="conformal risk control of the scorer's 90 % "
        "interval (omega, beta); omega chosen on its own share when n >= 100")
    reg("crc-exact", factory=crc("split"), help="CRC, omega always chosen on its own share")
    reg("crc-same", factory=crc("same"), help="CRC, omega chosen on the same items (the "
        "paper's rule; no finite-sample guarantee)")
    reg("crc-cluster", factory=cluster("conservative"),
        help="CRC per k-means cluster, the most conservative (omega, beta) for all")
    reg("crc-cluster-mondrian", factory=cluster("mondrian"),
        help="CRC per k-means cluster, each cluster its own (omega, beta)")
    reg("cqr", factory=simple(CQR, randomize=True),
        help="conformalized linear quantile regression on `features`")
    reg("chr", factory=simple(CHR, randomize=True),
        help="contiguous highest-density intervals of a classifier on `features`")
    reg("r2ccp", factory=r2ccp, help="regression-as-classification density sets on "
        "`features` (band = their hull)")
    reg("marginal", factory=simple(Marginal, randomize=True),
        help="one band from the targets alone (a baseline any method should beat)")
    reg("fitted", factory=simple(Fitted, randomize=True),
        help="absolute residual around a point score fitted to the targets (ridge on the "
        "median and `features`, then an isotonic map)")
    reg("auto", factory=auto, help="the narrowest candidate on one share of the items, "
        "conformalized on another")
    reg("weighted-split", factory=weighted, help="split conformal reweighted for covariate "
        "shift (needs `embedding`)")


_register_methods()


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
    if small_group not in ("marginal", "full", "error"):
        raise InputError(f"unknown `small_group` {small_group!r}; choose marginal, full or "
                         "error")
    if map not in (None, "none", *MAP_KINDS):
        raise InputError(f"unknown map {map!r}; choose one of none, {', '.join(MAP_KINDS)}")

    def wrap(c: Calibrator) -> Calibrator:
        return c if map in (None, "none") else Mapped(c, kind=map, seed=seed)

    cal = METHODS.create(method, alpha, scale=scale, offered=dict(
        seed=seed, randomize=randomize, adjust_boundary=adjust_boundary,
        n_clusters=n_clusters, small_group=small_group, wrap=wrap))
    if mondrian and not method.startswith("crc-cluster"):
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
