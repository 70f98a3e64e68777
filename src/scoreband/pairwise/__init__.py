"""Pairwise judging (SPEC section 13): pair tables from score tables, calibrated verdicts
(conformal prediction sets over {A, B, tie} and selective verdicts by Learn-then-Test), the
pairwise judge prompt and its verdict-token log-probs in both orders, and rankings of systems
from judge verdicts rectified by a few human preferences.

Labels are the strings ``"A"`` (the first system of the pair is better), ``"B"`` and
``"tie"``.
"""

from scoreband.pairwise.pairs import LABELS, make_pairs, pair_labels

__all__ = ["LABELS", "make_pairs", "pair_labels"]
