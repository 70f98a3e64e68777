"""The house rules of docs/ARCHITECTURE.md, read from the page and held against the source
(with ``ast``): every module on one part of the page's table, no import the table forbids
(at module level, inside a function, relative, or a module loaded by name through a string
``"scoreband.x.y"`` / ``"scoreband.x.y:function"``), no import cycle among module-level
imports, and no private name imported from another package.

The page is the one copy of the rules: the checks below are functions of (page text, source
files), and the tests at the end show on a synthetic page and file set that each one fails
when the page and the code disagree."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "scoreband"
PAGE = ROOT / "docs" / "ARCHITECTURE.md"

#: a string in the library that loads a module by name (a lazy registry entry, a stage)
NAME_LOAD = re.compile(r"scoreband(\.\w+)+(:\w+)?")
#: the header of the page's table of parts
HEADER = ("part", "files", "what lives there", "may import")
EVERY_PART_ABOVE = "every part above"


# ---------------------------------------------------------------------------- the page


@dataclass(frozen=True)
class Parts:
    """The page's table: each part's files (in table order) and what it may import."""

    files: dict[str, list[str]]
    may_import: dict[str, set[str]]

    def part_of(self, rel: str) -> str | None:
        """The part holding the file ``rel`` (relative to the package): the longest path
        of the table naming it or a folder above it."""
        best, where = "", None
        for part, paths in self.files.items():
            for p in paths:
                hit = rel == p or (p.endswith("/") and rel.startswith(p))
                if hit and len(p) > len(best):
                    best, where = p, part
        return where


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_parts(page: str) -> Parts:
    """The table of parts on ``page``; a ValueError naming the row when a row is not
    machine-readable (a may-import word that is no part above it, a part twice)."""
    lines = page.splitlines()
    start = next((i for i, ln in enumerate(lines)
                  if tuple(_cells(ln)) == HEADER), None)
    if start is None:
        raise ValueError(f"no table with the header | {' | '.join(HEADER)} |")
    files: dict[str, list[str]] = {}
    may: dict[str, set[str]] = {}
    for ln in lines[start + 2:]:
        if not ln.startswith("|"):
            break
        part, where, _, allowed = _cells(ln)
        if part in files:
            raise ValueError(f"part {part!r} is on two rows")
        files[part] = re.findall(r"`([^`]+)`", where)
        if not files[part]:
            raise ValueError(f"part {part!r} names no file")
        may[part] = _allowed(part, allowed, list(files)[:-1])
    return Parts(files, may)


def _allowed(part: str, text: str, above: list[str]) -> set[str]:
    """The parts in a may-import cell: part names of the rows above, ``nothing`` or
    ``every part above``; parentheses explain and are skipped."""
    text = re.sub(r"\([^()]*\)", "", text)
    words = [w.strip() for w in text.split(",") if w.strip()]
    if words == ["nothing"]:
        return {part}
    if words == [EVERY_PART_ABOVE]:
        return {part, *above}
    bad = [w for w in words if w not in above]
    if bad:
        raise ValueError(f"part {part!r} may import {bad}: not a part on a row above it "
                         f"({', '.join(above) or 'none'}), 'nothing' or "
                         f"'{EVERY_PART_ABOVE}'")
    return {part, *words}


# ---------------------------------------------------------------------------- the code


@dataclass(frozen=True)
class Import:
    """One import of a scoreband module by the file ``rel``."""

    rel: str
    module: str
    names: tuple[str, ...] = ()  # names taken from the module itself (not submodules)
    top: bool = True  # at module level (runs on import), not inside a function
    by_name: bool = False  # a string that loads it by name
    attr: str = ""  # the function a "module:function" string names


def module_name(rel: str) -> str:
    """``a/b.py`` -> ``scoreband.a.b``; ``a/__init__.py`` -> ``scoreband.a``."""
    parts = rel.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["scoreband", *parts])


def module_file(module: str, files) -> str | None:
    """The file (relative to the package) of a module, if the file set holds it."""
    rel = "/".join(module.split(".")[1:])
    for cand in (f"{rel}.py" if rel else None, f"{rel}/__init__.py" if rel else "__init__.py"):
        if cand in files:
            return cand
    return None


def _package(rel: str) -> str:
    name = module_name(rel)
    return name if rel.endswith("__init__.py") else name.rpartition(".")[0]


def _function_bodies(tree) -> set[int]:
    """ids of the nodes inside a function (imports there run only when it is called) or
    under ``if TYPE_CHECKING`` (never run)."""
    inner = set()
    for node in ast.walk(tree):
        lazy = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        checking = isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        if lazy or checking:
            inner.update(id(n) for n in ast.walk(node) if n is not node)
    return inner


def imports_of(rel: str, source: str, files) -> list[Import]:
    """Every import of a scoreband module in one file (module level and lazy; relative ones
    resolved; ``from pkg import sub`` counts as ``pkg.sub``), and every string constant
    that names a scoreband module (``"scoreband.x"``, ``"scoreband.x:function"``)."""
    tree = ast.parse(source)
    inner = _function_bodies(tree)
    found: list[Import] = []
    for node in ast.walk(tree):
        top = id(node) not in inner
        if isinstance(node, ast.Import):
            found += [Import(rel, a.name, top=top) for a in node.names
                      if a.name.split(".")[0] == "scoreband"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = _package(rel).split(".")
                up = up[: len(up) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            if base.split(".")[0] != "scoreband":
                continue
            names = [a.name for a in node.names]
            subs = [n for n in names if module_file(f"{base}.{n}", files)]
            found += [Import(rel, f"{base}.{n}", top=top) for n in subs]
            if len(subs) < len(names):
                found.append(Import(rel, base, tuple(n for n in names if n not in subs), top))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                NAME_LOAD.fullmatch(node.value):
            module, _, attr = node.value.partition(":")
            found.append(Import(rel, module, top=False, by_name=True, attr=attr))
    return found


def read_source(root: Path = SRC) -> dict[str, str]:
    return {f.relative_to(root).as_posix(): f.read_text(encoding="utf-8")
            for f in sorted(root.rglob("*.py"))}


def all_imports(files: dict[str, str]) -> list[Import]:
    return [imp for rel, src in files.items() for imp in imports_of(rel, src, files)]


# ---------------------------------------------------------------------------- the checks


def off_the_page(parts: Parts, files) -> list[str]:
    """Modules on no part, and paths on the page that no module has."""
    bad = [f"{rel} is on no part of docs/ARCHITECTURE.md: add it to a row"
           for rel in files if parts.part_of(rel) is None]
    for part, paths in parts.files.items():
        for p in paths:
            if not any(rel == p or (p.endswith("/") and rel.startswith(p)) for rel in files):
                bad.append(f"part {part!r} names {p}, which is no module: remove it")
    return bad


def forbidden(parts: Parts, files, imports, *, by_name: bool) -> list[str]:
    """Imports (``by_name``: modules loaded through a string) of a part the page does not
    let the importing part import."""
    bad = []
    for imp in imports:
        if imp.by_name != by_name:
            continue
        target = module_file(imp.module, files)
        if target is None:
            if imp.attr:  # "module:function" naming no module is a stage that cannot load
                bad.append(f"{imp.rel} loads {imp.module}:{imp.attr}: no such module")
            continue  # a string such as the file format "scoreband.calibrator"
        if imp.attr and not _defines(files[target], imp.attr):
            bad.append(f"{imp.rel} loads {imp.module}:{imp.attr}: {target} has no "
                       f"{imp.attr}")
        a, b = parts.part_of(imp.rel), parts.part_of(target)
        if a is not None and b is not None and b not in parts.may_import[a]:
            how = "loads by name" if by_name else "imports"
            bad.append(f"{imp.rel} ({a}) {how} {imp.module} ({b})")
    return sorted(set(bad))


def _defines(source: str, name: str) -> bool:
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                node.name == name:
            return True
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and \
                any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def private_crossings(files, imports) -> list[str]:
    """A private name (or module) taken from another package."""
    bad = []
    for imp in imports:
        target = module_file(imp.module, files)
        if target is None or imp.by_name:
            continue
        # _version is the one private-named module every layer may read (__version__)
        private_module = imp.module != "scoreband._version" and any(
            p.startswith("_") and not p.startswith("__") for p in imp.module.split(".")[1:])
        for n in imp.names or ("",):
            private = n.startswith("_") and not n.startswith("__")
            if (private or private_module) and \
                    _package(imp.rel) != module_name(target).rpartition(".")[0] and \
                    _package(imp.rel) != module_name(target):
                bad.append(f"{imp.rel} takes {n or imp.module} from {imp.module}")
    return bad


def cycles(files, imports) -> list[list[str]]:
    """The import cycles among module-level imports (strongly connected components of
    more than one module, or a module importing itself)."""
    graph: dict[str, set[str]] = {rel: set() for rel in files}
    for imp in imports:
        target = module_file(imp.module, files)
        if imp.top and not imp.by_name and target is not None:
            graph[imp.rel].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan; the package is small enough for recursion
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


# ---------------------------------------------------------------------------- the house

PARTS = read_parts(PAGE.read_text(encoding="utf-8"))
FILES = read_source()
IMPORTS = all_imports(FILES)


def test_every_module_is_on_a_part_and_every_path_on_the_page_exists():
    bad = off_the_page(PARTS, FILES)
    assert not bad, "\n".join(bad)


def test_no_part_imports_a_part_the_page_forbids():
    bad = forbidden(PARTS, FILES, IMPORTS, by_name=False)
    assert not bad, "imports against docs/ARCHITECTURE.md:\n" + "\n".join(bad)


#: files whose modules loaded by name still climb the table, each with the change that ends it;
#: this may only shrink (empty since report/sections.py's register_kind lines moved to the
#: face part, report_kinds.py, loaded by scoreband/__init__.py)
PENDING: set[str] = set()


def test_no_part_loads_by_name_a_module_the_page_forbids():
    bad = [b for b in forbidden(PARTS, FILES, IMPORTS, by_name=True)
           if b.split()[0] not in PENDING]
    assert not bad, "modules loaded by name against docs/ARCHITECTURE.md:\n" + "\n".join(bad)


def test_nothing_is_pending():
    bad = [b for b in forbidden(PARTS, FILES, IMPORTS, by_name=True)
           if b.split()[0] in PENDING]
    assert not bad, "\n".join(bad)


def test_no_import_cycle():
    found = cycles(FILES, IMPORTS)
    assert not found, "import cycles (module-level imports):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_no_private_name_crosses_a_package():
    bad = private_crossings(FILES, IMPORTS)
    assert not bad, "private names across packages:\n" + "\n".join(bad)


# ------------------------------------------------- each check fails when page and code disagree

TOY_PAGE = """
| part | files | what lives there | may import |
|---|---|---|---|
| low | `base.py`, `util/` | leaves | nothing |
| mid | `core.py`, `util/odd.py` | the middle (`not_a_file` in prose is no path) | low (explained) |
| top | `app.py`, `__init__.py` | the face | every part above |
"""

TOY_FILES = {
    "__init__.py": "",
    "base.py": "import os\n",
    "util/__init__.py": "from scoreband.base import x\n",
    "util/odd.py": "from scoreband import base\n",
    "core.py": "from . import base\nfrom .util import odd\n\ndef run():\n    pass\n",
    "app.py": "import scoreband.core\nSTAGE = 'scoreband.core:run'\n",
}


def _toy(**changes):
    files = dict(TOY_FILES)
    files.update(changes)
    return files, all_imports(files)


def test_the_page_is_read_as_written():
    toy = read_parts(TOY_PAGE)
    assert toy.files == {"low": ["base.py", "util/"], "mid": ["core.py", "util/odd.py"],
                         "top": ["app.py", "__init__.py"]}
    assert toy.may_import == {"low": {"low"}, "mid": {"mid", "low"},
                              "top": {"top", "mid", "low"}}
    assert toy.part_of("util/odd.py") == "mid" and toy.part_of("util/__init__.py") == "low"
    assert off_the_page(toy, TOY_FILES) == []
    files, imports = _toy()
    assert forbidden(toy, files, imports, by_name=False) == []
    assert forbidden(toy, files, imports, by_name=True) == []
    assert cycles(files, imports) == []


@pytest.mark.parametrize("row,why", [
    ("| low | `base.py` | x | mid |", "not a part on a row above"),
    ("| low | `base.py` | x | lowish |", "not a part on a row above"),
    ("| low | no files | x | nothing |", "names no file"),
])
def test_a_page_that_is_not_machine_readable_is_refused(row, why):
    page = TOY_PAGE.replace("| low | `base.py`, `util/` | leaves | nothing |", row)
    with pytest.raises(ValueError, match=why):
        read_parts(page)


def test_a_module_on_no_part_and_a_stale_path_are_found():
    toy = read_parts(TOY_PAGE)
    files, _ = _toy(**{"extra.py": ""})
    assert off_the_page(toy, files) == ["extra.py is on no part of docs/ARCHITECTURE.md: "
                                        "add it to a row"]
    files = {k: v for k, v in TOY_FILES.items() if k != "app.py"}
    assert off_the_page(toy, files) == ["part 'top' names app.py, which is no module: "
                                        "remove it"]


@pytest.mark.parametrize("code", [
    "from scoreband.core import run\n",
    "import scoreband.core\n",
    "from scoreband import core\n",
    "from .. import core\n",  # util/__init__ is in package scoreband.util
    "def f():\n    from ..core import run\n",
])
def test_an_import_the_page_forbids_is_found_in_every_form(code):
    toy = read_parts(TOY_PAGE)
    files, imports = _toy(**{"util/__init__.py": code})
    assert forbidden(toy, files, imports, by_name=False) == [
        "util/__init__.py (low) imports scoreband.core (mid)"]


@pytest.mark.parametrize("code", [
    "KINDS = {'x': 'scoreband.core'}\n",
    "import importlib\ndef f():\n    return importlib.import_module('scoreband.core')\n",
    "STAGE = 'scoreband.core:run'\n",
])
def test_a_module_loaded_by_name_from_a_lower_part_is_found(code):
    toy = read_parts(TOY_PAGE)
    files, imports = _toy(**{"base.py": code})
    assert forbidden(toy, files, imports, by_name=True) == [
        "base.py (low) loads by name scoreband.core (mid)"]
    assert forbidden(toy, files, imports, by_name=False) == []  # no import statement


def test_a_name_that_loads_nothing_is_found_and_a_format_name_is_not_a_module():
    toy = read_parts(TOY_PAGE)
    files, imports = _toy(**{"app.py": "A = 'scoreband.core:gone'\nB = 'scoreband.nope:run'\n"
                                       "FORMAT = 'scoreband.calibrator'\n"
                                       "DOC = 'see scoreband.core for more'\n"})
    assert forbidden(toy, files, imports, by_name=True) == [
        "app.py loads scoreband.core:gone: core.py has no gone",
        "app.py loads scoreband.nope:run: no such module"]


def test_an_import_cycle_is_found_at_module_level_only():
    files, imports = _toy(**{"base.py": "from scoreband.util import odd\n"})
    assert cycles(files, imports) == [["base.py", "util/odd.py"]]
    lazy = "def f():\n    from scoreband.util import odd\n"
    files, imports = _toy(**{"base.py": lazy})
    assert cycles(files, imports) == []
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import scoreband.core\n"
    files, imports = _toy(**{"base.py": typing_only})
    assert cycles(files, imports) == []


def test_a_private_name_across_packages_is_found():
    files, imports = _toy(**{"app.py": "from scoreband.util.odd import _helper\n",
                             "core.py": "from scoreband.base import _inner\n"})
    assert private_crossings(files, imports) == ["app.py takes _helper from scoreband.util.odd"]
