"""Backbone registry: kept as data, discoverable, addressed with explicit prefixes."""

from __future__ import annotations

from scoreband.errors import InputError

__all__ = ["BACKBONES", "list_backbones", "resolve_backbone"]

#: prefix -> description. Entries are data; loaders are looked up by prefix.
BACKBONES: dict[str, dict] = {
    "embedded:default": {
        "kind": "cross-encoder",
        "description": "tiny joint-attention transformer trained on the embedded world "
                       "(ships with scoreband; no download)",
    },
}
PREFIXES = ("embedded:",)


def list_backbones() -> list[str]:
    """Names of the available backbones (``embedded:NAME`` entries)."""
    return sorted(BACKBONES)


def resolve_backbone(name: str) -> dict:
    """Look a backbone up; errors list the choices."""
    if name in BACKBONES:
        return {"name": name, **BACKBONES[name]}
    if not any(name.startswith(p) for p in PREFIXES):
        raise InputError(f"backbone {name!r} has no known prefix; use one of "
                         f"{', '.join(PREFIXES)} (available: {', '.join(list_backbones())})")
    raise InputError(f"unknown backbone {name!r}; available: {', '.join(list_backbones())}")
