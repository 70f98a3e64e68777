"""The table formats, one object each, in one registry addressed by name and by suffix.

Every place that reads or writes a table asks this registry which format a path is
(:func:`resolve`): the whole-table reader and writer (:mod:`scoreband.tables`), the chunked
reader and writer (:mod:`scoreband.engine.stream`) and the Ray engine. A format
(:class:`~scoreband.formats.base.TableFormat`) reads the table whole (with the ``text``
option: cells as they are), in chunks, counts its rows, lists its columns from a header,
writes the table whole and chunk by chunk, and says whether it is a text format. Adding a
format is one module that defines it and one :func:`register` call below;
``tests/formats/test_contract.py`` checks every registered format alike.

How a path's format is chosen:

1. ``NAME:PATH`` (``csv:scores.txt``, ``inspect:logs/run.json``) names it outright, where
   ``NAME`` is a registered format and ``NAME:PATH`` is not itself an existing file (an
   unknown ``NAME`` is refused, listing the known ones); a read-only format that reads
   score-token log-probs takes the judge's label scale as ``NAME@LO-HI:PATH``
   (``openai-batch@1-5:answers.jsonl``);
2. a folder is a Hugging Face datasets folder;
3. otherwise the suffix: where several formats share it (``.json``: a table, an Inspect log,
   a promptfoo results file; ``.jsonl``: a table, OpenAI-style batch answers, lm-eval
   samples), the file's first bytes decide by the log's real structure
   (:meth:`~TableFormat.sniff`: Inspect's integer ``version`` beside an ``eval`` object,
   a Batch API line's ``custom_id`` beside a ``response`` object with a ``body`` ..., never
   a column's name alone) and the plain table format is the default. A file read plainly
   that has a log's marker keys is told how to force the log (``inspect:PATH``); a file
   read as a log that is not one is told how to force the table (``json:PATH``,
   ``jsonl:PATH``). An output is never sniffed: it is written in the suffix's plain
   format, and never over an existing log of another tool
   (:func:`scoreband.files.protect_foreign`).
"""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

from scoreband.errors import InputError
from scoreband.files import declare_input, protect_foreign
from scoreband.formats import base as _base_module
from scoreband.formats.base import ReadOnlyFormat, Sink, TableFormat
from scoreband.formats.common import json_lines, top_level
from scoreband.registry import Registry

__all__ = ["FORMATS", "TableFormat", "ReadOnlyFormat", "Sink", "register", "get_format",
           "all_formats", "resolve", "suffixes", "known_formats", "plain_format"]

#: every table format scoreband reads; ``get_format(name)`` returns its object
FORMATS = Registry("table format")

#: how many bytes of a file are looked at to tell formats of one suffix apart
SNIFF_BYTES = 1 << 16


def register(fmt: TableFormat) -> TableFormat:
    """Add a format to :data:`FORMATS` (its name once; its suffixes may be shared)."""
    FORMATS.register(fmt.name, help=fmt.help, factory=lambda: fmt, format=fmt,
                     suffixes=tuple(fmt.suffixes))
    return fmt


def get_format(name: str) -> TableFormat:
    """The format registered as ``name``; an unknown name lists the known formats."""
    return FORMATS.resolve(name)[0].info["format"]


def all_formats() -> list[TableFormat]:
    return [e.info["format"] for e in FORMATS.entries()]


def suffixes(*, text: bool | None = None, streamable: bool | None = None,
             writable: bool | None = None) -> tuple[str, ...]:
    """The suffixes whose default format has these properties (None: any)."""
    out = []
    for f in all_formats():
        if f.sniffs or f.folder:
            continue
        if ((text is None or f.text == text) and (writable is None or f.writable == writable)
                and (streamable is None or f.streamable == streamable)):
            out += [s for s in f.suffixes if s not in out]
    return tuple(out)


def known_formats() -> str:
    """The formats as an error message lists them: ``csv (.csv), ..., hf-dataset (a
    folder)``."""
    return ", ".join(f"{f.name} ({'a folder' if f.folder else ' '.join(f.suffixes)})"
                     for f in all_formats())


def _unknown(p: Path, suf: str, verb: str) -> InputError:
    return InputError(f"cannot {verb} {p.name!r}: unknown table format {suf or '(no suffix)'!r}; "
                      f"known formats: {known_formats()}; or name the format before the "
                      f"path, e.g. csv:{p}")


#: what a format name looks like before ``:`` (``csv``, ``openai-batch@1-5``); a single
#: letter is a drive (``C:``), a ``//`` after the colon a URL
_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9_-]+)(@[^:/\\]*)?")


def split_address(path) -> tuple[TableFormat | None, Path]:
    """``(format, path)`` for ``NAME:PATH`` / ``NAME@OPTIONS:PATH``; ``(None, path)`` for a
    plain path (also one that exists as written, colon and all). An unknown ``NAME`` (that
    is not part of an existing file's name) is refused, listing the known formats."""
    s = os.fspath(path)
    head, colon, rest = s.partition(":")
    if not colon or not rest or os.path.lexists(s):
        return None, Path(s)
    name, at, opts = head.partition("@")
    if name not in {e.name for e in FORMATS.entries()}:
        if _PREFIX.fullmatch(head) and not rest.startswith("//"):
            raise InputError(f"{s!r}: unknown table format {name!r} before the colon; known "
                             f"formats: {known_formats()}; a file whose name holds a colon "
                             f"is read as written when it exists (./{s} names it plainly)")
        return None, Path(s)
    fmt = get_format(name)
    if at:
        fmt = fmt.configure(opts)
    _declare_input(Path(rest))
    return fmt, Path(rest)


def _declare_input(p: Path) -> None:
    """The file behind a ``NAME:PATH`` address is one of the running command's inputs: added
    to its output policy (:func:`scoreband.files.output_policy`), so that no output is
    written over it (the command declared the address, which names no file)."""
    declare_input("TABLE", p)


def resolve(path, *, write: bool = False) -> tuple[TableFormat, Path]:
    """The format of ``path`` and the file path itself (without a ``NAME:`` prefix); see the
    module docstring. ``write``: for an output (never sniffed; a read-only format refused).
    Raises :class:`InputError` for an unknown suffix, listing the known formats."""
    fmt, p = split_address(path)
    if fmt is not None:
        if write and not fmt.writable:
            fmt.refuse_write(p)
        return fmt, p
    if not write and p.is_dir():
        return get_format("hf-dataset"), p
    suf = p.suffix.lower()
    cands = [f for f in all_formats() if suf in f.suffixes]
    plain = [f for f in cands if not f.sniffs]
    if write:
        if not plain:
            if cands:
                cands[0].refuse_write(p)
            raise _unknown(p, suf, "write")
        return plain[0], p
    if not cands:
        raise _unknown(p, suf, "read")
    sniffing = [f for f in cands if f.sniffs]
    if sniffing and p.is_file():
        head = _head(p)
        for f in sniffing:
            if f.sniff(p, head):
                return f, p
        if plain:
            _say_plain(p, plain[0], sniffing, head)
    return (plain or cands)[0], p


def plain_format(p: Path) -> TableFormat | None:
    """The plain table format of ``p``'s suffix (what an output of that name is written in,
    and what a ``PLAIN:PATH`` address forces), None when the suffix has none."""
    suf = Path(p).suffix.lower()
    return next((f for f in all_formats() if suf in f.suffixes and not f.sniffs), None)


_base_module.PLAIN_LOOKUP[:] = [plain_format]


def _say_plain(p: Path, plain: TableFormat, logs, head: str) -> None:
    """A file read as a plain table that looks like a log at a glance (it has a log's
    marker keys, not its structure) is told so, with the address that forces the log."""
    keys = _first_keys(head)
    for f in logs:
        if f.markers and f.markers <= keys:
            warnings.warn(f"{str(p)!r} has the keys {', '.join(sorted(f.markers))} of "
                          f"{f.help} but not its structure: read as a plain {plain.name} "
                          f"table; to read it as {f.name}, write {f.name}:{p}", stacklevel=3)
            return


def _first_keys(head: str) -> set:
    """The keys of a JSON document's top level, its first record (a list of records) or
    its first line (JSON Lines)."""
    top = top_level(head)
    if top is not None:
        return set(top)
    s = head.lstrip("\ufeff \t\r\n")
    rec = None
    if s.startswith("["):
        try:
            rec, _ = json.JSONDecoder().raw_decode(s, 1 + len(s[1:]) - len(s[1:].lstrip()))
        except ValueError:
            rec = None
    else:
        recs = json_lines(head, most=1)
        rec = recs[0] if recs else None
    return set(rec) if isinstance(rec, dict) else set()


def _foreign(path: Path) -> str | None:
    """What an existing file is when it is another tool's log (the output policy never
    writes over one: :func:`scoreband.files.protect_foreign`), else None."""
    suf = path.suffix.lower()
    logs = [f for f in all_formats() if f.sniffs and suf in f.suffixes]
    if not logs:
        return None
    head = _head(path)
    for f in logs:
        if (suf == ".eval" and head.startswith("PK")) or (suf != ".eval" and f.sniff(path, head)):
            return f.help
    return None


def _head(p: Path) -> str:
    try:
        with open(p, "rb") as f:
            return f.read(SNIFF_BYTES).decode("utf-8-sig", errors="replace")
    except OSError:
        return ""


# ------------------------------------------------------------------ the formats
def _register_all() -> None:
    from scoreband.formats.delimited import CSV, TSV
    from scoreband.formats.hf_datasets import HF_DATASET
    from scoreband.formats.inspect_log import INSPECT
    from scoreband.formats.json_table import JSON
    from scoreband.formats.jsonl import JSONL
    from scoreband.formats.lm_eval import LM_EVAL
    from scoreband.formats.openai_batch import OPENAI_BATCH
    from scoreband.formats.parquet import PARQUET
    from scoreband.formats.promptfoo import PROMPTFOO

    # the tables, then the files other tools write (read where they lie, never written):
    # where one shares a suffix with a table, its content tells them apart (sniff)
    for fmt in (CSV, TSV, JSONL, JSON, PARQUET, HF_DATASET, INSPECT, LM_EVAL, PROMPTFOO,
                OPENAI_BATCH):
        register(fmt)


_register_all()
protect_foreign(_foreign)
