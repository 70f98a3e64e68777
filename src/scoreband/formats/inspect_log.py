"""Inspect (``inspect_ai``) evaluation logs, ``.eval`` and ``.json``: one row per sample and
epoch, read where the log lies and never modified.

Columns: ``sample_id``, ``epoch``, ``task``, ``model``, ``target``, ``answer`` (the model's
completion), ``score_<scorer>`` per scorer (a letter grade as Inspect counts it: C = 1,
P = 0.5, I = N = 0; a scorer with several values gives ``score_<scorer>_<key>``),
``metadata_<key>`` for each plain metadata value of the samples (a human rating kept there
is a target), ``sample_error`` where a sample failed, and where the outputs carry
``logprobs`` / ``top_logprobs`` the score-token columns of ``scoreband judge``
(:mod:`scoreband.formats._answers`: ``logp_<label>``, ``judge_expected`` ...).

Reading: through ``inspect_ai.log.read_eval_log`` where ``inspect_ai`` is installed
(``pip install "scoreband[harness]"``); without it, a ``.json`` log is parsed as the
documented JSON log format (``EvalLog``: ``version``, ``status``, ``eval`` - the task,
model, scorers - and ``samples``, each with ``id``, ``epoch``, ``target``, ``output``,
``scores``, ``metadata``, ``error`` and its ``attachments``, which are put back in place),
and an ``.eval`` log (a zip of ``header.json`` and ``samples/<id>_epoch_<n>.json``) is read
with the standard zip module where its members are deflated; a zstd-compressed one (what
recent Inspect versions write) needs ``inspect_ai``.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pandas as pd

from scoreband.errors import InputError
from scoreband.formats._answers import DEFAULT_SCALE, answer_features, has_logprobs, parse_scale
from scoreband.formats.base import ReadOnlyFormat

__all__ = ["INSPECT", "InspectLog"]

#: Inspect's letter grades as numbers (``inspect_ai.scorer.value_to_float``'s defaults)
GRADES = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0, "yes": 1.0, "true": 1.0, "no": 0.0,
          "false": 0.0}

_INSPECT_JSON = re.compile(r'^\s*\{.*?"eval"\s*:\s*\{', re.S)


class InspectLog(ReadOnlyFormat):
    name = "inspect"
    help = "an Inspect (inspect_ai) evaluation log"
    suffixes = (".eval", ".json")

    def __init__(self, scale: tuple[int, int] = DEFAULT_SCALE):
        self.scale = scale

    def configure(self, options: str) -> InspectLog:
        return InspectLog(parse_scale(options))

    def sniff(self, path: Path, head: str) -> bool:
        if path.suffix.lower() == ".eval":
            return True
        return bool(_INSPECT_JSON.match(head[:4096])) and '"status"' in head

    def read(self, path: Path, columns=None, *, text: bool = False) -> pd.DataFrame:
        header, samples = _load(path)
        if not samples:
            raise InputError(f"Inspect log {str(path)!r} holds no samples (status "
                             f"{header.get('status', '?')!r}); was it written with samples?")
        return _table(header, samples, self.scale)


INSPECT = InspectLog()


# ------------------------------------------------------------------ loading
def _load(path: Path) -> tuple[dict, list[dict]]:
    """``(log header as a dict, samples as dicts)`` in the documented JSON shapes."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        read_eval_log = None
    if read_eval_log is not None:
        try:
            log = read_eval_log(str(path), resolve_attachments=True)
        except TypeError:  # an Inspect without resolve_attachments
            log = read_eval_log(str(path))
        header = {"status": log.status, "eval": log.eval.model_dump(mode="json")}
        return header, [s.model_dump(mode="json") for s in (log.samples or [])]
    if path.suffix.lower() == ".json":
        with open(path, encoding="utf-8-sig") as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or not isinstance(doc.get("eval"), dict):
            raise InputError(f"{str(path)!r} is not an Inspect log (no `eval` object)")
        return doc, [_attached(s) for s in doc.get("samples") or []]
    return _load_zip(path)


def _load_zip(path: Path) -> tuple[dict, list[dict]]:
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
    except (zipfile.BadZipFile, KeyError) as e:
        raise InputError(f"{str(path)!r} is not an Inspect .eval log ({e})") from None
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
def _table(header: dict, samples: list[dict], scale) -> pd.DataFrame:
    ev = header.get("eval") or {}
    rows = []
    for s in samples:
        out = s.get("output") or {}
        row = {"sample_id": s.get("id"), "epoch": s.get("epoch"), "task": ev.get("task"),
               "model": out.get("model") or ev.get("model"),
               "target": _text(s.get("target")), "answer": _completion(out)}
        for name, sc in (s.get("scores") or {}).items():
            value = sc.get("value") if isinstance(sc, dict) else sc
            if isinstance(value, dict):
                row.update({f"score_{name}_{k}": score_value(v) for k, v in value.items()})
            else:
                row[f"score_{name}"] = score_value(value)
        for k, v in (s.get("metadata") or {}).items():
            if v is None or isinstance(v, (str, int, float, bool)):
                row[f"metadata_{k}"] = v
        err = s.get("error")
        if err:
            row["sample_error"] = err.get("message", str(err)) if isinstance(err, dict) else str(err)
        rows.append(row)
    df = pd.DataFrame.from_records(rows)
    if "sample_error" in df:
        df["sample_error"] = df["sample_error"].fillna("")
    outputs = [s.get("output") for s in samples]
    if any(has_logprobs(o) for o in outputs):
        feats = answer_features([o if has_logprobs(o) else None for o in outputs], scale)
        df = pd.concat([df, pd.DataFrame(feats, index=df.index)], axis=1)
    return df


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

