"""The old import paths of the house round 3 renames (``scoreband._deprecated.MOVED``): the
library never imports one of them, and every one still resolves, each public name of its
successor reached through it with a :class:`DeprecationWarning` that names the new path."""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path

import pytest

import scoreband
from scoreband._deprecated import MOVED

ROOT = Path(scoreband.__file__).parent


def _module_name(path: Path) -> str:
    parts = ("scoreband", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts).removesuffix(".__init__")


def _imported(source: str, package: str) -> set[str]:
    """Every module path the source of a module of ``package`` imports (module level and lazy,
    relative ones resolved; ``from pkg import name`` counts as ``pkg.name`` too), and every
    string constant that is a module path (``importlib.import_module("...")``, a lazy
    registry's ``"module:attr"``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.partition(":")[0]
            if text.startswith("scoreband.") and text.replace(".", "").replace("_", "").isalnum():
                found.add(text)
    return found


def _shim_files() -> set[Path]:
    return {p for p in ROOT.rglob("*.py") if _module_name(p) in MOVED}


def test_every_old_path_is_a_shim_file_in_the_package():
    assert {_module_name(p) for p in _shim_files()} == set(MOVED)


def test_no_module_of_the_library_imports_a_deprecated_path():
    bad = {}
    for path in sorted(ROOT.rglob("*.py")):
        if path in _shim_files() or path.name == "_deprecated.py":
            continue
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        old = sorted(m for m in _imported(path.read_text(), package) if m in MOVED)
        if old:
            bad[path.relative_to(ROOT).as_posix()] = old
    assert not bad, f"import the new paths (scoreband._deprecated.MOVED): {bad}"


def test_the_import_scan_sees_every_import_form():
    """The scan above cannot pass by missing an import form: each form below is found."""
    forms = {"from . import _core": "scoreband.conformal._core",
             "def f():\n    from ..protocol import x": "scoreband.protocol",
             "import scoreband.records": "scoreband.records",
             "from scoreband import io": "scoreband.io",
             "importlib.import_module('scoreband.inference.ppi')": "scoreband.inference.ppi",
             "LAZY = 'scoreband.bands:apply_stage'": "scoreband.bands"}
    for code, old in forms.items():
        assert old in _imported(code, "scoreband.conformal"), code


def _public(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_")
                 and getattr(v, "__module__", module_name).startswith("scoreband")
                 and not isinstance(v, type(importlib))]
    return sorted(names)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_old_path_resolves_with_a_deprecation_warning(old):
    new = MOVED[old]
    shim = importlib.import_module(old)
    names = _public(new)
    assert names, new
    for name in names:
        with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: import {name} "
                                                    f"from {new}"):
            got = getattr(shim, name)
        want = getattr(importlib.import_module(new), name)
        assert got is want or got == want, (old, name)  # == for a value computed per access
    # ``from old import name`` goes through the same hook
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        exec(f"from {old} import {names[0]}", {})  # noqa: S102
    with pytest.raises(AttributeError), warnings.catch_warnings():
        warnings.simplefilter("error")
        shim.no_such_name_anywhere  # noqa: B018


#: the old module whose names went to more than one place (scoreband.io offered the
#: column and file helpers beside the table readers)
ELSEWHERE = {"scoreband.io": ("scoreband.columns", "scoreband.files")}


@pytest.mark.parametrize("old", sorted(ELSEWHERE))
def test_names_that_moved_elsewhere_resolve_through_the_old_path(old):
    shim = importlib.import_module(old)
    for where in ELSEWHERE[old]:
        for name in _public(where):
            if hasattr(importlib.import_module(MOVED[old]), name):
                continue  # reached through the successor, checked above
            with pytest.warns(DeprecationWarning, match=f"import {name} from {where}"):
                got = getattr(shim, name)
            want = getattr(importlib.import_module(where), name)
            assert got is want or got == want, (old, name)
