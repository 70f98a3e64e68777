"""The house rules of docs/ARCHITECTURE.md, read from the source with ``ast``: which part
may import which (every import, at module level or inside a function), no private name
imported from another package, and no module importing a deprecated path."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "scoreband"

#: part -> the files and folders it holds (a longer path wins), as in docs/ARCHITECTURE.md
PARTS = {
    "base": ["errors.py", "_version.py", "textsafe.py", "images.py", "registry.py",
             "datatypes.py", "grid.py", "logprobs.py", "files.py", "json_io.py",
             "checksums.py", "model_sources.py", "http.py", "progress.py", "extras.py",
             "provenance.py"],
    "answers": ["judges/base.py", "judges/tokens.py", "judges/answers.py"],
    "tables": ["formats/", "tables.py"],
    "records": ["columns.py", "schemas.py"],
    "engine": ["engine/"],
    "world": ["world/"],
    "methods": ["conformal/", "metrics.py", "domain.py", "clustering.py"],
    "judges": ["judges/"],
    "models": ["backbones/", "scorers/", "roundtrip/", "datasets/"],
    "decisions": ["decisions/", "pairwise/", "system_level/"],
    "stages": ["apply_stage.py", "judge_stage.py", "evaluation.py"],
    "report": ["report/"],
    "face": ["api.py", "__init__.py", "studies/", "integrations/"],
    "cli": ["cli/", "__main__.py"],
}

_BELOW = {"base": set(), "answers": {"base"}, "tables": {"base", "answers"},
          "records": {"base", "tables"}, "engine": {"base", "tables", "records"},
          "world": {"base", "answers"}, "methods": {"base", "records"},
          "judges": {"base", "answers", "tables", "records"},
          "models": {"base", "answers", "tables", "records", "engine", "methods", "world",
                     "judges", "stages"},
          "stages": {"base", "answers", "tables", "records", "engine", "methods", "judges"},
          "report": {"base", "records", "methods"},
          "decisions": {"base", "answers", "tables", "records", "engine", "methods",
                        "judges", "world", "report", "stages"},
          "face": set(PARTS) - {"cli"},
          "cli": set(PARTS)}
#: what each part may import: itself and the parts under it
MAY_IMPORT = {p: below | {p} for p, below in _BELOW.items()}


def part_of(rel: str) -> str:
    best, where = "", None
    for part, paths in PARTS.items():
        for p in paths:
            hit = rel == p or (p.endswith("/") and rel.startswith(p))
            if hit and len(p) > len(best):
                best, where = p, part
    assert where is not None, f"{rel} is on no part of docs/ARCHITECTURE.md: add it"
    return where


def _module_file(module: str) -> str | None:
    parts = module.split(".")[1:]
    if not parts:
        return "__init__.py"
    for cand in ("/".join(parts) + ".py", "/".join(parts) + "/__init__.py"):
        if (SRC / cand).exists():
            return cand
    return None


def _imports():
    """(importing file, imported module, names taken) for every scoreband import."""
    for f in sorted(SRC.rglob("*.py")):
        rel = f.relative_to(SRC).as_posix()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                    node.module.split(".")[0] == "scoreband":
                names = [a.name for a in node.names]
                sub = [f"{node.module}.{n}" for n in names if _module_file(f"{node.module}.{n}")]
                if len(sub) < len(names):  # names from the module itself, not submodules
                    yield rel, node.module, [n for n in names
                                             if f"{node.module}.{n}" not in sub]
                for s in sub:
                    yield rel, s, []
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "scoreband":
                        yield rel, a.name, []


IMPORTS = list(_imports())


def test_every_file_is_on_a_part():
    for f in SRC.rglob("*.py"):
        part_of(f.relative_to(SRC).as_posix())


def test_no_part_imports_a_part_it_may_not():
    bad = []
    for rel, module, _ in IMPORTS:
        target = _module_file(module)
        if target is None:
            continue
        a, b = part_of(rel), part_of(target)
        if b not in MAY_IMPORT[a]:
            bad.append(f"{rel} ({a}) imports {module} ({b})")
    assert not bad, "imports against docs/ARCHITECTURE.md:\n" + "\n".join(bad)


def _package(rel: str) -> str:
    return rel.rsplit("/", 1)[0] if "/" in rel else ""


def test_no_private_name_crosses_a_package():
    bad = []
    for rel, module, names in IMPORTS:
        target = _module_file(module)
        if target is None:
            continue
        # _version is the one private-named module every layer may read (__version__)
        private_module = module != "scoreband._version" and any(
            p.startswith("_") and not p.startswith("__") for p in module.split(".")[1:])
        for n in names or [""]:
            private = n.startswith("_") and not n.startswith("__")
            if (private or private_module) and _package(rel) != _package(target):
                bad.append(f"{rel} takes {n or module} from {module}")
    assert not bad, "private names across packages:\n" + "\n".join(bad)
