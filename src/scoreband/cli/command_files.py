"""Which of a command's options name its inputs and which its outputs, and the output policy
(:mod:`scoreband.files`) that every command runs under: an output never replaces one of the
command's inputs, a device, or a file scoreband did not write (:func:`outputs_checked`, applied
by :func:`scoreband.cli._app.guard`)."""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path

from scoreband.api import check_output, distinct_outputs, output_policy

__all__ = ["OUTPUT_OPTIONS", "FOLDER_COMMANDS", "path_of", "declared_files", "outputs_checked"]

#: options that name what a command writes; every other path option is an input
OUTPUT_OPTIONS = ("out", "html", "cache", "keep_images", "apply_out", "since_out")
#: commands whose --out is a folder (only files they wrote there may be replaced)
FOLDER_COMMANDS = {"demo", "stress", "judge_study", "roundtrip_study", "train", "world"}


def path_of(value) -> Path | None:
    """The local path an option's value names, if it names an existing one: a Path, a
    string such as ``@rubric.txt`` or ``hf:./model`` (prefix stripped)."""
    if isinstance(value, Path):  # a table may be addressed as FORMAT[@OPTIONS]:PATH
        from scoreband.api import split_address

        return split_address(value)[1]
    if isinstance(value, str) and value:
        s = value[1:] if value.startswith("@") else re.sub(r"^[a-z][a-z0-9_-]*:(?!//)", "",
                                                            value)
        try:
            if s and Path(s).expanduser().exists():
                return Path(s)
        except (OSError, ValueError, RuntimeError):  # RuntimeError: '~name' of no user
            return None
    return None


def declared_files(command: str, kw: dict):
    """The command's inputs and outputs from its options: ``(inputs, outputs, folders)``,
    each ``(what, path)`` with ``what`` the option as the library names it."""
    inputs, outputs, folders = [], [], []
    for name, value in kw.items():
        for v in value if isinstance(value, (list, tuple)) else [value]:
            what = f"`{name}`"
            if name in OUTPUT_OPTIONS:
                if v is None or str(v) == "":
                    continue
                is_folder = name in ("cache", "keep_images") or (
                    name == "out" and command in FOLDER_COMMANDS)
                (folders if is_folder else outputs).append((what, Path(v)))
            else:
                p = path_of(v)
                if p is not None:
                    inputs.append((what, p))
    return inputs, outputs, folders


@contextmanager
def outputs_checked(command: str, kw: dict):
    """The output policy (scoreband.files) for one command run: outputs checked against
    its inputs before any work, and every later write checked the same way."""
    inputs, outputs, folders = declared_files(command, kw)
    with output_policy(inputs, [p for _, p in folders]):
        distinct_outputs(*outputs, *folders)
        for what, p in outputs:
            check_output(p, what=what)
        for what, p in folders:
            check_output(p, what=what, folder=True)
        yield
