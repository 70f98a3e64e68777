"""The pieces a decision rule's guarantee is built from, kept apart (as MAPIE's
``risk_control``: a risk x a family-wise-error procedure x the controller that fits):

* a **loss** per labeled item: :class:`ToleranceLoss` (triage: the mapped score is off the
  human one by more than a tolerance) and :class:`VerdictLoss` (pairwise: the verdict is not
  the human preference);
* a **procedure** that picks the threshold on the calibration items with
  ``P(risk among accepted <= alpha) >= 1 - delta``: :class:`FixedSequence` (Learn-then-Test's
  fixed-sequence binomial tests, the grid and the start read from a training share) and
  :class:`LabelFreeSequence` (the grid and the start read from uncertainties no label
  chose, so every labeled item calibrates: :func:`label_free_threshold`);
* the **controller** is each rule's fit (:func:`scoreband.decisions.triage.fit_triage_arrays`,
  :func:`scoreband.pairwise.selective.fit_pairwise_arrays`), which orders the items by an
  uncertainty and hands the procedure their losses.

The maths stays in the pure functions of :mod:`scoreband.decisions.ltt`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scoreband.decisions.ltt import (
    TOP_BLOCK_RESOLUTION,
    accepted_counts,
    choose_start,
    label_free_start,
    ltt_threshold,
    min_rejectable,
    threshold_grid,
)

__all__ = ["ToleranceLoss", "VerdictLoss", "FixedSequence", "LabelFreeSequence",
           "label_free_threshold", "LOSS_SLACK", "LABEL_FREE_START_SHARE",
           "LABEL_FREE_GRID_STEP"]

#: ``|m - y| > tol + LOSS_SLACK`` is a miss: a score exactly ``tol`` away is within it even
#: when the targets are thirds stored in floating point
LOSS_SLACK = 1e-9


@dataclass(frozen=True)
class ToleranceLoss:
    """1 where the mapped score ``m`` is off the target ``y`` by more than ``tolerance``."""

    tolerance: float

    def __call__(self, m, y) -> np.ndarray:
        d = np.abs(np.asarray(m, float) - np.asarray(y, float))
        return (d > self.tolerance + LOSS_SLACK).astype(float)


@dataclass(frozen=True)
class VerdictLoss:
    """1 where the verdict is not the human preference."""

    def __call__(self, verdict, label) -> np.ndarray:
        return (np.asarray(verdict, dtype=object) != np.asarray(label, dtype=object)
                ).astype(float)


@dataclass(frozen=True)
class FixedSequence:
    """Fixed-sequence binomial tests over a grid of thresholds: the grid is
    ``grid_size`` quantiles of the training share's uncertainties (default one per 20
    calibration items, 5 to 200: a fine grid over few calibration items stops the
    sequence at the first unlucky step), the start chosen by ``start``
    (:func:`scoreband.decisions.ltt.choose_start`) on the training share's curve."""

    start: str = "likely"
    grid_size: int | None = None

    def grid(self, u_train, n_cal: int) -> np.ndarray:
        size = int(self.grid_size) if self.grid_size else int(np.clip(n_cal // 20, 5, 200))
        return threshold_grid(u_train, size)

    def first(self, u_train, loss_train, grid, n_cal: int, alpha: float,
              delta: float) -> int:
        """Where the sequence starts, from the training share's accepted counts."""
        n, k = accepted_counts(u_train, loss_train, grid)
        return choose_start(n / max(len(u_train), 1), n, k, n_cal, alpha, delta,
                            rule=self.start)

    def control(self, u_cal, loss_cal, grid, alpha: float, delta: float,
                start: int) -> dict:
        """:func:`scoreband.decisions.ltt.ltt_threshold` on the calibration items."""
        return ltt_threshold(u_cal, loss_cal, grid, alpha, delta, start)


#: where the label-free fixed sequence starts at the earliest: the first threshold accepting
#: at least this share of the calibration pairs (and at least enough for a test to reject).
#: The first tests, on the few most confident pairs, are the sequence's weakest link: a test
#: on 22 pairs rejects (alpha = delta = 0.1) only with no error at all, so where even the
#: most confident pairs err a few percent of the time one early error stops the sequence.
#: Chosen on pair tables before any label of the rule's own calibration draw is read, so the
#: guarantee is untouched (benchmarks/RESULTS.md, round 12: THumB 0.36 -> 0.40 decided, a
#: PASCAL-50S-shaped table 0.67 -> 0.71, the simulated world 0.74 -> 0.78 at 400 labels).
LABEL_FREE_START_SHARE = 0.2
#: the label-free grid: one threshold per this many calibration pairs (5 to 400 thresholds)
LABEL_FREE_GRID_STEP = 5


@dataclass(frozen=True)
class LabelFreeSequence:
    """The fixed sequence where the uncertainties and the verdicts never looked at a label
    (:func:`label_free_threshold`); ``stated``: ``u`` is the error the judge states."""

    grid_size: int | None = None
    stated: bool = False

    def control(self, u, loss, alpha: float, delta: float) -> dict:
        return label_free_threshold(u, loss, alpha, delta, self.grid_size,
                                    stated=self.stated)


def label_free_threshold(u, loss, alpha: float, delta: float,
                         grid_size: int | None = None,
                         start_share: float = LABEL_FREE_START_SHARE,
                         stated: bool = False) -> dict:
    """The Learn-then-Test threshold where the uncertainties ``u`` and the verdicts (whose
    ``loss`` is 1 when wrong) never looked at a label: every pair calibrates; the grid
    (``grid_size`` quantiles of ``u``; default one per :data:`LABEL_FREE_GRID_STEP` pairs,
    5 to 400) and the start are read from ``u`` alone:

    * ``stated=False`` (``u`` only orders the pairs, e.g. ``1 / (1 + |x|)``): the first
      threshold accepting at least ``start_share`` of the pairs and at least enough for a
      test to reject (:func:`scoreband.decisions.ltt.min_rejectable`);
    * ``stated=True`` (``u = 1 - max p``, the error the judge states): the pairs within
      :data:`scoreband.decisions.ltt.TOP_BLOCK_RESOLUTION` of the most confident enter as
      one block (the published rule's first test), and a second sequence starts where a
      test is predicted most likely to reject if the pairs erred as the judge states plus
      half the risk level (:func:`scoreband.decisions.ltt.label_free_start`): a judge
      whose probabilities pile up near 1 gets a test on the whole pile, which one
      confidently wrong pair does not stop. The two sequences share ``delta``, half each,
      joined into one chain (:func:`scoreband.decisions.ltt.chained_sequences`: a
      sequence that reaches the other's start goes on at the full ``delta``), so the
      guarantee is that of one fixed sequence.

    Returns :func:`scoreband.decisions.ltt.ltt_threshold`'s dict with ``grid`` and ``start``.

    >>> u = np.linspace(0.01, 1, 400); loss = (np.arange(400) % 20 == 0) & (u > 0.7)
    >>> res = label_free_threshold(u, loss, 0.1, 0.1)
    >>> float(res["threshold"]), int((u <= res["start_threshold"]).sum())
    (inf, 80)
    """
    u = np.asarray(u, float)
    if grid_size is None:
        grid_size = int(np.clip(len(u) // LABEL_FREE_GRID_STEP, 5, 400))
    grid = threshold_grid(u, grid_size, top_block=TOP_BLOCK_RESOLUTION if stated else 0.0)
    n_acc = np.searchsorted(np.sort(u), grid, side="right")
    need = max(min_rejectable(alpha, delta), int(math.ceil(start_share * len(u))))
    ok = np.flatnonzero(n_acc >= need)
    j0 = int(ok[0]) if len(ok) else len(grid) - 1
    starts = [j0]
    if stated:
        deep = label_free_start(u, grid, alpha, delta, min_share=start_share)
        if deep > j0:
            starts.append(deep)
    return {**ltt_threshold(u, loss, grid, alpha, delta, starts=starts), "grid": grid,
            "start_threshold": float(grid[j0])}
