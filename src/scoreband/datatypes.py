"""The data types that flow between the stages: the rating :class:`Scale`, a scorer's
:class:`Predictions` and a calibrator's :class:`Band`.

Every score in scoreband exists twice: on the dataset's native scale ``[a, b]`` and
normalised to ``[0, 1]`` as ``y01 = (y - a) / (b - a)``. Calibrators work on the
normalised scale; :class:`Band` converts back to the native one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from scoreband.errors import InputError

__all__ = [
    "Scale",
    "Predictions",
    "Band",
    "QUANTILE_LEVELS",
    "INTERVAL_ALPHAS",
]

#: Quantile levels of the 11-output head: central intervals for
#: alpha in {0.10, 0.15, 0.20, 0.25, 0.30} around the median.
QUANTILE_LEVELS: tuple[float, ...] = (
    0.05, 0.075, 0.10, 0.125, 0.15, 0.50, 0.85, 0.875, 0.90, 0.925, 0.95,
)
#: The miscoverage levels whose central intervals the head predicts.
INTERVAL_ALPHAS: tuple[float, ...] = (0.10, 0.15, 0.20, 0.25, 0.30)


@dataclass(frozen=True)
class Scale:
    """A rating scale ``[lo, hi]``; ``integer`` when single ratings are integers.

    Examples
    --------
    >>> s = Scale(1, 5, integer=True)
    >>> float(s.to01(4.0))
    0.75
    >>> s.achievable(2).tolist()
    [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]
    """

    lo: float
    hi: float
    integer: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi)) or self.hi <= self.lo:
            raise InputError(
                f"scale must be two finite numbers A < B, got A={self.lo}, B={self.hi}; "
                "pass e.g. `scale` 1,5"
            )
        if not math.isfinite(self.hi - self.lo) or (self.hi - self.lo) < 1e-12 * max(
                abs(self.lo), abs(self.hi), 1.0):
            # [-1e308, 1e308] overflows its own width (every band then looked exact), and a
            # width below float resolution makes every normalised value 0 or inf
            raise InputError(f"scale [{self.lo:g}, {self.hi:g}] is too wide or too narrow "
                             "to compute on (its width must be a finite number well above the "
                             "float resolution of its ends); pass the rating scale, e.g. 1,5")
        if self.integer and (self.lo != int(self.lo) or self.hi != int(self.hi)):
            raise InputError(f"an integer scale needs integer ends, got [{self.lo}, {self.hi}]")

    @classmethod
    def parse(cls, text: str, integer: bool | None = None, name: str = "scale") -> Scale:
        """Parse ``"A,B"``; integer ratings are assumed when both ends are integers.

        >>> Scale.parse("1,5")
        Scale(lo=1.0, hi=5.0, integer=True)
        >>> Scale.parse("0,1")
        Scale(lo=0.0, hi=1.0, integer=False)
        >>> Scale.parse((1, 5)) == Scale.parse("1,5")
        True
        """
        if isinstance(text, (tuple, list)):  # Python values: (1, 5)
            text = ",".join(str(v) for v in text)
        parts = [p.strip() for p in str(text).split(",")]
        if len(parts) != 2:
            raise InputError(f"`{name}` expects 'A,B' (e.g. 1,5 or 0,1), got {text!r}")
        try:
            lo, hi = float(parts[0]), float(parts[1])
        except ValueError:
            raise InputError(f"`{name}` expects two numbers 'A,B', got {text!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise InputError(f"`{name}` expects two finite numbers 'A,B' (e.g. 1,5), got "
                             f"{text!r}")
        if hi <= lo:
            raise InputError(f"`{name}` expects A < B (the low end first, e.g. 1,5), got "
                             f"{text!r}")
        if integer is None:
            # A [0, 1] scale is taken as continuous; other integer-ended scales as Likert.
            integer = lo == int(lo) and hi == int(hi) and (hi - lo) >= 2
        try:
            return cls(lo, hi, integer)
        except InputError as e:
            raise InputError(str(e).replace("`scale`", f"`{name}`").replace(
                "scale [", f"{name} [", 1)) from None

    @property
    def width(self) -> float:
        return self.hi - self.lo

    def to01(self, y):
        """Native scale -> [0, 1]."""
        return (np.asarray(y, dtype=float) - self.lo) / self.width

    def from01(self, y01):
        """[0, 1] -> native scale."""
        return np.asarray(y01, dtype=float) * self.width + self.lo

    def steps(self, n_ratings) -> np.ndarray:
        """Number of grid steps per unit of the normalised scale for each item.

        The mean of ``r`` integer ratings on ``{a..b}`` lies on ``a + k / r``; on the
        normalised scale that is ``k / (r (b - a))``. Returns ``r * (b - a)`` per item,
        or 0 for a continuous scale (no grid).
        """
        r = np.asarray(n_ratings, dtype=float)
        if not self.integer:
            return np.zeros_like(r)
        return r * self.width

    def achievable(self, n_ratings: int) -> np.ndarray:
        """The achievable mean ratings of ``n_ratings`` integer annotators (native scale)."""
        if not self.integer:
            raise InputError("a continuous scale has no achievable grid; pass an integer scale")
        if n_ratings < 1:
            raise InputError(f"n_ratings must be >= 1, got {n_ratings}")
        k = np.arange(int(round(n_ratings * self.width)) + 1)
        return self.lo + k / n_ratings

    def to_dict(self) -> dict:
        return {"lo": self.lo, "hi": self.hi, "integer": self.integer}

    @classmethod
    def from_dict(cls, d: dict) -> Scale:
        return cls(float(d["lo"]), float(d["hi"]), bool(d["integer"]))


@dataclass
class Record:
    """Deprecated (nothing in scoreband builds one; it goes in the next release): one item to
    be scored, an image and a text, optionally rated by annotators. Tables are the input."""

    id: str
    image: str | None
    text: str
    scale: Scale
    ratings: Sequence[float] | None = None
    instruction: str | None = None
    group: str | None = None
    domain: str | None = None

    @property
    def target(self) -> float | None:
        """Mean of the annotators' ratings on the native scale (None when unrated)."""
        if not self.ratings:
            return None
        return float(np.mean(self.ratings))

    @property
    def target01(self) -> float | None:
        t = self.target
        return None if t is None else float(self.scale.to01(t))


def _as_1d(x, name: str, n: int | None = None) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != 1:
        raise InputError(f"{name} must be one-dimensional, got shape {a.shape}")
    if n is not None and len(a) != n:
        raise InputError(f"{name} has {len(a)} values, expected {n} (one per item)")
    return a


@dataclass
class Predictions:
    """What a scorer says about ``n`` items, on the normalised scale [0, 1].

    Parameters
    ----------
    median : (n,) array
        Point score per item.
    lo, hi : (n,) arrays, optional
        The uncalibrated central interval (the 90 % pair of a quantile head).
    quantiles : (n, L) array, optional
        All predicted quantiles at ``levels``.
    features : (n, d) array, optional
        Features for learned calibrators (e.g. judge score-token log-probs).
    embedding : (n, e) array, optional
        Embeddings for clustering (cluster-conservative rule).
    n_ratings : (n,) array, optional
        Number of annotators behind each target (for the achievable grid).
    keys : (n,) uint64 array, optional
        Each item's identity for randomised tie-breaking (a hash of its table row; see
        :mod:`scoreband.conformal.randomness`); None: its prediction values stand for it.
    """

    median: np.ndarray
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    quantiles: np.ndarray | None = None
    levels: tuple[float, ...] | None = None
    features: np.ndarray | None = None
    embedding: np.ndarray | None = None
    n_ratings: np.ndarray | None = None
    keys: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.median = _as_1d(self.median, "median")
        n = len(self.median)
        if (self.lo is None) != (self.hi is None):
            raise InputError("give both lo and hi (the uncalibrated interval), or neither")
        if self.lo is not None:
            self.lo = _as_1d(self.lo, "lo", n)
            self.hi = _as_1d(self.hi, "hi", n)
        for name in ("quantiles", "features", "embedding"):
            v = getattr(self, name)
            if v is not None:
                v = np.asarray(v, dtype=float)
                if v.ndim == 1:
                    v = v[:, None]
                if v.ndim != 2 or len(v) != n:
                    raise InputError(f"{name} must have shape (n={n}, d), got {v.shape}")
                setattr(self, name, v)
        if self.n_ratings is not None:
            self.n_ratings = _as_1d(self.n_ratings, "n_ratings", n)
        if self.keys is not None:
            self.keys = np.asarray(self.keys, dtype=np.uint64)
            if self.keys.shape != (n,):
                raise InputError(f"keys must have shape (n={n},), got {self.keys.shape}")

    def __len__(self) -> int:
        return len(self.median)

    def take(self, idx) -> Predictions:
        """The predictions of a subset of items (index array or boolean mask)."""

        def sel(v):
            return None if v is None else v[idx]

        return Predictions(
            median=self.median[idx], lo=sel(self.lo), hi=sel(self.hi),
            quantiles=sel(self.quantiles), levels=self.levels, features=sel(self.features),
            embedding=sel(self.embedding), n_ratings=sel(self.n_ratings), keys=sel(self.keys),
        )

    @property
    def has_interval(self) -> bool:
        return self.lo is not None


@dataclass
class Band:
    """Calibrated bands for ``n`` items.

    ``lo01``, ``median01``, ``hi01`` are on [0, 1]; the native-scale values are derived
    from ``scale``. ``full_range`` flags items whose band is the whole scale because the
    calibration set (or the item's group) was too small for ``alpha``. ``group`` is the
    calibration group each item's band came from (None when marginal). Every band holds its
    median: ``lo <= median <= hi`` (a median outside is moved to the nearest end).
    """

    lo01: np.ndarray
    median01: np.ndarray
    hi01: np.ndarray
    alpha: float
    method: str
    scale: Scale = field(default_factory=lambda: Scale(0.0, 1.0))
    group: np.ndarray | None = None
    full_range: np.ndarray | None = None
    fallback: np.ndarray | None = None  # group too small or unseen: pooled band or whole scale
    sets01: list | None = None  # optional union-of-intervals sets (R2CCP), per item
    note: str | None = None  # a flag for every item (e.g. "marginal_fallback" from auto)

    def __post_init__(self) -> None:
        self.lo01 = np.asarray(self.lo01, dtype=float)
        self.hi01 = np.asarray(self.hi01, dtype=float)
        self.median01 = np.asarray(self.median01, dtype=float)
        if len(self.median01) and ((self.median01 < self.lo01).any()
                                   or (self.median01 > self.hi01).any()):
            # an invariant of every band: lo <= median <= hi. A point score outside its
            # calibrated set (a histogram's mean beside a one-value band, a median beside a
            # band snapped onto the grid) is reported at the nearest end of the set.
            self.median01 = np.minimum(np.maximum(self.median01, self.lo01), self.hi01)
        if self.full_range is None:
            self.full_range = np.zeros(len(self.lo01), dtype=bool)
        if self.fallback is None:
            self.fallback = np.zeros(len(self.lo01), dtype=bool)

    def __len__(self) -> int:
        return len(self.lo01)

    def take(self, idx) -> Band:
        """The bands of a subset of items (index array or boolean mask)."""
        def sel(v):
            return None if v is None else np.asarray(v)[idx]

        return replace(self, lo01=self.lo01[idx], median01=self.median01[idx],
                       hi01=self.hi01[idx], group=sel(self.group),
                       full_range=self.full_range[idx], fallback=self.fallback[idx],
                       sets01=None if self.sets01 is None else
                       [self.sets01[i] for i in np.arange(len(self.lo01))[idx]])

    @property
    def lo(self) -> np.ndarray:
        return self.scale.from01(self.lo01)

    @property
    def hi(self) -> np.ndarray:
        return self.scale.from01(self.hi01)

    @property
    def median(self) -> np.ndarray:
        return self.scale.from01(self.median01)

    @property
    def width01(self) -> np.ndarray:
        return self.hi01 - self.lo01

    def __repr__(self) -> str:
        w = float(np.mean(self.width01)) if len(self) else float("nan")
        return (
            f"Band(n={len(self)}, method={self.method!r}, alpha={self.alpha}, "
            f"mean_width01={w:.4f}, full_range={int(np.sum(self.full_range))})"
        )
