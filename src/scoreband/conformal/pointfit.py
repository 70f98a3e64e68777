"""A point score fitted to targets on [0, 1] from a few numeric columns: ridge regression
on the standardised columns (regularisation by leave-one-out, scikit-learn's ``RidgeCV``),
then an isotonic map of its output (a metric or a judge's expected score is often on the
wrong part of the target's scale, or bent). Stored as plain JSON numbers.

Used by the ``fitted`` calibrator (split conformal around this score) and by ``scoreband
systems`` (the metric-to-human map of prediction-powered inference, cross-fitted there).
"""

from __future__ import annotations

import numpy as np

from scoreband.conformal.core import row_matmul
from scoreband.conformal.mapping import MonotoneMap

__all__ = ["fit_point_model", "predict_point_model", "fit_standardiser", "standardise"]


def fit_standardiser(X) -> dict:
    """Column means and standard deviations of ``X`` (n, d), as JSON numbers."""
    X = np.asarray(X, dtype=float)
    return {"mu": X.mean(0).tolist(), "sd": (X.std(0) + 1e-8).tolist()}


def standardise(X, st: dict) -> np.ndarray:
    """``X`` standardised by :func:`fit_standardiser`'s numbers, clipped to [-10, 10]: the
    log-probs of an over-confident judge reach -1000s, which would dominate a linear model
    (and which CQR's linear-programming solver cannot handle). The one feature standardiser
    of the learned calibrators (``fitted``, CQR, CHR)."""
    X = np.asarray(X, dtype=float)
    return np.clip((X - np.asarray(st["mu"])) / np.asarray(st["sd"]), -10, 10)


def fit_point_model(X, y01) -> dict:
    """Fit on ``X`` (n, d) and targets on [0, 1]; returns the model as a dict.

    >>> rng = np.random.default_rng(0)
    >>> y = rng.uniform(size=300)
    >>> m = fit_point_model(np.c_[3 * y ** 2 + rng.normal(0, 0.05, 300)], y)
    >>> predict_point_model(m, [[0.75], [3.0]]).round(1).tolist()
    [0.5, 1.0]
    """
    from sklearn.linear_model import RidgeCV  # scikit-learn loads in ~0.5 s: only when fitting

    X = np.asarray(X, dtype=float)
    y = np.asarray(y01, dtype=float)
    st = fit_standardiser(X)
    Z = standardise(X, st)
    r = RidgeCV(alphas=np.logspace(-3, 3, 13)).fit(Z, y)
    raw = row_matmul(Z, r.coef_) + r.intercept_
    iso = MonotoneMap("isotonic").fit(raw, y) if len(np.unique(raw)) > 1 else None
    return {"n_columns": X.shape[1], **st,
            "coef": np.atleast_1d(r.coef_).tolist(), "intercept": float(r.intercept_),
            "ridge_alpha": float(r.alpha_), "map": None if iso is None else iso.to_dict()}


def predict_point_model(model: dict, X) -> np.ndarray:
    """The fitted score on [0, 1] for rows ``X`` (n, d)."""
    Z = standardise(X, model)
    raw = row_matmul(Z, np.asarray(model["coef"])) + model["intercept"]
    if model["map"] is None:
        return np.clip(raw, 0, 1)
    return np.clip(MonotoneMap.from_dict(model["map"]).transform(raw), 0, 1)
