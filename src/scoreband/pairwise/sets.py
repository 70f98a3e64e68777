"""Verdict probabilities and conformal prediction sets over {A, B, tie} (SPEC section 13).

A *verdict model* gives each pair ``p = (p(A), p(B), p(tie))``:

* ``logistic``: a multinomial logistic map of antisymmetric features (a score difference
  ``A - B``, a judge's order-averaged preference ``p(A) - p(B)``) and their absolute values
  (a tie is likelier near 0). It is fitted on the pairs and on the same pairs presented the
  other way round (features negated, A and B swapped), so the map is order-fair:
  ``p_A(x) = p_B(-x)``;
* ``probs``: columns that already hold the probabilities (a judge's verdict log-probs read
  in both orders), renormalised.

Split conformal classification on calibration pairs ``(p_i, y_i)`` (never used to fit the
map): with a conformity score ``s(p, y)`` of :mod:`scoreband.conformal.scores` (``LAC``:
``1 - p(y)``, the smallest sets; ``APS``: the mass of the labels at least as likely as
``y``, non-randomised, adaptive), ``q`` is the conformal quantile of the calibration scores
(:func:`scoreband.conformal.core.conformal_quantile`) and the set is
``{y : s(p, y) <= q}``; then ``P(y in set) >= 1 - alpha`` for a new pair drawn like them.
Mondrian: one ``q`` per group (task), each group its own guarantee.

>>> import numpy as np
>>> P = np.array([[0.7, 0.2, 0.1], [0.4, 0.35, 0.25]])
>>> conformity(P, np.array([0, 1]), "lac").round(2).tolist()
[0.3, 0.65]
>>> conformity(P, np.array([0, 1]), "aps").round(2).tolist()
[0.7, 0.75]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from scoreband.conformal.scores import SET_SCORES, set_score
from scoreband.errors import InputError
from scoreband.pairwise.pairs import LABELS

__all__ = ["VerdictModel", "fit_verdict_model", "conformity", "prediction_sets",
           "set_labels", "SET_METHODS", "MODEL_KINDS"]

SET_METHODS = tuple(SET_SCORES)
#: the verdict models a rule may hold
MODEL_KINDS = ("logistic", "probs")


@dataclass
class VerdictModel:
    """A map from a pair's features (or probability columns) to ``(p(A), p(B), p(tie))``."""

    kind: str                      #: logistic | probs
    columns: list[str]             #: features (logistic) or probability columns (probs)
    classes: list[str] = field(default_factory=lambda: list(LABELS))
    coef: list | None = None       #: (classes, 2 * features) on the standardised design
    intercept: list | None = None
    mean: list | None = None
    scale: list | None = None

    def _design(self, X) -> np.ndarray:
        X = np.asarray(X, float).reshape(len(X), -1)
        Z = np.column_stack([X, np.abs(X)])
        return (Z - np.asarray(self.mean)) / np.asarray(self.scale)

    def proba(self, X) -> np.ndarray:
        """(n, 3) probabilities over A, B, tie (0 for a class never seen while fitting);
        NaN rows where a feature is missing."""
        X = np.asarray(X, float).reshape(len(X), -1)
        bad = ~np.isfinite(X).all(axis=1)
        out = np.full((len(X), 3), np.nan)
        if self.kind == "probs":
            P = np.clip(np.nan_to_num(X, nan=0.0), 0, None)
            if P.shape[1] == 2:
                P = np.column_stack([P, np.zeros(len(P))])
            tot = P.sum(axis=1)
            ok = ~bad & (tot > 0)
            out[ok] = P[ok] / tot[ok, None]
            return out
        Z = self._design(np.nan_to_num(X))
        logits = Z @ np.asarray(self.coef).T + np.asarray(self.intercept)
        if len(self.classes) == 2 and np.asarray(self.coef).shape[0] == 1:
            logits = np.column_stack([np.zeros(len(Z)), logits[:, 0]])
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        for j, c in enumerate(self.classes):
            out[:, LABELS.index(c)] = p[:, j]
        out[~bad[:, None] & np.isnan(out)] = 0.0
        out[bad] = np.nan
        return out

    def to_dict(self) -> dict:
        return {"kind": self.kind, "columns": self.columns, "classes": self.classes,
                "coef": self.coef, "intercept": self.intercept, "mean": self.mean,
                "scale": self.scale}

    @classmethod
    def from_dict(cls, d: dict) -> VerdictModel:
        """The model of a rule file; an unknown ``kind``, columns that are not a list of
        names, a logistic model without its coefficients or classes outside A / B / tie
        are an :class:`InputError` naming the key (never an internal error at apply)."""
        if not isinstance(d, dict):
            raise InputError(f"key 'model' holds a {type(d).__name__}, not an object")
        kind = d.get("kind")
        if kind not in MODEL_KINDS:
            raise InputError(f"key 'model.kind' is {kind!r}: this scoreband knows "
                             f"{' and '.join(MODEL_KINDS)}")
        cols, classes = d.get("columns"), d.get("classes", list(LABELS))
        if not isinstance(cols, list) or not cols or \
                not all(isinstance(c, str) for c in cols):
            raise InputError(f"key 'model.columns' is {cols!r}, not a list of column names")
        if kind == "probs" and len(cols) not in (2, 3):
            raise InputError(f"key 'model.columns' holds {len(cols)} probability columns: "
                             "p(A), p(B) and optionally p(tie)")
        if not isinstance(classes, list) or not classes or \
                not all(isinstance(c, str) for c in classes) or not set(classes) <= set(LABELS):
            raise InputError(f"key 'model.classes' is {classes!r}: labels among "
                             f"{', '.join(LABELS)}")
        if kind == "logistic":
            for k in ("coef", "intercept", "mean", "scale"):
                if not _numbers(d.get(k)):
                    raise InputError(f"key 'model.{k}' is missing or not a list of finite "
                                     "numbers")
        return cls(kind, list(cols), list(classes), d.get("coef"), d.get("intercept"),
                   d.get("mean"), d.get("scale"))


def _numbers(v) -> bool:
    """Whether ``v`` is a non-empty (nested) list of finite JSON numbers (no bool, no
    text)."""
    if isinstance(v, list):
        return bool(v) and all(_numbers(x) for x in v)
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def fit_verdict_model(X, labels, columns, *, kind: str = "logistic",
                      C: float = 1.0, symmetric: bool = True) -> VerdictModel:
    """Fit the verdict model on labeled pairs (``labels`` in A / B / tie).

    ``kind="probs"``: nothing is fitted (``X`` holds p(A), p(B)[, p(tie)]).
    ``symmetric=False``: fitted on the pairs as given, so it may learn that the second
    system of the table's pairs is usually the better (e.g. pairs ordered by system name,
    the strongest system last) - valid (the map is fitted on the training share only) but
    no longer order-fair.
    """
    if kind == "probs":
        if len(columns) not in (2, 3):
            raise InputError("probability columns: give p(A), p(B) and optionally p(tie)")
        return VerdictModel("probs", list(columns))
    if kind != "logistic":
        raise InputError(f"verdict model {kind!r}: choose logistic or probs")
    from sklearn.linear_model import LogisticRegression

    X = np.asarray(X, float).reshape(len(X), -1)
    y = np.asarray(labels, dtype=object)
    # the pairs the other way round: features negated, A and B swapped (order-fair)
    flip = np.where(y == "A", "B", np.where(y == "B", "A", y))
    Xa, ya = (np.vstack([X, -X]), np.concatenate([y, flip])) if symmetric else (X, y)
    classes = [c for c in LABELS if (ya == c).any()]
    if len(classes) < 2:
        raise InputError("the labeled pairs hold one verdict only: nothing to learn")
    Z = np.column_stack([Xa, np.abs(Xa)])
    mean, scale = Z.mean(axis=0), Z.std(axis=0)
    scale[scale == 0] = 1.0
    m = LogisticRegression(C=C, max_iter=1000)
    m.fit((Z - mean) / scale, ya)
    order = [list(m.classes_).index(c) for c in classes]
    coef, icpt = m.coef_, m.intercept_
    if coef.shape[0] > 1:
        coef, icpt = coef[order], icpt[order]
    return VerdictModel("logistic", list(columns), classes, coef.tolist(), icpt.tolist(),
                        mean.tolist(), scale.tolist())


def conformity(P, y_idx, method: str = "lac") -> np.ndarray:
    """The conformity score (:data:`scoreband.conformal.scores.SET_SCORES`: ``lac`` or
    ``aps``) of label index ``y_idx`` (0 A, 1 B, 2 tie) under ``P`` (n, 3)."""
    return set_score(method).score(P, y_idx)


def prediction_sets(P, q, method: str = "lac", classes=LABELS) -> np.ndarray:
    """(n, 3) booleans: label j in the set of pair i (``q`` a number or (n,)). Labels
    outside ``classes`` (no tie verdicts in the labels) are never in a set."""
    live = np.array([c in classes for c in LABELS])
    return set_score(method).sets(P, q) & live[None, :]


def set_labels(sets) -> np.ndarray:
    """Each set as text: ``A``, ``A|tie``, ... (empty for an empty set)."""
    sets = np.asarray(sets, bool)
    return np.array(["|".join(c for c, b in zip(LABELS, row, strict=True) if b)
                     for row in sets], dtype=object)
