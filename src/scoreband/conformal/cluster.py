"""The cluster-conservative rule of BEiTScore++, and true Mondrian application per k-means
cluster of the image embeddings, on the group-wise machinery of
:mod:`scoreband.conformal.mondrian` (held-out share for the clusters, small groups)."""

from __future__ import annotations

import warnings

import numpy as np

from scoreband.clustering import assign_clusters, choose_k, fit_kmeans
from scoreband.conformal.base import Calibrator, check_unit_predictions, register
from scoreband.conformal.mondrian import (
    GROUP_FRAC,
    MIN_GROUP_SHARE,
    SmallGroupWarning,
    _Grouped,
    _labels,
)
from scoreband.datatypes import Band, Predictions, Scale
from scoreband.errors import InputError

__all__ = ["ClusterConservative"]


@register
class ClusterConservative(_Grouped):
    """The cluster-conservative rule of BEiTScore++, and true Mondrian application.

    The calibration items are clustered (k-means on ``pred.embedding``, or a given group
    label); the base method is fitted in every cluster; each cluster's parameters are
    evaluated on the whole calibration set and the parameters with the largest mean width
    are applied to every test item (``rule="conservative"``). With ``rule="mondrian"`` each test
    item gets its own cluster's parameters instead (group-conditional coverage): there the
    k-means clusters (and an ``"auto"`` k) are fitted on a share the conformal step never
    sees, as :class:`Mondrian` fits its difficulty groups, and clusters too small for alpha
    are handled by ``small_group`` as in :class:`Mondrian` (the whole scale by default).

    Parameters
    ----------
    base : usually :class:`~scoreband.conformal.crc.CRC`
    n_clusters : k, or ``"auto"`` (elbow + silhouette over 2..10); 1 is the unclustered rule
    rule : ``"conservative"`` or ``"mondrian"``
    small_group, group_frac : as for :class:`Mondrian` (the share has at least ``2 k``
        items for a given k)
    seed : seed of k-means and of the held-out share
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
              small_group="full", seed=0, **_):
        """CRC (mapped by ``wrap`` when asked) per cluster of the image embeddings."""
        from scoreband.conformal.crc import CRC

        return cls(wrap(CRC(alpha, scale=scale)), n_clusters=n_clusters,
                   small_group=small_group, seed=seed, **(preset or {}))

    def __init__(self, base: Calibrator, *, n_clusters: int | str = "auto",
                 rule: str = "conservative", small_group: str = "full",
                 group_frac: float = GROUP_FRAC, seed: int = 0):
        super().__init__(base, small_group=small_group, group_frac=group_frac, seed=seed)
        if rule not in ("conservative", "mondrian"):
            raise InputError(f"rule must be 'conservative' or 'mondrian', got {rule!r}")
        if not (n_clusters == "auto" or (isinstance(n_clusters, int) and n_clusters >= 1)):
            raise InputError(f"`n_clusters` must be 'auto' or an integer >= 1, got "
                             f"{n_clusters!r}")
        self.n_clusters = n_clusters
        self.rule = rule
        self._applies_groups = rule == "mondrian"

    @classmethod
    def _from_state(cls, state: dict, scale: Scale):
        obj = super()._from_state(state, scale)
        p = obj.params_
        if (obj.rule == "mondrian" and p.get("centers") is not None
                and "group_share" not in p):
            p["group_share"] = None
            warnings.warn(
                "this cluster-Mondrian calibrator was saved by an older scoreband, which "
                "fitted its k-means clusters on the very items it then calibrated: its "
                "cluster coverage can fall short of 1 - alpha at small n; recalibrate",
                SmallGroupWarning, stacklevel=3)
        return obj

    def _kmeans(self, emb: np.ndarray, where: str) -> tuple[int, np.ndarray, np.ndarray]:
        """``(k, labels, centers)`` of k-means on ``emb`` (k chosen when ``"auto"``)."""
        k = self.n_clusters
        if k == "auto":
            k = choose_k(emb, seed=self.seed).k
        elif int(k) > len(emb):
            raise InputError(f"`n_clusters` = {k} is more than the {len(emb)} {where}; give "
                             "fewer clusters or 'auto'")
        labels, centers = fit_kmeans(emb, int(k), seed=self.seed)
        return int(k), labels, centers

    def fit(self, pred: Predictions, y01, groups=None) -> ClusterConservative:
        check_unit_predictions(self, pred)
        centers, info, known = None, None, ()
        held_out = self.rule == "mondrian" and groups is None
        if held_out and pred.embedding is None:
            raise InputError("the cluster rule needs image embeddings (pred.embedding) or a "
                             "group label per item (`groups`)")
        floor = (MIN_GROUP_SHARE if self.n_clusters == "auto"
                 else max(MIN_GROUP_SHARE, 2 * int(self.n_clusters)))
        pred, y, groups, share, info = self._prepare(pred, y01, groups,
                                                     share_floor=floor if held_out else None)
        if groups is not None:
            labels = _labels(groups, len(pred))
        elif held_out:
            # clusters fitted on the share, applied to the conformal items like test items
            k, _, c = self._kmeans(share.embedding, "items held out to fit the clusters")
            centers = c.tolist()
            labels = assign_clusters(pred.embedding, centers).astype(str)
            known = [str(i) for i in range(k)]
        else:
            if pred.embedding is None:
                raise InputError("the cluster rule needs image embeddings (pred.embedding) "
                                 "or a group label per item (`groups`)")
            _, lab, c = self._kmeans(pred.embedding, "calibration items")
            labels, centers = lab.astype(str), c.tolist()
        fitted = self._fit_by_labels(pred, y, labels, known, pool=self.rule == "mondrian")
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
            "widths": widths, "centers": centers, "k": len(per_group), "group_share": info,
        }
        return self

    def predict(self, pred: Predictions, groups=None) -> Band:
        self._require_fitted()
        check_unit_predictions(self, pred)
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
            lo, hi, full, fb, _, group = self._apply_groups(pred, labels, p)
            band = self._band(pred, lo, hi, full, group=group, fallback=fb)
        band.method = f"cluster-{self.rule}({self.base.method},k={p['k']})"
        return band

    def get_config(self) -> dict:
        return {"n_clusters": self.n_clusters, "rule": self.rule, **super().get_config()}

    def __repr__(self) -> str:
        if self.params_ is None:
            return f"ClusterConservative(base={self.base!r}, unfitted)"
        return (f"ClusterConservative(base={self.base.method}, rule={self.rule}, "
                f"k={self.params_['k']}, chosen={self.params_['chosen_cluster']})")
