"""What every decision rule file shares: the check of its ``format`` / ``format_version``,
keys read so that a damaged one is named, and the domain of the inputs it was fitted on.

A rule is a JSON file a user hands back (``triage --rule``, ``apply --calibrator RULE``,
``report``): it may be of another version, edited or cut. :func:`check_rule_doc` refuses
another kind or version naming it and the fix; :func:`read_key` reads one key and names it
(and the file) when it is missing or of the wrong type, never an ``unexpected TypeError``.

A rule learned how a score relates to the human one over the scores it saw; applied to the
same judge's scores on another scale (0-100 where it learned 1-5) it trusts rows it has
no grounds to trust. :func:`rule_domain` records the range of each input the rule reads
(:func:`scoreband.domain.fit_domain`) and :func:`rule_outside` finds the rows outside it at
apply: a table mostly outside is refused (:func:`scoreband.domain.check_domain`), a
few rows outside (a table drawn like the labeled rows puts a fresh row outside the range
of n rows with probability about 2 / (n + 1)) are flagged, never refused.

>>> check_rule_doc({"format": "scoreband-triage-rule", "format_version": 99}, "r.json",
...                fmt="scoreband-triage-rule", version=1, what="triage rule",
...                refit="scoreband triage LABELED ... --out r.json")
Traceback (most recent call last):
...
scoreband.errors.InputError: r.json is a triage rule of format_version 99; this scoreband \
reads version 1 only: fit the rule again with this scoreband (scoreband triage LABELED ... \
--out r.json)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from scoreband.errors import InputError

__all__ = ["check_rule_doc", "read_key", "rule_domain", "rule_outside", "as_float",
           "as_mapping"]

_MISSING = object()
#: the triage rule file's ``format_version`` (decisions.triage writes it, the report's
#: check of a rule file reads it: here so that neither imports the other)
TRIAGE_RULE_VERSION = 1


def check_rule_doc(doc: Any, where: str, *, fmt: str, version: int, what: str,
                   refit: str) -> dict:
    """``doc`` when it is a rule of format ``fmt`` and ``format_version`` ``version``; else
    an :class:`InputError` naming ``where`` (the file), what it holds and the fix (``refit``:
    the command that writes such a rule). The one check of every rule file (triage,
    pairwise)."""
    if not isinstance(doc, dict):
        raise InputError(f"{where} holds a JSON {type(doc).__name__}, not a scoreband {what} "
                         f"(an object with format {fmt!r}); write one with `{refit}`")
    got = doc.get("format")
    if got != fmt:
        raise InputError(f"{where} is not a scoreband {what}: its `format` is {got!r}, not "
                         f"{fmt!r}; write one with `{refit}`")
    v = doc.get("format_version", _MISSING)
    if v is _MISSING:
        raise InputError(f"{where} has no `format_version` (this scoreband reads {what}s of "
                         f"version {version}): fit the rule again with `{refit}`")
    if type(v) is not int or v != version:
        raise InputError(f"{where} is a {what} of format_version {v!r}; this scoreband reads "
                         f"version {version} only: fit the rule again with this scoreband "
                         f"({refit})")
    return doc


def read_key(doc: dict, key: str, parse: Callable[[Any], Any], where: str, *,
             default: Any = _MISSING, fix: str = "fit the rule again") -> Any:
    """``parse(doc[key])``; a missing key (without ``default``) or a value ``parse`` refuses
    is an :class:`InputError` naming ``where``, the key (dotted: ``groups.a.threshold``) and
    what it held. ``key`` may be dotted to reach into nested objects."""
    cur: Any = doc
    parts = key.split(".")
    for i, part in enumerate(parts):
        if not isinstance(cur, dict):
            raise InputError(f"{where}: key {'.'.join(parts[:i])!r} holds "
                             f"{_show(cur)}, not an object; {fix}")
        if part not in cur:
            if default is not _MISSING:
                return default
            raise InputError(f"{where}: key {key!r} is missing; {fix}")
        cur = cur[part]
    try:
        return parse(cur)
    except InputError as e:
        raise InputError(f"{where}: key {key!r}: {e}; {fix}") from None
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise InputError(f"{where}: key {key!r} holds {_show(cur)}, which cannot be read "
                         f"({type(e).__name__}: {e}); {fix}") from None


def _show(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def as_float(v: Any, *, finite: bool = False) -> float:
    """A JSON number (never a bool or a string; ``"-Infinity"`` and the like as JSON writes
    non-finite floats are accepted unless ``finite``)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise TypeError(f"expected a number, got {type(v).__name__}")
    x = float(v)  # a string that is not a number raises ValueError
    if isinstance(v, str) and v.strip().lower() not in ("infinity", "-infinity", "inf",
                                                         "-inf", "nan"):
        raise TypeError("expected a number, got a string")
    if finite and not math.isfinite(x):
        raise ValueError(f"expected a finite number, got {v!r}")
    return x


def as_mapping(v: Any) -> dict:
    if not isinstance(v, dict):
        raise TypeError(f"expected an object, got {type(v).__name__}")
    return v


# ------------------------------------------------------------------ the domain
def _pred(score, features):
    from scoreband.datatypes import Predictions

    return Predictions(median=np.asarray(score, float),
                       features=None if features is None else np.asarray(features, float))


def rule_domain(score, features=None, names: dict | None = None) -> dict:
    """The range of each input a rule reads over its labeled rows (``score`` (n,), then the
    columns of ``features`` (n, d)): :func:`scoreband.domain.fit_domain`'s document
    (``names``: input -> column, for messages)."""
    from scoreband.domain import fit_domain

    return fit_domain(_pred(score, features), None, names)


def rule_outside(domain: dict | None, score, features=None, *, what: str
                 ) -> tuple[np.ndarray, str | None]:
    """The rows outside ``domain`` and a note naming the input and its range (None when
    none is); raises an :class:`InputError` when most rows are (a table on another scale:
    :func:`scoreband.domain.check_domain`). ``what`` starts the messages."""
    from scoreband.domain import check_domain, describe, outside

    if not domain or len(np.atleast_1d(score)) == 0:
        return np.zeros(len(np.atleast_1d(score)), dtype=bool), None
    pred = _pred(score, features)
    try:  # the one rule of when a table is refused: the calibrators'
        mask, _ = check_domain(domain, pred, what)
    except InputError:
        mask, counts = outside(domain, pred)
        raise InputError(
            f"{what}: {int(mask.sum())} of {len(mask)} rows lie outside the range of the rows "
            f"the rule was fitted on, {describe(domain, counts, len(mask))}. The table is on "
            "another scale or comes from another judge or scorer: put its scores on the "
            "scale the rule was fitted on, or fit a rule on labeled rows like these") from None
    if not mask.any():
        return mask, None
    _, counts = outside(domain, pred)
    return mask, (f"{what}: {int(mask.sum())} of {len(mask)} rows lie outside the range of "
                  f"the rows the rule was fitted on, {describe(domain, counts, len(mask))}: "
                  "they are escalated (the rule's guarantee covers rows drawn like its "
                  "labeled ones)")
