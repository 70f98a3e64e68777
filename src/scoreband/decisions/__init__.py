"""Decisions from bands and scores: trust or escalate with a guaranteed risk (SPEC section 12).

>>> from scoreband.decisions import fit_triage, load_rule, Triage   # doctest: +SKIP

* :func:`fit_triage` (a table: a :class:`TriageResult`, its ``.rule``) / :func:`fit_triage_arrays` (arrays) fit a
  :class:`TriageRule`; ``rule.apply(df)`` adds ``triage_score``, ``triage_uncertainty``,
  ``trusted`` and ``triage_error`` to every row, ``rule.save(path)`` / :func:`load_rule`;
  :class:`Triage` is the estimator twin (``fit`` -> ``predict``).
* :mod:`scoreband.decisions.ltt`: the Learn-then-Test maths (binomial p-values,
  fixed-sequence testing).
* :mod:`scoreband.decisions.maps`: the tolerance-aware map of a score onto the human scale.
* :mod:`scoreband.decisions.uncertainty`: the uncertainties a threshold may read.
* :func:`accepted_share` (for the demo) and :func:`triage_figure` / :func:`triage_html`
  (for the report).
"""

from __future__ import annotations

from scoreband.decisions.rule import load_rule
from scoreband.decisions.triage import (
    TRIAGE_COLUMNS,
    Triage,
    TriageResult,
    TriageRule,
    accepted_share,
    fit_triage,
    fit_triage_arrays,
)
from scoreband.decisions.uncertainty import UNCERTAINTIES, Signals

__all__ = ["Triage", "TriageRule", "TriageResult", "fit_triage", "fit_triage_arrays",
           "load_rule", "TRIAGE_COLUMNS", "UNCERTAINTIES", "Signals", "accepted_share",
           "triage_figure", "triage_html"]


def __getattr__(name):  # the report helpers load matplotlib: only when asked
    if name in ("triage_figure", "triage_html"):
        from scoreband.decisions import report

        return getattr(report, name)
    raise AttributeError(name)
