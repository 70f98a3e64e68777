"""Files without tables: the output policy and atomic writes (JSON files are
:mod:`scoreband.json_io`, content hashes :mod:`scoreband.checksums`, ``hf:`` model folders
:mod:`scoreband.model_sources`).

The output policy is the one mechanism that keeps a user's files safe, whatever the command:
every writer in scoreband (tables, JSON, weights, checkpoints, images, journals, reports) goes
through :func:`check_output` before it creates or replaces a file, and it refuses

* an output that is one of the running command's inputs (same real path or same inode:
  ``--out TABLE``, a hard link, a symlink to it), named with both;
* an existing output that is not a regular file (a device such as ``/dev/null``, a FIFO, a
  socket, a folder where a file is written): atomic replace is only for regular files;
* an existing file that another tool wrote and scoreband only ever reads (an evaluation
  log: an Inspect log, LM Evaluation Harness samples, a promptfoo results file, OpenAI
  answers), found by its content (:func:`protect_foreign`: the table formats register how
  to recognise them), whether or not the command reads it;
* inside a folder a command writes (``demo --out DIR``, ``train --out DIR``) or reads (a
  benchmark folder, ``--model DIR``), an existing file that scoreband did not write there:
  such a folder keeps the list of what scoreband wrote in ``DIR/.scoreband-files``, and only
  those files may be replaced.

The CLI declares each command's inputs and outputs once (:func:`output_policy`, from the
command's options); a Python caller may declare its own with the same context manager
(without one, only the non-regular-file rule applies).

Free of pandas, so the conformal core and calibrator files load fast.
"""

from __future__ import annotations

import contextvars
import errno
import glob
import os
import re
import secrets
import signal
import stat
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from scoreband.errors import InputError

try:
    import fcntl
except ImportError:  # Windows has no fcntl: manifests are written without a lock there
    fcntl = None

__all__ = ["resolve_path", "atomic_path", "atomic_write_bytes", "atomic_write_text", "output_policy",
           "check_output", "declare_input", "record_written", "remove_output",
           "written_by_scoreband", "MANIFEST", "check_readable", "temp_path", "track_temp",
           "untrack_temp", "remove_stale_temps", "file_mode", "protect_foreign",
           "output_errors", "output_mode", "distinct_outputs"]

#: the list of files a folder output holds that scoreband wrote (one relative path a line)
MANIFEST = ".scoreband-files"

#: recognisers of files other tools wrote that scoreband never replaces: ``fn(path)`` returns
#: what the file is ("an Inspect evaluation log") or None (:func:`protect_foreign`)
_FOREIGN: list = []


def protect_foreign(recognise) -> None:
    """Register ``recognise(path) -> str | None``: what an existing file is when scoreband
    must never write over it (another tool's log), else None. :func:`check_output` asks
    every recogniser before an existing file is replaced (the table formats register the
    evaluation logs they read: :mod:`scoreband.formats`)."""
    if recognise not in _FOREIGN:
        _FOREIGN.append(recognise)


@dataclass
class _Policy:
    inputs: list[tuple[str, Path]] = field(default_factory=list)  # (what, path)
    folders: list[Path] = field(default_factory=list)  # folder outputs (resolved)
    manifests: dict = field(default_factory=dict)  # folder -> the names in its manifest


_POLICY: contextvars.ContextVar[_Policy | None] = contextvars.ContextVar("scoreband_outputs",
                                                                         default=None)


def distinct_outputs(*outputs) -> None:
    """Refuse two outputs of one command naming one file: ``outputs`` are ``(what, path)``
    pairs (``what`` as the user typed it: ``--out``, `` `html` ``), None paths skipped.
    The one check of every command writing more than one file (the second write would
    replace the first)."""
    seen: list[tuple[str, Path]] = []
    for what, p in outputs:
        if p is None or str(p) == "":
            continue
        p = Path(p).expanduser()
        for other, q in seen:
            if _same(p, q):
                raise InputError(f"{what} and {other} name the same path {str(p)!r}; give "
                                 "each output its own")
        seen.append((what, p))


def _same(a: Path, b: Path) -> bool:
    try:
        if a.resolve() == b.resolve():
            return True
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


@contextmanager
def output_policy(inputs=(), folders=()):
    """Declare the running command's inputs (``(what, path)`` pairs: "TABLE", "--calibrator")
    and the folders it writes; :func:`check_output` refuses any write onto an input, and
    any replace of a file in a folder output that scoreband did not write. Nested policies
    add to the outer one."""
    outer = _POLICY.get()
    pol = _Policy(list(outer.inputs) if outer else [], list(outer.folders) if outer else [],
                  outer.manifests if outer else {})
    for what, p in inputs:
        if p is not None and str(p) != "":
            pol.inputs.append((what, Path(p).expanduser()))
            if Path(p).expanduser().is_dir():  # its files are the user's too (see below)
                pol.folders.append(Path(p).expanduser().resolve())
    for f in folders:
        if f is not None:
            pol.folders.append(Path(f).expanduser().resolve())
    token = _POLICY.set(pol)
    try:
        yield pol
    finally:
        _POLICY.reset(token)


def declare_input(what: str, path) -> None:
    """Add ``path`` to the running command's inputs (:func:`output_policy`), unless it is one
    already or does not exist; without a policy in force, nothing to do. For an input found
    after the command declared its options (the file behind a ``NAME:PATH`` address)."""
    pol = _POLICY.get()
    p = Path(path)
    if pol is not None and p.exists() and not any(_same(p, q) for _, q in pol.inputs):
        pol.inputs.append((what, p.expanduser()))


def check_output(path, *, what: str = "output", folder: bool = False) -> Path:
    """Refuse to write ``path`` when it is an input of the running command, an existing
    non-regular file (a folder too, unless ``folder``), or an existing file of a folder
    output that scoreband did not write (see the module docstring). Returns the path."""
    path = Path(path).expanduser()
    pol = _POLICY.get()
    for name, inp in (pol.inputs if pol else []):
        if _same(path, inp):
            raise InputError(f"{what} {str(path)!r} is the same file as {name} {str(inp)!r}: "
                             "scoreband never writes over one of its own inputs; choose "
                             "another output path")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return path
    except OSError as e:
        raise InputError(f"{what} {str(path)!r} cannot be used: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        if folder:
            return path
        raise InputError(f"{what} {str(path)!r} is a folder; give a file name to write "
                         f"(e.g. {str(path / 'out.csv')!r})")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                "a FIFO" if stat.S_ISFIFO(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise InputError(f"{what} {str(path)!r} exists and is {kind}: scoreband writes "
                         "only regular files; choose another output path")
    if folder:
        raise InputError(f"{what} {str(path)!r} is a file; give a folder to write into")
    _refuse_foreign(path, what)
    root = _owning_folder(path, pol)
    if root is not None and path.name != MANIFEST:
        rel = path.resolve().relative_to(root).as_posix()
        if rel not in _manifest(root, pol, rel):
            raise InputError(f"{str(path)!r} exists and was not written by scoreband (it is "
                             f"not in {str(root / MANIFEST)!r}): scoreband does not replace "
                             "files it did not write; move it away or choose another folder")
    return path


def _refuse_foreign(path: Path, what: str) -> None:
    for recognise in _FOREIGN:
        kind = recognise(path)
        if kind:
            raise InputError(f"{what} {str(path)!r} exists and is {kind}, a file another tool "
                             "wrote: scoreband only reads such files and never writes over "
                             "one; choose another output path")


def _owning_folder(path: Path, pol: _Policy | None) -> Path | None:
    if pol is None:
        return None
    parent = path.resolve().parent
    best = None
    for f in pol.folders:
        if parent == f or f in parent.parents:
            if best is None or len(f.parts) > len(best.parts):
                best = f
    return best


def _read_manifest(folder: Path) -> set[str]:
    try:
        with open(folder / MANIFEST, encoding="utf-8") as f:
            _lock(f, shared=True)
            text = f.read()
    except (FileNotFoundError, UnicodeDecodeError, IsADirectoryError, NotADirectoryError):
        text = ""
    return {line for line in text.splitlines() if line}


def _manifest(folder: Path, pol: _Policy, wanted: str | None = None) -> set[str]:
    """The names in ``folder``'s manifest, read once per command run (then kept up to date
    by :func:`record_written`, so writing n files costs O(n), not O(n^2)). A ``wanted`` name
    missing from that copy is looked up again on disk: another scoreband run writing into
    the same folder at the same time may have added it since."""
    if folder not in pol.manifests:
        pol.manifests[folder] = _read_manifest(folder)
    known = pol.manifests[folder]
    if wanted is not None and wanted not in known:
        known |= _read_manifest(folder)
    return known


def _lock(f, shared: bool = False) -> None:
    """An advisory lock on an open manifest (released when it is closed), so that runs
    writing into one folder at once never interleave a line or lose one."""
    if fcntl is None:
        return
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
    except OSError:  # no flock (some network file systems)
        pass


def record_written(path) -> None:
    """Add ``path`` to the manifest of the folder output that holds it (if any). Called
    before the file appears under its name (:func:`atomic_path`), so a concurrent run that
    sees the file also finds it in the manifest."""
    path = Path(path)
    pol = _POLICY.get()
    root = _owning_folder(path, pol)
    if root is None or path.name == MANIFEST:
        return
    rel = path.resolve().relative_to(root).as_posix()
    known = _manifest(root, pol)
    if rel in known:
        return
    with open(root / MANIFEST, "a", encoding="utf-8") as f:
        _lock(f)
        f.write(rel + "\n")
    known.add(rel)


def written_by_scoreband(path) -> bool:
    """Whether ``path`` lies in a folder output of the running command and its manifest
    lists it (False outside any folder output: nothing says who wrote it)."""
    path = Path(path)
    pol = _POLICY.get()
    root = _owning_folder(path, pol)
    if root is None or path.name == MANIFEST:
        return False
    rel = path.resolve().relative_to(root).as_posix()
    return rel in _manifest(root, pol, rel)


def _is_input(path: Path) -> str | None:
    pol = _POLICY.get()
    for name, inp in (pol.inputs if pol else []):
        if _same(path, inp):
            return name
    return None


def remove_output(path, *, mine: bool = False) -> bool:
    """Delete a file scoreband wrote, through the output policy; returns whether it was
    removed. Never removed: an input of the running command (same path, hard link or
    symlink), anything that is not a regular file, and a file that scoreband did not
    write: inside a folder output one its manifest does not list (then dropped from the
    manifest once removed), elsewhere one the caller does not vouch for (``mine``: it
    created the file in this run, or checked it is its own, such as a resume journal)."""
    path = Path(path).expanduser()
    if _is_input(path) is not None:
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    pol = _POLICY.get()
    root = _owning_folder(path, pol)
    if root is not None:
        rel = path.resolve().relative_to(root).as_posix()
        if rel not in _manifest(root, pol, rel):
            return False
    elif not mine:
        return False
    path.unlink(missing_ok=True)
    if root is not None:
        _forget(root, rel, pol)
    return True


def _forget(root: Path, rel: str, pol: _Policy) -> None:
    """Drop ``rel`` from ``root``'s manifest (a removed file must not leave its name there:
    a file the user later puts under that name would count as scoreband's)."""
    try:
        with open(root / MANIFEST, "r+", encoding="utf-8") as f:
            _lock(f)
            lines = [ln for ln in f.read().splitlines() if ln and ln != rel]
            f.seek(0)
            f.truncate()
            f.write("".join(ln + "\n" for ln in lines))
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    pol.manifests.get(root, set()).discard(rel)


# ------------------------------------------------------------------ temporary files
_TEMPS: set[str] = set()
_HANDLED: dict[int, object] = {}


def temp_path(path: Path) -> Path:
    """The temporary name a writer of ``path`` uses: hidden, beside it, with this process's
    id (so that a later writer can tell a dead writer's leftover from a live one's) and a
    random part (several writers in one process)."""
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")


def track_temp(tmp) -> None:
    """Remove ``tmp`` if the process ends by SIGTERM, SIGHUP or SIGINT before it is
    renamed or removed (:func:`untrack_temp`); the handlers are installed on first use,
    from the main thread only (a signal is delivered there)."""
    _TEMPS.add(str(tmp))
    _install_handlers()


def untrack_temp(tmp) -> None:
    _TEMPS.discard(str(tmp))


def _install_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None)):
        if sig is None or sig in _HANDLED:
            continue
        try:
            prev = signal.getsignal(sig)
            if prev is signal.SIG_IGN:  # nohup, a shell's background job: keep ignoring
                continue
            signal.signal(sig, _on_signal)
        except (ValueError, OSError):
            continue
        _HANDLED[sig] = prev


def _on_signal(signum, frame):
    """Remove the temporary files, then do what the signal did before: the previous
    handler (SIGINT: KeyboardInterrupt), or the default action (the process ends by the
    signal, its exit status says so)."""
    for t in list(_TEMPS):
        try:
            os.unlink(t)
        except OSError:
            pass
        _TEMPS.discard(t)
    prev = _HANDLED.get(signum)
    if callable(prev):
        return prev(signum, frame)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def remove_stale_temps(path: Path) -> None:
    """Temporary files of writers of ``path`` whose process is gone (killed with SIGKILL
    mid-write): ``.NAME.PID-XXXX.tmp`` (and the older ``.NAME.PID.tmp``) with a dead PID."""
    pat = re.compile(re.escape(f".{path.name}.") + r"(\d+)(?:-[0-9a-f]+)?\.tmp")
    try:
        found = list(path.parent.glob(f".{glob_escape(path.name)}.*.tmp"))
    except OSError:
        return
    for f in found:
        m = pat.fullmatch(f.name)
        if m and not _alive(int(m.group(1))):
            try:
                if stat.S_ISREG(os.lstat(f).st_mode):
                    f.unlink(missing_ok=True)
            except OSError:
                pass


def glob_escape(name: str) -> str:
    return glob.escape(name)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


@contextmanager
def atomic_path(path, *, durable: bool = True):
    """Yield a temporary path beside ``path``; on success it is fsynced and renamed onto
    ``path``, on any error it is removed. A crash never leaves a half-written file.
    ``durable=False`` skips the fsync (a cache entry that a crash may leave empty is found
    damaged and asked again; the fsync was 40 % of a judged row's time).

    The file gets the mode a plain ``open(path, "w")`` would give it: a new file the
    umask's (``0o666 & ~umask``, also when the writer - safetensors, say - made its own
    file with another mode), a replaced file its old mode. A write that fails for want of
    room or rights (a full disk ...) raises an OSError naming ``path`` and the fix
    (:func:`output_errors`).

    Every writer in scoreband (tables, JSON, weights, checkpoints, caches) goes through this.
    """
    path = check_output(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    tmp = str(temp_path(path))
    track_temp(tmp)
    try:
        with output_errors(path, tmp):
            # created with the umask (O_EXCL: never someone else's file under that name)
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            yield tmp
            if durable:
                with open(tmp, "rb+") as f:
                    os.fsync(f.fileno())
            os.chmod(tmp, output_mode(path))
            check_output(path)  # again: the path may have changed while the file was written
            record_written(path)  # listed first: a concurrent run that sees the file finds it
            os.replace(tmp, path)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        untrack_temp(tmp)


def output_mode(path: Path) -> int:
    """The permission bits ``open(path, "w")`` leaves: an existing file's, else the umask's
    (a writer that renames a temporary file over ``path`` gives it these first)."""
    try:
        st = os.stat(path)
    except OSError:
        return file_mode()
    return stat.S_IMODE(st.st_mode) & 0o777 if stat.S_ISREG(st.st_mode) else file_mode()


#: errors of writing that are about the disk, whatever file the error names
_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
#: errors of the output's own file (its folder's permissions, an I/O error)
_OWN_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EIO, errno.ENOENT})


@contextmanager
def output_errors(path, tmp=None):
    """Re-raise an OSError of writing the output ``path`` (through its temporary file
    ``tmp``) as one that names ``path`` and the fix: a full disk, a quota, a file too
    large, a read-only file system, or an error on the output's own file (no permission
    in its folder). Other errors (a file read while writing) pass as they are."""
    try:
        yield
    except OSError as e:
        own = e.filename is None or str(e.filename) in {str(path), str(tmp)}
        if not (e.errno in _DISK_ERRNOS or (own and e.errno in _OWN_ERRNOS)):
            raise
        folder = str(Path(path).expanduser().parent)
        raise OSError(e.errno, f"{e.strerror or e} while writing {str(path)!r}; nothing was "
                      "written there (a file already at that path is unchanged): free space "
                      f"or fix the permissions in {folder!r}, or choose another output path",
                      str(path)) from None


def file_mode() -> int:
    """The mode of a new file under the process's umask (``0o666 & ~umask``), read without
    changing the umask where the system says it (Linux: /proc/self/status), since
    changing it even for an instant would give files that other threads create then the
    wrong mode."""
    return 0o666 & ~_umask()


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_path(path, durable=durable) as tmp, open(tmp, "wb") as f:
        f.write(data)


def atomic_write_text(path, text: str, *, durable: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def check_readable(path, what: str = "file", *, folder_ok: bool = False) -> Path:
    """An input path scoreband may open: it exists and is a regular file (or a folder,
    where ``folder_ok``); a FIFO or a device would be an endless or blocking stream."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(f"{what} {str(p)!r} does not exist") from None
    except OSError as e:
        raise InputError(f"{what} {str(p)[:200]!r} cannot be used: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode) and folder_ok:
        return p
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} {str(p)!r} is a folder; give a file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what} {str(p)!r} is not a regular file (a device, FIFO or "
                         "socket); give a file")
    return p


def resolve_path(value, base_dir=None) -> Path:
    """A relative path is looked up from the working directory, then from ``base_dir``
    (the table's folder)."""
    p = Path(str(value))
    try:
        exists = p.exists()
    except OSError:  # a name the file system cannot hold (too long ...): the reader reports it
        return p
    if not p.is_absolute() and not exists and base_dir is not None:
        p = Path(base_dir) / p
    return p
