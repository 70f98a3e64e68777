"""Scorers: the one scorer (a backbone and a head set), quantile heads, losses, training
and MC dropout."""

from scoreband.scorers.heads import ChainedQuantileHead, PointHead, UnconstrainedQuantileHead
from scoreband.scorers.losses import centered_interval_loss, interval_score, pinball_loss

__all__ = ["PointHead", "ChainedQuantileHead", "UnconstrainedQuantileHead",
           "interval_score", "centered_interval_loss", "pinball_loss", "load_scorer"]


def load_scorer(source="embedded:default", **kw):
    """Any trained scorer by one call: ``embedded:default`` (the bundled model) or a folder
    written by ``scoreband train`` (``device`` / ``dtype`` apply to a registered backbone).
    Returns a :class:`~scoreband.scorers.scorer.Scorer`: ``predict(images, texts)`` gives
    :class:`~scoreband.datatypes.Predictions` on [0, 1]; ``fingerprint`` names its weights."""
    from scoreband.scorers.scorer import Scorer  # torch loads with the scorer, not here

    return Scorer.load(source, **kw)
