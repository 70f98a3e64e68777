"""Group-conditional calibration: Mondrian wrapper and the cluster-conservative rule.

Both reuse any base calibrator's conformal step (``fit_conformal`` / ``apply_params``) per group.
"""

from __future__ import annotations

import warnings

import numpy as np

from scoreband.clustering import assign_clusters, choose_k, fit_kmeans
from scoreband.conformal._core import min_calibration_size
from scoreband.conformal.base import (
    Calibrator,
    _jsonable,
    _unjson,
    calibrator_from_state,
    check_targets,
    register,
)
from scoreband.errors import InputError
from scoreband.records import Band, Predictions, Scale

__all__ = ["Mondrian", "ClusterConservative", "SmallGroupWarning", "DIFFICULTY_LABELS"]

DIFFICULTY_LABELS = ("easy", "medium", "hard")
SMALL_GROUP_POLICIES = ("marginal", "full", "error")


class SmallGroupWarning(UserWarning):
    """A group has too few calibration items for alpha, or was unseen at calibration."""


def _labels(groups, n: int) -> np.ndarray:
    if groups is None:
        raise InputError("group-conditional calibration needs a group label per item (`groups`)")
    g = np.asarray(groups).astype(str)
    if g.shape != (n,):
        raise InputError(f"expected {n} group labels, got shape {g.shape}")
    return g


def _base_state(base: Calibrator) -> dict:
    return {"method": base.method, "alpha": base.alpha, "config": base.get_config(),
            "model": base._model_state()}


def _base_from(state: dict, scale: Scale) -> Calibrator:
    return calibrator_from_state({**state, "params": {}}, scale)


class _Grouped(Calibrator):
    """Shared machinery: fit the base's params per group, apply per group."""

    def __init__(self, base: Calibrator, *, small_group: str = "marginal"):
        super().__init__(base.alpha, scale=base.scale, clip=base.clip)
        if small_group not in SMALL_GROUP_POLICIES:
            raise InputError(
                f"small_group must be one of {', '.join(SMALL_GROUP_POLICIES)}, got {small_group!r}"
            )
        self.base = base
        self.small_group = small_group

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

    def get_state(self) -> dict:
        """The wrapper's config and params, with the base calibrator nested."""
        self._require_fitted()
        return {"method": self.method, "alpha": self.alpha, "config": self.get_config(),
                "base": _base_state(self.base), "params": _jsonable(self.params_)}

    @classmethod
    def _from_state(cls, state: dict, scale: Scale):
        obj = cls(_base_from(state["base"], scale), **state["config"])
        obj.params_ = _unjson(state["params"])
        return obj

    def _prepare(self, pred: Predictions, y01, groups=None):
        """Validate and fit the base's learned part once (on its own share of the items);
        returns the predictions, targets and group labels left for the conformal step."""
        self.check_pred(pred)
        y = check_targets(y01, len(pred))
        idx = self.base.fit_model_part(pred, y)
        g = None if groups is None else np.asarray(groups)[idx]
        return pred.take(idx), y[idx], g

    def _fit_by_labels(self, pred: Predictions, y: np.ndarray, labels: np.ndarray) -> dict:
        """Marginal params, params per group, and the group sizes."""
        return {"marginal": self.base.fit_conformal(pred, y),
                "groups": self._fit_groups(pred, y, labels),
                "counts": {str(g): int(np.sum(labels == g)) for g in np.unique(labels)}}

    def _fit_groups(self, pred: Predictions, y: np.ndarray, labels: np.ndarray) -> dict:
        """Params per group; None for a group too small for alpha (policy decides)."""
        need = min_calibration_size(self.alpha)
        out: dict[str, dict | None] = {}
        small = []
        for g in np.unique(labels):
            idx = np.flatnonzero(labels == g)
            if len(idx) < need:
                small.append(f"{g} (n={len(idx)})")
                out[str(g)] = None
            else:
                out[str(g)] = self.base.fit_conformal(pred.take(idx), y[idx])
        if small:
            msg = (f"groups too small for alpha={self.alpha} (at least {need} calibration items "
                   f"needed): {', '.join(small)}")
            if self.small_group == "error":
                raise InputError(msg + "; merge them, or use small_group='marginal' or 'full'")
            action = ("the marginal band is used for them" if self.small_group == "marginal"
                      else "their items get the whole scale as band")
            warnings.warn(f"{msg}; {action}", SmallGroupWarning, stacklevel=3)
        return out

    def _apply_groups(self, pred: Predictions, labels: np.ndarray, per_group: dict,
                      fallback_params: dict):
        n = len(pred)
        lo, hi = np.empty(n), np.empty(n)
        full = np.zeros(n, dtype=bool)
        fb = np.zeros(n, dtype=bool)
        sets: list | None = [None] * n
        unseen = set()
        for g in np.unique(labels):
            idx = np.flatnonzero(labels == g)
            params = per_group.get(str(g))
            sub = pred.take(idx)
            if params is None:
                if str(g) not in per_group:
                    unseen.add(str(g))
                fb[idx] = True
                if self.small_group == "full":
                    lo[idx], hi[idx], full[idx] = 0.0, 1.0, True
                    if sets is not None:
                        for i in idx:
                            sets[i] = [(0.0, 1.0)]
                    continue
                params = fallback_params
            lo[idx], hi[idx], full[idx] = self.base.apply_params(sub, params)
            s = self.base.apply_sets(sub, params) if sets is not None else None
            if s is None:
                sets = None
            else:
                for i, v in zip(idx, s, strict=True):
                    sets[i] = v
        if unseen:
            warnings.warn(f"groups not seen at calibration: {', '.join(sorted(unseen))}; "
                          "their items are flagged as fallback", SmallGroupWarning, stacklevel=3)
        return lo, hi, full, fb, sets


@register
class Mondrian(_Grouped):
    """Group-conditional (Mondrian) conformal calibration around any base method.

    Parameters
    ----------
    base : the calibrator whose conformal step is run per group
    by : ``"given"`` (a group label per item, e.g. the task) or ``"difficulty"``: Easy /
        Medium / Hard by tertiles of the base's uncalibrated width (thresholds fitted on the
        calibration items, applied to test items from their own predictions)
    small_group : a group with fewer than ``ceil(1/alpha) - 1`` calibration items gets the
        ``"marginal"`` band (flagged ``fallback``), the ``"full"`` scale, or raises (``"error"``)
    """

    method = "mondrian"

    def __init__(self, base: Calibrator, *, by: str = "given", small_group: str = "marginal"):
        super().__init__(base, small_group=small_group)
        if by not in ("given", "difficulty"):
            raise InputError(f"by must be 'given' or 'difficulty', got {by!r}")
        self.by = by

    @staticmethod
    def _difficulty_labels(difficulty, thresholds) -> np.ndarray:
        idx = np.searchsorted(thresholds, difficulty, side="right")
        return np.asarray(DIFFICULTY_LABELS)[idx]

    def fit(self, pred: Predictions, y01, groups=None) -> Mondrian:
        pred, y, groups = self._prepare(pred, y01, groups)
        thresholds = None
        if self.by == "difficulty":
            d = self.base.difficulty(pred)
            thresholds = np.quantile(d, [1 / 3, 2 / 3]).tolist()
            labels = self._difficulty_labels(d, thresholds)
        else:
            labels = _labels(groups, len(pred))
        self.params_ = {**self._fit_by_labels(pred, y, labels), "thresholds": thresholds}
        return self

    def group_labels(self, pred: Predictions, groups=None) -> np.ndarray:
        """The group each item is calibrated in."""
        self._require_fitted()
        if self.by == "difficulty":
            return self._difficulty_labels(self.base.difficulty(pred),
                                           self.params_["thresholds"])
        return _labels(groups, len(pred))

    def predict(self, pred: Predictions, groups=None) -> Band:
        self._require_fitted()
        self.check_pred(pred)
        labels = self.group_labels(pred, groups)
        lo, hi, full, fb, sets = self._apply_groups(pred, labels, self.params_["groups"],
                                                    self.params_["marginal"])
        band = self._band(pred, lo, hi, full, group=labels, fallback=fb)
        band.method = f"mondrian({self.base.method},{self.by})"
        band.sets01 = sets
        return band

    def get_config(self) -> dict:
        return {"by": self.by, "small_group": self.small_group}

    def __repr__(self) -> str:
        state = ("unfitted" if self.params_ is None
                 else f"groups={len(self.params_['groups'])}")
        return f"Mondrian(base={self.base.method}, by={self.by}, alpha={self.alpha}, {state})"


@register
class ClusterConservative(_Grouped):
    """The cluster-conservative rule of BEiTScore++, and true Mondrian application.

    The calibration items are clustered (k-means on ``pred.embedding``, or a given group
    label); the base method is fitted in every cluster; each cluster's parameters are
    evaluated on the whole calibration set and the pair with the largest mean width is
    applied to every test item (``rule="conservative"``). With ``rule="mondrian"`` each test
    item gets its own cluster's parameters instead (group-conditional coverage).

    Parameters
    ----------
    base : usually :class:`~scoreband.conformal.crc.CRC`
    n_clusters : k, or ``"auto"`` (elbow + silhouette over 2..10); 1 is the unclustered rule
    rule : ``"conservative"`` or ``"mondrian"``
    """

    method = "cluster"
    names = {
        "crc-cluster": ("CRC per k-means cluster, the most conservative (omega, beta) for all",
                        {"rule": "conservative"}),
        "crc-cluster-mondrian": ("CRC per k-means cluster, each cluster its own (omega, beta)",
                                 {"rule": "mondrian"}),
    }
    needs = (("median", "interval"),)
    grouped = True

    @classmethod
    def build(cls, alpha, *, scale=None, preset=None, wrap=lambda c: c, n_clusters="auto",
              small_group="marginal", seed=0, **_):
        """CRC (mapped by ``wrap`` when asked) per cluster of the image embeddings."""
        from scoreband.conformal.crc import CRC

        return cls(wrap(CRC(alpha, scale=scale)), n_clusters=n_clusters,
                   small_group=small_group, seed=seed, **(preset or {}))

    def __init__(self, base: Calibrator, *, n_clusters: int | str = "auto",
                 rule: str = "conservative", small_group: str = "marginal", seed: int = 0):
        super().__init__(base, small_group=small_group)
        if rule not in ("conservative", "mondrian"):
            raise InputError(f"rule must be 'conservative' or 'mondrian', got {rule!r}")
        if not (n_clusters == "auto" or (isinstance(n_clusters, int) and n_clusters >= 1)):
            raise InputError(f"`n_clusters` must be 'auto' or an integer >= 1, got "
                             f"{n_clusters!r}")
        self.n_clusters = n_clusters
        self.rule = rule
        self.seed = seed

    def _cluster_labels(self, pred: Predictions, groups) -> tuple[np.ndarray, list | None]:
        if groups is not None:
            return _labels(groups, len(pred)), None
        if pred.embedding is None:
            raise InputError("the cluster rule needs image embeddings (pred.embedding) or a "
                             "group label per item (`groups`)")
        k = self.n_clusters
        if k == "auto":
            k = choose_k(pred.embedding, seed=self.seed).k
        elif int(k) > len(pred):
            raise InputError(f"`n_clusters` = {k} is more than the {len(pred)} calibration "
                             "items; give fewer clusters or 'auto'")
        labels, centers = fit_kmeans(pred.embedding, int(k), seed=self.seed)
        return labels.astype(str), centers.tolist()

    def fit(self, pred: Predictions, y01, groups=None) -> ClusterConservative:
        pred, y, groups = self._prepare(pred, y01, groups)
        labels, centers = self._cluster_labels(pred, groups)
        fitted = self._fit_by_labels(pred, y, labels)
        per_group = fitted["groups"]
        # Evaluate every cluster's parameters on the whole calibration set; keep the widest.
        widths = {}
        for g, params in per_group.items():
            if params is None:
                continue
            lo, hi, full = self.base.apply_params(pred, params)
            widths[g] = float(np.mean(np.where(full, 1.0, np.clip(hi, 0, 1) - np.clip(lo, 0, 1))))
        chosen = max(widths, key=widths.get) if widths else None
        self.params_ = {
            **fitted, "chosen_cluster": chosen,
            "conservative": per_group[chosen] if chosen is not None else fitted["marginal"],
            "widths": widths, "centers": centers, "k": len(per_group),
        }
        return self

    def predict(self, pred: Predictions, groups=None) -> Band:
        self._require_fitted()
        self.check_pred(pred)
        p = self.params_
        if self.rule == "conservative":
            lo, hi, full = self.base.apply_params(pred, p["conservative"])
            band = self._band(pred, lo, hi, full)
        else:
            if groups is not None:
                labels = _labels(groups, len(pred))
            elif p["centers"] is not None:
                if pred.embedding is None:
                    raise InputError("Mondrian cluster application needs pred.embedding")
                labels = assign_clusters(pred.embedding, p["centers"]).astype(str)
            else:
                raise InputError("clusters were given as groups at fit: pass groups to predict")
            lo, hi, full, fb, _ = self._apply_groups(pred, labels, p["groups"], p["marginal"])
            band = self._band(pred, lo, hi, full, group=labels, fallback=fb)
        band.method = f"cluster-{self.rule}({self.base.method},k={p['k']})"
        return band

    def get_config(self) -> dict:
        return {"n_clusters": self.n_clusters, "rule": self.rule,
                "small_group": self.small_group, "seed": self.seed}

    def __repr__(self) -> str:
        if self.params_ is None:
            return f"ClusterConservative(base={self.base!r}, unfitted)"
        return (f"ClusterConservative(base={self.base.method}, rule={self.rule}, "
                f"k={self.params_['k']}, chosen={self.params_['chosen_cluster']})")


