"""Weighted split conformal prediction under covariate shift (Tibshirani, Barber, Candes and
Ramdas 2019), and a shift alarm (a classifier two-sample test).

When the test items' inputs are drawn from another distribution than the calibration items'
(paintings instead of photos, long captions instead of short), but the target given the input
is unchanged, split conformal loses its guarantee. Weighting each calibration item by the
likelihood ratio ``w(x) = dP_test(x) / dP_cal(x)`` restores it. The ratio is estimated by a
domain classifier (logistic regression) on the items' embeddings: ``w = p / (1 - p) *
n_cal / n_test``, ``p`` the classifier's probability that an item is a test item.

The method needs overlapping support: where the classifier separates the two sets almost
perfectly, a few calibration items carry all the weight, the effective sample size
``(sum w)^2 / sum w^2`` collapses and the band becomes the whole scale. The calibrator reports
that effective sample size and says so when it is small.

What is guaranteed: coverage ``>= 1 - alpha`` for test items drawn from the shifted
distribution *under covariate shift only* (the inputs' distribution changes, the target
given the input does not) and *with the true likelihood ratio*; the ratio here is estimated
(cross-fitted, so no item scores itself), so the guarantee is approximate, and it says
nothing about a shift in the target given the input (a new rater pool, a new task): there,
recalibrate on labeled rows of the new domain (:mod:`scoreband.conformal.recalibrate`).

Written here because neither MAPIE nor crepes ships weighted conformal prediction for
regression under covariate shift.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from scoreband.conformal.base import Calibrator, register
from scoreband.conformal.scores import ABSOLUTE_RESIDUAL, ConformityScore, score_from_config
from scoreband.datatypes import Band, Predictions
from scoreband.errors import CalibratorMismatch, InputError

__all__ = ["WeightedSplit", "weighted_thresholds", "likelihood_ratio_weights",
           "effective_sample_size", "shift_test", "SmallEffectiveSample"]

#: Below this effective sample size the weighted band is flagged as unreliable ...
MIN_ESS = 30
#: ... and below this share of the calibration items: the weights then rest on the few
#: calibration items nearest the test domain. Measured on the embedded world (calibrated on
#: photos only, tested on paintings): effective sample 70 of 750 (9 %), coverage 0.78 instead
#: of 0.90, worse than unweighted; with a 20 % painting share in calibration: 678 of 1500
#: (45 %), coverage 0.89.
MIN_ESS_SHARE = 0.10
#: A shift-test AUC at or above this: the domains (nearly) do not overlap.
NO_OVERLAP_AUC = 0.98


def too_few_effective(ess: float, n: int) -> bool:
    """Whether the weights leave too small an effective sample (absolute or as a share)."""
    return ess < max(MIN_ESS, MIN_ESS_SHARE * n)


class SmallEffectiveSample(UserWarning):
    """The shift-correcting weights leave too few effective calibration items."""


def weighted_thresholds(scores, w_cal, w_test, alpha: float) -> np.ndarray:
    """Per test item: the weighted conformal quantile of the calibration ``scores``.

    The ``1 - alpha`` quantile of ``sum_i p_i delta(s_i) + p_test delta(+inf)`` with
    ``p_i = w_i / (sum w + w_test)``: ``+inf`` when the calibration mass cannot reach it.
    With equal weights this is the ``ceil((n + 1)(1 - alpha))``-th smallest score, i.e. plain
    split conformal.

    >>> s = np.arange(1.0, 20.0)                      # 19 scores
    >>> weighted_thresholds(s, np.ones(19), np.ones(2), 0.1).tolist()
    [18.0, 18.0]
    """
    s = np.asarray(scores, dtype=float)
    wc = np.asarray(w_cal, dtype=float)
    wt = np.asarray(w_test, dtype=float)
    order = np.argsort(s, kind="stable")
    s, cw = s[order], np.cumsum(wc[order])
    total = cw[-1] if len(cw) else 0.0
    target = (1 - alpha) * (total + wt)
    # a relative tolerance: (1 - alpha)(n + 1) in floats can land a hair above an integer
    k = np.searchsorted(cw, target - 1e-9 * max(total, 1.0), side="left")
    out = np.full(len(wt), math.inf)
    ok = k < len(s)
    out[ok] = s[k[ok]]
    return out


def effective_sample_size(w) -> float:
    """``(sum w)^2 / sum w^2``: how many equally weighted items the weights are worth."""
    w = np.asarray(w, dtype=float)
    s2 = float(np.sum(w**2))
    return float(np.sum(w) ** 2 / s2) if s2 > 0 else 0.0


def _standardize(X_cal, X_test):
    X = np.vstack([X_cal, X_test])
    mu, sd = X.mean(0), X.std(0) + 1e-8
    return (X_cal - mu) / sd, (X_test - mu) / sd


def likelihood_ratio_weights(X_cal, X_test, C: float = 1.0, clip: float = 1e-6,
                             folds: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Estimated ``dP_test / dP_cal`` at the calibration and the test items, from a logistic
    domain classifier (scikit-learn) on standardised features, cross-fitted (SPEC section
    9): the items fall into ``folds`` folds by their values
    (:func:`~scoreband.conformal.randomness.fold_of`, so not by their order), and each
    item's probability comes from the classifier fitted without its fold, so no item scores
    itself. With fewer than ``2 * folds`` items on either side the folds shrink (at least
    2); below 2 items a side, the classifier is fitted in-sample."""
    from sklearn.linear_model import LogisticRegression

    from scoreband.conformal.randomness import array_keys, fold_of

    Xc, Xt = (np.asarray(v, dtype=float) for v in (X_cal, X_test))
    if Xc.ndim != 2 or Xt.ndim != 2 or Xc.shape[1] != Xt.shape[1]:
        raise InputError(f"calibration and test embeddings must have the same width, got "
                         f"{Xc.shape} and {Xt.shape}")
    Zc, Zt = _standardize(Xc, Xt)
    Z = np.vstack([Zc, Zt])
    y = np.r_[np.zeros(len(Zc)), np.ones(len(Zt))]
    k = max(1, min(folds, len(Zc) // 2, len(Zt) // 2))
    fold = (fold_of(np.r_[array_keys(Xc), array_keys(Xt) ^ np.uint64(1)], k, seed)
            if k >= 2 else np.zeros(len(Z), dtype=int))
    p = np.empty(len(Z))
    for f in range(k):
        out = fold == f
        train = ~out if k >= 2 else np.ones(len(Z), dtype=bool)
        if len(np.unique(y[train])) < 2:  # a fold took a whole side: fit on every item
            train = np.ones(len(Z), dtype=bool)
        clf = LogisticRegression(C=C, max_iter=2000).fit(Z[train], y[train])
        p[out] = clf.predict_proba(Z[out])[:, 1]
    p = np.clip(p, clip, 1 - clip)
    w = p / (1 - p) * (len(Zc) / len(Zt))
    return w[:len(Zc)], w[len(Zc):]


def shift_test(X_cal, X_test, folds: int = 5, seed: int = 0) -> dict:
    """Classifier two-sample test: can a classifier tell the test items from the calibration
    items? Out-of-fold probabilities of a logistic regression; the AUC and the one-sided
    Mann-Whitney p-value of "test items score higher" (scipy). A small p-value means the test
    table looks unlike the calibration items, and plain conformal coverage may not hold."""
    from scipy.stats import mannwhitneyu
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    Xc, Xt = (np.asarray(v, dtype=float) for v in (X_cal, X_test))
    n_c, n_t = len(Xc), len(Xt)
    if min(n_c, n_t) < folds:
        raise InputError(f"the shift test needs at least {folds} calibration and {folds} test "
                         f"items, got {n_c} and {n_t}")
    Zc, Zt = _standardize(Xc, Xt)
    X, y = np.vstack([Zc, Zt]), np.r_[np.zeros(n_c), np.ones(n_t)]
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    p = cross_val_predict(LogisticRegression(max_iter=2000), X, y, cv=cv,
                          method="predict_proba")[:, 1]
    u, pval = mannwhitneyu(p[y == 1], p[y == 0], alternative="greater")
    return {"auc": float(u / (n_c * n_t)), "p_value": float(pval), "n_cal": n_c, "n_test": n_t}


@register
class WeightedSplit(Calibrator):
    """Split conformal around a point prediction, reweighted for covariate shift.

    ``fit`` keeps the calibration items' conformity scores (``score``: by default the
    absolute residual ``|y - m|``; any :mod:`scoreband.conformal.scores` score, e.g.
    ``"quantile-residual"`` around the given ``lo``/``hi``) and embeddings; ``predict`` fits
    the domain classifier between them and the items it is given (transductive: the weights
    depend on the test table) and gives each item its own weighted threshold. Needs
    ``pred.embedding`` at fit and predict (e.g. the scorer's image or joint embedding).

    ``last_shift_`` holds the effective sample size of the weights and the shift test of the
    last ``predict``; an effective sample below :data:`MIN_ESS` (or :data:`MIN_ESS_SHARE` of
    the calibration items) is warned about and flagged
    on the band (``note="small_effective_sample"``), and so are domains a classifier tells
    apart almost perfectly (AUC >= :data:`NO_OVERLAP_AUC`, ``note="no_overlap"``).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(400, 1)); m = 0.5 + 0.1 * np.tanh(x[:, 0])
    >>> y = np.clip(m + rng.normal(0, 0.05, 400), 0, 1)
    >>> cal = WeightedSplit(0.1).fit(Predictions(m[:200], embedding=x[:200]), y[:200])
    >>> band = cal.predict(Predictions(m[200:], embedding=x[200:]))
    >>> bool(0.85 < np.mean((band.lo01 <= y[200:]) & (y[200:] <= band.hi01)) <= 1)
    True
    """

    method = "weighted-split"
    names = {"weighted-split": ("split conformal reweighted for covariate shift (needs "
                                "`embedding`)", {})}
    needs = (("median", "embedding"),)
    whole_table = True
    guarantee = ("under covariate shift only (the inputs' distribution changes, not the "
                 "target given the input), approximately: the likelihood ratio is estimated")
    # no Beta rank to raise: each test item gets its own weighted quantile (weights from an
    # estimated likelihood ratio, fitted transductively on the test table), so even its
    # marginal guarantee is approximate; a training-conditional one would need the true ratio
    # and a rejection-sampling construction (Park et al. 2022), which this method is not
    no_delta = ("its guarantee is approximate even on average (the likelihood ratio behind "
                "its weights is estimated, and each test row gets its own weighted quantile), "
                "so there is no exact conformal rank to make training-conditional")

    @classmethod
    def check_params(cls, params: dict, where: str, number) -> None:
        scores, emb = params.get("scores"), params.get("embedding")
        if not isinstance(scores, list) or not isinstance(emb, list) or len(scores) != len(emb):
            raise CalibratorMismatch(f"{where} needs 'scores' and 'embedding' lists of equal "
                                     "length")
        try:  # saved beside the scores when it is not the default (absolute residual)
            score = score_from_config(params.get("score", ABSOLUTE_RESIDUAL))
        except InputError as e:
            raise CalibratorMismatch(f"{where}.score: {e}; recalibrate") from None
        for i, v in enumerate(scores):
            number(v, f"{where}.scores[{i}]", lo=0.0 if score.nonnegative else None,
                   inf_ok=False)

    def __init__(self, alpha: float = 0.1, *, C: float = 1.0,
                 score: ConformityScore | str | dict = ABSOLUTE_RESIDUAL, **kw):
        super().__init__(alpha, **kw)
        self.C = C
        self.score = score_from_config(score)
        self.last_shift_: dict | None = None

    def _custom_score(self) -> dict:
        return {} if self.score == ABSOLUTE_RESIDUAL else {"score": self.score.to_config()}

    def get_config(self) -> dict:
        return {**super().get_config(), "C": self.C, **self._custom_score()}

    def check_pred(self, pred: Predictions) -> None:
        if pred.embedding is None:
            raise InputError("weighted conformal needs an embedding per item to estimate the "
                             "shift (embedding columns, e.g. `embedding` 'emb_*')")
        if "median" in self.score.needs and not np.isfinite(pred.median).all():
            raise InputError("weighted split conformal needs a point prediction (median)")
        if "interval" in self.score.needs and pred.lo is None:
            raise InputError(f"weighted conformal on the {self.score.name} score needs the "
                             "uncalibrated interval of each item: pass `lo` and `hi` columns")

    def fit_conformal(self, pred: Predictions, y01: np.ndarray) -> dict:
        return {"scores": self.score.score(pred, y01).tolist(),
                "embedding": np.asarray(pred.embedding).tolist(), "n": len(y01),
                **self._custom_score()}

    def apply_params(self, pred: Predictions, params: dict):
        scores = np.asarray(params["scores"], dtype=float)
        Xc = np.asarray(params["embedding"], dtype=float)
        w_cal, w_test = likelihood_ratio_weights(Xc, pred.embedding, C=self.C)
        q = weighted_thresholds(scores, w_cal, w_test, self.alpha)
        ess = effective_sample_size(w_cal)
        self.last_shift_ = {"effective_sample_size": ess, "n_cal": len(scores),
                            "weights_max_share": float(w_cal.max() / w_cal.sum())}
        if min(len(Xc), len(pred.embedding)) >= 10:
            self.last_shift_.update(shift_test(Xc, pred.embedding))
        if too_few_effective(ess, len(scores)):
            warnings.warn(f"weighted conformal: the shift weights leave an effective sample of "
                          f"{ess:.1f} of {len(scores)} calibration items (below "
                          f"{max(MIN_ESS, MIN_ESS_SHARE * len(scores)):.0f}): the domains "
                          "barely overlap, the weights rest on a few items and the coverage "
                          "guarantee does not hold; calibrate on items like these",
                          SmallEffectiveSample, stacklevel=3)
        elif self.last_shift_.get("auc", 0.0) >= NO_OVERLAP_AUC:
            warnings.warn(f"weighted conformal: a classifier tells these items from the "
                          f"calibration items almost perfectly (AUC "
                          f"{self.last_shift_['auc']:.3f}): the domains do not overlap, the "
                          "weights extrapolate and the coverage guarantee does not hold; "
                          "calibrate on items like these", SmallEffectiveSample, stacklevel=3)
        full = ~np.isfinite(q)
        lo, hi = self.score.interval(pred, np.where(full, 0.0, q))
        return lo, hi, full

    def predict(self, pred: Predictions, groups=None) -> Band:
        band = super().predict(pred, groups)
        sh = self.last_shift_
        if sh and too_few_effective(sh["effective_sample_size"], sh["n_cal"]):
            band.note = "small_effective_sample"
        elif self.last_shift_ and self.last_shift_.get("auc", 0.0) >= NO_OVERLAP_AUC:
            band.note = "no_overlap"
        return band
