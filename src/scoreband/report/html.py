"""One self-contained HTML report for any results file a scoreband command writes: a verdict
first, then figures (inline SVG from matplotlib), tables, the definition of every metric and
the provenance. Jinja2 renders the page; nothing is fetched when it is opened (no scripts,
fonts or images from elsewhere).

The report knows no results format: each kind's module renders its own section, and
:mod:`scoreband.report.sections` says which module that is. This module only iterates them.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone
from pathlib import Path

from scoreband._version import __version__
from scoreband.errors import InputError
from scoreband.files import atomic_write_text
from scoreband.json_io import read_json
from scoreband.report.schema import FIX, check_results
from scoreband.report.sections import KINDS, kind_of, section_of

__all__ = ["render_report", "write_report", "kind_of", "DEFINITIONS"]

DEFINITIONS = [
    ("coverage", "Share of held-out items whose human score lies inside their band; the "
                 "target is 1 - alpha (0.90 for alpha = 0.1)."),
    ("theoretical coverage band", "Where split-conformal coverage lands with n calibration "
                                  "items: between 1 - alpha and 1 - alpha + 1/(n + 1) in "
                                  "expectation, wider on discrete targets (ties)."),
    ("Clopper-Pearson interval", "Exact 95 % binomial interval of a coverage measured on a "
                                 "finite number of items. Over repeated splits the same items "
                                 "are tested again and again, so each distinct item is "
                                 "counted once: the interval is that of the mean coverage "
                                 "over the splits observed on the group's distinct tested "
                                 "items (n in the table), never on n per split x splits."),
    ("mean ± std", "A number over repeated random calibration/test splits: its mean and its "
                   "standard deviation across the splits (the spread from re-drawing the "
                   "split, not a confidence interval)."),
    ("coverage by level", "Coverage of the items whose human score rounds to a level (left) "
                          "or whose calibrated median does (predicted level). A band built "
                          "for 90 % on average can cover the best and worst items far less: "
                          "the per-level coverage says where it can be trusted."),
    ("calibration curve", "Empirical coverage against the nominal 1 - alpha over several "
                          "alphas: on the diagonal the bands mean what they say at every "
                          "level of confidence."),
    ("width / sharpness", "Mean band width; on the native scale unless said (sharpness on "
                          "[0, 1] is the width divided by the scale's range). Narrower is "
                          "better at the same coverage."),
    ("UPS", "Uncertainty-prediction score: the correlation between an item's band width and "
            "its absolute error. Positive: wider bands where the scorer errs more. A method "
            "that gives every band one width (split conformal on a given median) has a UPS "
            "only from bands cut at the scale's ends: it is then not a sign of adaptation "
            "(the evaluate report leaves it out)."),
    ("Kendall tau-c", "Rank agreement between the point predictions and the human scores "
                      "(tau-c handles ties and unequal numbers of categories)."),
    ("RSG", "Ranking-scoring gap of a judge: how much better it orders items than it scores "
            "them (high: use it for pairwise ranking, not absolute scores)."),
    ("effective sample", "(sum w)^2 / sum w^2 of the weights of weighted conformal "
                         "prediction: how many calibration items the shift-corrected band "
                         "really rests on."),
]


def _provenance(doc: dict) -> str:
    p = doc.get("provenance") or doc.get("_meta", {}).get("provenance")
    if not p:
        keep = {k: v for k, v in doc.items() if isinstance(v, (str, int, float, bool))}
        return json.dumps(keep, indent=1)
    return json.dumps({k: p[k] for k in p if k != "packages"} | {
        "packages": p.get("packages", {})}, indent=1, default=str)


def _provenance_rows(doc: dict) -> list[tuple[str, str]]:
    """The provenance as (what, value) rows: time, command, components, package versions."""
    p = doc.get("provenance") or doc.get("_meta", {}).get("provenance") or {}
    rows = []
    for k, v in p.items():
        if k == "packages" and isinstance(v, dict):
            rows += [(f"package {name}", str(ver)) for name, ver in v.items()]
        elif isinstance(v, dict):
            rows += [(f"{k}: {kk}", json.dumps(vv, default=str) if not isinstance(vv, str)
                      else vv) for kk, vv in v.items()]
        else:
            rows.append((k, " ".join(v) if isinstance(v, list) else str(v)))
    return rows


def _image_block(path) -> dict:
    """A PNG the command wrote, inlined (the report stays one self-contained file)."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return {"kind": "image", "src": f"data:image/png;base64,{data}",
            "caption": f"{Path(path).name}, as the command wrote it beside this report."}


def render_report(docs: list[dict], title: str | None = None, images=(),
                  names=None) -> str:
    """The HTML of one report over one or more results documents; ``images``: PNG files the
    command wrote, shown in the first section; ``names``: the file each document was read
    from (None for one the command made), named in an error."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    sections, prov = [], []
    seen: dict[str, int] = {}
    for doc, name in zip(docs, names or [None] * len(docs), strict=True):
        kind = kind_of(doc)
        sections.append(_section(doc, kind, name))
        t = sections[-1]["title"]
        seen[t] = seen.get(t, 0) + 1
        if seen[t] > 1:  # two results files of one kind: titles that tell them apart
            sections[-1]["title"] = f"{t} ({seen[t]})"
        prov.append({"title": sections[-1]["title"], "text": _provenance(doc),
                     "rows": _provenance_rows(doc)})
    if sections:
        sections[0]["blocks"] += [_image_block(p) for p in images
                                  if str(p).lower().endswith(".png") and Path(p).is_file()]
    env = Environment(loader=PackageLoader("scoreband.report", "templates"),
                      autoescape=select_autoescape(["html", "j2"]))
    return env.get_template("report.html.j2").render(
        title=title or "scoreband report: " + ", ".join(s["title"] for s in sections),
        version=__version__, created=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        sections=sections, definitions=_definitions(docs), provenance=prov)


def _definitions(docs) -> list:
    """The terms the report's sections use: the common ones, then each kind's own (in the
    order of :data:`~scoreband.report.sections.KINDS`), each term once."""
    present = {kind_of(d) for d in docs}
    defs = list(DEFINITIONS)
    seen = {term for term, _ in defs}
    for kind in (k for k in KINDS.names() if k in present):
        for term, text in section_of(kind).definitions:
            if term not in seen:
                seen.add(term)
                defs.append((term, text))
    return defs


def write_report(docs, out, title: str | None = None, images=()) -> Path:
    """Write the report of ``docs`` (dicts, or paths of results JSON files) to ``out``,
    with the PNG ``images`` the command wrote inlined."""
    loaded = []
    for d in docs:
        if isinstance(d, dict):
            loaded.append(d)
            continue
        try:
            doc = read_json(d, what="results file")
        except InputError as e:
            raise InputError(f"{d}: not a readable results JSON ({e})") from None
        try:
            kind = kind_of(doc)
        except ValueError as e:
            raise InputError(f"{d}: {e}") from None
        check_results(doc, kind, d)  # every key its section reads, of its type
        loaded.append(doc)
    for d, doc in zip(docs, loaded, strict=True):
        try:
            kind_of(doc)
        except ValueError as e:
            raise InputError(f"{d if not isinstance(d, dict) else 'document'}: {e}") from None
    names = [None if isinstance(d, dict) else str(d) for d in docs]
    atomic_write_text(Path(out), render_report(loaded, title, images, names=names))
    return Path(out)


def _section(doc: dict, kind: str, name: str | None) -> dict:
    """The section of one document; ``name``: the file it was read from, whose problems
    the declared keys (:mod:`scoreband.report.schema`) did not catch (an edited file) are
    then an InputError naming it, never a crash."""
    build = section_of(kind).build
    if name is None:
        return build(doc)
    try:
        return build(doc)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, StopIteration,
            ZeroDivisionError, OverflowError) as e:
        what = (f"key {e.args[0]!r} is missing" if isinstance(e, KeyError) and e.args
                else " ".join(str(e).split())[:200] or type(e).__name__)
        raise InputError(f"{name}: cannot read this {kind} results file ({what}); "
                         f"{FIX}") from None

