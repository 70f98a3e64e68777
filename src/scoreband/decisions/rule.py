"""One base for every decision rule: a rule is fitted on arrays, decides a table's rows on
the row engine, saves as a JSON file whose ``format`` names its kind, and is read back by
one :func:`load_rule` that dispatches on that ``format`` (:data:`RULES`).

A rule kind is a :class:`Rule` subclass registered with :func:`register_rule`; it sets

* ``format`` / ``version`` (the file's ``format`` and ``format_version``), ``what`` (its name
  in messages) and ``refit`` (the command that writes one);
* ``error_column`` (why a row could not be judged) and :meth:`Rule.outputs` (the columns
  it adds and the value of a row without one);
* :meth:`Rule.to_dict` / :meth:`Rule.from_dict` (the file) and :meth:`Rule.decide_frame`
  (a chunk's columns, row errors, counts and warnings).

The one row-engine stage :class:`RuleStage` applies any rule (``triage --apply``,
``apply --calibrator RULE``, ``rule.apply(df)``); :func:`rule_stage` builds it from the rule
file (the form a Ray actor gets).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from scoreband.decisions.rulefile import check_rule_doc
from scoreband.engine.rows import Stage
from scoreband.errors import InputError, RowError
from scoreband.registry import Registry

__all__ = ["Rule", "RULES", "registered", "register_rule", "load_rule", "rule_format", "RuleStage",
           "rule_stage", "Decision"]

#: rule kinds by the ``format`` their files carry
RULES = Registry("rule format")
#: the modules whose import registers the built-in kinds (imported before a file is read)
BUILTIN_RULES = ("scoreband.decisions.triage", "scoreband.pairwise.selective",
                 "scoreband.decisions.cascade_rule", "scoreband.decisions.score_cascade")


def registered() -> Registry:
    """:data:`RULES` with the built-in kinds in it."""
    import importlib

    for module in BUILTIN_RULES:
        importlib.import_module(module)
    return RULES


def register_rule(cls: type[Rule]) -> type[Rule]:
    """Class decorator: files of ``cls.format`` are read by ``cls.from_dict``."""
    RULES.register(cls.format, help=cls.what, factory=cls.from_dict, cls=cls)
    return cls


@dataclass
class Decision:
    """What a rule decided on one chunk: its output ``columns`` (the error column among
    them), the chunk's row ``errors`` (positions in the chunk), the rows ``judged``, its
    ``counts`` (trusted / decided / out of domain ...) and ``warnings``."""

    columns: dict[str, np.ndarray]
    errors: list[RowError]
    judged: int
    counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class Rule:
    """A fitted decision rule (see the module docstring for what a kind sets)."""

    format: ClassVar[str] = ""
    version: ClassVar[int] = 1
    what: ClassVar[str] = "rule"
    #: the kind's short name (``triage``, ``pairwise``, ``cascade``): its messages
    kind: ClassVar[str] = "rule"
    #: the row job (:data:`scoreband.jobs.JOBS`) that applies a rule of this kind
    job: ClassVar[str] = ""
    refit: ClassVar[str] = ""
    error_column: ClassVar[str] = "error"
    #: the row engine's progress text
    label: ClassVar[str] = "deciding"

    # ------------------------------------------------------------ what a kind implements
    def outputs(self) -> dict[str, Any]:
        """Added column -> the value of a row that gets none."""
        raise NotImplementedError

    def decide_frame(self, df: pd.DataFrame, offset: int = 0) -> Decision:
        """The rule's columns for every row of the chunk ``df`` (row ``offset`` of the
        table first); a bad row gets its reason in :attr:`error_column`, never an
        exception."""
        raise NotImplementedError

    def to_dict(self) -> dict:
        raise NotImplementedError

    @classmethod
    def from_dict(cls, doc: dict, where: str = "the rule") -> Rule:
        raise NotImplementedError

    def components(self, source: Path | None = None) -> dict:
        """What the output's provenance records of this rule (read from ``source``)."""
        return {}

    # ------------------------------------------------------------ shared
    def head(self) -> dict:
        """The keys every rule file starts with."""
        from scoreband._version import __version__

        return {"format": self.format, "format_version": self.version,
                "scoreband_version": __version__}

    def save(self, path) -> Path:
        """Write the rule as JSON (:func:`load_rule` reads it back)."""
        from scoreband.json_io import write_json

        write_json(path, self.to_dict())
        return Path(path)

    def apply(self, table, on_warning=None) -> pd.DataFrame:
        """Every row and column of ``table`` (a DataFrame, or a path: its cells read as
        text) with the rule's columns added, through the one :class:`RuleStage`; the row
        errors are kept in ``last_errors``, the warnings in ``last_warnings`` (each also
        sent to ``on_warning``)."""
        from scoreband.engine.rows import run_rows
        from scoreband.tables import read_table

        df = read_table(table, text=True) if isinstance(table, (str, Path)) else table
        stage = RuleStage(self, on_warning=on_warning)
        out = run_rows(df, stage).table
        self.last_errors, self.last_warnings = stage.errors, stage.warnings
        return out

    def predict(self, table) -> np.ndarray:
        """The rule's decision per row of ``table`` (bool (n,): trusted / decided)."""
        out = self.apply(table)
        return out[self.decision_column].to_numpy(dtype=bool)

    decision_column: ClassVar[str] = "trusted"


def rule_format(path) -> str | None:
    """The ``format`` of a rule file at ``path`` when it is a registered rule, else None
    (how ``apply --calibrator`` tells a rule from a calibrator; a FIFO or a device is
    never opened)."""
    try:
        if not Path(path).is_file():
            return None
        with open(path, "rb") as f:
            fmt = json.loads(f.read(1 << 22)).get("format")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None  # the calibrator reader says what is wrong
    return fmt if isinstance(fmt, str) and fmt in registered() else None


def load_rule(path_or_doc, where: str | None = None) -> Rule:
    """The rule of a rule file (read once) or of its parsed document: the class registered
    for its ``format`` reads it after :func:`scoreband.decisions.rulefile.check_rule_doc`;
    another format or version, or a damaged key, is an :class:`InputError` naming the file
    and the key."""
    if isinstance(path_or_doc, Rule):
        return path_or_doc
    if isinstance(path_or_doc, (str, Path)):
        from scoreband.json_io import read_json

        doc = read_json(path_or_doc, what="rule",
                        missing="write one with `scoreband triage LABELED ... --out rule.json`",
                        fix="is it a rule written by `scoreband triage --out`?")
        where = where or str(path_or_doc)
    else:
        doc, where = path_or_doc, where or "the rule"
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if not (isinstance(fmt, str) and fmt in registered()):
        known = ", ".join(repr(e.name) for e in RULES.entries())
        raise InputError(f"{where} is not a scoreband rule: its `format` is {fmt!r}, not one "
                         f"of {known}; write one with `scoreband triage LABELED ... --out "
                         "rule.json`")
    cls = RULES.resolve(fmt)[0].info["cls"]
    check_rule_doc(doc, where, fmt=cls.format, version=cls.version, what=cls.what,
                   refit=cls.refit)
    return cls.from_dict(doc, where)


class RuleStage(Stage):
    """Any rule's decisions on a table's rows, a whole chunk at a time: the row engine's
    one stage for rules, so a CSV / TSV table's cells come back byte for byte and a file is
    streamed chunk by chunk like every row command's. Rows are independent: one row alone,
    a chunk or the whole table give the same row. After the run: ``errors`` (positions in
    the whole table), ``warnings`` (each once, also to ``on_warning``), ``judged`` and the
    rule's counts (``trusted`` or ``decided``, ``out_of_domain``)."""

    vectorized = True

    def __init__(self, rule, *, on_warning=None, base_dir=None, source=None):
        super().__init__(base_dir)
        self.source = Path(rule) if isinstance(rule, (str, Path)) else \
            (Path(source) if source is not None else None)
        self.rule = load_rule(rule)
        self.label = self.rule.label
        self.error_column = self.rule.error_column
        self.outputs = self.rule.outputs()
        self.on_warning = on_warning
        self.warnings: list[str] = []
        self.errors: list[RowError] = []
        self.judged = 0
        self.counts: dict[str, int] = {}

    def __getattr__(self, name: str):  # stage.trusted, stage.decided, stage.out_of_domain
        counts = self.__dict__.get("counts", {})
        if name in counts:
            return counts[name]
        raise AttributeError(name)

    @property
    def calibrator(self):  # the output's provenance hashes no calibrator file
        return None

    def frame(self, df: pd.DataFrame) -> dict[str, np.ndarray]:
        d = self.rule.decide_frame(df, self.offset)
        for message in d.warnings:
            if message not in self.warnings:
                self.warnings.append(message)
                if self.on_warning is not None:
                    self.on_warning(message)
        self.errors.extend(replace(e, position=e.position + self.offset) for e in d.errors)
        self.judged += d.judged
        for k, v in d.counts.items():
            self.counts[k] = self.counts.get(k, 0) + int(v)
        return d.columns

    def components(self) -> dict:
        return self.rule.components(self.source)

    def summary(self) -> dict:
        return {"judged": self.judged, **self.counts, "errors": len(self.errors)}


def rule_stage(rule, on_warning=None, base_dir=None, source=None) -> RuleStage:
    """The stage from plain values (the rule file, the form a Ray actor gets), or from a
    rule already read (``source``: the file it was read from, for the provenance)."""
    return RuleStage(rule, on_warning=on_warning, base_dir=base_dir, source=source)
