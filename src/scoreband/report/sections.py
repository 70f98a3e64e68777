"""Which results documents the HTML report renders, and which module renders each.

Every kind of results file (``evaluate --out``, a study's ``results.json``, ``systems``,
``pairwise-systems``, a triage rule) is one line of :data:`KINDS`: its name (the document's
``study`` key, or a marker for the documents that have none), one line of help, and the
module that owns its section. That module defines ``REPORT_SECTION``, a
:class:`ReportSection`: the function that turns a document into a section, the terms the
section uses and the model of the keys it reads. The report (:mod:`scoreband.report.html`)
only iterates this registry; it knows no format. Adding a study is its module (with its
``REPORT_SECTION``) and one :func:`register_kind` line in :mod:`scoreband.report_kinds` (the
face part, loaded by ``import scoreband``: the report names no study or rule module itself).
Modules are imported only when a document of their kind is rendered or checked.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

from scoreband.registry import Registry

__all__ = ["ReportSection", "KINDS", "register_kind", "kind_of", "section_of", "kinds_help"]


@dataclass(frozen=True)
class ReportSection:
    """What one kind of results document brings to the report.

    build : ``doc -> {"title", "verdict", "blocks"}`` (blocks from
        :mod:`scoreband.report.blocks`)
    definitions : ``(term, meaning)`` pairs the section uses, added to the report's glossary
    schema : ``() -> pydantic model`` of the keys ``build`` reads (strict types; every other
        key allowed), checked before a file a user hands the report is rendered; None: none
    """

    build: Callable[[dict], dict]
    definitions: Sequence[tuple[str, str]] = ()
    schema: Callable[[], type] | None = None


#: results kinds by name, each with the module owning its section (``info["module"]``) and,
#: for documents without a ``study`` key, how to recognise them (``info["marker"]``: a
#: ``{key: value}`` the document holds, or ``info["keys"]``: keys it has)
KINDS = Registry("results kind")


def register_kind(name: str, module: str, help: str, *, marker: dict | None = None,
                  keys: tuple[str, ...] = ()) -> None:
    """Add a results kind whose section ``module.REPORT_SECTION`` renders."""
    KINDS.register(name, help=help, factory=lambda: _load(module), module=module,
                   marker=marker or {}, keys=tuple(keys))


@cache
def _load(module: str) -> ReportSection:
    section = getattr(importlib.import_module(module), "REPORT_SECTION", None)
    if not isinstance(section, ReportSection):
        raise TypeError(f"{module} defines no REPORT_SECTION (a ReportSection)")
    return section


def section_of(kind: str) -> ReportSection:
    """The :class:`ReportSection` of a registered kind (its module imported on first use)."""
    return KINDS.create(kind)


def kinds_help() -> str:
    """The kinds as a reader names them: ``evaluate, demo, ... or a triage rule``."""
    names = [e.help for e in KINDS.entries()]
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def kind_of(doc) -> str:
    """Which kind a results document is: a registered marker, else its ``study`` key, else
    the keys a kind without one has; a ValueError naming the kinds otherwise."""
    what = f"not a scoreband results file ({kinds_help()})"
    if isinstance(doc, dict):
        for e in KINDS.entries():
            if e.info["marker"] and all(doc.get(k) == v for k, v in e.info["marker"].items()):
                return e.name
    if not isinstance(doc, dict):
        raise ValueError(f"{what}: a JSON {_json_type(doc)}, where a results file is an "
                         "object")
    study = doc.get("study")
    if study:
        if not isinstance(study, str) or study not in KINDS.names():
            raise ValueError(f"{what}: its key 'study' is {str(study)[:60]!r}")
        return study
    for e in KINDS.entries():
        if e.info["keys"] and all(k in doc for k in e.info["keys"]):
            return e.name
    raise ValueError(what)


def _json_type(v) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null",
            int: "number", float: "number"}.get(type(v), type(v).__name__)
