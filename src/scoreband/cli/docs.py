"""docs/CLI.md, generated from the commands themselves (a test checks that the file in the
repository is what this writes, so the documented options cannot drift)."""

from __future__ import annotations

import typer

__all__ = ["options_markdown"]


def _param_line(p) -> str:
    names = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
    if getattr(p, "param_type_name", "") == "argument":
        names = f"`{p.name.upper()}`"
    help_ = " ".join((getattr(p, "help", None) or "").split())
    default = p.default
    show = default not in (None, False, (), []) and not callable(default) \
        and getattr(p, "param_type_name", "") != "argument"
    req = " (required)" if p.required else ""
    return f"- {names}{req}: {help_}" + (f" Default: `{default}`." if show else "")


def options_markdown(app: typer.Typer) -> str:
    """Every command, its one-line summary, its arguments and options."""
    import click

    root = typer.main.get_command(app)
    lines = ["# Command-line reference", "",
             "Generated from the commands (`python -m scoreband.cli.docs > docs/CLI.md`); "
             "`scoreband COMMAND --help` shows the same.", ""]

    def walk(cmd, prefix):
        for name in cmd.list_commands(None):
            sub = cmd.get_command(None, name)
            if isinstance(sub, click.Group):
                walk(sub, f"{prefix} {name}")
                continue
            summary = " ".join((sub.help or "").split("\n\n")[0].split())
            lines.extend([f"## `{prefix} {name}`", "", summary, ""])
            lines.extend(_param_line(p) for p in sub.params if p.name != "help")
            lines.append("")

    walk(root, "scoreband")
    return "\n".join(lines)


if __name__ == "__main__":
    from scoreband.cli import app

    print(options_markdown(app), end="")
