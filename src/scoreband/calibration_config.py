"""How to calibrate: :class:`CalibrationConfig`, the one definition of the calibration options
of ``scoreband.api.evaluate`` / ``calibrate`` and of the CLI's evaluate / calibrate (whose
options and defaults are generated from its fields), and the factory of the calibrator it
names."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields

from scoreband.columns import ColumnSpec, column_fields
from scoreband.conformal import make_calibrator
from scoreband.conformal.mondrian import MONDRIAN_BY  # what ``mondrian_by`` may name
from scoreband.datatypes import Scale
from scoreband.errors import InputError, check_known_keys

__all__ = ["CalibrationConfig", "config_fields", "MONDRIAN_BY", "options_of", "option_keys",
           "keywords_only", "check_keywords"]


@dataclass
class CalibrationConfig:
    """How to calibrate: the calibration keywords of ``scoreband.evaluate`` and
    ``calibrate``. The one definition of these options: the CLI's options of evaluate /
    calibrate and their defaults are generated from these fields
    (:mod:`scoreband.cli._options`).

    Parameters
    ----------
    method : str, default ``"split"``
        A name of :data:`scoreband.conformal.METHODS` (each method's class declares its
        names, inputs and parameters: ``METHODS.choices()`` lists them with their help).
    alpha : float in (0, 1), default 0.1
        Target miscoverage: bands cover 1 - alpha.
    delta : float in (0, 1) or None, default None
        A training-conditional guarantee: coverage >= 1 - alpha with probability
        >= 1 - delta over the calibration draw, not only on average over calibrations (a
        later conformal rank, from the exact Beta tail:
        :func:`scoreband.conformal.core.conditional_rank`; per group with Mondrian). Methods
        without an exact finite-sample rank (weighted-split, crc-same, the cluster rules)
        refuse it, saying why. None: the marginal guarantee.
    mondrian : bool, default False
        Group-conditional bands: per ``groups`` label when the columns name one, else per
        Easy/Medium/Hard difficulty group (``mondrian_by`` chooses).
    mondrian_by : ``"given"``, ``"difficulty"``, ``"predicted"`` or None, default None
        What the Mondrian groups are (implies ``mondrian``): the ``groups`` labels, the
        difficulty groups, or bins of the point score (``"predicted"``: quantile bins fitted
        on a share of the calibration items the conformal step never sees; the remedy when
        coverage differs by predicted level). None: given with ``groups``, else difficulty.
    clusters : int or ``"auto"``, default ``"auto"``
        k for the cluster rules (``"auto"``: elbow + silhouette).
    small_group : ``"full"``, ``"pool-together"`` or ``"error"``, default ``"full"``
        What a Mondrian group too small for alpha gets: the whole scale, flagged (the only
        band valid for such a group on its own), one band calibrated on the small groups
        pooled (valid for them together, not for each), or an error.
    map : ``"none"``, ``"isotonic"`` or ``"linear"``, default ``"none"``
        A monotone map of a raw metric onto the target's scale, fitted on its own share.
    randomize : bool or None, default None
        Randomised tie-breaking; None = each method's default (on for chr and auto).
    adjust_boundary : bool, default False
        Snap bands to the achievable targets (and let ``auto`` compare snapped widths).

    A key that is none of these is an error naming the valid ones.
    """

    method: str = "split"
    alpha: float = 0.1
    delta: float | None = None
    mondrian: bool = False
    mondrian_by: str | None = None
    clusters: int | str = "auto"
    small_group: str = "full"
    map: str = "none"
    randomize: bool | None = None
    adjust_boundary: bool = False

    @classmethod
    def of(cls, value=None, /, **keywords) -> CalibrationConfig:
        """A config from this class, a dict of its fields or keywords (keywords override)."""
        if isinstance(value, cls) and not keywords:
            return value
        d = ({f.name: getattr(value, f.name) for f in fields(cls)} if isinstance(value, cls)
             else dict(value or {}))
        d.update(keywords)
        check_known_keys(d, config_fields(cls), "calibration option")
        return cls(**d)

    def mondrian_groups(self, has_groups: bool) -> str | None:
        """What the Mondrian wrapper groups by (None: no Mondrian)."""
        if self.mondrian_by is not None:
            if self.mondrian_by not in MONDRIAN_BY:
                raise InputError(f"`mondrian_by` {self.mondrian_by!r}: choose one of "
                                 f"{', '.join(MONDRIAN_BY)}")
            if self.mondrian_by == "given" and not has_groups:
                raise InputError("`mondrian_by` 'given' needs a `groups` column")
            if self.mondrian_by != "given" and has_groups:
                warnings.warn(f"`groups` is not what the bands are calibrated by: with "
                              f"`mondrian_by` {self.mondrian_by!r} the Mondrian groups are "
                              f"the {self.mondrian_by} levels (`groups` only labels the "
                              "per-group coverage report); use `mondrian_by` 'given' to "
                              "calibrate per group", UserWarning, stacklevel=2)
            return self.mondrian_by
        if not self.mondrian:
            return None
        return "given" if has_groups else "difficulty"

    def factory(self, scale: Scale, has_groups: bool):
        """A function building a fresh, unfitted calibrator (validated once, here); its
        ``seed`` draws the calibrator's own random choices (the evaluation protocol gives
        each split its own)."""
        k = self.clusters
        if k != "auto":
            try:
                k = int(k)
            except (TypeError, ValueError):
                raise InputError(f"`clusters` expects an integer or 'auto', got {k!r}") from None
        by = self.mondrian_groups(has_groups)

        def make(seed: int = 0):
            return make_calibrator(self.method, self.alpha, scale=scale, mondrian=by,
                                   n_clusters=k, small_group=self.small_group, map=self.map,
                                   randomize=self.randomize,
                                   adjust_boundary=self.adjust_boundary, seed=seed,
                                   delta=self.delta)

        make()
        return make


def config_fields(config: type = CalibrationConfig) -> tuple[str, ...]:
    """The names of :class:`CalibrationConfig`'s fields (the one source of the config keys)."""
    return tuple(f.name for f in fields(config))


# ------------------------------------------------------------------ the API's one calling convention
def options_of(fn: str, keywords: dict) -> tuple[ColumnSpec, CalibrationConfig]:
    """``(ColumnSpec, CalibrationConfig)`` of an API call's keywords, each routed to the
    schema whose field it names. A keyword that names no field is a TypeError naming the
    valid ones."""
    col_keys, cfg_keys = column_fields(), config_fields()
    check_keywords(fn, keywords, col_keys + cfg_keys)
    cols = {k: v for k, v in keywords.items() if k in col_keys}
    cfg = {k: v for k, v in keywords.items() if k in cfg_keys}
    return ColumnSpec.of(**cols), CalibrationConfig.of(**cfg)


def option_keys() -> tuple[str, ...]:
    return (*column_fields(), *config_fields())


def keywords_only(valid: Callable[[], tuple[str, ...]]):
    """``fn`` refusing positional arguments past its own (a dict of options, say) with a
    TypeError naming the keywords ``valid()`` it takes instead."""
    def wrap(fn):
        n = sum(p.kind is p.POSITIONAL_OR_KEYWORD
                for p in inspect.signature(fn).parameters.values())

        @functools.wraps(fn)
        def call(*args, **keywords):
            if len(args) > n:
                raise TypeError(f"{fn.__name__}() takes {n} positional argument(s), got "
                                f"{len(args)}; give the options as keywords: "
                                f"{', '.join(valid())}")
            return fn(*args, **keywords)
        return call
    return wrap


def check_keywords(fn: str, keywords: dict, valid) -> None:
    """A TypeError naming the keywords of ``fn`` that are none of ``valid``."""
    bad = sorted(k for k in keywords if k not in valid)
    if bad:
        raise TypeError(f"{fn}() got unexpected keyword argument(s) {', '.join(bad)}; the "
                        f"column and calibration keywords are {', '.join(valid)}")
