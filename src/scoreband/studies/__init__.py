"""Studies: the demo, the judge study, the round-trip study and the stress study.

Every study has one shape: a config (keyword arguments of its ``run``) -> ``run(...)`` -> a
:class:`~scoreband.studies.base.StudyResult` holding the numbers (``doc``, JSON-ready), their
markdown and the figures to draw; ``result.write(out_dir)`` writes ``results.json``,
``results.md`` and the figures. ``protocol`` holds the repeated-split evaluation they share.
"""

from scoreband.studies.base import StudyResult

__all__ = ["StudyResult"]
