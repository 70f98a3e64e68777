"""Text from the user's data, shown and never interpreted: one escaping rule per medium.

Group, task, system and column names, file paths and messages that quote cells are data.
Each medium that scoreband writes has its own markup, and a name such as ``[/]``,
``$\\textbf{ours}$``, ``a|b``, ``<script>`` or ``[link=https://evil.example/]A[/link]``
must come out as those characters, never as a style, a formula, a column or a link:

========== ============================= ==================================================
medium     function                      what it escapes
========== ============================= ==================================================
terminal   :func:`term`                  rich markup (``rich.markup.escape``); control
                                         characters (ANSI escapes, newlines) as ``\\x1b``
figures    :func:`fig`                   matplotlib mathtext: ``$`` as ``\\$``; control
                                         characters as ``\\n`` ...
markdown   :func:`md`                    ``\\ ` * _ [ ] | ~ $`` backslash-escaped, ``& < >``
                                         as entities, control characters as ``\\n`` ...
                                         (one line, one table cell); a leading
                                         ``# - + = >`` or ``1.`` escaped
HTML       :func:`html`                  ``html.escape`` (``& < > " '``)
========== ============================= ==================================================

Use the function of the medium at the point the text is written, once, on the data only
(never on the markup scoreband writes around it). Every function takes any object (its
``str()``). The CLI's consoles (:mod:`scoreband.cli._app`) print with markup and emoji codes
off, so a plain ``console.print(f"wrote {path}")`` is already literal; a print that styles
(``markup=True``) passes its data through :func:`term`. A figure label drawn with
``text.parse_math`` off must not use :func:`fig` (its ``\\$`` would show).
"""

from __future__ import annotations

import html as _html
import re

__all__ = ["fig", "html", "md", "md_unescape", "plain", "term"]

# C0 and C1 control characters and DEL (ESC starts an ANSI sequence; CR rewrites a line)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def plain(text: object, *, lines: bool = False) -> str:
    """``text`` as one line with every control character shown as its escape (``\\n``,
    ``\\x1b``): no terminal sequence, carriage return or line break survives
    (``lines=True``: line breaks ``\\n`` are kept, for a message of several lines)."""
    s = str(text)
    keep = "\n" if lines else ""
    return _CONTROL.sub(lambda m: m.group(0) if m.group(0) == keep else
                        _NAMED.get(m.group(0), f"\\x{ord(m.group(0)):02x}"), s)


def term(text: object, *, lines: bool = False) -> str:
    """For the terminal, inside rich console markup: ``[bold]``, ``[/]``, ``[link=...]``
    shown as written; control characters as their escapes (:func:`plain`; ``lines=True``
    keeps line breaks). Put it between tags (``f"[bold]{term(name)}[/bold]"``): a trailing
    backslash is doubled so that it cannot escape the tag after it (at the very end of a
    markup string it would show twice; a rich ``Text`` with :func:`plain` has no markup).

    Examples
    --------
    >>> term("[link=https://evil.example/]A[/link]")
    '\\\\[link=https://evil.example/]A\\\\[/link]'
    """
    return _markup_escape(plain(text, lines=lines))


#: a rich markup tag (rich.markup's own pattern): ``[bold]``, ``[/]``, ``[link=...]``
_TAG = re.compile(r"\[[a-z#/@][^[]*?]")


def _markup_escape(s: str) -> str:
    """``s`` as rich markup that prints ``s`` itself. Written here because
    ``rich.markup.escape`` escapes only a ``[`` that opens a tag: an untagged ``\\[`` is left
    as it is and rich then prints it as ``[`` (the backslash lost). Every ``[`` gets a
    backslash; before a tag the backslashes in front are doubled too (rich reads them as
    escapes there), and a trailing run is doubled so it cannot escape a tag that follows."""
    def one(m):
        k = m.group(1)
        return (k * 2 if _TAG.match(s, m.end() - 1) else k) + "\\["

    out = re.sub(r"(\\*)\[", one, s)
    return out + "\\" * (len(out) - len(out.rstrip("\\")))


def fig(text: object) -> str:
    """For a matplotlib label (title, tick, legend): ``$`` never opens mathtext.

    Examples
    --------
    >>> fig("$\\\\textbf{ours}$")
    '\\\\$\\\\textbf{ours}\\\\$'
    """
    return plain(text).replace("$", "\\$")


_MD_ESCAPES = {"\\": "\\\\", "`": "\\`", "*": "\\*", "_": "\\_", "[": "\\[", "]": "\\]",
               "|": "\\|", "~": "\\~", "$": "\\$", "&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MD_SPECIAL = re.compile(r"[\\`*_\[\]|~$&<>]")
_MD_LEADING = re.compile(r"^(\s*)([#\-+=>])")
_MD_ORDERED = re.compile(r"^(\s*\d+)([.)])")


def md(text: object) -> str:
    """For markdown, after other text in a paragraph or a heading, or in a table cell: one
    line (a line break shows as ``\\n``, as in :func:`term` and :func:`fig`); no pipe splits
    a cell, no HTML, code, emphasis, link, math or list marker is made.

    Examples
    --------
    >>> md("a|b <script>")
    'a\\\\|b &lt;script&gt;'
    """
    s = plain(text)
    s = _MD_SPECIAL.sub(lambda m: _MD_ESCAPES[m.group(0)], s)
    s = _MD_LEADING.sub(lambda m: m.group(1) + "\\" + m.group(2), s)
    return _MD_ORDERED.sub(lambda m: m.group(1) + "\\" + m.group(2), s)


_MD_UNESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def md_unescape(cell: str) -> str:
    """The text an escaped markdown cell shows (backslash escapes and entities undone):
    what a terminal rendering of a markdown table prints, as plain text."""
    return _html.unescape(_MD_UNESCAPE.sub(r"\1", cell))


def html(text: object) -> str:
    """For HTML text and attribute values (``html.escape``, quotes included)."""
    return _html.escape(str(text), quote=True)


def share_text(p: float) -> str:
    """A small probability as written: a percentage where two decimals hold it exactly
    (``5 %``, ``2.5 %``), else the number itself (``1e-12``), never rounded to ``0 %``.

    >>> share_text(0.05), share_text(0.025), share_text(1e-12)
    ('5 %', '2.5 %', '1e-12')
    """
    pct = 100 * p
    exact = pct >= 0.01 and abs(round(pct, 2) - pct) <= 1e-9 * pct
    return f"{pct:g} %" if exact else f"{p:g}"


def complement_text(p: float) -> str:
    """``1 - p`` as written, never rounded up to ``100 %``: ``90 %`` for 0.1, ``97.5 %``
    for 0.025, ``1 - 1e-12`` for 1e-12 (a guarantee's level from its alpha or delta).

    >>> complement_text(0.1), complement_text(0.025), complement_text(1e-12)
    ('90 %', '97.5 %', '1 - 1e-12')
    """
    return f"{100 - 100 * p:g} %" if share_text(p).endswith("%") else f"1 - {p:g}"
