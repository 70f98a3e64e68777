"""scoreband: calibrated uncertainty bands around image-text evaluation scores.

The functions of :mod:`scoreband.api`, here too (loaded on first use, so that ``import
scoreband`` stays light; ``help(scoreband.calibrate)`` shows each):

* ``evaluate(table, **options)`` - coverage, width and agreement before and after calibration,
  over repeated calibration / test splits
* ``calibrate(table, **options)`` - a fitted :class:`~scoreband.api.Calibration`
  (``.predict(new_table)``, ``.save(path)``)
* ``apply(table, calibration)`` - bands for every row (what ``Calibration.predict`` does)
* ``recalibrate(calibration, labeled_table)`` - the conformal step redone on a new domain
* ``systems(table, system_col=, score=, target=, scale=)`` - which system is better
* ``propose_labels(table, system_col=, n_labels=)`` - which rows to send to humans
* ``monitor(calibration_or_rule, stream, target=, false_alarm=)`` - an anytime-valid alarm
  for the row where a calibrator's misses (a triage rule's trusted errors) exceed its promise
* ``score(table, out)``, ``judge(table, out, judge=)`` - the row jobs of the commands of
  the same names (:mod:`scoreband.jobs`; the round trip's is ``scoreband.api.roundtrip``:
  ``scoreband.roundtrip`` is the round-trip package)
* ``read_table(path)``, ``example_table()``, ``CalibrationConfig``

One calling convention: the options are keywords naming the columns (``target=``,
``ratings=``, ``scale=``, ``median=``, ``lo=``, ``hi=``, ``features=``, ``groups=`` ...) and
how to calibrate (``method=``, ``alpha=``, ``mondrian=``, ``mondrian_by=`` ...)::

    import scoreband as sb
    fit = sb.calibrate(df, target="human", scale=(1, 5), median="score", method="split")
    banded = fit.predict(new_df).table

The calibrators work on arrays as estimators (``fit`` / ``predict``):
:mod:`scoreband.conformal`.
"""

import importlib

import scoreband.report_kinds  # noqa: E402,F401 - the report's results kinds, one line each
from scoreband._version import __version__  # noqa: E402
from scoreband.datatypes import Band, Predictions, Scale  # noqa: E402

_API = ("evaluate", "calibrate", "calibration_curve", "recalibrate", "apply", "systems",
        "propose_labels", "read_table", "example_table", "CalibrationConfig", "Calibration",
        "score", "judge")

#: the monitor's face (:mod:`scoreband.decisions.monitor`), loaded on first use as well
_MONITOR = ("monitor", "MonitorResult")

__all__ = ["Band", "Predictions", "Scale", "__version__", *_API, *_MONITOR]


def __getattr__(name):
    if name in _API:  # PEP 562: the facade loads scoreband.api on first use
        return getattr(importlib.import_module("scoreband.api"), name)
    if name in _MONITOR:
        return getattr(importlib.import_module("scoreband.decisions.monitor"), name)
    raise AttributeError(f"module 'scoreband' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
