"""Inspect (``inspect_ai``) evaluation logs, ``.eval`` and ``.json``: one row per sample and
epoch, read where the log lies and never modified.

Columns: ``sample_id``, ``epoch``, ``task``, ``model``, ``target``, ``answer`` (the model's
completion), ``score_<scorer>`` per scorer (a letter grade as Inspect counts it: C = 1,
P = 0.5, I = N = 0; a scorer with several values gives ``score_<scorer>_<key>``),
``metadata_<key>`` for each plain metadata value of the samples (a human rating kept there
is a target), ``sample_error`` where a sample failed or a field of it could not be read
(``scores`` or ``metadata`` that is not an object: named, with a warning; the row is kept),
and where the outputs carry
``logprobs`` / ``top_logprobs`` the score-token columns of ``scoreband judge``
(:mod:`scoreband.formats._answers`: ``logp_<label>``, ``judge_expected`` ...).

Reading: through ``inspect_ai.log.read_eval_log`` where ``inspect_ai`` is installed
(``pip install "scoreband[harness]"``); without it, or where Inspect will not validate the
log (a sample's ``scores`` that is a list: read here, that row's fields named in its
``sample_error``), a ``.json`` log is parsed as the
documented JSON log format (``EvalLog``: ``version``, ``status``, ``eval`` - the task,
model, scorers - and ``samples``, each with ``id``, ``epoch``, ``target``, ``output``,
``scores``, ``metadata``, ``error`` and its ``attachments``, which are put back in place),
and an ``.eval`` log (a zip of ``header.json`` and ``samples/<id>_epoch_<n>.json``) is read
with the standard zip module where its members are deflated; a zstd-compressed one (what
recent Inspect versions write) needs ``inspect_ai``. Log versions 1 (a sample's one
``score``, read as ``score_<scorer>`` with the scorer's name from the results, as Inspect
reads it) and 2 (``scores``) are read; another version is refused, naming it.
"""

from __future__ import annotations

import json
import re
import warnings
import zipfile
from pathlib import Path

import pandas as pd

from scoreband.errors import InputError
from scoreband.formats._answers import DEFAULT_SCALE, answer_features, has_logprobs, parse_scale
from scoreband.formats.base import ReadOnlyFormat
from scoreband.formats.common import Cut, top_level

__all__ = ["INSPECT", "InspectLog"]

#: Inspect's letter grades as numbers (``inspect_ai.scorer.value_to_float``'s defaults)
GRADES = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0, "yes": 1.0, "true": 1.0, "no": 0.0,
          "false": 0.0}

#: the log versions this reader knows: 1 (a sample's one ``score``) and 2 (``scores``)
VERSIONS = (1, 2)


class InspectLog(ReadOnlyFormat):
    name = "inspect"
    help = "an Inspect (inspect_ai) evaluation log"
    suffixes = (".eval", ".json")
    markers = frozenset({"eval", "status"})

    def __init__(self, scale: tuple[int, int] = DEFAULT_SCALE):
        self.scale = scale

    def configure(self, options: str) -> InspectLog:
        return InspectLog(parse_scale(options))

    def sniff(self, path: Path, head: str) -> bool:
        """An ``.eval`` file, or a ``.json`` one whose top level is a log's: an integer
        ``version`` and an ``eval`` object naming the ``task`` (a pandas table with columns
        ``eval`` and ``status`` is a table)."""
        if path.suffix.lower() == ".eval":
            return True
        return is_log_header(top_level(head))

    def read(self, path: Path, columns=None, *, text: bool = False) -> pd.DataFrame:
        header, samples = _load(path, self)
        if not samples:
            raise self.not_this(path, f"it holds no samples, status "
                                      f"{header.get('status', '?')!r}; was it written with "
                                      "samples?")
        return _table(header, samples, self.scale, path)


def is_log_header(doc) -> bool:
    """Whether a JSON document's top level (:func:`~scoreband.formats.common.top_level`)
    is an Inspect log's."""
    if not isinstance(doc, dict):
        return False
    version, ev = doc.get("version"), doc.get("eval")
    if not isinstance(version, int) or isinstance(version, bool):
        return False
    if isinstance(ev, Cut):
        return ev == "{"
    return isinstance(ev, dict) and isinstance(ev.get("task"), str)


INSPECT = InspectLog()


# ------------------------------------------------------------------ loading
def _load(path: Path, fmt: InspectLog) -> tuple[dict, list[dict]]:
    """``(log header as a dict, samples as dicts)`` in the documented JSON shapes."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        read_eval_log = None
    if read_eval_log is not None:
        try:
            return _load_inspect(read_eval_log, path, fmt)
        except InputError as refused:  # a log Inspect will not validate (a field of the
            try:                       # wrong type): the documented layout, row by row
                return _load_own(path, fmt)
            except InputError:
                raise refused from None
    return _load_own(path, fmt)


def _load_own(path: Path, fmt: InspectLog) -> tuple[dict, list[dict]]:
    """The documented JSON layout parsed here (a ``.json`` log, or an ``.eval`` zip)."""
    if path.suffix.lower() == ".json":
        with open(path, encoding="utf-8-sig") as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or not isinstance(doc.get("eval"), dict):
            raise fmt.not_this(path, "no `eval` object at its top level")
        _check_version(doc, path)
        samples = doc.get("samples") or []
        if not isinstance(samples, list):
            raise fmt.not_this(path, f"its `samples` is a {type(samples).__name__}, not a list")
        return doc, [_attached(s) for s in samples]
    return _load_zip(path, fmt)


def _load_inspect(read_eval_log, path: Path, fmt: InspectLog) -> tuple[dict, list[dict]]:
    """Through ``inspect_ai`` itself (it reads every version it ever wrote)."""
    try:
        try:
            log = read_eval_log(str(path), resolve_attachments=True)
        except TypeError:  # an Inspect without resolve_attachments
            log = read_eval_log(str(path))
    except Exception as e:  # noqa: BLE001 - pydantic / zip / JSON errors: not a log
        msg = " ".join(str(e).split())[:300]
        raise fmt.not_this(path, f"inspect_ai cannot read it: {type(e).__name__}: {msg}") \
            from None
    results = log.results.model_dump(mode="json") if log.results is not None else None
    header = {"version": log.version, "status": log.status, "results": results,
              "eval": log.eval.model_dump(mode="json")}
    return header, [s.model_dump(mode="json") for s in (log.samples or [])]


def _check_version(header: dict, path: Path) -> None:
    """A log version this reader does not know is refused, naming it (its samples may keep
    their scores where this reader does not look)."""
    v = header.get("version")
    if v is not None and v not in VERSIONS:
        raise InputError(f"{str(path)!r} is an Inspect log of version {v!r}; scoreband reads "
                         f"versions {', '.join(map(str, VERSIONS))} itself: install inspect_ai "
                         "(pip install \"scoreband[harness]\") to read it through Inspect, or "
                         "convert it with `inspect log convert --to json`")


def _load_zip(path: Path, fmt: InspectLog) -> tuple[dict, list[dict]]:
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            header = json.loads(z.read("header.json")) if "header.json" in names else \
                json.loads(z.read("_journal/start.json"))
            samples = [_attached(json.loads(z.read(n))) for n in sorted(names, key=_order)
                       if n.startswith("samples/") and n.endswith(".json")]
    except NotImplementedError:
        raise InputError(f"the Inspect log {str(path)!r} is zstd-compressed: reading it "
                         "needs inspect_ai (pip install \"scoreband[harness]\"), or convert it with "
                         "`inspect log convert --to json`") from None
    except (zipfile.BadZipFile, KeyError, ValueError) as e:
        raise fmt.not_this(path, f"not an Inspect .eval archive: {e}") from None
    if not isinstance(header, dict):
        raise fmt.not_this(path, "its header.json is not an object")
    _check_version(header, path)
    return header, samples


def _order(name: str):
    m = re.match(r"samples/(.*)_epoch_(\d+)\.json$", name)
    return (int(m.group(2)), m.group(1)) if m else (0, name)


def _attached(sample: dict) -> dict:
    """A sample with its ``attachment://<hash>`` references replaced by their text."""
    att = sample.get("attachments") or {}
    if not att:
        return sample

    def put(v):
        if isinstance(v, str) and v.startswith("attachment://"):
            return att.get(v[len("attachment://"):], v)
        if isinstance(v, dict):
            return {k: put(x) for k, x in v.items()}
        if isinstance(v, list):
            return [put(x) for x in v]
        return v

    return {k: (v if k == "attachments" else put(v)) for k, v in sample.items()}


# ------------------------------------------------------------------ the table
#: the key inspect_ai gives a version-1 sample's one score until it finds the scorer's name
PLACEHOLDER = "88F74D2C"


def _table(header: dict, samples: list, scale, path: Path) -> pd.DataFrame:
    ev = header.get("eval") if isinstance(header.get("eval"), dict) else {}
    v1_name = _scorer_name(header)
    rows, bad = [], []
    for k, s in enumerate(samples):
        row, problems = _sample_row(s if isinstance(s, dict) else {}, ev, v1_name)
        if not isinstance(s, dict):
            problems = [f"the sample is a {type(s).__name__}, not an object"]
        if problems:
            where = f"sample {row['sample_id']!r} (epoch {row['epoch']})" \
                if row["sample_id"] is not None else f"sample {k + 1}"
            bad.append(f"{where}: {'; '.join(problems)}")
            row["sample_error"] = "; ".join(filter(None, [row.get("sample_error")] + problems))
        rows.append(row)
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        warnings.warn(f"Inspect log {str(path)!r}: {' | '.join(bad[:3])}{more}; those fields "
                      "are not read (each row's sample_error says why)", stacklevel=3)
    df = pd.DataFrame.from_records(rows)
    if "sample_error" in df:
        df["sample_error"] = df["sample_error"].fillna("")
    outputs = [s.get("output") if isinstance(s, dict) else None for s in samples]
    if any(has_logprobs(o) for o in outputs):
        feats = answer_features([o if has_logprobs(o) else None for o in outputs], scale)
        df = pd.concat([df, pd.DataFrame(feats, index=df.index)], axis=1)
    return df


def _sample_row(s: dict, ev: dict, v1_name: str) -> tuple[dict, list[str]]:
    """One sample as a row, and what in it could not be read (a field of the wrong type:
    named, never dropped silently)."""
    problems = []
    out = s.get("output")
    if out is not None and not isinstance(out, dict):
        problems.append(_wrong("output", out, "an object"))
    out = out if isinstance(out, dict) else {}
    row = {"sample_id": s.get("id"), "epoch": s.get("epoch"), "task": ev.get("task"),
           "model": out.get("model") or ev.get("model"),
           "target": _text(s.get("target")), "answer": _completion(out)}
    scores = s.get("scores")
    if scores is None and s.get("score") is not None:  # a version-1 log: one score
        scores = {v1_name: s["score"]}
    if isinstance(scores, dict):
        for name, sc in scores.items():
            _put_score(row, v1_name if name == PLACEHOLDER else name, sc)
    elif scores is not None:
        problems.append(_wrong("scores", scores, "an object of scorer name -> score"))
    meta = s.get("metadata")
    if isinstance(meta, dict):
        for k, v in meta.items():
            if v is None or isinstance(v, (str, int, float, bool)):
                row[f"metadata_{k}"] = v
    elif meta is not None:
        problems.append(_wrong("metadata", meta, "an object"))
    err = s.get("error")
    if err:
        row["sample_error"] = err.get("message", str(err)) if isinstance(err, dict) else str(err)
    return row, problems


def _put_score(row: dict, name: str, sc) -> None:
    value = sc.get("value") if isinstance(sc, dict) else sc
    if isinstance(value, dict):
        row.update({f"score_{name}_{k}": score_value(v) for k, v in value.items()})
    else:
        row[f"score_{name}"] = score_value(value)


def _wrong(field: str, value, expected: str) -> str:
    shown = json.dumps(value, default=str)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"`{field}` is a {type(value).__name__} ({shown}), expected {expected}"


def _scorer_name(header: dict) -> str:
    """The name of a version-1 log's one scorer (its sample's ``score``): from the results
    (``scores[0].name``, or version 1's ``scorer.name``), else the task's first scorer;
    ``score`` when the log names none."""
    res, ev = (header.get(k) if isinstance(header.get(k), dict) else {}
               for k in ("results", "eval"))
    first = [x[0] if isinstance(x, list) and x else None
             for x in (res.get("scores"), ev.get("scorers"))]
    for cand in (first[0], res.get("scorer"), first[1]):
        if isinstance(cand, dict) and isinstance(cand.get("name"), str) and cand["name"]:
            return cand["name"]
    return "score"


def score_value(v):
    """A score value as a number: Inspect's letter grades as it counts them, numbers and
    booleans as they are, a number written as text as that number; other text as is."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) or v is None:
        return v
    if isinstance(v, str):
        if v in GRADES or v.lower() in GRADES:
            return GRADES.get(v, GRADES.get(v.lower()))
        try:
            return float(v)
        except ValueError:
            return v
    return json.dumps(v)


def _completion(out: dict):
    if isinstance(out.get("completion"), str):
        return out["completion"]
    try:
        content = out["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    return _text(content)


def _text(v):
    """A target or message content as text: a list of texts joined by newlines, content
    parts by their ``text``."""
    if isinstance(v, list):
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in v]
        return "\n".join(parts)
    return v

