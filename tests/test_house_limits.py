"""The house's limits (issue 42), counted as ``scripts/house_numbers.py`` counts them (the one
copy of the counting: imported here): no function over 80 lines, no module over 600 lines,
no command over 25 options, ``cli/`` importing at most 8 library modules, no shim module and
no alias command."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "house_numbers.py"
_spec = importlib.util.spec_from_file_location("house_numbers", SCRIPT)
house = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(house)

MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600
MAX_OPTIONS = 25
MAX_CLI_LIBRARY_MODULES = 8

def module_sizes() -> list[tuple[int, str]]:
    return sorted(((len(f.read_text(encoding="utf-8").splitlines()),
                    f.relative_to(house.SRC).as_posix()) for f in house.SRC.rglob("*.py")),
                  reverse=True)


def test_no_function_over_80_lines():
    long = house.long_functions(MAX_FUNCTION_LINES)
    assert not long, "functions over 80 lines (split them):\n" + "\n".join(
        f"{n:4d} {name}" for n, name in long)


def test_no_module_over_600_lines():
    big = [(n, p) for n, p in module_sizes() if n > MAX_MODULE_LINES]
    assert not big, "modules over 600 lines:\n" + "\n".join(f"{n:4d} {p}" for n, p in big)


def test_no_command_over_25_options():
    over = [(n, c) for n, c, _, _ in house.commands() if n > MAX_OPTIONS]
    assert not over, "commands over 25 options (group them, or --config FILE):\n" + "\n".join(
        f"{n:4d} {c}" for n, c in over)


def test_cli_imports_at_most_8_library_modules():
    mods = house.cli_library_modules()
    assert len(mods) <= MAX_CLI_LIBRARY_MODULES, (
        f"cli/ imports {len(mods)} library modules (at most {MAX_CLI_LIBRARY_MODULES}: "
        f"scoreband.api and errors, textsafe, progress, _version): {', '.join(mods)}")


#: the commands issue 42 found repeating another's job (pairwise-triage: triage on pairs,
#: pairwise-systems: systems on pairs, judge-pairs: judge --pairwise)
ALIASES = ("pairwise-triage", "pairwise-systems", "judge-pairs")


def test_no_alias_command():
    aliases = [c for _, c, hidden, deprecated in house.commands()
               if hidden or deprecated or c in ALIASES]
    assert not aliases, f"commands that repeat another's job, hidden or deprecated: {aliases}"


def test_no_shim_module():
    assert house.shim_files() == []


def test_no_name_kept_for_its_old_path():
    """Version 0.1.0 owes no alias: no module warns that a name of it is deprecated (a moved
    name forwarded by a module ``__getattr__``, a former name kept one release)."""
    kept = sorted(f.relative_to(house.SRC).as_posix() for f in house.SRC.rglob("*.py")
                  if "DeprecationWarning" in f.read_text(encoding="utf-8"))
    assert not kept, f"modules keeping a deprecated name: {kept}"


def test_the_counts_see_what_they_count(tmp_path, monkeypatch):
    """Each count finds a case built to break it (so a pass is not a count that sees nothing)."""
    body = "\n".join(f"    x = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def f():\n{body}\n" + "\n" * MAX_MODULE_LINES)
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "a.py").write_text(
        "from scoreband.api import x\nimport scoreband.tables\nfrom scoreband import files\n"
        "from scoreband.cli import _options\n")
    monkeypatch.setattr(house, "SRC", tmp_path)
    (tmp_path / "files.py").write_text("")
    assert house.long_functions(MAX_FUNCTION_LINES) == [(MAX_FUNCTION_LINES + 1, "long.py:f")]
    assert module_sizes()[0] == (MAX_FUNCTION_LINES + 1 + MAX_MODULE_LINES, "long.py")
    assert house.cli_library_modules() == ["scoreband.api", "scoreband.files",
                                          "scoreband.tables"]
    over = [c for n, c, _, _ in house.commands() if n > 0]
    assert over, "the options of the real commands are counted"
