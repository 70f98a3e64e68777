"""The option checks that decisions, systems and the pairwise commands share: which options
must come together, which exclude each other, which a mode needs. One message shape for all:
the flags as typed on the command line and what to give instead."""

from __future__ import annotations

from scoreband.cli._app import fail

__all__ = ["need", "both_or_neither", "exactly_one", "only_with"]


def need(what: str, **flags) -> None:
    """Fail unless every flag is given: ``need("fitting a rule", out=out)`` ->
    "fitting a rule needs --out". Keyword names are the flags with ``-`` written ``_``."""
    missing = [_flag(k) for k, v in flags.items() if v is None or v == []]
    if missing:
        fail(f"{what} needs {', '.join(missing)}")


def both_or_neither(**flags) -> None:
    """Two options that only make sense together (``--apply`` and ``--apply-out``)."""
    (a, va), (b, vb) = flags.items()
    if (va is None) != (vb is None):
        fail(f"give both {_flag(a)} and {_flag(b)}, or neither")


def exactly_one(what: str, **flags) -> None:
    """Options that replace each other: exactly one must be given."""
    given = [k for k, v in flags.items() if v is not None and v != []]
    if len(given) != 1:
        names = " or ".join(_flag(k) for k in flags)
        fail(f"{what}: give {names}" + (" (one of them, not several)" if given else ""))


def only_with(mode: str, **flags) -> None:
    """Options read only in another mode: refused rather than silently ignored."""
    given = [_flag(k) for k, v in flags.items() if v not in (None, False, [])]
    if given:
        fail(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} read only {mode}")


def _flag(name: str) -> str:
    return "--" + name.rstrip("_").replace("_", "-")
