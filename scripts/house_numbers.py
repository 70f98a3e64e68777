"""The house's numbers (issue 42): library modules imported by ``cli/``, shim files, alias
commands, commands over 25 options, functions over 80 lines, the largest modules.

Run: ``python scripts/house_numbers.py`` (reads the source with ``ast``; imports the CLI app
to count each command's options)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "scoreband"


def _modules_imported(files):
    seen = set()
    for f in files:
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.startswith("scoreband"):
                    names = [a.name for a in node.names]
                    if node.module == "scoreband":
                        seen.update(f"scoreband.{n}" for n in names if (SRC / f"{n}.py").exists()
                                    or (SRC / n).is_dir())
                        if not any((SRC / f"{n}.py").exists() or (SRC / n).is_dir() for n in names):
                            seen.add("scoreband")
                    else:
                        seen.add(node.module)
            elif isinstance(node, ast.Import):
                seen.update(a.name for a in node.names if a.name.startswith("scoreband"))
    return seen


def cli_library_modules():
    files = list((SRC / "cli").glob("*.py"))
    return sorted(m for m in _modules_imported(files) if not m.startswith("scoreband.cli"))


def long_functions(limit=80):
    out = []
    for f in SRC.rglob("*.py"):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out.append((n, f"{f.relative_to(SRC)}:{node.name}"))
    return sorted(out, reverse=True)


def shim_files():
    return sorted(str(f.relative_to(SRC)) for f in SRC.rglob("*.py")
                  if "_deprecated import moved" in f.read_text())


def commands():
    import typer

    from scoreband.cli import app
    group = typer.main.get_command(app)
    rows = []

    def is_option(param):  # typer vendors its own click: match the class by name
        return "Option" in type(param).__name__

    def walk(cmd, prefix):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, f"{prefix} {name}".strip())
        else:
            n = sum(1 for p in cmd.params if is_option(p) and p.name != "help")
            rows.append((n, prefix, bool(getattr(cmd, "hidden", False)),
                         bool(getattr(cmd, "deprecated", False))))
    walk(group, "")
    return sorted(rows, reverse=True)


def main():
    mods = cli_library_modules()
    print(f"library modules imported by cli/: {len(mods)}")
    print("   ", ", ".join(m.removeprefix("scoreband.") for m in mods))
    shims = shim_files()
    print(f"shim files: {len(shims)} ({', '.join(shims)})")
    cmds = commands()
    over = [(n, c) for n, c, _, _ in cmds if n > 25]
    print(f"commands: {len(cmds)}; over 25 options: {len(over)} "
          f"({', '.join(f'{c} {n}' for n, c in over)})")
    longf = long_functions()
    print(f"functions over 80 lines: {len(longf)}")
    for n, name in longf:
        print(f"    {n:4d} {name}")
    sizes = sorted(((len(f.read_text().splitlines()), str(f.relative_to(SRC)))
                    for f in SRC.rglob("*.py")), reverse=True)
    print("largest modules: " + ", ".join(f"{p} {n}" for n, p in sizes[:6]))
    print(f"modules over 600 lines: {sum(1 for n, _ in sizes if n > 600)}")


if __name__ == "__main__":
    main()
