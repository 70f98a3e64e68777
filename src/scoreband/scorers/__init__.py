"""Scorers: quantile heads, losses, training, MC dropout and the scorer facade."""

from scoreband.scorers.heads import ChainedQuantileHead, PointHead, UnconstrainedQuantileHead
from scoreband.scorers.losses import centered_interval_loss, interval_score, pinball_loss

__all__ = ["PointHead", "ChainedQuantileHead", "UnconstrainedQuantileHead",
           "interval_score", "centered_interval_loss", "pinball_loss"]
