"""Markdown for the terminal: a study's results (paragraphs and pipe tables) as rich
renderables whose table cells wrap at word boundaries instead of being cut with an ellipsis.
Cell text is data: shown as plain text (:func:`~scoreband.textsafe.plain`), never markup."""

from __future__ import annotations

import re

from rich import box
from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

from scoreband.textsafe import md_unescape, plain

__all__ = ["markdown_parts", "markdown_tables", "table_cells"]


def markdown_tables(lines: list[str], width: int) -> list:
    """A markdown pipe table as rich Tables whose cells wrap at word boundaries (rich's own
    markdown tables cut headers and cells with an ellipsis at 80 columns: "covera..."). A
    table too wide for ``width`` even with every column as narrow as its longest word is
    split into several, each repeating the columns that name the row."""
    # cells split at the pipes that are not escaped (a name "a|b" is written a\\|b), shown as
    # the text they stand for (escapes undone), never as markup
    rows = [[c.strip() for c in table_cells(line)] for line in lines]
    rows = [r for r in rows if not all(re.fullmatch(r":?-{3,}:?", c) for c in r)]  # |---|
    rows = [[md_unescape(c) for c in r] for r in rows]
    k = len(rows[0])
    rows = [(r + [""] * k)[:k] for r in rows]
    # a column's narrowest width without breaking a word, plus the 3 characters between
    # columns (a space of the box and one of padding on each side)
    need = [max(cell_len(w) for r in rows for w in (r[j].split() or [""])) + 3
            for j in range(k)]  # terminal cells: a CJK character takes two
    keys = list(range(min(2 if k >= 4 else 1, k)))
    groups, cur = [], []
    for j in range(len(keys), k):
        if cur and sum(need[i] for i in keys + cur) + need[j] > width:
            groups.append(cur)
            cur = []
        cur.append(j)
    groups.append(cur)
    if len(groups) == 1:
        keys = []
        groups = [list(range(k))]
    tables = []
    for g in groups:
        cols = keys + g
        t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for j in cols:
            # as wide as its longest word: headers and cells wrap between words
            t.add_column(Text(plain(rows[0][j])), overflow="fold", min_width=need[j] - 3,
                         max_width=need[j] - 3)
        for r in rows[1:]:
            t.add_row(*(Text(plain(r[j])) for j in cols))
        tables.append(t)
    return tables


def table_cells(line: str) -> list[str]:
    """The cells of a markdown table row ``| a | b\\|c |``: split at the pipes that no
    backslash escapes (escapes kept; :func:`~scoreband.textsafe.md_unescape` undoes them)."""
    out, cur, i = [], [], 0
    body = line.strip()
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            cur.append(body[i:i + 2])
            i += 2
            continue
        if body[i] == "|":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(body[i])
        i += 1
    out.append("".join(cur))
    if body.startswith("|"):
        out = out[1:]
    if len(out) > 1 and not out[-1].strip():  # the row's closing pipe
        out = out[:-1]
    return out


def markdown_parts(text: str, width: int) -> list:
    """A study's markdown as rich renderables for a terminal ``width`` columns wide, in
    order: paragraphs as rich Markdown (wrapped by rich), tables as :func:`markdown_tables`
    (cells wrap, never cut), never hard-wrapped source."""
    from rich.markdown import Markdown  # lazy: markdown-it and pygments, 37 ms of every start

    parts: list = []
    block: list[str] = []
    table = False
    for line in [*text.splitlines(), ""]:
        is_row = line.lstrip().startswith("|")
        if block and is_row != table:
            parts.extend(markdown_tables(block, width) if table
                         else [Markdown("\n".join(block))])
            block = []
        table = is_row
        block.append(line)
    if block and any(b.strip() for b in block):
        parts.append(Markdown("\n".join(block)))
    return parts
