"""scoreband: calibrated uncertainty bands around image-text evaluation scores.

The table functions of :mod:`scoreband.api` are here too (loaded on first use, so that
``import scoreband`` stays light): ``scoreband.evaluate(df, columns, config)``,
``scoreband.calibrate(...)``, ``scoreband.apply(df, calibration)``, ``scoreband.systems(df,
...)`` (which system is better), ``scoreband.read_table``.
"""

from scoreband._version import __version__  # noqa: E402
from scoreband.datatypes import Band, Predictions, Scale  # noqa: E402

_API = ("evaluate", "calibrate", "recalibrate", "apply", "systems", "propose_labels", "read_table",
        "example_table", "CalibrationConfig")

__all__ = ["Band", "Predictions", "Scale", "__version__", *_API]


def __getattr__(name):
    if name in _API:  # PEP 562: the facade loads scoreband.api on first use
        import importlib

        return getattr(importlib.import_module("scoreband.api"), name)
    if name == "Record":  # deprecated: nothing builds one; goes in the next release
        import warnings

        from scoreband.datatypes import Record

        warnings.warn("scoreband.Record is deprecated (tables are the input); it goes in the "
                      "next release", DeprecationWarning, stacklevel=2)
        return Record
    raise AttributeError(f"module 'scoreband' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
