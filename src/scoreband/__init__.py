"""scoreband: calibrated uncertainty bands around image-text evaluation scores."""

__version__ = "0.1.0"

from scoreband.records import Band, Predictions, Record, Scale  # noqa: E402

__all__ = ["Band", "Predictions", "Record", "Scale", "__version__"]
