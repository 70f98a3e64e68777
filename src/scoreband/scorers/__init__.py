"""Scorers: quantile heads, losses, training, MC dropout and the scorer facade."""

from scoreband.scorers.heads import ChainedQuantileHead, PointHead, UnconstrainedQuantileHead
from scoreband.scorers.losses import centered_interval_loss, interval_score, pinball_loss

__all__ = ["PointHead", "ChainedQuantileHead", "UnconstrainedQuantileHead",
           "interval_score", "centered_interval_loss", "pinball_loss", "load_scorer"]


def load_scorer(source="embedded:default", **kw):
    """Any trained scorer by one call: ``embedded:default`` (the bundled model) or a folder
    written by ``scoreband train`` (the embedded kind, or heads on a registered backbone;
    ``device`` / ``dtype`` apply to the latter). Every scorer has ``predict(images, texts)``
    returning :class:`~scoreband.records.Predictions` on [0, 1] and a ``fingerprint``."""
    from pathlib import Path

    from scoreband.scorers.scoring import model_format

    if Path(str(source)).is_dir() and model_format(source) == "scoreband.backbone-scorer":
        from scoreband.scorers.backbone_scorer import BackboneScorer

        return BackboneScorer.load(source, **kw)
    from scoreband.scorers.model import QuantileScorer

    return QuantileScorer.load(source)
