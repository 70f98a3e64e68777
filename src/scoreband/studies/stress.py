"""``scoreband stress``: how the bands react to image distortions, domain shift, caption
length and the cluster count k, and a remedy for shift (weighted conformal prediction).

Protocol (the robustness and domain-shift study of BEiTScore++, extended):

* A calibrator (CRC on the chained centred-interval head) is fitted on clean in-domain items
  and applied, unchanged, to the test items under six distortions at named levels (level
  ``clean`` = no distortion): the table shows what drift does to width and coverage. Every
  distortion comes from albumentations with a fixed seed per item, so runs repeat. The same
  numbers are given on a balanced subset of the test items (the most frequent target bins
  down-sampled so the target histogram is roughly flat).
* Domain shift: calibrated in domain, tested in domain / out of domain (painting style on the
  world; a user-given domain column on a table), and weighted split conformal (likelihood
  ratios from a domain classifier on the scorer's image embeddings) next to plain split
  conformal, for the full switch and for a change of mixture (calibration 80 % / 20 %, test
  20 % / 80 %), over random resplits. The weights' effective sample size says when the
  remedy cannot work (no overlap: the band becomes the whole scale).
* Caption length: short vs long captions (word-count tertiles) of the in-domain test items.
* k-sensitivity of the cluster-conservative rule: coverage and width for each k, with the
  elbow + silhouette choice marked.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from functools import partial

import numpy as np

from scoreband import metrics as M
from scoreband.clustering import choose_k
from scoreband.conformal import CRC, ClusterConservative, SplitConformal, WeightedSplit
from scoreband.conformal.weighted import NO_OVERLAP_AUC, too_few_effective
from scoreband.datatypes import Predictions, Scale
from scoreband.errors import InputError, RowError
from scoreband.evaluation import resplits
from scoreband.extras import require
from scoreband.report.blocks import FINDINGS_DEFINITIONS
from scoreband.report.result import StudyResult
from scoreband.report.sections import ReportSection
from scoreband.studies.stress_report import report_schema, stress_section
from scoreband.textsafe import md

__all__ = ["DISTORTIONS", "LEVELS", "K_DEFAULT", "distort", "balanced_subset", "run",
           "parse_distortions"]

#: level names; ``clean`` is no distortion
LEVELS = ("clean", "light", "moderate", "strong", "extreme")
#: name -> (what it does, structural?, parameter per level after clean)
DISTORTIONS = {
    "blur": ("Gaussian blur, sigma in pixels of a 64-pixel image", False,
             (0.5, 1.0, 2.0, 4.0)),
    "noise": ("salt-and-pepper noise, share of pixels", True, (0.01, 0.03, 0.08, 0.2)),
    "jpeg": ("JPEG compression, quality", False, (60, 30, 15, 5)),
    "cutout": ("one black patch, side as a share of the image", True,
               (0.15, 0.25, 0.35, 0.5)),
    "elastic": ("elastic warp, displacement alpha in pixels of a 64-pixel image", True,
                (10.0, 25.0, 50.0, 90.0)),
    "contrast": ("contrast reduction towards the mean grey, share", False,
                 (0.2, 0.4, 0.6, 0.8)),
}
K_DEFAULT = (1, 2, 4, 8, 16, 32, 63)


def _transform(name: str, level: int, size: int):
    A = require("albumentations", "the stress study's distortions")

    v = DISTORTIONS[name][2][level - 1]
    f = size / 64.0  # pixel-sized parameters are given for 64-pixel images
    if name == "blur":
        t = A.GaussianBlur(sigma_limit=(v * f, v * f), blur_limit=0, p=1)
    elif name == "noise":
        t = A.SaltAndPepper(amount=(v, v), p=1)
    elif name == "jpeg":
        t = A.ImageCompression(quality_range=(v, v), p=1)
    elif name == "cutout":
        t = A.CoarseDropout(num_holes_range=(1, 1), hole_height_range=(v, v),
                            hole_width_range=(v, v), fill=0, p=1)
    elif name == "elastic":
        t = A.ElasticTransform(alpha=v * f, sigma=5.0 * f, p=1)
    else:
        # albumentations' contrast multiplies around 0, which darkens the image as well; a
        # contrast reduction pulls every pixel towards the image's mean grey instead
        t = A.Lambda(image=partial(_reduce_contrast, share=v), p=1)
    return A.Compose([t])


def _reduce_contrast(img: np.ndarray, share: float, **_) -> np.ndarray:
    mean = img.reshape(-1, img.shape[-1]).mean()
    out = mean + (1.0 - share) * (img.astype(np.float32) - mean)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def distort(images, name: str, level: int | str, seed: int = 0) -> list[np.ndarray]:
    """The images (uint8 H x W x 3 arrays) under one distortion at one level; item ``i`` uses
    seed ``seed + i``, so the result depends on nothing else."""
    level = LEVELS.index(level) if isinstance(level, str) else int(level)
    if name not in DISTORTIONS:
        raise InputError(f"unknown distortion {name!r}; choose from {', '.join(DISTORTIONS)}")
    if level == 0:
        return [np.asarray(im) for im in images]
    out = []
    for i, im in enumerate(images):
        a = np.ascontiguousarray(np.asarray(im, dtype=np.uint8))
        t = _transform(name, level, min(a.shape[:2]))
        t.set_random_seed(seed + i)
        out.append(t(image=a)["image"])
    return out


def parse_distortions(names=None, levels=None) -> tuple[list[str], list[str]]:
    """Validate distortion and level names (None: all)."""
    names = list(DISTORTIONS) if not names else list(names)
    levels = list(LEVELS[1:]) if not levels else list(levels)
    for n in names:
        if n not in DISTORTIONS:
            raise InputError(f"unknown distortion {n!r}; choose from {', '.join(DISTORTIONS)}")
    for lv in levels:
        if lv not in LEVELS[1:]:
            raise InputError(f"unknown level {lv!r}; choose from {', '.join(LEVELS[1:])} "
                             "(clean is always included)")
    return names, [lv for lv in LEVELS[1:] if lv in levels]


def balanced_subset(y01, bins: int = 10, seed: int = 0) -> np.ndarray:
    """Indices of a subset whose target histogram is roughly flat: every bin above the
    median bin count is down-sampled to it (bins with fewer items keep all)."""
    y = np.asarray(y01, dtype=float)
    b = np.minimum((y * bins).astype(int), bins - 1)
    counts = np.bincount(b, minlength=bins)
    cap = int(np.median(counts[counts > 0]))
    rng = np.random.default_rng(seed)
    keep = [rng.permutation(np.flatnonzero(b == k))[:cap] for k in range(bins)]
    return np.sort(np.concatenate(keep))


# ------------------------------------------------------------------ summaries
def _width_stats(w) -> dict:
    w = np.asarray(w, dtype=float)
    return {"mean": float(w.mean()), "median": float(np.median(w)),
            "q25": float(np.quantile(w, 0.25)), "q75": float(np.quantile(w, 0.75))}


def _band_stats(band, y01, scale: Scale) -> dict:
    w = (band.hi01 - band.lo01) * scale.width
    return {"width": _width_stats(w), "median_score": float(np.mean(scale.from01(band.median01))),
            "coverage": M.coverage(band.lo01, band.hi01, y01), "n": int(len(y01)),
            "full_range_rate": float(np.mean(band.full_range))}


# ------------------------------------------------------------------ data
class _Items:
    """Images (uint8 arrays), captions, targets on [0, 1], annotator counts and a domain
    label per item."""

    def __init__(self, images, captions, y01, n_ratings, domain):
        self.images, self.captions = list(images), list(captions)
        self.y01 = np.asarray(y01, dtype=float)
        self.n_ratings = np.broadcast_to(np.asarray(n_ratings, dtype=float), self.y01.shape)
        self.domain = np.asarray(domain).astype(str)

    def take(self, idx) -> _Items:
        idx = np.asarray(idx, dtype=int)
        return _Items([self.images[i] for i in idx], [self.captions[i] for i in idx],
                      self.y01[idx], self.n_ratings[idx], self.domain[idx])

    def __len__(self) -> int:
        return len(self.y01)


def world_items(n: int, seed: int = 0) -> tuple[_Items, str, Scale]:
    """The embedded world: ``n`` photo items and ``n`` painting items, 3 annotators each."""
    from scoreband.world import make_dataset  # lazy: loads PIL
    from scoreband.world.dataset import LIKERT  # lazy: loads PIL

    parts = [make_dataset(n, seed + k, style=style, n_annotators=3, name=f"stress-{style}")
             for k, style in enumerate(("photo", "painting"))]
    items = _Items([*parts[0].images, *parts[1].images], parts[0].captions + parts[1].captions,
                   np.concatenate([p.y01 for p in parts]), 3,
                   ["photo"] * n + ["painting"] * n)
    return items, "photo", LIKERT


def table_items(df, *, scale: Scale, target=None, ratings=None, image_col="image",
                text_col="caption", domain_col=None, in_domain=None, base_dir=None,
                n_ratings=None, on_rows=None) -> tuple[_Items, str, Scale]:
    """A user's table: images loaded at their own size, targets, and the domain column (the
    in-domain value: ``in_domain``, default the most frequent)."""
    from scoreband.columns import ColumnSpec, load_inputs  # lazy: loads pandas, pyarrow
    from scoreband.images import load_image  # lazy: loads PIL, pandas, pyarrow

    for col in (image_col, text_col, domain_col):
        if col is not None and col not in df.columns:
            raise InputError(f"column {col!r} is not in the table; available: "
                             f"{', '.join(map(str, df.columns))}")
    inp = load_inputs(df, ColumnSpec(scale=scale, target=target, ratings=ratings),
                      require_median=False, n_ratings=n_ratings)
    images, keep, errors = [], [], list(inp.errors)
    for pos in inp.rows:
        try:
            images.append(load_image(df[image_col].iloc[pos], None, base_dir))
            keep.append(pos)
        except ValueError as e:
            errors.append(RowError(str(pos + 1), image_col, str(e), int(pos)))
    if on_rows:
        on_rows(errors, len(df))
    rows = np.searchsorted(inp.rows, keep)
    dom = (df[domain_col].astype(str).to_numpy()[keep] if domain_col
           else np.full(len(keep), "all"))
    values, counts = np.unique(dom, return_counts=True)
    if domain_col and len(values) < 2:
        raise InputError(f"domain column {domain_col!r} has one value ({values[0]!r}); a shift "
                         "study needs items from at least two domains")
    ind = in_domain if in_domain is not None else str(values[np.argmax(counts)])
    if domain_col and ind not in values:
        raise InputError(f"in-domain value {ind!r} is not in column {domain_col!r}; values: "
                         f"{', '.join(values[:20])}")
    caps = df[text_col].astype(str).to_numpy()[keep]
    return _Items(images, caps, inp.y01[rows], inp.n_ratings[rows], dom), ind, scale


# ------------------------------------------------------------------ scoring
def _predict(scorer, images, captions) -> Predictions:
    """Chained CI-head predictions; images resized to what the scorer takes."""
    size = scorer.input_size
    if size is not None:  # the embedded models: a (n, size, size, 3) array
        from scoreband.images import resize_square  # lazy: loads pandas, pyarrow

        arr = np.stack([resize_square(a, size) for a in images])
        return scorer.predict(arr, list(captions))
    from PIL import Image

    return scorer.predict([Image.fromarray(a) for a in images], list(captions))


# ------------------------------------------------------------------ the study parts
def _crc(alpha, scale):
    return CRC(alpha, scale=scale)


def _distortion_study(scorer, test: _Items, crc, names, levels, scale, seed, step) -> tuple:
    """Per distortion and level: width distribution, mean median score and coverage of the
    clean-calibrated bands, on all test items and on the balanced subset."""
    bal = balanced_subset(test.y01, seed=seed)
    clean_band = crc.predict(_predict(scorer, test.images, test.captions))

    def stats(band):
        return {**_band_stats(band, test.y01, scale),
                "balanced": _band_stats(band.take(bal), test.y01[bal], scale)}

    out, widths = {}, {}
    for name in names:
        step(f"distortion {name}: {', '.join(levels)}")
        out[name] = {"clean": stats(clean_band)}
        widths[name] = {"clean": (clean_band.hi01 - clean_band.lo01) * scale.width}
        for lv in levels:
            ims = distort(test.images, name, lv, seed=seed)
            band = crc.predict(_predict(scorer, ims, test.captions))
            out[name][lv] = stats(band)
            widths[name][lv] = (band.hi01 - band.lo01) * scale.width
    return out, widths, clean_band, {"n_balanced": int(len(bal)), "n_full": len(test)}


def _fit_apply(cal, pred, y, cal_idx, test_idx):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small effective samples are reported as numbers
        c = cal.fit(pred.take(cal_idx), y[cal_idx])
        return c, c.predict(pred.take(test_idx))


def _cov_width(band, y, scale) -> tuple[float, float, float]:
    return (M.coverage(band.lo01, band.hi01, y), float(np.mean(band.hi01 - band.lo01))
            * scale.width, float(np.mean(band.full_range)))


def _domain_shift(pred: Predictions, items: _Items, ind: str, scale, alpha, seeds) -> dict:
    """Full switch (calibrated in domain, tested in / out of domain) and a change of mixture
    (calibration 80/20, test 20/80), plain vs weighted split conformal, over resplits."""
    P, Q = np.flatnonzero(items.domain == ind), np.flatnonzero(items.domain != ind)
    y = items.y01
    rec: dict[str, list] = {}

    def add(key, band, idx):
        c, w, f = _cov_width(band, y[idx], scale)
        for k, v in (("coverage", c), ("width", w), ("full_range_rate", f)):
            rec.setdefault(f"{key}.{k}", []).append(v)

    m = min(len(P), len(Q))
    for sp in resplits(len(P), seeds):
        rng = sp.rng
        cal, test_in, test_out = P[sp.cal], P[sp.test], Q
        for key, cls in (("split", SplitConformal), ("crc", None)):
            c = _crc(alpha, scale) if cls is None else cls(alpha, scale=scale)
            c, b = _fit_apply(c, pred, y, cal, test_in)
            add(f"in_domain.{key}", b, test_in)
            add(f"out_of_domain.{key}", c.predict(pred.take(test_out)), test_out)
        w, b = _fit_apply(WeightedSplit(alpha, scale=scale), pred, y, cal, test_out)
        add("out_of_domain_weighted", b, test_out)
        rec.setdefault("out_of_domain_weighted.ess", []).append(
            w.last_shift_["effective_sample_size"])
        rec.setdefault("out_of_domain_weighted.shift_auc", []).append(
            w.last_shift_.get("auc", np.nan))
        # mixture: calibration 80 % in / 20 % out, test 20 % in / 80 % out
        pp, qq = rng.permutation(P)[:m], rng.permutation(Q)[:m]
        k8, k2 = int(round(0.8 * m)), m - int(round(0.8 * m))
        cal_m = np.concatenate([pp[:k8], qq[:k2]])
        test_m = np.concatenate([pp[k8:k8 + k2], qq[k2:k2 + k8]])
        _, b = _fit_apply(SplitConformal(alpha, scale=scale), pred, y, cal_m, test_m)
        add("mixture.unweighted", b, test_m)
        w, b = _fit_apply(WeightedSplit(alpha, scale=scale), pred, y, cal_m, test_m)
        add("mixture.weighted", b, test_m)
        rec.setdefault("mixture.weighted.ess", []).append(w.last_shift_["effective_sample_size"])
        rec.setdefault("mixture.shift_p_value", []).append(w.last_shift_.get("p_value",
                                                                              np.nan))
        rec.setdefault("mixture.shift_auc", []).append(w.last_shift_.get("auc", np.nan))
    return _nest({k: float(np.nanmean(v)) for k, v in rec.items()}, seeds, len(P), len(Q), m)


def _nest(flat: dict, seeds, n_in, n_out, m) -> dict:
    out: dict = {}
    for key, v in flat.items():
        d = out
        parts = key.split(".")
        for p in parts[:-1]:
            d = d.setdefault(p, {})
        d[parts[-1]] = v
    for k in ("in_domain", "out_of_domain"):  # the plain split numbers on top, CRC beside
        out[k] = {**out[k]["split"], "method": "split", "crc": out[k]["crc"]}
    ow = out["out_of_domain_weighted"]
    ow["method"] = "weighted-split"
    n_cal = n_in // 2
    ow["overlap"] = bool(ow["shift_auc"] < NO_OVERLAP_AUC
                         and not too_few_effective(ow["ess"], n_cal))
    out["mixture"].update(calibration="80 % in / 20 % out", test="20 % in / 80 % out",
                          n_per_set=m)
    out.update(seeds=seeds, n_in_domain=n_in, n_out_of_domain=n_out)
    return out


def _captions(band, test: _Items, scale) -> dict:
    """Short vs long captions (word-count tertiles) of the in-domain test items."""
    words = np.array([len(c.split()) for c in test.captions])
    lo, hi = np.quantile(words, [1 / 3, 2 / 3])
    out = {}
    for name, sel in (("short", words <= lo), ("long", words >= hi)):
        b = band.take(np.flatnonzero(sel))
        out[name] = {**_band_stats(b, test.y01[sel], scale),
                     "words": [int(words[sel].min()), int(words[sel].max())]}
    return out


def _check_ks(ks, n_cal: int) -> None:
    """``ks`` must fit in the calibration share."""
    if max(ks) > n_cal:
        raise InputError(f"`ks`: k = {max(ks)} is larger than the {n_cal} calibration "
                         "items; give smaller k")


def _k_sensitivity(pred, y, cal, test, ks, alpha, scale, seed) -> dict:
    _check_ks(ks, len(cal))
    auto = choose_k(pred.take(cal).embedding, seed=seed).k
    out = {}
    for k in sorted(set(ks) | {auto}):
        c = ClusterConservative(_crc(alpha, scale), n_clusters=int(k), seed=seed)
        _, band = _fit_apply(c, pred, y, cal, test)
        cov, w, f = _cov_width(band, y[test], scale)
        out[str(k)] = {"coverage": cov, "width": w, "full_range_rate": f,
                       "auto": bool(k == auto), "requested": bool(k in ks)}
    return out


# ------------------------------------------------------------------ run
def findings(doc: dict) -> list[dict]:
    """The claims the study checks, each with its numbers and whether it holds here."""
    d, out = doc["distortions"], []

    def w(name, lv):
        return d[name][lv]["width"]["mean"] if name in d and lv in d[name] else None

    structural = [n for n in d if DISTORTIONS[n][1] and w(n, "moderate") is not None]
    if structural:
        rise = float(np.mean([w(n, "moderate") - w(n, "clean") for n in structural]))
        out.append({"claim": "bands widen under moderate structural distortion ("
                    + ", ".join(structural) + ")", "value": rise, "holds": rise > 0})
    if "blur" in d and len(d["blur"]) > 2:
        levels = [lv for lv in LEVELS if lv in d["blur"]]
        peak = max(w("blur", lv) for lv in levels)
        last = w("blur", levels[-1])
        out.append({"claim": f"under extreme blur the width can fall again ({levels[-1]} "
                    f"{last:.3f} vs peak {peak:.3f})", "value": last - peak,
                    "holds": last < peak - 1e-9})
    if "contrast" in d:
        c0 = w("contrast", "clean")
        dev = max(abs(w("contrast", lv) - c0) / c0 for lv in d["contrast"])
        out.append({"claim": "bands stay flat under contrast change (largest relative change)",
                    "value": dev, "holds": dev < 0.1})
    alpha = doc["alpha"]
    mod = {n: d[n]["moderate"]["coverage"] for n in d if "moderate" in d[n]}
    if mod:
        low = {n: c for n, c in mod.items() if c < 1 - alpha - 0.05}
        out.append({"claim": "coverage holds (>= 1 - alpha - 0.05) under moderate distortion"
                    + (" except " + ", ".join(f"{n} {c:.3f}" for n, c in low.items())
                       if low else "") + "; the width does not warn of the drift",
                    "value": min(mod.values()), "holds": not low})
    ds = doc["domain_shift"]
    if ds is None:
        return out
    out.append({"claim": "bands are wider out of domain (width out - in)",
                "value": ds["out_of_domain"]["width"] - ds["in_domain"]["width"],
                "holds": ds["out_of_domain"]["width"] > ds["in_domain"]["width"]})
    mw, mu = ds["mixture"]["weighted"], ds["mixture"]["unweighted"]
    ok = (mw["coverage"] >= 0.88 and mw["width"] <= 2 * ds["in_domain"]["width"]
          and mw["full_range_rate"] < 0.05)
    out.append({"claim": f"weighted conformal restores coverage under the mixture shift "
                f"({mu['coverage']:.3f} unweighted -> {mw['coverage']:.3f}, width "
                f"{mw['width'] / ds['in_domain']['width']:.2f}x in domain)",
                "value": mw["coverage"], "holds": bool(ok)})
    ow = ds["out_of_domain_weighted"]
    out.append({"claim": f"without overlap (full switch: shift AUC {ow['shift_auc']:.3f}, "
                f"effective sample {ow['ess']:.0f}) the remedy is flagged, not trusted",
                "value": ow["coverage"], "holds": not ow["overlap"]})
    return out


def run(scorer=None, *, items: _Items | None = None, in_domain: str | None = None,
        scale: Scale | None = None, n: int = 1500, alpha: float = 0.1, seed: int = 0,
        seeds: int = 10, distortions=None, levels=None, ks=K_DEFAULT,
        on_step: Callable[[str], None] | None = None) -> StudyResult:
    """Run the stress study. Without ``items``: the embedded world (``n`` photo and ``n``
    painting items) and the bundled model; with ``items`` (see :func:`table_items`) a user's
    data and ``scorer`` (see :func:`scoreband.scorers.load_scorer`)."""
    from scoreband.scorers import load_scorer  # lazy: loads torch

    step = on_step or (lambda msg: None)
    t0 = time.perf_counter()
    names, lvls = parse_distortions(distortions, levels)
    if [n_ for n_ in names if n_ != "contrast"]:  # before any work: the extra is there
        require("albumentations", "the stress study's distortions")
    if items is None:
        step(f"generating {n} photo and {n} painting items of the embedded world")
        items, in_domain, scale = world_items(n, seed)
    scorer = scorer or load_scorer("embedded:default")
    P = np.flatnonzero(items.domain == in_domain)
    perm = np.random.default_rng(seed).permutation(P)
    cal, test = perm[: len(perm) // 2], perm[len(perm) // 2:]
    if len(cal) < 20:
        raise InputError(f"{len(P)} in-domain items are too few; at least 40 are needed")
    _check_ks(ks, len(cal))  # before the scoring, not after the whole study
    step("scoring the clean items")
    pred = _predict(scorer, items.images, items.captions)
    crc = _crc(alpha, scale).fit(pred.take(cal), items.y01[cal])
    dist, widths, clean_band, sizes = _distortion_study(scorer, items.take(test), crc, names,
                                                        lvls, scale, seed, step)
    step("domain shift: plain and weighted split conformal over resplits")
    shift = (_domain_shift(pred, items, in_domain, scale, alpha, seeds)
             if (items.domain != in_domain).any() else None)
    step("k-sensitivity of the cluster-conservative rule")
    doc = {"alpha": alpha, "seed": seed, "scale": scale.to_dict(), "in_domain": in_domain,
           "n_calibration": len(cal), "n_test": len(test), **sizes,
           "calibrator": "crc on the chained centred-interval head, fitted on clean "
                         "in-domain items",
           "distortions": dist, "domain_shift": shift,
           "captions": _captions(clean_band, items.take(test), scale),
           "k_sensitivity": _k_sensitivity(pred, items.y01, cal, test, ks, alpha, scale, seed)}
    doc["findings"] = findings(doc)
    doc["seconds"] = round(time.perf_counter() - t0, 1)
    return _result(doc, items, test, widths, pred, in_domain, scale, names, lvls, seed)


def _md_table(header, rows) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(r) + " |" for r in rows), ""]


def markdown(doc: dict) -> str:
    """results.md: the numbers of :func:`run` as short tables (80 columns)."""
    sc = doc["scale"]
    lines = [f"# Stress study (alpha = {doc['alpha']}, scale {sc['lo']:g}-{sc['hi']:g})", "",
             f"{doc['calibrator']}: {doc['n_calibration']} calibration items, "
             f"{doc['n_test']} test items ({doc['n_balanced']} in the balanced subset).", "",
             "## Distortions (width on the native scale, calibrated on clean items)", ""]
    rows = []
    for name, per in doc["distortions"].items():
        for lv, v in per.items():
            rows.append([md(name), md(lv), f"{v['width']['mean']:.3f}", f"{v['width']['median']:.3f}",
                         f"{v['coverage']:.3f}", f"{v['balanced']['coverage']:.3f}",
                         f"{v['median_score']:.2f}"])
    lines += _md_table(["distortion", "level", "width", "median w", "cover", "cover bal",
                        "score"], rows)
    ds = doc["domain_shift"]
    if ds:
        lines += ["## Domain shift (mean over resplits; split conformal)", ""]
        rows = [[k.replace("_", " "), f"{ds[k]['coverage']:.3f}", f"{ds[k]['width']:.3f}",
                 f"{ds[k]['full_range_rate']:.2f}"]
                for k in ("in_domain", "out_of_domain", "out_of_domain_weighted")]
        mx = ds["mixture"]
        rows += [[f"mixture {k}", f"{mx[k]['coverage']:.3f}", f"{mx[k]['width']:.3f}",
                  f"{mx[k]['full_range_rate']:.2f}"] for k in ("unweighted", "weighted")]
        lines += _md_table(["setting", "cover", "width", "full range"], rows)
        ow = ds["out_of_domain_weighted"]
        lines += [f"Effective sample of the weights: full switch {ow['ess']:.1f} (shift AUC "
                  f"{ow['shift_auc']:.3f}: " + ("the domains overlap" if ow["overlap"] else
                                                "no overlap, the weighted band is not "
                                                "trustworthy there") + "), mixture "
                  f"{mx['weighted']['ess']:.1f} of {mx['n_per_set']} calibration items "
                  f"(mixture: calibration {mx['calibration']}, test {mx['test']}).", ""]
    lines += ["## Caption length (in-domain test items, word-count tertiles)", ""]
    lines += _md_table(["captions", "words", "cover", "width"], [
        [k, f"{v['words'][0]}-{v['words'][1]}", f"{v['coverage']:.3f}",
         f"{v['width']['mean']:.3f}"] for k, v in doc["captions"].items()])
    lines += ["## k-sensitivity of the cluster-conservative rule", ""]
    lines += _md_table(["k", "cover", "width", "full range"], [
        [k + (" (auto)" if v["auto"] else ""), f"{v['coverage']:.3f}", f"{v['width']:.3f}",
         f"{v['full_range_rate']:.2f}"] for k, v in doc["k_sensitivity"].items()])
    lines += ["## Findings", ""]
    lines += [f"- [{'x' if f['holds'] else ' '}] {f['claim']} ({f['value']:.3f})"
              for f in doc["findings"]]
    return "\n".join(lines) + "\n"


def _result(doc, items, test, widths, pred, in_domain, scale, names, lvls, seed):
    from scoreband.report import figures as F  # lazy: loads PIL, matplotlib

    ex = items.take(test[:1])
    examples = {name: [distort(ex.images, name, lv, seed=seed)[0] for lv in ("clean", *lvls)]
                for name in names}
    figs = [("widths_by_distortion.png", lambda p: F.stress_width_figure(p, widths)),
            ("k_curve.png", lambda p: F.k_curve_figure(p, doc["k_sensitivity"])),
            ("examples_by_level.png",
             lambda p: F.distortion_examples_figure(p, examples, ("clean", *lvls)))]
    if doc["domain_shift"]:
        figs.append(("domain_widths.png",
                     lambda p: F.domain_width_figure(p, doc["domain_shift"])))
    return StudyResult("stress", doc, markdown(doc), figs)


# ------------------------------------------------------------------ its report section
# (the section and its schema: studies/stress_report.py)
REPORT_SECTION = ReportSection(stress_section, FINDINGS_DEFINITIONS, report_schema)
