"""A trained model's folder: claimed by a training run (a finished model is never silently
continued or mixed with a new one) and, with ``overwrite``, emptied of the files a scoreband
run wrote there, through the output policy (:mod:`scoreband.files`): any other file stays.

It needs no torch of its own: ``scoreband train`` refuses a folder before any model is
built."""

from __future__ import annotations

from pathlib import Path

from scoreband.checksums import SUMS_FILE
from scoreband.errors import InputError
from scoreband.files import check_output, record_written, remove_output
from scoreband.json_io import read_json

__all__ = ["MODEL_FILES", "claim_model_folder", "plain_name"]


def plain_name(name: str) -> bool:
    """A file name inside the folder (no path, not hidden): what a checkpoint state may
    name (a hand-edited state naming ``../x`` removes nothing)."""
    return bool(name) and "/" not in name and "\\" not in name and not name.startswith(".")



#: the files a training run writes at the top of its folder
MODEL_FILES = ("model.safetensors", "heads.safetensors", "backbone.safetensors", "config.json",
               "calibrator.json", "MODEL_CARD.md", "SHA256SUMS")


def claim_model_folder(out, *, resume: bool = False, overwrite: bool = False) -> None:
    """A finished run in ``out`` (its weights are there) is never silently continued or
    mixed with a new one: refused unless ``resume`` (continue from its checkpoint) or
    ``overwrite`` (its files are removed first). An interrupted run (a checkpoint only)
    resumes."""
    out = Path(out)
    if resume and overwrite:
        raise InputError("give `resume` or `overwrite`, not both")
    if out.exists() and not out.is_dir():
        raise InputError(f"`out` {str(out)!r} is a file; give a folder for the model")
    finished = any((out / f).exists() for f in ("model.safetensors", "heads.safetensors",
                                                 "MODEL_CARD.md"))
    if finished and not (resume or overwrite):
        raise InputError(f"{str(out)!r} holds a finished model; pass `overwrite` to replace "
                         "it, `resume` to continue it from its checkpoint, or another `out`")
    if out.is_dir():
        _adopt_run(out)
    if overwrite and finished:  # only the files scoreband wrote; anything else stays
        _remove_run(out)
    if resume and not (out / "checkpoint").is_dir():
        raise InputError(f"`resume`: {str(out)!r} has no checkpoint folder to continue from")
    if out.is_dir():
        # the files a run writes, checked now (not after the training) against the output
        # policy: a foreign config.json is refused before any work
        for name in MODEL_FILES:
            check_output(out / name)


def _run_files(out: Path) -> list[Path]:
    """The files of a scoreband run in ``out`` that say so themselves: its checkpoint (a
    ``state.json`` scoreband wrote and the files it names) and the model files its
    ``SHA256SUMS`` lists (with the card and calibrator written beside them)."""
    found = []
    ck = out / "checkpoint"
    try:
        state = read_json(ck / "state.json", what="checkpoint state")
    except InputError:
        state = None
    if isinstance(state, dict) and isinstance(state.get("files"), dict):
        found += [ck / "state.json", *(ck / str(n) for n in state["files"].values()
                                       if plain_name(str(n)))]
    sums = out / SUMS_FILE
    if sums.is_file():
        names = [line.partition("  ")[2].strip() for line in
                 sums.read_text(encoding="utf-8", errors="replace").splitlines()]
        found += [out / n for n in [*names, SUMS_FILE, "MODEL_CARD.md", "calibrator.json"]
                  if plain_name(n)]
    return [f for f in found if f.is_file() and not f.is_symlink()]


def _adopt_run(out: Path) -> None:
    """The files of a scoreband run already in ``out`` (an interrupted or finished one,
    perhaps written before folders kept their list of files) may be replaced by this run
    (:func:`_run_files`). Anything else there stays protected by the output policy."""
    for f in _run_files(out):
        record_written(f)


def _remove_run(out: Path) -> None:
    """``overwrite``: remove the files of the run in ``out`` (:func:`_run_files`, and under
    the command's output policy whatever its folder's list says scoreband wrote in
    ``checkpoint/`` and ``cache/``), through the output policy; any other file stays, and
    so does a folder that still holds one."""
    for f in _run_files(out):
        remove_output(f, mine=True)
    for name in ("checkpoint", "cache"):
        d = out / name
        if not d.is_dir() or d.is_symlink():
            continue
        for f in sorted(d.rglob("*"), reverse=True):
            if f.is_file() and not f.is_symlink():
                remove_output(f)  # listed in the folder's manifest, else kept
            elif f.is_dir() and not f.is_symlink() and not any(f.iterdir()):
                f.rmdir()
        if not any(d.iterdir()):
            d.rmdir()
