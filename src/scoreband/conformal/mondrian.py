"""Group-conditional calibration: the Mondrian wrapper and the machinery of group-wise
calibration it shares with the cluster rules (:mod:`scoreband.conformal.cluster`).

Both reuse any base calibrator's conformal step (``fit_conformal`` / ``apply_params``) per group.

Two rules keep the per-group guarantee exact (SPEC section 4):

* groups built from the data (Easy / Medium / Hard tertiles of the base width, k-means
  clusters of the embeddings) are fitted on a share of the calibration items that the
  conformal step never sees (the base method's training share when it has one, otherwise a
  held-out split drawn from the calibrator's seed), then applied to calibration and test
  items alike from their own predictions. Groups fitted on the very items then calibrated
  make a test item never the extreme of its group: coverage (k - 1) / n_g, not k / (n_g + 1).
* a group with too few calibration items for alpha (fewer than ``ceil(1/alpha) - 1``) gets
  the whole scale, flagged: that is the only band valid for the group itself, whatever its
  items look like (its own conformal quantile is infinite; a band borrowed from other groups -
  the marginal band, or a band of the small groups pooled together - under-covers a group
  harder than the ones it borrows from: the pooled hard group of 13 difficulty-grouped items
  covered 0.565 at a promised 0.80). The pooled band is still offered, as an explicit choice
  with the weaker guarantee it has (``small_group="pool-together"``: coverage of the small
  groups together, not of each).
"""

from __future__ import annotations

import warnings

import numpy as np

from scoreband.conformal.base import (
    Calibrator,
    _jsonable,
    _unjson,
    calibrator_from_state,
    check_targets,
    check_unit_predictions,
    delta_of,
    register,
)
from scoreband.conformal.core import min_calibration_size, whole_scale
from scoreband.conformal.randomness import key_split
from scoreband.datatypes import Band, Predictions, Scale
from scoreband.errors import CalibratorMismatch, InputError

__all__ = ["Mondrian", "SmallGroupWarning", "DIFFICULTY_LABELS",
           "SMALL_GROUP_POLICIES", "MONDRIAN_BY", "PREDICTED_BINS", "pool_plan",
           "group_share_size", "point_score", "predicted_labels"]

DIFFICULTY_LABELS = ("easy", "medium", "hard")
#: what :class:`Mondrian` groups by: a given label per item, difficulty tertiles of the
#: base's uncalibrated width, or bins of the point score
MONDRIAN_BY = ("given", "difficulty", "predicted")
#: the number of point-score bins of ``by="predicted"`` (quantiles of the held-out share)
PREDICTED_BINS = 5
#: what a group too small for alpha (or unseen at calibration) gets: ``"full"`` (the whole
#: scale: valid for each group), ``"pool-together"`` (the band of the small groups pooled:
#: valid for them together, not for each) or ``"error"``
SMALL_GROUP_POLICIES = ("full", "pool-together", "error")
#: the policy that pools the small groups
POOL_TOGETHER = "pool-together"
#: prefix of the group label of an item calibrated in the pooled group
POOLED = "pooled:"
#: share of the calibration items held out to fit data-built groups (when the base has no
#: training share), its floor and its cap
GROUP_FRAC = 0.2
MIN_GROUP_SHARE = 3
MAX_GROUP_SHARE = 2000
_SHARE_STREAM = 17  # the held-out share: the items' uniforms of stream 17 (randomness.key_split)


class SmallGroupWarning(UserWarning):
    """A group has too few calibration items for alpha, or was unseen at calibration."""


def _policy(small_group: str) -> str:
    if small_group not in SMALL_GROUP_POLICIES:
        raise InputError(f"small_group must be one of {', '.join(SMALL_GROUP_POLICIES)}, "
                         f"got {small_group!r}")
    return small_group


def _saved_policy(config: dict) -> None:
    """Refuse a saved file whose ``small_group`` is not a policy of this scoreband (the
    names ``"pool"`` and ``"marginal"`` of earlier versions gave small groups a band
    borrowed from other groups, which under-covers them): a
    :class:`~scoreband.errors.CalibratorMismatch` naming the value and the fix."""
    name = config.get("small_group", "full")
    if name not in SMALL_GROUP_POLICIES:
        raise CalibratorMismatch(
            f"this calibrator was saved with small_group {name!r}, which this scoreband does "
            f"not know (it knows {', '.join(SMALL_GROUP_POLICIES)}): calibrate again, with "
            "small_group full (the default: a group too small for alpha gets the whole "
            "scale, flagged) or pool-together (one band for the small groups together)")


def _labels(groups, n: int) -> np.ndarray:
    if groups is None:
        raise InputError("group-conditional calibration needs a group label per item (`groups`)")
    g = np.asarray(groups).astype(str)
    if g.shape != (n,):
        raise InputError(f"expected {n} group labels, got shape {g.shape}")
    return g


def _names(groups, at_most: int = 20) -> str:
    groups = list(groups)
    more = len(groups) - at_most
    return ", ".join(groups[:at_most]) + (f" and {more} more" if more > 0 else "")


def pool_plan(counts: dict[str, int], need: int) -> tuple[list[str], list[str]]:
    """Which groups are too small to be calibrated alone, and which groups' items form the
    pooled group they are calibrated in.

    A group with fewer than ``need`` (``ceil(1/alpha) - 1``) calibration items is small. The
    pooled group holds the items of every group with at most ``need`` items: counting the
    test item, a small group's test item sees its own group at ``<= need`` items, and a group
    of exactly ``need`` calibration items is at ``need`` for another group's test item but at
    ``need + 1`` (enough to be calibrated alone) for its own. So which items are pooled is a
    function of the calibration items and the test item together - the Mondrian condition
    for exact coverage of the pooled group, ``>= 1 - alpha``. (Pooling only the groups
    below ``need`` would leave out items a test item of a borderline group is exchangeable
    with.) The guarantee is for the pooled group as a whole: each pooled group on its own
    is covered at ``1 - alpha`` only when the pooled groups are alike.

    Parameters
    ----------
    counts : calibration items per group (0 for a known group without items)
    need : :func:`~scoreband.conformal.core.min_calibration_size` of alpha

    Returns
    -------
    (small, pool) : sorted group names

    >>> pool_plan({"a": 100, "b": 9, "c": 3, "d": 0}, 9)
    (['c', 'd'], ['b', 'c', 'd'])
    >>> pool_plan({"a": 100, "b": 9}, 9)
    ([], ['b'])
    """
    small = sorted(g for g, n in counts.items() if n < need)
    pool = sorted(g for g, n in counts.items() if n <= need)
    return small, pool


def group_share_size(n: int, frac: float = GROUP_FRAC, floor: int = MIN_GROUP_SHARE) -> int:
    """Items held out to fit data-built groups: ``round(frac * n)``, at least ``floor`` and
    at most :data:`MAX_GROUP_SHARE`; at least one item must remain for the conformal step.

    >>> group_share_size(13), group_share_size(1000), group_share_size(10**6)
    (3, 200, 2000)
    """
    s = min(max(int(round(frac * n)), floor), max(MAX_GROUP_SHARE, floor))
    if n - s < 1:
        raise InputError(
            f"groups built from the data need {s} calibration items to fit the groups on "
            f"and at least one more to calibrate; got {n}: use more calibration items, or "
            "give a group label per item (`groups`)")
    return s


def point_score(base: Calibrator, pred: Predictions) -> np.ndarray:
    """The point score the ``"predicted"`` bins are cut on: a learned base's own band
    centre (``band_median``: CQR's median regression, ``fitted``'s point model ...), else
    the given median. (A monotone map's base reads the raw median: quantile bins of a metric
    and of its monotone map hold the same items.)"""
    own = getattr(base, "band_median", None)
    if callable(own) and getattr(base, "model_", None) is not None:
        v = np.asarray(own(pred), dtype=float)
    else:
        v = np.asarray(pred.median, dtype=float)
    if len(v) and not np.isfinite(v).all():
        raise InputError("Mondrian by predicted level bins the point score: give a point "
                         "prediction (`median`) for every item, or a learned method that "
                         "makes one from `features`")
    return v


def predicted_labels(score, thresholds) -> np.ndarray:
    """Bin labels ``pred1`` (lowest scores) ... ``predK`` of point scores cut at
    ``thresholds`` (a score equal to a threshold goes up).

    >>> predicted_labels([0.1, 0.5, 0.9], [0.3, 0.6]).tolist()
    ['pred1', 'pred2', 'pred3']
    """
    idx = np.searchsorted(np.asarray(thresholds, dtype=float), np.asarray(score, dtype=float),
                          side="right")
    return np.char.add("pred", (idx + 1).astype(str))


def predicted_thresholds(score: np.ndarray, n_bins: int) -> list[float]:
    """Cut points of ``n_bins`` equal-count bins of ``score`` (distinct values only, so a
    discrete score makes fewer bins, none empty by construction).

    >>> predicted_thresholds(np.arange(10.0), 2)
    [4.5]
    """
    qs = np.quantile(score, np.arange(1, n_bins) / n_bins, method="weibull")
    return [float(t) for t in np.unique(qs) if t > np.min(score)]


def _base_state(base: Calibrator) -> dict:
    return {"method": base.method, "alpha": base.alpha, "config": base.get_config(),
            "model": base._model_state()}


def _base_from(state: dict, scale: Scale) -> Calibrator:
    return calibrator_from_state({**state, "params": {}}, scale)


class _Grouped(Calibrator):
    """Shared machinery: fit the base's params per group (the small groups: whole scale, or
    pooled), apply per group."""

    def __init__(self, base: Calibrator, *, small_group: str = "full",
                 group_frac: float = GROUP_FRAC, seed: int | None = None):
        super().__init__(base.alpha, scale=base.scale, clip=base.clip)
        self.small_group = _policy(small_group)
        if not 0 < group_frac < 1:
            raise InputError(f"group_frac must be in (0, 1), got {group_frac}")
        self.base = base
        self.group_frac = float(group_frac)
        self.seed = getattr(base, "seed", 0) if seed is None else seed

    @property
    def takes_raw_predictions(self) -> bool:  # as its base reads them
        return getattr(self.base, "takes_raw_predictions", False)

    def check_pred(self, pred):
        self.base.check_pred(pred)

    def conformalize(self, pred, y01):
        raise InputError(f"{self.method}: recalibrating group-conditional bands on a few "
                         "labels is not supported (each group would need its own labels); "
                         "calibrate anew on the new domain, or recalibrate a calibrator "
                         "without groups")

    def fit_conformal(self, pred, y01):  # pragma: no cover - grouped fit is done in fit()
        raise NotImplementedError

    def apply_params(self, pred, params):  # pragma: no cover
        raise NotImplementedError

    def get_config(self) -> dict:
        return {"small_group": self.small_group, "group_frac": self.group_frac,
                "seed": self.seed}

    def get_state(self) -> dict:
        """The wrapper's config and params, with the base calibrator nested."""
        self._require_fitted()
        return {"method": self.method, "alpha": self.alpha, "config": self.get_config(),
                "base": _base_state(self.base), "params": _jsonable(self.params_)}

    @classmethod
    def _from_state(cls, state: dict, scale: Scale):
        _saved_policy(state["config"])
        obj = cls(_base_from(state["base"], scale), **state["config"])
        obj.params_ = _unjson(state["params"])
        # a file saved before the pooled rule: its too-small groups have no parameters
        obj.params_.setdefault("pool", None)
        obj.params_.setdefault("pool_groups", [])
        obj.params_.setdefault("small", sorted(
            g for g, v in (obj.params_.get("groups") or {}).items() if v is None))
        return obj

    #: each item gets its own group's parameters (False: the conservative cluster rule)
    _applies_groups = True

    # --- fitting --------------------------------------------------------------------------
    def _prepare(self, pred: Predictions, y01, groups=None, *, share_floor: int | None = None):
        """Validate and fit the base's learned part once (on its own share of the items).

        Returns the predictions, targets and group labels left for the conformal step, and,
        when ``share_floor`` is given (groups built from the data), the predictions of the
        items to fit the groups on and a record of that share: the base's training share
        when it has one, else a held-out split of :func:`group_share_size` items drawn from
        the items' identities (``randomness.key_split``, stream 17: never by row position or
        order); the conformal step never sees them.
        """
        self.check_pred(pred)
        y = check_targets(y01, len(pred))
        if len(pred) == 0:
            raise InputError("cannot calibrate on an empty set of predictions")
        # the groups order the copies of an item (randomness.split_keys): an item repeated in
        # two groups is split alike in any row order
        idx = (self.base.fit_model_part(pred, y) if groups is None else
               self.base.fit_model_part(pred, y, within=np.asarray(groups)))
        share = info = None
        if share_floor is not None:
            if self.base.learned:
                share = np.setdiff1d(np.arange(len(y)), idx)
                # in the items' canonical order (k-means on it must not see row order)
                share = share[key_split(pred.take(share), y[share], self.seed, 31)[0]]
                info = {"from": "training", "n": int(len(share))}
            else:
                s = group_share_size(len(idx), self.group_frac, share_floor)
                a, b = key_split(pred.take(idx), np.asarray(y)[idx], self.seed,
                                 _SHARE_STREAM, s)  # by identity
                share, idx = idx[a], idx[b]
                info = {"from": "held-out", "n": int(s), "frac": self.group_frac,
                        "seed": self.seed}
        g = None if groups is None else np.asarray(groups)[idx]
        return (pred.take(idx), y[idx], g,
                None if share is None else pred.take(share), info)

    def _fit_by_labels(self, pred: Predictions, y: np.ndarray, labels: np.ndarray,
                       known=(), pool: bool = True) -> dict:
        """Marginal params, params per group (None for a group too small for alpha), the
        group sizes (``known`` groups without items count 0) and, with ``pool`` and the
        ``"pool-together"`` policy, the pooled group's params (None when it is too small
        itself)."""
        need = min_calibration_size(self.alpha, delta_of(self.base))  # delta: a later rank
        counts = dict.fromkeys((str(g) for g in known), 0)
        uniq, cnt = np.unique(labels, return_counts=True)
        counts.update({str(g): int(c) for g, c in zip(uniq, cnt, strict=True)})
        small, pool_groups = pool_plan(counts, need)
        per_group: dict[str, dict | None] = {}
        for g, n_g in counts.items():
            per_group[g] = (None if n_g < need else
                            self.base.fit_conformal(*self._subset(pred, y, labels == g)))
        out = {"marginal": self.base.fit_conformal(pred, y), "groups": per_group,
               "counts": counts, "need": need, "small": small, "pool": None,
               "pool_groups": [], "pool_n": 0}
        if not small:
            return out
        msg = (f"groups too small for alpha={self.alpha} (at least {need} calibration items "
               f"needed): {_names(f'{g} (n={counts[g]})' for g in small)}")
        if self.small_group == "error":
            raise InputError(msg + "; merge them, or use small_group='full'")
        if not pool:
            warnings.warn(f"{msg}; they are left out of the choice", SmallGroupWarning,
                          stacklevel=4)
            return out
        if self.small_group == "full":
            warnings.warn(f"{msg}; their items get the whole scale as band (flagged "
                          "group_fallback): the only band valid for a group this small",
                          SmallGroupWarning, stacklevel=4)
            return out
        in_pool = np.isin(labels, pool_groups)
        n_pool = int(in_pool.sum())
        out.update(pool_groups=pool_groups, pool_n=n_pool)
        if n_pool >= need:
            out["pool"] = self.base.fit_conformal(*self._subset(pred, y, in_pool))
            action = (f"they are calibrated together as one pooled group of {n_pool} items "
                      f"(the groups with at most {need} items: {_names(pool_groups)}); its "
                      "coverage holds for the pooled groups together, not for each")
        else:
            action = (f"pooled (groups with at most {need} items: {_names(pool_groups)}) they "
                      f"have {n_pool} items, too few as well: their items get the whole scale")
        warnings.warn(f"{msg}; {action}", SmallGroupWarning, stacklevel=4)
        return out

    @staticmethod
    def _subset(pred: Predictions, y: np.ndarray, mask: np.ndarray):
        idx = np.flatnonzero(mask)
        return pred.take(idx), y[idx]

    # --- applying -------------------------------------------------------------------------
    def _apply_groups(self, pred: Predictions, labels: np.ndarray, params: dict):
        """Bands per group: a group's own params, else (small or unseen at calibration) the
        whole scale, or with the ``"pool-together"`` policy the pooled group's params (when
        the pool was large enough). Returns ``(lo, hi, full_range, fallback, sets,
        band_group)``; an item calibrated in the pooled group has the label
        ``"pooled:<its group>"``."""
        per_group = params["groups"]
        pool = params.get("pool") if self.small_group == POOL_TOGETHER else None
        n = len(pred)
        lo, hi = np.empty(n), np.empty(n)
        full = np.zeros(n, dtype=bool)
        fb = np.zeros(n, dtype=bool)
        out_label = labels.astype(object)
        sets: list | None = [None] * n
        unseen = sorted(str(g) for g in np.unique(labels) if str(g) not in per_group)
        if unseen and self.small_group == "error":
            raise InputError(f"groups not seen at calibration: {_names(unseen)}; they have no "
                             "calibration items (small_group='error'): calibrate with them, "
                             "or use small_group='full'")
        if unseen:
            action = ("they get the pooled small-group band" if pool is not None else
                      "they get the whole scale")
            warnings.warn(f"groups not seen at calibration: {_names(unseen)}; {action}, "
                          "flagged as fallback", SmallGroupWarning, stacklevel=3)
        for g in np.unique(labels):
            idx = np.flatnonzero(labels == g)
            p = per_group.get(str(g))
            if p is None:
                fb[idx] = True
                if pool is None:
                    lo[idx], hi[idx], full[idx] = whole_scale(len(idx))
                    if sets is not None:
                        for i in idx:
                            sets[i] = [(0.0, 1.0)]
                    continue
                p = pool
                out_label[idx] = POOLED + str(g)
            sub = pred.take(idx)
            lo[idx], hi[idx], full[idx] = self.base.apply_params(sub, p)
            s = self.base.apply_sets(sub, p) if sets is not None else None
            if s is None:
                sets = None
            else:
                for i, v in zip(idx, s, strict=True):
                    sets[i] = v
        return lo, hi, full, fb, sets, out_label.astype(str)


@register
class Mondrian(_Grouped):
    """Group-conditional (Mondrian) conformal calibration around any base method.

    Parameters
    ----------
    base : the calibrator whose conformal step is run per group
    by : ``"given"`` (a group label per item, e.g. the task), ``"difficulty"``: Easy /
        Medium / Hard by tertiles of the base's uncalibrated width, or ``"predicted"``:
        ``n_bins`` equal-count bins of the point score (:func:`point_score`), labelled
        ``pred1`` (lowest) ... ``predK`` - coverage per predicted level, where marginal
        bands over-cover some levels and under-cover others. The tertiles and the bins are
        fitted on items the conformal step never sees - the base's training share when it
        is a learned method, else a held-out ``group_frac`` share of the calibration items
        (:func:`group_share_size`, drawn from ``seed``) - and applied to calibration and test
        items alike from their own predictions; the share is recorded in
        ``params_["group_share"]``, the cut points in ``params_["thresholds"]``.
    small_group : what a group with fewer than ``ceil(1/alpha) - 1`` calibration items (and a
        group unseen at calibration) gets:

        * ``"full"`` (default): the whole scale, flagged ``full_range`` and ``fallback``; its
          ``band.group`` is the item's own group. This is the only band valid for each such
          group on its own: with fewer than ``ceil(1/alpha) - 1`` items the group's conformal
          quantile is infinite, and any band borrowed from other groups under-covers a group
          harder than they are (the pooled hard group of 13 difficulty-grouped items covered
          0.565 at 0.80).
        * ``"pool-together"``: the small groups are calibrated together, as one pooled group,
          on their own items (:func:`pool_plan`); if the pool is too small as well, or at
          apply no pool was fitted, the whole scale. Flagged ``fallback``; a pooled item's
          ``band.group`` is ``"pooled:<group>"``. The guarantee is for the pooled groups
          together, not for each: choose it only where the small groups are alike.
        * ``"error"``: an :class:`~scoreband.errors.InputError` at fit (and at apply for a
          group unseen at calibration).
    group_frac : the held-out share for difficulty groups and predicted bins (no effect with
        ``by="given"`` or a learned base)
    n_bins : the number of predicted-level bins (``by="predicted"``; fewer when the point
        score takes fewer distinct values on the share)
    seed : seed of that share's split; None: the base's ``seed`` (0 if it has none)

    Examples
    --------
    >>> from scoreband.conformal import SplitConformal
    >>> rng = np.random.default_rng(0)
    >>> g = np.repeat(["a", "b", "c"], [300, 4, 6])
    >>> m = rng.uniform(0.2, 0.8, 310); y = np.clip(m + rng.normal(0, 0.05, 310), 0, 1)
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     cal = Mondrian(SplitConformal(0.1)).fit(Predictions(m), y, g)
    >>> print(w[0].message)  # doctest: +ELLIPSIS
    groups too small for alpha=0.1 (at least 9 calibration items needed): b (n=4), c (n=6); \
their items get the whole scale as band ...
    >>> band = cal.predict(Predictions([0.5, 0.5, 0.5]), ["a", "b", "c"])
    >>> band.group.tolist(), band.fallback.tolist(), band.full_range.tolist()
    (['a', 'b', 'c'], [False, True, True], [False, True, True])
    """

    method = "mondrian"

    @property
    def guarantee(self) -> str:
        """Group-conditional: the base method's guarantee within each group."""
        groups = {"given": "each given group", "difficulty": "each difficulty group "
                  "(Easy / Medium / Hard)", "predicted": "each predicted-level bin"}[self.by]
        small = {"full": "a group too small for alpha gets the whole scale (flagged)",
                 "pool-together": "groups too small for alpha are covered together as one "
                                  "pooled group, not each",
                 "error": "a group too small for alpha is refused"}.get(self.small_group, "")
        return (f"group-conditional: E[coverage] >= 1 - alpha within {groups}, over "
                "calibration and test rows drawn exchangeably within the group; " + small +
                "; not per item")

    def __init__(self, base: Calibrator, *, by: str = "given", small_group: str = "full",
                 group_frac: float = GROUP_FRAC, seed: int | None = None,
                 n_bins: int = PREDICTED_BINS):
        super().__init__(base, small_group=small_group, group_frac=group_frac, seed=seed)
        if by not in MONDRIAN_BY:
            raise InputError(f"by must be one of {', '.join(map(repr, MONDRIAN_BY))}, got "
                             f"{by!r}")
        if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 2:
            raise InputError(f"n_bins must be an integer >= 2, got {n_bins!r}")
        self.by = by
        self.n_bins = int(n_bins)

    @classmethod
    def _from_state(cls, state: dict, scale: Scale):
        obj = super()._from_state(state, scale)
        p = obj.params_
        if obj.by == "difficulty" and "group_share" not in p:
            p["group_share"] = None
            warnings.warn(
                "this difficulty-group calibrator was saved by an older scoreband, which "
                "fitted the Easy / Medium / Hard thresholds on the very items it then "
                "calibrated: its group coverage can fall short of 1 - alpha at small n "
                "(0.74 at 13 items, alpha 0.2); recalibrate", SmallGroupWarning, stacklevel=3)
        return obj

    @staticmethod
    def _difficulty_labels(difficulty, thresholds) -> np.ndarray:
        idx = np.searchsorted(thresholds, difficulty, side="right")
        return np.asarray(DIFFICULTY_LABELS)[idx]

    def fit(self, pred: Predictions, y01, groups=None) -> Mondrian:
        check_unit_predictions(self, pred)
        thresholds = info = None
        if self.by == "predicted":
            pred, y, _, share, info = self._prepare(
                pred, y01, None, share_floor=max(MIN_GROUP_SHARE, self.n_bins))
            thresholds = predicted_thresholds(point_score(self.base, share), self.n_bins)
            labels = predicted_labels(point_score(self.base, pred), thresholds)
            known = predicted_labels([-np.inf, *thresholds], thresholds).tolist()
        elif self.by == "difficulty":
            pred, y, _, share, info = self._prepare(pred, y01, None,
                                                    share_floor=MIN_GROUP_SHARE)
            # "weibull" (position p (n + 1)): each group holds a third of the items in
            # expectation even from a small share (the default interpolation gives the
            # middle group a sixth from three items)
            thresholds = np.quantile(self.base.difficulty(share), [1 / 3, 2 / 3],
                                     method="weibull").tolist()
            labels = self._difficulty_labels(self.base.difficulty(pred), thresholds)
            known = DIFFICULTY_LABELS
        else:
            pred, y, groups, _, _ = self._prepare(pred, y01, groups)
            labels, known = _labels(groups, len(pred)), ()
        self.params_ = {**self._fit_by_labels(pred, y, labels, known),
                        "thresholds": thresholds, "group_share": info}
        return self

    def group_labels(self, pred: Predictions, groups=None) -> np.ndarray:
        """The group each item belongs to (its difficulty group, or its given label) - before
        pooling: ``predict``'s ``band.group`` says which items were calibrated pooled."""
        self._require_fitted()
        if self.by == "difficulty":
            return self._difficulty_labels(self.base.difficulty(pred),
                                           self.params_["thresholds"])
        if self.by == "predicted":
            return predicted_labels(point_score(self.base, pred), self.params_["thresholds"])
        return _labels(groups, len(pred))

    def predict(self, pred: Predictions, groups=None) -> Band:
        self._require_fitted()
        check_unit_predictions(self, pred)
        self.check_pred(pred)
        labels = self.group_labels(pred, groups)
        lo, hi, full, fb, sets, group = self._apply_groups(pred, labels, self.params_)
        band = self._band(pred, lo, hi, full, group=group, fallback=fb)
        band.method = f"mondrian({self.base.method},{self.by})"
        band.sets01 = sets
        return band

    def get_config(self) -> dict:
        # n_bins only where it is used: the saved files of the other groupings stay as
        # they were
        bins = {"n_bins": self.n_bins} if self.by == "predicted" else {}
        return {"by": self.by, **super().get_config(), **bins}

    def __repr__(self) -> str:
        state = ("unfitted" if self.params_ is None
                 else f"groups={len(self.params_['groups'])}, "
                      f"pooled={len(self.params_.get('small') or [])}")
        return f"Mondrian(base={self.base.method}, by={self.by}, alpha={self.alpha}, {state})"
