"""The evaluation protocol: repeated random calibration/test splits, before and after
calibration, mean and std over seeds.

One protocol for every resplit loop of the project: :func:`resplits` yields the splits (seed
``s`` draws from ``numpy.random.default_rng(s)``, and a study that draws more after the split -
a fit part of the calibration half, a mixture - continues with the split's own generator);
:class:`Tally` collects a value per split and summarises it as mean and std;
:func:`evaluate_splits` is the whole protocol for one calibrator (``scoreband evaluate``, the
demo, the benchmarks), the studies run their own measurements inside :func:`resplits`."""

from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields

import numpy as np

from scoreband import metrics as M
from scoreband.conformal import n_conformal
from scoreband.conformal.base import Calibrator, delta_of, guarantee_of, wrapper_chain
from scoreband.conformal.boundary import adjust_band, check_on_grid
from scoreband.conformal.core import split_at
from scoreband.datatypes import Predictions
from scoreband.errors import InputError

__all__ = ["split_indices", "resplits", "build_for_split", "Split", "Tally", "evaluate_splits",
           "evaluate_result", "EvaluateResult", "summarize", "level_labels", "LEVEL_SHORTFALL"]

#: a level whose coverage falls more than this below 1 - alpha is warned about
LEVEL_SHORTFALL = 0.1
#: at most this many (error, width) pairs are kept for the report's scatter
WIDTH_ERROR_POINTS = 1500

BAND_METRICS = ("coverage", "sharpness", "ups", "kendall_tau_c", "pearson", "spearman")


class _Absent:
    """A key the result does not have (``None`` is a value: ``delta`` None is the marginal
    guarantee)."""

    def __repr__(self) -> str:
        return "ABSENT"


#: the value of an :class:`EvaluateResult` field whose key the JSON does not have
ABSENT = _Absent()


@dataclass
class EvaluateResult:
    """What the protocol measured (:func:`evaluate_result`), and what its faces add (the
    scale, the skipped rows, the notes, the calibration curve, the table, the provenance).
    The fields are the keys of the evaluate JSON in its order; a field left
    :data:`ABSENT` is a key the JSON does not have. :meth:`to_dict` gives that JSON,
    :meth:`from_dict` reads it back (an older file's missing keys stay ABSENT; keys this
    version does not know are dropped)."""

    method: str = ABSENT
    alpha: float = ABSENT
    n: int = ABSENT
    seeds: int = ABSENT
    cal_frac: float = ABSENT
    adjust_boundary: bool = ABSENT
    #: the guarantee's band, for the items the conformal step used
    theoretical_coverage: dict = ABSENT
    #: marginal / training-conditional / per group / covariate shift only / none
    guarantee: str | None = ABSENT
    #: None: the marginal guarantee; else each calibration covers >= 1 - alpha with
    #: probability >= 1 - delta
    delta: float | None = ABSENT
    #: the share of splits whose test coverage fell below 1 - alpha
    coverage_below_target: dict = ABSENT
    n_cal: int = ABSENT
    #: the distinct items tested over all splits: what a coverage's interval may count
    n_items_tested: int = ABSENT
    after: dict = ABSENT
    before: dict = ABSENT
    groups: dict = ABSENT
    coverage_by_level: dict = ABSENT
    level_warnings: list = ABSENT
    width_vs_error: dict = ABSENT
    warnings: list = ABSENT
    scale: dict = ABSENT
    skipped_rows: list = ABSENT
    notes: list = ABSENT
    calibration_curve: list = ABSENT
    table: str = ABSENT
    provenance: dict = ABSENT

    def to_dict(self) -> dict:
        """The evaluate JSON: every field that is not :data:`ABSENT`, in field order."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not ABSENT}

    @classmethod
    def from_dict(cls, doc: dict) -> EvaluateResult:
        """A result from its JSON (a results file read back)."""
        return cls(**{f.name: doc[f.name] for f in fields(cls) if f.name in doc})

    def get(self, name: str, default=None):
        """A field's value, ``default`` where it is ABSENT (or None)."""
        v = getattr(self, name)
        return default if v is ABSENT or v is None else v


def split_indices(n: int, cal_frac: float, rng: np.random.Generator,
                  keys=None) -> tuple[np.ndarray, np.ndarray]:
    """Random calibration/test split; rows sharing a ``keys`` value stay on one side."""
    if not 0 < cal_frac < 1:
        raise InputError(f"`cal_frac` must be in (0, 1), got {cal_frac}")
    if keys is None:
        perm = rng.permutation(n)
        cut = int(round(cal_frac * n))
        cal, test = split_at(perm, cut)
        return cal, test
    uniq, inv = np.unique(np.asarray(keys), return_inverse=True)
    perm = rng.permutation(len(uniq))
    in_cal = np.zeros(len(uniq), dtype=bool)
    in_cal[perm[: int(round(cal_frac * len(uniq)))]] = True
    mask = in_cal[inv]
    return np.flatnonzero(mask), np.flatnonzero(~mask)


@dataclass(frozen=True)
class Split:
    """One split of the protocol: its seed, the calibration and test positions (sorted), and
    the generator that drew them (for what a study draws after the split)."""

    seed: int
    cal: np.ndarray
    test: np.ndarray
    rng: np.random.Generator


def resplits(n: int, seeds: int, cal_frac: float = 0.5, *, keys=None, seed0: int = 0,
             on_split=None) -> Iterator[Split]:
    """The protocol's ``seeds`` random calibration/test splits of ``n`` items: split ``s``
    draws from ``default_rng(seed0 + s)`` (:func:`split_indices`; rows sharing a ``keys``
    value stay on one side). ``on_split(done, seeds)`` hears after each split's work, when
    the loop asks for the next one.

    >>> [(sp.cal.tolist(), sp.test.tolist()) for sp in resplits(4, 2)]
    [([0, 2], [1, 3]), ([0, 1], [2, 3])]
    """
    if seeds < 1:
        raise InputError(f"`seeds` must be >= 1, got {seeds}")
    for s in range(seeds):
        rng = np.random.default_rng(seed0 + s)
        cal, test = split_indices(n, cal_frac, rng, keys)
        if len(cal) == 0 or len(test) == 0:
            raise InputError(f"split {s} left an empty calibration or test set (n={n}); "
                             "use more rows or another `cal_frac`")
        yield Split(seed0 + s, cal, test, rng)
        if on_split is not None:
            on_split(s + 1, seeds)


class Tally:
    """Values per split under names; :meth:`summary` gives each name's mean and std over the
    splits (:func:`summarize`), names in the order they were first added."""

    def __init__(self, *names: str):
        self.values: dict[str, list] = {k: [] for k in names}

    def add(self, **values) -> None:
        for k, v in values.items():
            self.values.setdefault(k, []).append(v)

    def summary(self) -> dict:
        return {k: summarize(v) for k, v in self.values.items()}


def summarize(values) -> dict:
    """``{"mean", "std"}`` over seeds, ignoring NaN (std with ddof=0; NaN if all NaN)."""
    v = np.asarray(values, dtype=float)
    ok = v[~np.isnan(v)]
    if len(ok) == 0:
        return {"mean": float("nan"), "std": float("nan")}
    return {"mean": float(ok.mean()), "std": float(ok.std())}


def median_source(cal: Calibrator, pred: Predictions) -> str:
    """Which median a band's agreement metrics (Pearson, tau-c, UPS) describe, read from
    the calibrator's structure (through its wrappers): a learned method's own point, the
    given median mapped by ``--map``, or the given median."""
    from scoreband.conformal.mapping import Mapped

    chain = list(wrapper_chain(cal))
    mapped, c = any(isinstance(w, Mapped) for w in chain), chain[-1]
    if c.method == "marginal":
        return "the training share's median target (marginal: the same for every item)"
    if c.learned:
        return f"the median {c.method} learned from the features (not a given median column)"
    if not np.isfinite(np.asarray(pred.median, dtype=float)).any():
        return "none given"
    if mapped:
        return "the given median, mapped onto the target's scale (--map)"
    return "the given median"


class _Record:
    """What the splits measured, appended split by split."""

    def __init__(self, scale=None):
        self.scale = scale
        # coverage by the target's level and by the predicted (calibrated median's) level
        self.levels: dict[str, dict[str, dict[str, list]]] = {"target": {}, "predicted": {}}
        # the test items at each level, split by split (an item's predicted level can
        # change from split to split)
        self.level_items: dict[str, dict[str, list]] = {"target": {}, "predicted": {}}
        self.err_width: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.constant_inside: list[bool] = []
        self.tested: set = set()  # distinct test items over every split
        self.before: dict[str, list] = {k: [] for k in BAND_METRICS}
        self.after: dict[str, list] = {k: [] for k in BAND_METRICS}
        self.extra: dict[str, list] = {k: [] for k in (
            "full_range_rate", "fallback_rate", "n_cal", "n_conformal", "n_test",
            "worst_group_coverage", "set_coverage", "set_length")}
        self.per_group: dict[str, dict[str, list]] = {}
        self.group_items: dict[str, set] = {}  # distinct test items per group, all splits
        self.median_source = "the given median"
        self.methods: dict[str, int] = {}
        self.warnings: list[str] = []
        self.widths: list[np.ndarray] = []  # native-scale widths, pooled over the splits
        self.alpha = None
        self.delta = None

    def add(self, cal_obj, band, pt, yt, n_cal: int, groups=None, items=None) -> None:
        """One split's test band; ``items``: the test items' positions (distinct items
        per group are counted for the groups' intervals)."""
        self.methods[band.method] = self.methods.get(band.method, 0) + 1
        self.alpha = cal_obj.alpha
        self.delta = delta_of(cal_obj)
        self.guarantee = guarantee_of(cal_obj)
        if pt.lo is not None:
            for k, v in M.interval_metrics(pt.median, pt.lo, pt.hi, yt).items():
                self.before[k].append(v)
        for k, v in M.interval_metrics(band.median01, band.lo01, band.hi01, yt).items():
            self.after[k].append(v)
        self.median_source = median_source(cal_obj, pt)
        self.widths.append(np.asarray(band.hi - band.lo, dtype=float))
        ex = self.extra
        ex["full_range_rate"].append(float(np.mean(band.full_range)))
        ex["fallback_rate"].append(float(np.mean(band.fallback)))
        ex["n_cal"].append(n_cal)
        ex["n_conformal"].append(n_conformal(cal_obj) or n_cal)
        if band.sets01 is not None and all(v is not None for v in band.sets01):
            ex["set_coverage"].append(M.set_coverage(band.sets01, yt))
            ex["set_length"].append(M.set_length(band.sets01))
        ex["n_test"].append(len(yt))
        if items is not None:
            self.tested.update(np.asarray(items).tolist())
        if self.scale is not None:
            self._add_levels(band, yt, items)
        if groups is not None:
            gc = M.group_coverage(band.lo01, band.hi01, yt, groups)
            ex["worst_group_coverage"].append(min(v["coverage"] for v in gc.values()))
            g_arr = np.asarray(groups).astype(str)
            for g, v in gc.items():
                d = self.per_group.setdefault(g, {"n": [], "coverage": [], "sharpness": []})
                for k in d:
                    d[k].append(v[k])
                if items is not None:
                    self.group_items.setdefault(g, set()).update(
                        np.asarray(items)[g_arr == g].tolist())

    def _add_levels(self, band, yt, items) -> None:
        """Coverage per level of the target and of the calibrated median; (error, width)
        pairs on the native scale; whether the band's width is the same for every item
        its scale's ends did not cut."""
        sc = self.scale
        lo01, hi01 = np.asarray(band.lo01, dtype=float), np.asarray(band.hi01, dtype=float)
        cov = M.covered(lo01, hi01, yt)
        w01 = hi01 - lo01
        items = np.arange(len(yt)) if items is None else np.asarray(items)
        m01 = np.asarray(band.median01, dtype=float)
        for kind, values in (("target", yt), ("predicted", m01)):
            lab = level_labels(values, sc)
            for g in np.unique(lab[lab != ""]):
                m = lab == g
                g = str(g)
                d = self.levels[kind].setdefault(g, {"n": [], "coverage": [], "sharpness": []})
                d["n"].append(int(m.sum()))
                d["coverage"].append(float(cov[m].mean()))
                d["sharpness"].append(float(w01[m].mean()))
                self.level_items[kind].setdefault(g, []).append(items[m])
        ok = np.isfinite(m01)
        span = sc.hi - sc.lo
        self.err_width.append((np.abs(m01 - yt)[ok] * span, w01[ok] * span, cov[ok]))
        inside = (lo01 > 1e-9) & (hi01 < 1 - 1e-9)
        self.constant_inside.append(bool(inside.sum() >= 2 and np.ptp(w01[inside]) < 1e-9))

    def method(self) -> str:
        # auto can choose differently per split: say how often it chose what
        m = self.methods
        return (next(iter(m)) if len(m) == 1 else
                ", ".join(f"{k} x{c}" for k, c in sorted(m.items(), key=lambda kv: -kv[1])))


def build_for_split(make_calibrator: Callable[..., Calibrator], seed: int) -> Calibrator:
    """A fresh calibrator for the split drawn from ``seed``: ``make_calibrator(seed=seed)``
    where the factory takes a seed, so every random choice inside the calibration set (a
    learned method's training share, ``auto``'s selection share, a map's share) is drawn
    anew in each split. A fixed seed would draw the same positions of the calibration rows in
    every split, and on a table ordered by its target train on the same kind of rows each
    time (CQR covered 0.77 at alpha 0.2 where the shuffled table gave 0.83)."""
    try:
        takes_seed = "seed" in inspect.signature(make_calibrator).parameters
    except (TypeError, ValueError):  # a builtin or an odd callable: take it as it is
        takes_seed = False
    return make_calibrator(seed=seed) if takes_seed else make_calibrator()


def _fit_predict(make_calibrator, pred, y01, cal, test, g_all, caught: list, seed: int = 0):
    cal_obj = build_for_split(make_calibrator, seed)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cal_obj.fit(pred.take(cal), y01[cal], groups=None if g_all is None else g_all[cal])
        pt = pred.take(test)
        band = cal_obj.predict(pt, groups=None if g_all is None else g_all[test])
    caught.extend(str(x.message) for x in w)
    return cal_obj, band, pt


def evaluate_splits(pred: Predictions, y01, make_calibrator: Callable[[], Calibrator],
                    **options) -> dict:
    """:func:`evaluate_result` as the evaluate JSON (:meth:`EvaluateResult.to_dict`)."""
    return evaluate_result(pred, y01, make_calibrator, **options).to_dict()


def evaluate_result(pred: Predictions, y01, make_calibrator: Callable[[], Calibrator], *,
                    seeds: int = 10, cal_frac: float = 0.5, groups=None, split_keys=None,
                    adjust_boundary: bool = False, n_ratings=None, seed0: int = 0,
                    on_split=None) -> EvaluateResult:
    """Run the protocol (see the CLI's ``evaluate``).

    Parameters
    ----------
    pred, y01 : all items' predictions and normalised targets
    make_calibrator : builds a fresh, unfitted calibrator for each split; called with
        ``seed=`` the split's seed where it takes one (:func:`build_for_split`)
    groups : optional group label per item (per-group coverage; Mondrian uses it too)
    split_keys : rows sharing a key stay on the same side of every split
    adjust_boundary : snap bands to the achievable grid of the calibrator's scale
    """
    y01 = np.asarray(y01, dtype=float)
    n = len(y01)
    if seeds < 1:
        raise InputError(f"`seeds` must be >= 1, got {seeds}")
    g_all = None if groups is None else np.asarray(groups).astype(str)
    nr = np.ones(n) if n_ratings is None else np.asarray(n_ratings, dtype=float)
    if adjust_boundary:
        check_on_grid(y01, make_calibrator().scale, nr)
    rec = _Record(make_calibrator().scale)
    for sp in resplits(n, seeds, cal_frac, keys=split_keys, seed0=seed0, on_split=on_split):
        cal, test = sp.cal, sp.test
        cal_obj, band, pt = _fit_predict(make_calibrator, pred, y01, cal, test, g_all,
                                         rec.warnings, sp.seed)
        if adjust_boundary:
            band = adjust_band(band, nr[test])
        rec.add(cal_obj, band, pt, y01[test], len(cal),
                None if g_all is None else g_all[test], items=test)
    res = EvaluateResult(
        method=rec.method(), alpha=rec.alpha, n=n, seeds=seeds, cal_frac=cal_frac,
        adjust_boundary=adjust_boundary,
        # the guarantee's n: the items the conformal step used (learned methods train on a
        # share of the calibration half first)
        theoretical_coverage=M.theoretical_coverage(int(np.mean(rec.extra["n_conformal"])),
                                                    rec.alpha, rec.delta),
        guarantee=rec.guarantee, delta=rec.delta,
        # the measured side of the guarantee: at most about delta with delta; near one
        # half for marginal bands
        coverage_below_target={**M.share_below(rec.after["coverage"], rec.alpha),
                               "delta": rec.delta},
        n_cal=int(np.mean(rec.extra["n_cal"])), n_items_tested=len(rec.tested),
        after={k: summarize(v) for k, v in rec.after.items()})
    if pred.lo is not None:
        res.before = {k: summarize(v) for k, v in rec.before.items()}
    _summarize_extra(res, rec, make_calibrator().scale.width, g_all is not None)
    _summarize_levels(res, rec)
    # which median the agreement metrics (pearson, tau-c, UPS) of "after" were computed on
    res.after["median_source"] = rec.median_source
    warn = sorted(set(rec.warnings)) + res.get("level_warnings", [])
    if warn:
        res.warnings = warn
    return res


def _summarize_extra(out: EvaluateResult, rec: _Record, width: float, grouped: bool) -> None:
    for part in (out.before, out.after):
        if part is not ABSENT:
            s = part["sharpness"]
            part["sharpness_native"] = {"mean": s["mean"] * width, "std": s["std"] * width}
    ex, after = rec.extra, out.after
    if ex["set_coverage"]:
        # union-of-intervals prediction sets (R2CCP): their own coverage and total length,
        # beside the hull reported as the band
        after["set_coverage"] = summarize(ex["set_coverage"])
        after["set_length"] = summarize(ex["set_length"])
        after["set_length_native"] = {k: v * width for k, v in after["set_length"].items()}
    after["full_range_rate"] = summarize(ex["full_range_rate"])
    # the distribution of band widths (native scale) over every test item of every split
    w = np.concatenate(rec.widths) if rec.widths else np.zeros(0)
    after["width_quantiles"] = {f"q{int(q * 100):02d}": float(np.quantile(w, q))
                                for q in (0, 0.05, 0.25, 0.5, 0.75, 0.95, 1)} if len(w) else {}
    after["fallback_rate"] = summarize(ex["fallback_rate"])
    if grouped:
        after["worst_group_coverage"] = summarize(ex["worst_group_coverage"])
        out.groups = {g: _group_summary(d, len(rec.group_items.get(g) or ()))
                      for g, d in sorted(rec.per_group.items())}


def _group_summary(d: dict, n_items: int) -> dict:
    """A group's coverage over the splits, with a 95 % Clopper-Pearson interval that counts
    each distinct item once: the splits reuse the same items, so pooling their test sides
    (n per split x splits) would make the interval too narrow. ``n_items``: the distinct
    items of the group that were ever tested (:func:`level_item_counts` for levels); the
    interval is that of the mean coverage observed on that many items."""
    cov = summarize(d["coverage"])
    out = {"n": int(round(np.mean(d["n"]))), "coverage": cov,
           "sharpness": summarize(d["sharpness"])}
    if n_items:
        n = n_items
        out["n_items"] = n
        out["ci"] = list(M.binomial_ci(int(round(cov["mean"] * n)), n))
    return out


def level_labels(y01, scale) -> np.ndarray:
    """The level of each value on ``[0, 1]`` as text: on a scale of 2 to 10 points between
    integer ends (a Likert scale) the nearest whole point (a mean of 3 ratings 2.33 is level
    2), otherwise one of 5 equal bins of the scale (``"0.2-0.4"`` of 0-1); ``""`` where the
    value is missing.

    >>> from scoreband.datatypes import Scale
    >>> level_labels([0.0, 0.3, 0.6, 1.0], Scale(1, 5)).tolist()
    ['1', '2', '3', '5']
    """
    v = np.asarray(y01, dtype=float)
    ok = np.isfinite(v)
    out = np.full(len(v), "", dtype=object)
    lo, hi = float(scale.lo), float(scale.hi)
    if lo == int(lo) and hi == int(hi) and 2 <= hi - lo <= 10:
        nat = np.clip(np.floor(lo + v[ok] * (hi - lo) + 0.5), lo, hi)
        out[ok] = [f"{x:g}" for x in nat]
        return out.astype(str)
    edges = np.linspace(lo, hi, 6)
    b = np.clip((v[ok] * 5).astype(int), 0, 4)
    out[ok] = [f"{edges[i]:g}-{edges[i + 1]:g}" for i in b]
    return out.astype(str)


def level_item_counts(hits: dict[str, list]) -> dict[str, int]:
    """Distinct items per level, each item counted once over all levels: an item tested at
    several levels over the splits (its predicted level moves with each split's calibration)
    counts at each level by the share of its tests there, so the counts add up to the items
    tested, not to items x splits. A level fixed per item (the target's) counts its distinct
    items. ``hits``: per level, the item positions tested there, one array per split.

    >>> level_item_counts({"3": [np.array([0, 1]), np.array([0])],
    ...                    "4": [np.array([1]), np.array([1, 2])]})  # 1 + 1/3, 2/3 + 1
    {'3': 1, '4': 2}
    """
    every = [np.concatenate(v) for v in hits.values()]
    if not every:
        return {}
    uniq, tests = np.unique(np.concatenate(every), return_counts=True)
    out = {}
    for g, arrays in hits.items():
        u, h = np.unique(np.concatenate(arrays), return_counts=True)
        out[g] = int(np.floor(np.sum(h / tests[np.searchsorted(uniq, u)]) + 0.5))
    return out


def _level_key(name: str) -> float:
    """A level's label sorted by its (first) number."""
    m = re.match(r"-?[0-9.]+(e-?[0-9]+)?", name)
    return float(m.group()) if m else float("inf")


def _summarize_levels(out: EvaluateResult, rec: _Record) -> None:
    """``coverage_by_level`` (by the target's level and by the calibrated median's, each
    level's coverage with its Clopper-Pearson interval on distinct items, as the groups'),
    ``width_vs_error`` (the report's figure) and the warnings for levels more than
    :data:`LEVEL_SHORTFALL` below the nominal coverage."""
    if rec.scale is None or not rec.err_width:
        return
    nominal = 1 - rec.alpha
    by = {}
    for kind in ("target", "predicted"):
        names = sorted(rec.levels[kind], key=_level_key)
        counts = level_item_counts(rec.level_items[kind])
        by[kind] = {g: _group_summary(rec.levels[kind][g], counts.get(g, 0)) for g in names}
    out.coverage_by_level = by
    warns = []
    for kind in ("target", "predicted"):
        for g, v in by[kind].items():
            c = v["coverage"]["mean"]
            if c < nominal - LEVEL_SHORTFALL:
                warns.append(_level_warning(kind, g, v, nominal))
    if warns:
        out.level_warnings = warns
    err = np.concatenate([e for e, _, _ in rec.err_width])
    wid = np.concatenate([w for _, w, _ in rec.err_width])
    cov = np.concatenate([c for _, _, c in rec.err_width])
    out.width_vs_error = _width_vs_error(err, wid, cov)
    # a band of one width for every item, cut only at the scale's ends: its UPS (correlation
    # of width and error) comes from the cutting, not from bands that adapt to the error
    out.after["constant_width"] = bool(rec.constant_inside and all(rec.constant_inside))


#: the remedy the warnings offer: calibration per level of the point score, whose bins are
#: fitted on a share the conformal step never sees, or fixed in advance (rounding)
REMEDY = ("calibrate per predicted level: --mondrian-by predicted (mondrian_by='predicted' "
          "in Python: bins of the point score fitted on a share of the calibration items "
          "the conformal step never sees), or a column of the rounded point score (e.g. "
          "round(median) on the target's scale) with --mondrian --groups THAT_COLUMN "
          "(rounding fixes the bins in advance, so no calibration item is spent on them)")


def _level_warning(kind: str, g: str, v: dict, nominal: float) -> str:
    c, ci = v["coverage"]["mean"], v.get("ci", [float("nan")] * 2)
    head = (f"coverage {c:.2f} (95 % CI {ci[0]:.2f}-{ci[1]:.2f}, {v.get('n_items', v['n'])} "
            f"items) is more than {LEVEL_SHORTFALL:g} below the nominal {nominal:.2f}")
    if kind == "predicted":
        return (f"items the score puts at level {g}: {head}; the bands hold on average over "
                f"levels, not at each. Remedy: {REMEDY}")
    return (f"items whose human score is at level {g}: {head}; an auditor cannot trust these "
            f"bands there. No calibrator can promise coverage per true level (it is unknown "
            f"when the band is made), and calibration per predicted level (--mondrian-by "
            f"predicted) does not repair it where the score cannot "
            f"tell these items from their neighbours (on LLM-judge tables it left the top "
            f"level at 0.4-0.7): say so where the bands are used, and check such items by "
            f"hand or with a scorer that separates them")


def _width_vs_error(err: np.ndarray, wid: np.ndarray, cov: np.ndarray, bins: int = 8) -> dict:
    """Band width against absolute error (native points) over every test item of every split:
    per bin of the error (quantile edges) the items, mean and quartiles of the width and the
    coverage; and up to :data:`WIDTH_ERROR_POINTS` pairs (a seeded sample) for a scatter."""
    edges = np.unique(np.quantile(err, np.linspace(0, 1, bins + 1))) if len(err) else []
    rows = []
    for i in range(len(edges) - 1):
        m = (err >= edges[i]) & ((err < edges[i + 1]) if i < len(edges) - 2 else
                                 (err <= edges[i + 1]))
        if m.any():
            rows.append({"error_lo": float(edges[i]), "error_hi": float(edges[i + 1]),
                         "n": int(m.sum()), "width_mean": float(wid[m].mean()),
                         "width_q25": float(np.quantile(wid[m], 0.25)),
                         "width_q75": float(np.quantile(wid[m], 0.75)),
                         "coverage": float(cov[m].mean())})
    keep = np.random.default_rng(0).permutation(len(err))[:WIDTH_ERROR_POINTS]
    keep.sort()
    return {"bins": rows, "error": np.round(err[keep], 4).tolist(),
            "width": np.round(wid[keep], 4).tolist()}
