"""Does a calibrator or a triage rule still keep its promise? An anytime-valid monitor over a
stream of newly labeled rows (``scoreband monitor``; SPEC section 16).

Each row of the stream, in arrival order, gives a loss: for a calibrator, 1 where the human
target lies outside the row's band (the calibrator's apply stage bands the row, exactly as
``scoreband apply`` does); for a triage rule, 1 where a row the rule trusts has a score off
the target by more than its tolerance (the rule's triage stage decides the row, as
``scoreband apply --calibrator RULE`` does; rows it escalates carry no loss and are not
monitored). The promise ``p0``: the calibrator's ``alpha``, the rule's risk (or
``promise=``). The test is the e-process of :mod:`scoreband.decisions.eprocess`: **if every
row's expected loss given the rows before it is at most p0, the chance that the monitor ever
alarms, however long the stream, is at most ``false_alarm``** (Ville's inequality). A
calibrator fitted without ``delta`` promises alpha only on average over its calibration
draw; the one calibrator fitted may miss a little more, which the monitor can flag on a long
stream: fit with ``delta`` (then the promise holds for this calibrator with probability 1 -
delta), or give ``promise=``.

With ``by=COL`` every value of the column is its own stream with its own e-process, each at
``false_alarm`` (the chance of a false alarm is at most ``false_alarm`` per value, not for
all values together). Rows that cannot be scored (a bad prediction or target cell, a missing
``by`` value) are skipped, listed with their row numbers, and never counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scoreband.decisions.eprocess import EVERY, change_point, first_alarm, log_eprocess
from scoreband.errors import InputError, RowError
from scoreband.report.sections import ReportSection

__all__ = ["monitor", "MonitorResult", "StreamResult", "MONITOR_FORMAT", "REPORT_SECTION",
           "stream_losses", "Losses", "advice", "guarantee_words"]

MONITOR_FORMAT = "scoreband-monitor"
ALL = "(all)"


@dataclass
class StreamResult:
    """One monitored stream (the whole table, or one value of ``by``): the 1-based table
    rows monitored, their losses, ``log_e`` (the natural log of the e-process after each),
    the alarm row, the estimated change row and the loss rate since it."""

    rows: np.ndarray
    losses: np.ndarray
    log_e: np.ndarray
    alarm_row: int | None
    change_row: int | None
    since: dict | None

    def to_dict(self) -> dict:
        return {"alarm_row": self.alarm_row, "monitored": len(self.rows),
                "loss_rate": float(self.losses.mean()) if len(self.losses) else None,
                "max_e_value": float(np.exp(self.log_e.max())) if len(self.log_e) else 1.0,
                "final_e_value": float(np.exp(self.log_e[-1])) if len(self.log_e) else 1.0,
                "change_row": self.change_row, "since_change": self.since,
                "path": {"row": self.rows.tolist(),
                         "log_e": np.round(self.log_e, 4).tolist()}}


@dataclass
class MonitorResult:
    """What :func:`monitor` found. ``alarm_row``: the 1-based table row of the first alarm
    (the earliest over the ``by`` values), None without one; ``streams``: value -> its
    :class:`StreamResult` (``"(all)"`` without ``by``); ``errors``: the skipped rows;
    ``advice``: what to do. ``to_dict()`` / ``save(path)``: the results JSON."""

    alarm_row: int | None
    kind: str
    source: str
    promise: float
    promise_from: str
    false_alarm: float
    rows: int
    streams: dict[str, StreamResult]
    by: str | None = None
    escalated: int = 0
    errors: list[RowError] = field(default_factory=list)
    advice: str = ""
    warnings: list[str] = field(default_factory=list)
    refit: str = ""  #: the command that refits the source on the rows since the change

    @property
    def alarmed(self) -> dict[str, int]:
        """value -> alarm row, for the streams that alarmed."""
        return {k: s.alarm_row for k, s in self.streams.items() if s.alarm_row is not None}

    def since_rows(self, stream):
        """The rows of ``stream`` (the table monitored) from the estimated change of the
        first alarm on (of its ``by`` value): the rows to label and refit on; None
        without an alarm."""
        hit = [(s.alarm_row, v, s) for v, s in self.streams.items() if s.alarm_row]
        if not hit:
            return None
        _, value, s = min(hit, key=lambda h: h[0])
        keep = np.arange(len(stream)) >= s.change_row - 1
        if self.by is not None:
            keep &= (stream[self.by].astype(str) == value).to_numpy()
        return stream.iloc[np.flatnonzero(keep)]

    def to_dict(self) -> dict:
        return {"format": MONITOR_FORMAT, "alarm_row": self.alarm_row, "kind": self.kind,
                "source": self.source, "promise": self.promise,
                "promise_from": self.promise_from, "false_alarm": self.false_alarm,
                "guarantee": guarantee_words(self.false_alarm, self.by),
                "rows": self.rows, "skipped_rows": len(self.errors), "refit": self.refit,
                "escalated": self.escalated, "by": self.by, "advice": self.advice,
                "streams": {k: s.to_dict() for k, s in self.streams.items()},
                "errors": [e.__dict__ for e in self.errors[:1000]],
                "warnings": self.warnings}

    def save(self, path) -> Path:
        from scoreband.json_io import write_json

        write_json(path, self.to_dict())
        return Path(path)


def guarantee_words(false_alarm: float, by: str | None) -> str:
    """The guarantee in words, as the results file and the report state it."""
    per = (f" for each value of {by!r} apart (more values, more chances of a false alarm "
           "among them)" if by else "")
    return (f"While the promise holds (each row's chance of a loss, given the rows before it, "
            f"is at most the promised rate), the chance that this monitor ever alarms, "
            f"however long the stream runs, is at most {false_alarm:g}{per} (a betting "
            f"e-process with restarts every {EVERY} rows; Ville's inequality).")


# ------------------------------------------------------------------ reading the source
def _source(calibration_or_path):
    """``("triage-rule", TriageRule)`` or ``("calibrator", (calibrator, document))``."""
    from scoreband.decisions.rule import load_rule
    from scoreband.decisions.triage import RULE_FORMAT, TriageRule

    obj = calibration_or_path
    if isinstance(obj, TriageRule):
        return "triage-rule", obj
    if isinstance(obj, tuple) and len(obj) == 2:
        return "calibrator", obj
    if hasattr(obj, "calibrator") and hasattr(obj, "inputs"):  # an api.Calibration
        return "calibrator", (obj.calibrator, {"inputs": obj.inputs})
    if not isinstance(obj, (str, Path)):
        raise InputError("`calibration_or_path`: give a calibrator file, a triage rule file, "
                         "a Calibration or a TriageRule")
    from scoreband.json_io import read_json

    doc = read_json(obj, what="calibrator or rule",
                    missing="write one with `scoreband calibrate` or `scoreband triage`")
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if fmt == RULE_FORMAT:
        return "triage-rule", load_rule(doc, str(obj))
    if isinstance(fmt, str) and "rule" in fmt:
        raise InputError(f"{obj} is a {fmt}: the monitor watches a calibrator or a triage "
                         "rule (a pairwise rule is not monitored yet)")
    from scoreband.conformal import load_calibrator

    return "calibrator", load_calibrator(obj)


def _targets(df, scale, target, ratings, ratings_sep, n_ratings, id_col):
    """The human target of each row on [0, 1] (NaN where unusable) and the bad rows."""
    from scoreband.columns import ColumnSpec, load_inputs

    if not (target or ratings):
        raise InputError("give the stream's human score: `target` (a column of mean ratings) "
                         "or `ratings`")
    spec = ColumnSpec.from_dict({"scale": scale, "target": target, "ratings": ratings,
                                 "ratings_sep": ratings_sep or ";",
                                 "id_col": id_col if id_col in df.columns else None})
    inp = load_inputs(df, spec, require_median=False, n_ratings=n_ratings, allow_none=True)
    y = np.full(len(df), np.nan)
    y[inp.rows] = inp.y01
    return y, list(inp.errors)


@dataclass
class Losses:
    """Each row's loss (NaN: not monitored) and how the rows were read."""

    kind: str  #: "calibrator" or "triage-rule"
    promise: float  #: the source's own promise: alpha, or the rule's risk
    z: np.ndarray
    errors: list[RowError]
    warnings: list[str]
    escalated: int  #: rows a rule escalated (not monitored)
    target: str | None  #: the target column read
    refit: str = ""  #: the command that refits the source on new rows (SOURCE, ROWS)


def _calibrator_losses(pair, df, columns: dict, n_ratings, on_warning):
    from scoreband.apply_stage import ApplyStage
    from scoreband.engine.rows import run_rows
    from scoreband.metrics import covered

    cal, doc = pair
    recorded = dict((doc.get("inputs") or {}).get("columns") or {})
    given = {k: v for k, v in columns.items() if v is not None}
    target, ratings = given.pop("target", None), given.pop("ratings", None)
    if not (target or ratings):
        target, ratings = recorded.get("target"), recorded.get("ratings")
    stage = ApplyStage(pair, columns=given, n_ratings=n_ratings, on_warning=on_warning)
    out = run_rows(df, stage).table
    lo, hi = (out[c].to_numpy(dtype=float) for c in ("band_lo01", "band_hi01"))
    y, bad = _targets(df, recorded.get("scale") or cal.scale.to_dict(), target, ratings, recorded.get("ratings_sep"),
                      n_ratings, recorded.get("id_col"))
    ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(y)
    z = np.full(len(df), np.nan)
    z[ok] = 1.0 - covered(lo[ok], hi[ok], y[ok])
    flag = f"--ratings {ratings}" if ratings else f"--target {target}"
    return Losses("calibrator", float(cal.alpha), z, [*stage.errors, *bad],
                  list(stage.warnings), 0, target or ratings,
                  f"scoreband recalibrate SOURCE ROWS {flag} --out recalibrated.json")


def _rule_losses(rule, df, columns: dict, n_ratings, on_warning):
    from scoreband.decisions.rule import RuleStage
    from scoreband.decisions.triage import losses
    from scoreband.engine.rows import run_rows

    extra = [k for k, v in columns.items() if v is not None and k not in ("target",
                                                                          "ratings")]
    if extra:
        raise InputError(f"{', '.join(f'`{k}`' for k in extra)}: not used with a triage rule, "
                         "which reads the columns it was fitted with; leave them out")
    stage = RuleStage(rule, on_warning=on_warning)
    out = run_rows(df, stage).table
    target = columns.get("target") or rule.columns.get("target")
    y, bad = _targets(df, rule.scale.to_dict(), target, columns.get("ratings"), None,
                      n_ratings, rule.columns.get("id_col"))
    trusted = out["trusted"].to_numpy(dtype=bool)
    score = out["triage_score"].to_numpy(dtype=float)
    ok = trusted & np.isfinite(y) & np.isfinite(score)
    z = np.full(len(df), np.nan)
    z[ok] = losses(score[ok], rule.scale.from01(y[ok]), rule.tolerance)
    escalated = int((~trusted).sum()) - len({e.position for e in stage.errors})
    c, sc = rule.columns, rule.scale
    refit = (f"scoreband triage ROWS --target {target} --score {c.get('score')} --scale "
             f"{sc.lo:g},{sc.hi:g} --tolerance {rule.tolerance:g} --alpha {rule.alpha:g} "
             f"--delta {rule.delta:g}" + (f" --groups {c['groups']}" if c.get("groups") else "")
             + (f" --uncertainty {c['uncertainty']}" if c.get("uncertainty") else "")
             + " --out rule.json")
    return Losses("triage-rule", float(rule.alpha), z, [*stage.errors, *bad],
                  list(stage.warnings), max(escalated, 0), columns.get("ratings") or target,
                  refit)


def stream_losses(source, df, *, columns: dict | None = None, n_ratings=None,
                  on_warning=None) -> Losses:
    """The :class:`Losses` of the rows of ``df`` under ``source`` (a calibrator or a triage
    rule, as :func:`monitor` takes it): ``z`` (n,) each row's loss, NaN where the row is not
    monitored (a bad row, listed once in ``errors`` with its first reason; a row a rule
    escalates, counted in ``escalated``)."""
    kind, obj = _source(source)
    fn = _rule_losses if kind == "triage-rule" else _calibrator_losses
    out = fn(obj, df, dict(columns or {}), n_ratings, on_warning)
    seen: dict[int, RowError] = {}
    for e in out.errors:
        seen.setdefault(e.position, e)
    if seen:
        out.z[np.array(sorted(seen), dtype=int)] = np.nan
    out.errors = [seen[i] for i in sorted(seen)]
    return out


# ------------------------------------------------------------------ the monitor
def _stream(z: np.ndarray, positions: np.ndarray, p0: float, false_alarm: float
            ) -> StreamResult:
    """The e-process over one stream's losses ``z`` at 0-based table ``positions``."""
    rows = positions + 1
    if len(z) == 0:
        return StreamResult(rows, z, np.zeros(0), None, None, None)
    log_e = log_eprocess(z, p0)
    at = first_alarm(log_e, false_alarm)
    if at < 0:
        return StreamResult(rows, z, log_e, None, None, None)
    cp = change_point(z, p0, at)
    return StreamResult(rows, z, log_e, int(rows[at]), int(rows[cp]), _since(z[cp:],
                                                                              rows[cp]))


def _since(z: np.ndarray, first_row: int) -> dict:
    """The loss rate from the estimated change to the end of the stream, with its exact
    (Clopper-Pearson) 95 % interval."""
    from scoreband.metrics import binomial_ci

    k, n = int(round(float(z.sum()))), len(z)
    lo, hi = binomial_ci(k, n, 0.95)
    return {"from_row": int(first_row), "rows": n, "losses": float(z.sum()),
            "loss_rate": float(z.mean()), "ci95": [float(lo), float(hi)],
            "estimate": "the generalised likelihood ratio change point (the start that "
                        "maximises the binomial likelihood ratio of the rows since it "
                        "against the promise), sought up to the alarm row"}


def _by_values(df, by: str | None, z: np.ndarray, errors: list[RowError]):
    """value -> 0-based positions of the monitored rows; rows without a ``by`` value become
    errors."""
    ok = np.isfinite(z)
    if by is None:
        return {ALL: np.flatnonzero(ok)}
    if by not in df.columns:
        raise InputError(f"`by`: the stream has no column {by!r} (available: "
                         f"{', '.join(map(str, list(df.columns)[:30]))})")
    cells = df[by]
    missing = cells.isna().to_numpy() | (cells.astype(str).str.strip() == "").to_numpy()
    have = {e.position for e in errors}
    for i in np.flatnonzero(missing & ok):
        errors.append(RowError(str(i + 1), by, "no value to monitor it under; give each row "
                                               f"its {by} or leave `by` out", int(i)))
        have.add(int(i))
    ok &= ~missing
    values = cells.astype(str).to_numpy()
    return {v: np.flatnonzero(ok & (values == v)) for v in dict.fromkeys(values[ok])}


def monitor(calibration_or_path, stream, *, target: str | None = None,
            ratings: str | None = None, median: str | None = None, lo: str | None = None,
            hi: str | None = None, groups: str | None = None, by: str | None = None,
            false_alarm: float = 0.05, promise: float | None = None,
            n_ratings: int | None = None, on_warning=None) -> MonitorResult:
    """Watch newly labeled rows, in arrival order, for the moment a calibrator's bands miss
    more often than its alpha, or a triage rule's trusted rows err more often than its
    risk (module docstring).

    ``calibration_or_path``: a calibrator file (``scoreband calibrate``), a triage rule file
    (``scoreband triage --out``), a :class:`scoreband.api.Calibration` or a ``TriageRule``;
    ``stream``: a DataFrame or a table path, rows in arrival order. Column keywords as in
    :func:`scoreband.api.apply` (``median``, ``lo``, ``hi``, ``groups``: a calibrator's
    recorded columns by default) and the human score (``target`` or ``ratings``: the
    recorded target column by default). ``by``: monitor each value of this column apart,
    each at ``false_alarm``. ``promise``: the loss rate to hold the source to (default: its
    alpha / risk).

    Guarantee: while each row's chance of a loss given the rows before it is at most the
    promise, ``P(alarm_row is not None) <= false_alarm`` for a stream of any length (per
    ``by`` value).

    Returns a :class:`MonitorResult`: ``alarm_row`` (1-based table row of the first alarm,
    None without one), each stream's e-value path, the estimated change row and the loss
    rate since it, ``advice``; ``.save(path)`` writes the results JSON.
    """
    from scoreband.tables import read_table

    if not 0.0 < false_alarm < 1.0:
        raise InputError(f"`false_alarm` must lie in (0, 1), got {false_alarm!r}")
    if promise is not None and not 0.0 < promise < 1.0:
        raise InputError(f"`promise` must lie in (0, 1), got {promise!r}")
    df = read_table(stream) if isinstance(stream, (str, Path)) else stream
    cols = {"target": target, "ratings": ratings, "median": median, "lo": lo, "hi": hi,
            "groups": groups}
    got = stream_losses(calibration_or_path, df, columns=cols, n_ratings=n_ratings,
                        on_warning=on_warning)
    kind, z, errors = got.kind, got.z, got.errors
    promised = "the rule's risk" if kind == "triage-rule" else "the calibrator's alpha"
    p0, frm = ((got.promise, promised) if promise is None else
               (float(promise), "given (`promise`)"))
    streams = {v: _stream(z[pos], pos, p0, false_alarm)
               for v, pos in _by_values(df, by, z, errors).items()}
    if not any(len(s.rows) for s in streams.values()):
        raise InputError("no row of the stream could be monitored: " + (
            "; ".join(str(e) for e in errors[:5]) or "the rule escalated every row"))
    errors.sort(key=lambda e: e.position if e.position is not None else -1)
    alarms = [s.alarm_row for s in streams.values() if s.alarm_row is not None]
    src = str(calibration_or_path) if isinstance(calibration_or_path, (str, Path)) else \
        f"a {type(calibration_or_path).__name__}"
    res = MonitorResult(min(alarms) if alarms else None, kind, src, p0, frm, false_alarm,
                        len(df), streams, by, got.escalated, errors, warnings=got.warnings)
    src_arg = src if isinstance(calibration_or_path, (str, Path)) else "CALIBRATOR"
    res.refit = got.refit.replace("SOURCE", src_arg)
    res.advice = advice(res)
    return res


def advice(res: MonitorResult) -> str:
    """What to do after the run: nothing, or label the rows since the change and refit."""
    if res.alarm_row is None:
        return (f"no alarm: the stream is consistent with the promised rate {res.promise:g}; "
                "keep monitoring as labels arrive")
    lines = []
    for v, s in res.streams.items():
        if s.alarm_row is None:
            continue
        where = "" if v == ALL else f" ({res.by} = {v})"
        rate = s.since["loss_rate"] if s.since else math.nan
        lines.append(f"alarm at row {s.alarm_row}{where}: the loss rate since about row "
                     f"{s.change_row} is {rate:.3f} against the promised {res.promise:g}")
    what = ("refit the rule" if res.kind == "triage-rule" else
            "recalibrate (the fitted model kept, the conformal step redone)")
    return ("; ".join(lines) + f". Next: {what} on the labeled rows since the change (ROWS: "
            f"`--since-out` writes them): `{res.refit.replace('ROWS', 'ROWS_SINCE_CHANGE')}`"
            ", then monitor the new one on the rows that arrive after them.")


# ------------------------------------------------------------------ the report's section
DEFINITIONS = [
    ("e-value path", "The monitor's wealth after each monitored row: a bettor that wins when a "
                     "row is a loss (a miss of the band, an error among trusted rows) and "
                     "loses otherwise, at odds fair for the promised rate. While the promise "
                     "holds it grows past 1 / false alarm with probability at most the false "
                     "alarm level, ever (Ville's inequality); the alarm is the first row "
                     "where it does."),
    ("change row", "Where the loss rate most likely rose: the start that maximises the "
                   "binomial likelihood ratio of the rows since it against the promise."),
]


def _path_figure(doc: dict) -> str:
    from scoreband.report.blocks import pyplot, svg
    from scoreband.textsafe import fig as label

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for name, s in doc["streams"].items():
        line, = ax.plot(s["path"]["row"], np.asarray(s["path"]["log_e"]) / math.log(10),
                        lw=1.2, label=label(name))
        if s.get("alarm_row") is not None:
            ax.axvline(s["alarm_row"], color=line.get_color(), ls=":", lw=1)
    ax.axhline(math.log10(1 / doc["false_alarm"]), color="#c53030", ls="--", lw=1,
               label=f"alarm: e-value {1 / doc['false_alarm']:g}")
    ax.set_xlabel("row of the stream")
    ax.set_ylabel("log10 e-value")
    ax.legend(fontsize=7)
    return svg(fig)


def monitor_section(doc: dict) -> dict:
    """The report's section of a monitor results file: verdict, e-value path, streams."""
    from scoreband.report.blocks import fig_block, fmt, table_block

    alarm = doc["alarm_row"]
    what = "calibrator's bands" if doc.get("kind") != "triage-rule" else "rule's trusted rows"
    verdict = (f"Alarm at row {alarm}: the {what} lose more often than the promised "
               f"{doc['promise']:g}. {doc.get('advice', '')}" if alarm is not None else
               f"No alarm over {doc.get('rows', 0)} rows: the {what} keep the promised "
               f"{doc['promise']:g}.")
    rows = []
    for name, s in doc["streams"].items():
        since = s.get("since_change") or {}
        rows.append([name, str(s.get("monitored", "")), fmt(s.get("loss_rate")),
                     "-" if s["alarm_row"] is None else str(s["alarm_row"]),
                     "-" if s.get("change_row") is None else str(s["change_row"]),
                     fmt(since.get("loss_rate"))])
    blocks = [fig_block(_path_figure(doc), doc.get("guarantee", "")),
              table_block(["stream", "rows monitored", "loss rate", "alarm row",
                           "change row", "loss rate since"], rows)]
    return {"title": "Monitor: does the promise still hold?", "verdict": verdict,
            "blocks": blocks}


def monitor_model():
    from scoreband.report.schema import StrictModel

    class Path_(StrictModel):
        row: list[int]
        log_e: list[float]

    class Stream(StrictModel):
        alarm_row: int | None
        path: Path_

    class MonitorDoc(StrictModel):
        format: str
        alarm_row: int | None
        promise: float
        false_alarm: float
        streams: dict[str, Stream]

    return MonitorDoc


REPORT_SECTION = ReportSection(monitor_section, DEFINITIONS, monitor_model)
