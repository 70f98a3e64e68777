"""The domain a calibrator (or a rule) was fitted on, and the rows that fall outside it.

A calibrator learned how a scorer's numbers relate to human scores over the range of numbers
it saw. Applied to numbers on another scale (a 1-5 calibrator on 0-1 scores, features 20x
larger, a metric x 100), it still prints bands, and they mean nothing: a CQR calibrator on
features 20x larger gave zero-width bands to 98 % of rows. So :func:`fit_domain` records the
range of every input (on the representation the calibrator reads: the median and interval on
[0, 1] after ``pred_scale``, raw features), how many calibration values it saw, optionally a
declared scale per input, and the group labels as written; :func:`check_domain` (at apply)
flags the rows outside that range and refuses only a table that is clearly another scale.

Why not refuse a table "mostly outside the range": the range of n calibration values is not
the domain of the method. A fresh row drawn like them falls outside their min / max with
probability 2 / (n + 1) per input, and the share of a table outside is that of a
Beta(2, n - 1) draw (the two end spacings of n exchangeable values), so at n = 5 half a
table of rows drawn like the calibration rows lies outside on a third of the calibrations,
and at n = 1 every row does. A table is refused only when

* some input puts more than :data:`MOSTLY` of its rows outside its range (the exact range:
  the margin of :data:`MARGIN` of the range only spares a row just beyond it its
  ``out_of_domain`` flag) *and* that many rows outside has probability below
  :data:`LEVEL` (Bonferroni over the inputs) for rows exchangeable with the calibration
  rows: the Beta-binomial(m, 2, n - 1) tail, which bounds the count outside for any
  exchangeable data, ties included. Small calibration sets cannot refuse on range at all
  (n = 1 never; n = 5 never at 60 rows): their rows are flagged ``out_of_domain`` and said.
* or at least 2 rows, and at least :data:`MOSTLY` of the table, lie outside an input's
  declared scale (``pred_scale``; ``scales`` for a rule): values no row drawn like the
  calibration rows can take. This refuses a 4-row 0-1 table given to a 1-5 calibrator, and
  one calibrated on a single row.

How a rule uses it (no Predictions needed)::

    domain = fit_domain({"judge": scores}, names={"judge": "judge"}, scales={"judge": (1, 5)})
    ...                                          # saved with the rule
    outside_rows, note = check_domain(domain, {"judge": new_scores}, "triage apply")

``check_domain`` raises :class:`~scoreband.errors.InputError` naming the column and the fix,
or returns the rows to flag and a note to say (None when nothing is outside).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from scoreband.errors import InputError

__all__ = ["fit_domain", "outside", "check_domain", "off_scale_counts",
           "off_scale_rows", "outside_probability", "same_labels", "MARGIN", "MOSTLY",
           "LEVEL"]

#: how far beyond the range seen at calibration a value may lie before its row is flagged,
#: as a share of that range
MARGIN = 0.1
#: a table is refused only when more than this share of its rows lie outside (and the
#: count is improbable for rows drawn like the calibration rows, or off the declared scale)
MOSTLY = 0.5
#: the chance, for a table drawn like the calibration rows, of being refused on range
#: (per table or chunk, all inputs together)
LEVEL = 1e-6
#: the fewest rows off the declared scale that refuse a table
MIN_OFF_SCALE = 2


def _columns(values) -> dict[str, np.ndarray]:
    """The inputs by name: a mapping's columns as given, or a Predictions' ``median``,
    ``lo``, ``hi`` (where given) and ``features[j]``."""
    if isinstance(values, Mapping):
        return {str(k): np.asarray(v, dtype=float).ravel() for k, v in values.items()}
    out = {}
    for role in ("median", "lo", "hi"):
        v = getattr(values, role)
        if v is not None and np.isfinite(v).any():
            out[role] = np.asarray(v, dtype=float)
    if values.features is not None:
        for j in range(values.features.shape[1]):
            out[f"features[{j}]"] = values.features[:, j]
    return out


def _length(values) -> int:
    if isinstance(values, Mapping):
        return max((len(np.ravel(v)) for v in values.values()), default=0)
    return len(values)


def fit_domain(values, groups=None, names: dict | None = None,
               scales: dict | None = None) -> dict:
    """``{"ranges": {input: [min, max]}, "n": {input: count}, "names": {input: column},
    "groups": [labels], "scales": {input: [lo, hi]}}`` of the calibration rows.

    ``values``: a :class:`~scoreband.datatypes.Predictions` (a calibrator's inputs) or a
    mapping ``{input: values}`` (a rule's columns); ``names`` maps an input (``median``,
    ``features[0]``, a rule's key) to the table's column for messages; ``scales`` the scale
    an input is declared on (a value outside it is another scale)."""
    ranges, counts = {}, {}
    for k, v in _columns(values).items():
        ok = v[np.isfinite(v)]
        if len(ok):
            ranges[k] = [float(ok.min()), float(ok.max())]
            counts[k] = int(len(ok))
    out: dict = {"ranges": ranges, "n": counts, "names": dict(names or {})}
    if scales:
        out["scales"] = {str(k): [float(a), float(b)] for k, (a, b) in scales.items()}
    if groups is not None:
        out["groups"] = sorted({str(g) for g in groups})
    return out


def outside(domain: dict | None, values, margin: float = MARGIN
            ) -> tuple[np.ndarray, dict[str, int]]:
    """Which rows of ``values`` lie outside ``domain`` (any input beyond its range by more
    than ``margin`` of the range, or not finite), and how many rows each input puts
    outside."""
    n = _length(values)
    mask = np.zeros(n, dtype=bool)
    counts: dict[str, int] = {}
    if not domain:
        return mask, counts
    cols = _columns(values)
    for k, (a, b) in (domain.get("ranges") or {}).items():
        v = cols.get(k)
        if v is None:
            continue
        pad = margin * (b - a) if b > a else margin * max(abs(a), 1e-9)
        with np.errstate(invalid="ignore"):
            bad = ~((v >= a - pad) & (v <= b + pad))
        if bad.any():
            counts[k] = int(bad.sum())
            mask |= bad
    return mask, counts


def off_scale_counts(domain: dict | None, values) -> tuple[np.ndarray, dict[str, int]]:
    """Rows outside an input's declared scale (``domain["scales"]``), and counts by input."""
    n = _length(values)
    mask = np.zeros(n, dtype=bool)
    counts: dict[str, int] = {}
    cols = _columns(values)
    for k, (a, b) in ((domain or {}).get("scales") or {}).items():
        v = cols.get(k)
        if v is None:
            continue
        with np.errstate(invalid="ignore"):
            bad = np.isfinite(v) & ((v < a) | (v > b))
        if bad.any():
            counts[k] = int(bad.sum())
            mask |= bad
    return mask, counts


def outside_probability(k: int, m: int, n: int) -> float:
    """P(at least ``k`` of ``m`` rows lie outside the min / max of ``n`` calibration values)
    for rows exchangeable with them: the Beta-binomial(m, 2, n - 1) tail (exact for distinct
    values, an upper bound with ties). 1 when ``n < 2`` (one value's range holds nothing).

    >>> round(outside_probability(60, 60, 13), 15) < 1e-9, outside_probability(60, 60, 1)
    (True, 1.0)
    >>> round(outside_probability(1, 1, 9), 4)  # 2 / (n + 1)
    0.2
    """
    if n < 2 or k <= 0:
        return 1.0
    if k > m:
        return 0.0
    a, b = 2.0, n - 1.0
    lb = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    lg = math.lgamma
    terms = [lg(m + 1) - lg(j + 1) - lg(m - j + 1) + lg(j + a) + lg(m - j + b)
             - lg(m + a + b) - lb for j in range(k, m + 1)]
    top = max(terms)
    return float(min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms)))


def off_scale_rows(errors, roles: dict[str, str]) -> dict[str, int]:
    """Rows refused (row errors of :func:`~scoreband.columns.load_inputs`) because a
    prediction lay outside its scale, by input role; ``roles`` maps a column to its role
    (``median``, ``lo``, ``hi``): :func:`check_domain`'s ``off_scale``."""
    out: dict[str, int] = {}
    for e in errors:
        if e.column in roles and "outside the prediction scale" in e.reason:
            out[roles[e.column]] = out.get(roles[e.column], 0) + 1
    return out


def describe(domain: dict, counts: dict[str, int], n: int, margin: bool = True) -> str:
    """``"column 'score' (412 of 500 rows outside [0.21, 0.97], the range seen at
    calibration)"`` for the input that puts the most rows outside."""
    k = max(counts, key=counts.get)
    name = (domain.get("names") or {}).get(k) or k
    if k not in (domain.get("ranges") or {}):
        return f"column {name!r} ({counts[k]} of {n} rows outside its prediction scale)"
    a, b = domain["ranges"][k]
    pad = MARGIN * (b - a) if b > a else MARGIN * max(abs(a), 1e-9)
    u = (domain.get("units") or {}).get(k)  # the column's own units, where they differ

    def show(x):
        return f"{u[0] + x * (u[1] - u[0]):.4g}" if u else f"{x:.4g}"

    if not margin:
        return (f"column {name!r} ({counts[k]} of {n} rows outside [{show(a)}, {show(b)}], "
                "the range seen at calibration)")
    return (f"column {name!r} ({counts[k]} of {n} rows outside [{show(a - pad)}, "
            f"{show(b + pad)}]: the range seen at calibration, [{show(a)}, {show(b)}], and a "
            f"tenth of its width either side)")


def _why(domain: dict, k: str, counts: dict[str, int], off: dict[str, int], m: int) -> str:
    """What refused the table: rows off the input's declared scale, or outside its range."""
    if off.get(k, 0) >= MIN_OFF_SCALE and off[k] >= MOSTLY * m:
        name = (domain.get("names") or {}).get(k) or k
        return f"column {name!r} ({off[k]} of {m} rows outside its prediction scale)"
    return describe(domain, {k: counts[k]}, m, margin=False)


def _refusal(domain: dict, counts: dict[str, int], off: dict[str, int], m: int,
             n_default: int | None) -> str | None:
    """The input whose rows show another scale, or None."""
    for k, c in off.items():
        if c >= MIN_OFF_SCALE and c >= MOSTLY * m:
            return k
    tested = [k for k in (domain.get("ranges") or {}) if k in counts]
    for k in tested:
        n_k = (domain.get("n") or {}).get(k, n_default)
        if n_k is None or counts[k] <= MOSTLY * m:
            continue
        if outside_probability(counts[k], m, int(n_k)) * max(len(tested), 1) < LEVEL:
            return k
    return None


def check_domain(domain: dict | None, values, what: str,
                 off_scale: dict[str, int] | None = None,
                 n_calibration: int | None = None) -> tuple[np.ndarray, str | None]:
    """The rows of ``values`` to flag ``out_of_domain`` and a note naming the worst input;
    raises :class:`~scoreband.errors.InputError` when the table is clearly on another scale
    (see the module's docstring for the rule).

    ``values``: Predictions or a mapping ``{input: values}`` as at :func:`fit_domain`.
    ``off_scale``: rows already refused (row errors) because a value lay outside the declared
    prediction scale, by input: they count as outside, so a 0-1 table given to a 1-5
    calibrator is refused, not banded on the few rows where 1.0 happens to be in range.
    ``n_calibration``: the calibration count of a domain saved without ``"n"`` (older files;
    without either, a table is refused only for values off the declared scale)."""
    mask, counts = outside(domain, values)
    off_mask, declared = off_scale_counts(domain, values)
    mask |= off_mask
    off = dict(off_scale or {})
    for k, c in declared.items():
        off[k] = off.get(k, 0) + c
    # the refusal tests rows outside the exact range seen at calibration: what a fresh
    # exchangeable row does with probability 2 / (n + 1) (outside_probability's model); the
    # margin only spares single rows just beyond it a flag
    smask, strict = outside(domain, values, margin=0.0)
    if not domain or (not mask.any() and not off and not strict):
        return mask, None
    for k, c in off.items():
        counts[k] = counts.get(k, 0) + c if k not in declared else max(counts.get(k, 0), c)
    m = _length(values) + sum((off_scale or {}).values())
    for k, c in off.items():
        strict[k] = strict.get(k, 0) + c if k not in declared else max(strict.get(k, 0), c)
    worst = _refusal(domain, strict, off, m, n_calibration)
    k = int(mask.sum()) + sum((off_scale or {}).values())
    if worst is not None:
        k = int((smask | off_mask).sum()) + sum((off_scale or {}).values())
        raise InputError(
            f"{what}: {k} of {m} rows lie outside the domain the calibrator was fitted on: "
            f"{_why(domain, worst, strict, off, m)}. The table is on another scale "
            "or comes from another scorer; check `pred_scale` and the columns, or calibrate "
            "on rows like these")
    if not k:  # outside the exact range only, within the margin: not flagged, not said
        return mask, None
    note = (f"{k} of {m} rows lie outside the calibrator's domain, "
            f"{describe(domain, counts, m)}; their bands are flagged out_of_domain")
    if k > MOSTLY * m:
        n_cal = min((domain.get("n") or {}).values(), default=n_calibration)
        if n_cal is not None:
            note += (f" (with {n_cal} calibration rows, rows drawn like them often lie outside "
                     "their range: not refused; calibrate on more rows for a sharper check)")
    return mask, note


def same_labels(groups, known) -> np.ndarray | None:
    """Group labels read as the calibration wrote them: a label it never saw but that is the
    same number as one it did (``1`` for ``1.0``: a column read as integers here and as
    floats there) becomes that label; anything else is left as it is."""
    if groups is None or not known:
        return groups
    known_set = set(known)
    by_number = {}
    for k in known:
        try:
            by_number.setdefault(float(k), k)
        except ValueError:
            pass
    g = np.asarray(groups, dtype=object).copy()
    for label in set(g.tolist()) - known_set:
        try:
            hit = by_number.get(float(label))
        except ValueError:
            hit = None
        if hit is not None:
            g[g == label] = hit
    return g.astype(str)
