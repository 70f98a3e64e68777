"""One small registry class behind every extension point.

Calibration methods, backbones, judges, generators and encoders are each a :class:`Registry`:
named entries, either exact names (``split``, ``embedded:default``) or prefixes that take an
argument (``hf:`` + a folder or hub id). The registry builds objects (:meth:`Registry.create`),
checks a name without building anything (:meth:`Registry.resolve`), lists the choices and
writes the help text the CLI shows, so a new entry is one ``register`` call and appears
everywhere at once. Factories import their heavy dependencies lazily.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

from scoreband.errors import InputError

__all__ = ["Registry", "Entry"]


@dataclass(frozen=True)
class Entry:
    """One registered implementation."""

    name: str  #: exact name (``split``) or prefix with its colon (``hf:``)
    help: str  #: one line for listings and the CLI's help
    factory: Callable | None = None  #: builds the object; prefixes get the argument first
    argument: str = ""  #: what follows a prefix, for help (``PATH_OR_ID``)
    info: dict = field(default_factory=dict)  #: extra facts (a backbone's kind ...)

    @property
    def is_prefix(self) -> bool:
        return self.name.endswith(":")

    @property
    def usage(self) -> str:
        return self.name + self.argument if self.is_prefix else self.name


class Registry:
    """Named implementations of one extension point (see the module docstring)."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Entry] = {}

    def register(self, name: str, *, help: str, factory: Callable | None = None,
                 argument: str = "", **info) -> Callable:
        """Add an entry; usable as a decorator on the factory."""
        def add(f):
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._entries[name] = Entry(name, help, f, argument, info)
            return f

        return add(factory) if factory is not None else add

    # ------------------------------------------------------------------ look-up
    def names(self) -> list[str]:
        """Entries as a user writes them (``split``, ``hf:PATH_OR_ID``), in registration order."""
        return [e.usage for e in self._entries.values()]

    def __iter__(self):
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[Entry]:
        return list(self._entries.values())

    def __contains__(self, spec: str) -> bool:
        try:
            self.resolve(spec)
        except InputError:
            return False
        return True

    def choices(self, sep: str = "; ") -> str:
        return sep.join(f"{e.usage} ({e.help})" for e in self._entries.values())

    def help_text(self, sep: str = " | ") -> str:
        """The choices on one line, for an option's help."""
        return sep.join(self.names())

    def resolve(self, spec: str) -> tuple[Entry, str]:
        """``(entry, argument)`` for a name; a clear error listing the choices otherwise."""
        if not isinstance(spec, str) or not spec:
            raise InputError(f"give a {self.kind}; choose one of {', '.join(self.names())}")
        if spec in self._entries and not self._entries[spec].is_prefix:
            return self._entries[spec], ""
        head, colon, rest = spec.partition(":")
        entry = self._entries.get(head + colon) if colon else None
        if entry is None or not entry.is_prefix:
            exact = [e.name for e in self._entries.values()
                     if not e.is_prefix and e.name.startswith(head + colon)] if colon else []
            if exact:
                raise InputError(f"unknown {self.kind} {spec!r}; available: {', '.join(exact)}")
            raise InputError(f"unknown {self.kind} {spec!r}; choose one of "
                             f"{', '.join(self.names())}")
        if not rest:
            raise InputError(f"{self.kind} {spec!r} names nothing after {entry.name!r}: "
                             f"write {entry.usage}")
        return entry, rest

    def create(self, spec: str, *args, offered: dict | None = None, **kw):
        """Build the object ``spec`` names with ``args`` and ``kw``; a keyword the entry's
        factory does not take is an error naming it and what the entry takes.

        ``offered``: options a caller gives every entry alike (a command's ``--device``,
        ``--base-url`` ...): each entry gets those it takes, the others are left out on
        purpose - offered, not asked for."""
        entry, rest = self.resolve(spec)
        if entry.factory is None:
            raise InputError(f"{self.kind} {spec!r} cannot be built directly")
        f = entry.factory
        params = inspect.signature(f).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        names = [k for k, p in params.items()
                 if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
        unknown = [k for k in kw if k not in params and not takes_any]
        if unknown:
            raise InputError(f"{self.kind} {spec!r} takes no {', '.join(map(repr, unknown))}; "
                             f"it takes: {', '.join(names) or 'no options'}")
        extra = {k: v for k, v in (offered or {}).items()
                 if k not in kw and (takes_any or k in params)}
        kw = {**extra, **kw}
        return f(rest, *args, **kw) if entry.is_prefix else f(*args, **kw)
