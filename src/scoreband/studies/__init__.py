"""Studies: the demo, the judge study, the round-trip study and the stress study.

Every study has one shape: a config (keyword arguments of its ``run``) -> ``run(...)`` -> a
:class:`~scoreband.report.result.StudyResult` holding the numbers (``doc``, JSON-ready), their
markdown and the figures to draw; ``result.write(out_dir)`` writes ``results.json``,
``results.md``, the figures and ``report.html``. Each study's module also renders its own
section of the HTML report (``REPORT_SECTION``, named by one line of
:mod:`scoreband.report.sections`). :mod:`scoreband.evaluation` holds the repeated-split
evaluation they share.
"""

from scoreband.report.result import StudyResult

__all__ = ["StudyResult"]
