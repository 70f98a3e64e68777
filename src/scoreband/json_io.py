"""JSON files: written atomically with numpy values made plain (NaN as null), and read back
within limits (size, nesting depth) that keep a hostile or damaged file from exhausting memory
or the stack.

Free of pandas, so the conformal core and calibrator files load fast.
"""

from __future__ import annotations

import json
import math
import os
import re

import numpy as np

from scoreband.errors import InputError
from scoreband.files import atomic_write_text, check_readable

__all__ = ["write_json", "to_jsonable", "read_json", "json_depth", "MAX_JSON_BYTES",
           "MAX_JSON_DEPTH"]

#: JSON files scoreband reads back (calibrators, configs, results) are refused above this
MAX_JSON_BYTES = 256 << 20
#: ... or nested deeper than this (Python's parser would end in RecursionError)
MAX_JSON_DEPTH = 100


def write_json(path, obj) -> None:
    """Write JSON atomically (NaN written as null)."""
    atomic_write_text(path, json.dumps(to_jsonable(obj), indent=2))


def to_jsonable(x):
    """Plain JSON types: numpy scalars/arrays unwrapped, NaN -> null, +/-inf -> "inf"/"-inf"."""
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return to_jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return None if math.isnan(f) else (str(f) if math.isinf(f) else f)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def read_json(path, *, what: str = "file", max_bytes: int = MAX_JSON_BYTES,
              max_depth: int = MAX_JSON_DEPTH, missing: str = "", fix: str = ""):
    """Parse a JSON file, refusing first what would exhaust memory or the stack: a path that
    is not a regular file (a FIFO or a device is an endless stream), one larger than
    ``max_bytes``, one nested deeper than ``max_depth``. Errors name ``what`` and the path;
    ``missing`` is appended when the file does not exist, ``fix`` to every other error."""
    if missing and not os.path.lexists(path):
        raise InputError(f"{what} {str(path)!r} does not exist; {missing}")
    try:
        return _read_json(path, what, max_bytes, max_depth)
    except InputError as e:
        if not fix:
            raise
        raise InputError(f"{e}; {fix}") from None


def _read_json(path, what: str, max_bytes: int, max_depth: int):
    p = check_readable(path, what)
    st = os.stat(p)
    if st.st_size > max_bytes:
        raise InputError(f"{what} {str(p)!r} is {st.st_size / 2**20:,.0f} MiB, above the "
                         f"{max_bytes / 2**20:,.0f} MiB scoreband reads")
    with open(p, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputError(f"{what} {str(p)!r} grew above {max_bytes / 2**20:,.0f} MiB while "
                         "read")
    try:  # a byte-order mark (Windows editors write one) is not part of the JSON
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{what} {str(p)!r} is not valid JSON (its bytes are not UTF-8 text)") from None
    depth = json_depth(text)
    if depth > max_depth:
        raise InputError(f"{what} {str(p)!r} is nested {depth} levels deep, above the "
                         f"{max_depth} scoreband reads")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as e:
        raise InputError(f"{what} {str(p)!r} is not valid JSON ({e.msg} at line {e.lineno}, "
                         f"column {e.colno})") from None
    except _DuplicateKey as e:
        raise InputError(f"{what} {str(p)!r} gives the key {e.args[0]!r} twice in one object "
                         "(JSON readers differ on which one counts): keep one") from None


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list) -> dict:
    """A JSON object, refusing a key given twice (``json`` would keep the last silently)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return out


def json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in JSON text (strings skipped), found with two
    regex passes and a cumulative sum (C speed, no recursion).

    >>> json_depth('{"a": [1, {"b": "[[["}]}')
    3
    """
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', "", text)
    brackets = re.sub(r"[^\[\]{}]", "", bare)
    if not brackets:
        return 0
    step = np.frombuffer(brackets.encode("ascii"), dtype=np.uint8)
    delta = np.where((step == ord("[")) | (step == ord("{")), 1, -1)
    return int(np.cumsum(delta).max())
