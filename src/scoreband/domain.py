"""The domain a calibrator was fitted on, and the rows that fall outside it.

A calibrator learned how a scorer's numbers relate to human scores over the range of numbers
it saw. Applied to numbers far outside that range (a 1-5 calibrator on 0-1 scores, features
20x larger, a metric x 100), it still prints bands, and they mean nothing: a CQR calibrator on
features 20x larger gave zero-width bands to 98 % of rows. So :func:`fit_domain` records the
range of every prediction input (on the representation the calibrator reads: the median and
interval on [0, 1] after ``pred_scale``, raw features) and the group labels as written, and
:func:`outside` tells which rows lie outside it (beyond a margin of a tenth of the range) and
which input is the reason. ``apply`` flags such rows ``out_of_domain`` and refuses a table
that is mostly outside; ``recalibrate`` refuses one too.
"""

from __future__ import annotations

import numpy as np

from scoreband.errors import InputError

__all__ = ["fit_domain", "outside", "check_mostly_inside", "same_labels", "MARGIN", "MOSTLY"]

#: how far beyond the range seen at calibration a value may lie, as a share of that range
MARGIN = 0.1
#: above this share of rows outside the domain (and at least :data:`MIN_ROWS` of them), a
#: table is refused
MOSTLY = 0.5
MIN_ROWS = 5


def _columns(pred) -> dict[str, np.ndarray]:
    out = {}
    for role in ("median", "lo", "hi"):
        v = getattr(pred, role)
        if v is not None and np.isfinite(v).any():
            out[role] = np.asarray(v, dtype=float)
    if pred.features is not None:
        for j in range(pred.features.shape[1]):
            out[f"features[{j}]"] = pred.features[:, j]
    return out


def fit_domain(pred, groups=None, names: dict | None = None) -> dict:
    """``{"ranges": {input: [min, max]}, "names": {input: column}, "groups": [labels]}`` of
    the calibration items' predictions; ``names`` maps an input (``median``,
    ``features[0]``) to the table's column for messages."""
    ranges = {}
    for k, v in _columns(pred).items():
        ok = v[np.isfinite(v)]
        if len(ok):
            ranges[k] = [float(ok.min()), float(ok.max())]
    out: dict = {"ranges": ranges, "names": dict(names or {})}
    if groups is not None:
        out["groups"] = sorted({str(g) for g in groups})
    return out


def outside(domain: dict | None, pred) -> tuple[np.ndarray, dict[str, int]]:
    """Which rows of ``pred`` lie outside ``domain`` (any input beyond its range by more
    than :data:`MARGIN` of the range, or not finite), and how many rows each input puts
    outside."""
    n = len(pred)
    mask = np.zeros(n, dtype=bool)
    counts: dict[str, int] = {}
    if not domain:
        return mask, counts
    cols = _columns(pred)
    for k, (a, b) in (domain.get("ranges") or {}).items():
        v = cols.get(k)
        if v is None:
            continue
        pad = MARGIN * (b - a) if b > a else MARGIN * max(abs(a), 1e-9)
        with np.errstate(invalid="ignore"):
            bad = ~((v >= a - pad) & (v <= b + pad))
        if bad.any():
            counts[k] = int(bad.sum())
            mask |= bad
    return mask, counts


def describe(domain: dict, counts: dict[str, int], n: int) -> str:
    """``"column 'score' (412 of 500 rows outside [0.21, 0.97], the range seen at
    calibration)"`` for the input that puts the most rows outside."""
    k = max(counts, key=counts.get)
    name = (domain.get("names") or {}).get(k) or k
    if k not in (domain.get("ranges") or {}):
        return f"column {name!r} ({counts[k]} of {n} rows outside its prediction scale)"
    a, b = domain["ranges"][k]
    return (f"column {name!r} ({counts[k]} of {n} rows outside [{a:.4g}, {b:.4g}], the range "
            "seen at calibration)")


def check_mostly_inside(domain: dict | None, pred, what: str,
                        off_scale: dict[str, int] | None = None) -> tuple[np.ndarray, str | None]:
    """The rows outside ``domain``, and a note naming the worst input; raises when most of
    the rows are outside (a table on another scale, features of another extractor).
    ``off_scale``: rows already refused because a prediction lay outside its scale, by
    input: they count as outside (a 0-1 table given to a 1-5 calibrator is refused, not
    banded on the few rows where 1.0 happens to be in range)."""
    mask, counts = outside(domain, pred)
    off = dict(off_scale or {})
    if not domain or (not mask.any() and not off):
        return mask, None
    for k, c in off.items():
        counts[k] = counts.get(k, 0) + c
    n, k = len(pred) + sum(off.values()), int(mask.sum()) + sum(off.values())
    where = describe(domain, counts, n)
    if k >= MIN_ROWS and k > MOSTLY * n:
        raise InputError(
            f"{what}: {k} of {n} rows lie outside the domain the calibrator was fitted on: "
            f"{where}. The table is on another scale or comes from another scorer; check "
            "`pred_scale` and the columns, or calibrate on rows like these")
    return mask, (f"{k} of {n} rows lie outside the calibrator's domain, {where}; their "
                  "bands are flagged out_of_domain")


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
