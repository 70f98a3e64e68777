"""A triage rule over a table's rows: the row engine's vectorized stage, so a table in memory
(:meth:`TriageRule.apply`) and a file of any size streamed chunk by chunk
(:func:`apply_rule_file`, ``scoreband triage --apply``) take one path, as ``apply`` does.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.engine.rows import Stage
from scoreband.errors import InputError, RowError

__all__ = ["TriageStage", "triage_stage", "apply_rule_file", "ERROR_COLUMN"]

ERROR_COLUMN = "triage_error"


class TriageStage(Stage):
    """Adds ``triage_score`` (the score on the target's scale), ``triage_uncertainty``,
    ``trusted`` (True / False) and ``triage_error`` to every row (``triage_group`` with a
    per-group rule). A row that cannot be judged (a bad or missing cell, a calibrator band
    it cannot get) is escalated: ``trusted`` False, the reason in ``triage_error``. After
    the run: ``errors`` (every bad row), ``judged``, ``trusted`` (counts)."""

    label = "triaging"
    error_column = ERROR_COLUMN
    vectorized = True

    def __init__(self, rule, *, on_warning=None, base_dir=None):
        super().__init__(base_dir)
        from scoreband.decisions.triage import load_rule

        self.rule = load_rule(rule) if isinstance(rule, (str, Path)) else rule
        self.source = Path(rule) if isinstance(rule, (str, Path)) else None
        self.on_warning = on_warning
        self.warnings: list[str] = []
        self.errors: list[RowError] = []
        self.judged = 0
        self.trusted = 0
        self.cal_pair = self.rule.calibrator_pair() if self.rule.calibrator else None
        self.per_group = "(all)" not in self.rule.groups

    @property
    def outputs(self) -> dict:
        out = {"triage_score": np.nan, "triage_uncertainty": np.nan, "trusted": False}
        if self.per_group:
            out["triage_group"] = ""
        return out

    @property
    def calibrator(self):  # the output's provenance hashes the rule file
        return None

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
            if self.on_warning is not None:
                self.on_warning(message)

    def frame(self, df: pd.DataFrame) -> dict[str, np.ndarray]:
        from scoreband.columns import ColumnSpec, load_inputs
        from scoreband.decisions.triage import band_widths, signals_of

        r = self.rule
        cols = r.columns
        if not cols.get("score"):
            raise InputError("the rule records no score column; fit it with `scoreband "
                             "triage` or scoreband.decisions.fit_triage")
        feats = list(cols.get("features") or [])
        unc = cols.get("uncertainty")
        need = [("score", cols["score"]), *[("features", c) for c in feats],
                ("uncertainty", unc), ("groups", cols.get("groups"))]
        missing = [(k, c) for k, c in need if c and c not in df.columns]
        if missing:
            k, c = missing[0]
            raise InputError(f"the rule reads the {k} column {c!r}, which this table lacks; "
                             f"score these rows the same way (available: "
                             f"{', '.join(map(str, list(df.columns)[:30]))})")
        spec = ColumnSpec(scale=r.scale, median=cols["score"], features=feats + ([unc] if unc
                                                                            else []),
                          groups=cols.get("groups") if self.per_group else None,
                          id_col=cols.get("id_col") if cols.get("id_col") in df.columns
                          else None, raw_predictions=True)
        inp = load_inputs(df, spec, require_target=False, row_offset=self.offset,
                          allow_none=True)
        errs = {e.position: e for e in inp.errors}
        rows = inp.rows
        band = None
        if self.cal_pair is not None and len(rows):
            w, bad = band_widths(df, self.cal_pair, self.offset)
            for e in bad:
                errs.setdefault(e.position - self.offset, replace(
                    e, position=e.position - self.offset))
            ok = np.isfinite(w[rows])
            band = w[rows][ok]
            keep = np.flatnonzero(ok)
        else:
            keep = np.arange(len(rows))
        n = len(df)
        score = np.full(n, np.nan)
        unc_out = np.full(n, np.nan)
        trusted = np.zeros(n, dtype=bool)
        if len(keep):
            sig = signals_of(inp, feats, unc, None)
            sig = sig.take(keep)
            sig.band = band
            groups = None if inp.groups is None else inp.groups[keep]
            thr, notes = r.thresholds_for(groups, len(keep))
            for note in notes:
                self._warn(note)
            m, u, _ = r.decide(sig.score, sig, groups)
            at = rows[keep]
            score[at], unc_out[at] = m, u
            trusted[at] = np.isfinite(u) & (u <= thr)
        errors = np.full(n, "", dtype=object)
        for pos, e in sorted(errs.items()):
            errors[pos] = f"{e.column}: {e.reason}"
            self.errors.append(replace(e, position=pos + self.offset))
        self.judged += len(keep)
        self.trusted += int(trusted.sum())
        out = {"triage_score": score, "triage_uncertainty": unc_out, "trusted": trusted}
        if self.per_group:
            g = np.full(n, "", dtype=object)
            g[inp.rows] = inp.groups
            out["triage_group"] = g
        out[ERROR_COLUMN] = errors
        return out

    def components(self) -> dict:
        return {"triage_rule": str(self.source) if self.source else "in memory",
                "uncertainty": self.rule.uncertainty.name, "map": self.rule.map.kind}

    def summary(self) -> dict:
        return {"judged": self.judged, "trusted": self.trusted, "errors": len(self.errors)}


def triage_stage(rule: str, on_warning=None, base_dir=None) -> TriageStage:
    """The stage from plain values (the rule file), as the CLI builds it."""
    return TriageStage(rule, on_warning=on_warning, base_dir=base_dir)


def apply_rule_file(table, rule, out, *, chunk_rows: int = 100_000, on_warning=None):
    """Triage every row of the file ``table`` into ``out`` (CSV / TSV / JSONL / Parquet,
    streamed chunk by chunk; every input row and column kept). Returns the stage (its
    ``judged``, ``trusted``, ``errors``)."""
    from scoreband.engine.rows import run_file

    stage = TriageStage(rule, on_warning=on_warning)
    run_file(table, stage, out, chunk_rows=chunk_rows)
    if stage.judged == 0 and stage.errors:
        raise InputError("no row could be triaged: " + "; ".join(str(e)
                                                                 for e in stage.errors[:5]))
    return stage
