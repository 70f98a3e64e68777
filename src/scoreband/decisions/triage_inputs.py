"""A triage rule's inputs read from a table: the columns of the fit (a labeled table) and
of a chunk to decide, the :class:`~scoreband.decisions.uncertainty.Signals` they give and
the band widths of an embedded calibrator. The array fit and the decisions live in
:mod:`scoreband.decisions.triage`."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scoreband.decisions.uncertainty import Signals
from scoreband.errors import InputError, RowError

__all__ = ["fit_spec", "signals_of", "band_widths", "subset",
           "chunk_signals", "domain_inputs", "with_bands"]


def fit_spec(scale, target, score, features, groups, uncertainty, id_col, df):
    """The :class:`scoreband.columns.ColumnSpec` of a labeled table, and the feature
    columns (globs expanded)."""
    from scoreband.columns import ColumnSpec, expand_columns

    feats = expand_columns(features, df.columns) if features else []
    extra = [uncertainty] if uncertainty else []
    return ColumnSpec(scale=scale, target=target, median=score, features=feats + extra,
                      groups=groups, id_col=id_col, raw_predictions=True), feats


def signals_of(inp, feats: list[str], uncertainty: str | None, band=None) -> Signals:
    """The :class:`Signals` of loaded inputs (the uncertainty column rides last among the
    features)."""
    f = inp.pred.features
    col = None
    if uncertainty:
        col, f = f[:, -1], (f[:, :-1] if f.shape[1] > 1 else None)
    if f is not None and f.shape[1] == 0:
        f = None
    return Signals(np.asarray(inp.pred.median, float), f, col, band)


def domain_inputs(sig: Signals) -> np.ndarray | None:
    """The inputs beside the score whose range a rule records: the features, then the
    uncertainty column (the band width is the embedded calibrator's to check)."""
    cols = [c for c in (sig.features, None if sig.column is None else
                        np.asarray(sig.column, float)[:, None]) if c is not None]
    return np.column_stack(cols) if cols else None


def band_widths(df, calibrator, offset: int = 0) -> tuple[np.ndarray, list[RowError]]:
    """Each row's band width on [0, 1] under ``calibrator`` (a path, a ``(calibrator,
    document)`` pair or a Calibration), NaN with a row error where it gives none: the one
    :func:`scoreband.apply_stage.bands`."""
    from scoreband.apply_stage import bands

    b = bands(df, calibrator, offset=offset)
    return b.widths01(), b.errors


def subset(inp, keep):
    """The loaded inputs of the rows ``keep``."""
    p = inp.pred
    pred = type(p)(median=p.median[keep],
                   features=None if p.features is None else p.features[keep],
                   n_ratings=None if p.n_ratings is None else p.n_ratings[keep])
    return replace(inp, pred=pred, y01=None if inp.y01 is None else inp.y01[keep],
                   rows=inp.rows[keep], groups=None if inp.groups is None else inp.groups[keep],
                   n_ratings=inp.n_ratings[keep])


def with_bands(df, inp, errors: list[RowError], calibrator):
    """The fit's inputs with each row's band width under ``calibrator``: rows without one
    leave (a row error each, once). Returns ``(inputs, errors, band, document)``."""
    from scoreband.apply_stage import calibration_pair

    pair = calibration_pair(calibrator)
    w, bad = band_widths(df, pair)
    have = {e.position for e in errors}
    errors = sorted([*errors, *[e for e in bad if e.position not in have]],
                    key=lambda e: e.position or 0)
    ok = np.isfinite(w[inp.rows])
    if not ok.all():
        inp = subset(inp, np.flatnonzero(ok))
    return inp, errors, w[inp.rows], pair[1]


def chunk_signals(rule, df, offset: int):
    """What a fitted triage ``rule`` reads of a chunk ``df`` (row ``offset`` of the table
    first): ``(inputs, signals of the judged rows, their positions among the loaded rows,
    {chunk position: row error})``. A column the rule reads and the table lacks is refused
    naming it."""
    from scoreband.columns import ColumnSpec, load_inputs

    cols = rule.columns
    if not cols.get("score"):
        raise InputError("the rule records no score column; fit it with `scoreband "
                         "triage` or scoreband.decisions.fit_triage")
    feats, unc = list(cols.get("features") or []), cols.get("uncertainty")
    need = [("score", cols["score"]), *[("features", c) for c in feats],
            ("uncertainty", unc), ("groups", cols.get("groups"))]
    missing = [(k, c) for k, c in need if c and c not in df.columns]
    if missing:
        k, c = missing[0]
        raise InputError(f"the rule reads the {k} column {c!r}, which this table lacks; "
                         f"score these rows the same way (available: "
                         f"{', '.join(map(str, list(df.columns)[:30]))})")
    spec = ColumnSpec(scale=rule.scale, median=cols["score"],
                      features=feats + ([unc] if unc else []),
                      groups=cols.get("groups") if rule.reads_groups else None,
                      id_col=cols.get("id_col") if cols.get("id_col") in df.columns
                      else None, raw_predictions=True)
    inp = load_inputs(df, spec, require_target=False, row_offset=offset, allow_none=True)
    errs = {e.position: e for e in inp.errors}
    keep, band = np.arange(len(inp.rows)), None
    if rule.cal_pair is not None and len(inp.rows):
        w, bad = band_widths(df, rule.cal_pair, offset)
        for e in bad:
            errs.setdefault(e.position - offset, replace(e, position=e.position - offset))
        ok = np.isfinite(w[inp.rows])
        band, keep = w[inp.rows][ok], np.flatnonzero(ok)
    sig = signals_of(inp, feats, unc, None).take(keep)
    sig.band = band
    return inp, sig, keep, errs
