"""Figures a user looks at: band-width distributions and qualitative examples."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: never needs a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from scoreband.files import atomic_path  # noqa: E402
from scoreband.textsafe import fig as label  # noqa: E402

# every label that names something of the user's data goes through textsafe.fig (a "$" is
# never mathtext); LaTeX from a user's matplotlibrc would read "_" and "%" in them as markup
matplotlib.rcParams["text.usetex"] = False

__all__ = ["width_figure", "examples_figure", "reliability_figure", "roundtrip_figure",
           "stress_width_figure", "k_curve_figure", "domain_width_figure",
           "distortion_examples_figure"]


def _save(fig, path) -> Path:
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    return path


def width_figure(path, widths: dict[str, np.ndarray], unit: str = "1-5 scale",
                 what: str = "") -> Path:
    """Box plot of calibrated band widths per test set; ``what``: which head, method, alpha
    and split the widths are of (the figure's subtitle: a width plot must say it)."""
    fig, ax = plt.subplots(figsize=(1.8 + 1.4 * len(widths), 3.6))
    names = list(widths)
    ax.boxplot([widths[n] for n in names], showfliers=False)
    ax.set_xticks(range(1, len(names) + 1), [label(n) for n in names])
    for i, n in enumerate(names, 1):
        ax.scatter([i], [np.mean(widths[n])], marker="D", color="C3", zorder=3,
                   label="mean" if i == 1 else None)
    ax.set_ylabel(f"band width ({unit})")
    ax.set_title("Calibrated band widths per test set" + (f"\n{label(what)}" if what else ""),
                 fontsize=9)
    ax.legend(loc="upper left")
    return _save(fig, path)


def examples_figure(path, ds, band, n: int = 8) -> Path:
    """Images with their caption, median score, band and human rating (native scale)."""
    idx = np.linspace(0, len(ds) - 1, n).astype(int)
    cols = 4
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 4.4 * rows))
    for ax, i in zip(np.ravel(axes), idx, strict=False):
        ax.imshow(ds.images[i])
        ax.set_xticks([])
        ax.set_yticks([])
        cap = textwrap.fill(label(ds.captions[i]), 34)
        ax.set_title(cap, fontsize=7)
        human = ds.ratings[i].mean()
        ax.set_xlabel(f"score {band.median[i]:.2f}  band [{band.lo[i]:.2f}, {band.hi[i]:.2f}]\n"
                      f"human {human:.2f}  task {label(ds.tasks[i])}", fontsize=7)
    for ax in np.ravel(axes)[len(idx):]:
        ax.axis("off")
    fig.tight_layout(h_pad=3.0)
    return _save(fig, path)


def reliability_figure(path, maps: dict[str, dict], k: int) -> Path:
    """Per judge: tasks ordered by mean band width (bars, K-point scale) with coverage
    markers on a second axis."""
    fig, axes = plt.subplots(1, len(maps), figsize=(4.2 * len(maps), 3.4), squeeze=False)
    for ax, (judge, tasks) in zip(axes[0], maps.items(), strict=True):
        names = list(tasks)
        w = [tasks[t]["mean_width"] for t in names]
        cov = [tasks[t]["coverage"] for t in names]
        y = np.arange(len(names))
        # red: absolute scores unreliable (any advice but "absolute scores usable")
        ax.barh(y, w, color=["C0" if tasks[t]["recommendation"].startswith("absolute") else "C3"
                             for t in names])
        ax.set_yticks(y, [label(t) for t in names], fontsize=8)
        ax.set_xlim(0, k - 1)
        ax.set_xlabel(f"mean band width (of {k - 1})")
        ax.set_title(label(judge), fontsize=9)
        ax2 = ax.twiny()
        ax2.plot(cov, y, "k^", label="coverage")
        ax2.set_xlim(0.5, 1.0)
        ax2.set_xlabel("coverage (triangles)", fontsize=8)
    fig.suptitle("Reliability map (red: scores unreliable - compare instead: scoreband pairs, "
                 "judge --pairwise, triage --pairwise, systems --pairwise)", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def roundtrip_figure(path, matched, mismatched, validation: dict) -> Path:
    """Histograms of round-trip scores for matched and shuffled captions."""
    m = np.asarray(matched, dtype=float)
    mm = np.asarray(mismatched, dtype=float)
    m, mm = m[np.isfinite(m)], mm[np.isfinite(mm)]
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    lo, hi = float(min(m.min(), mm.min())), float(max(m.max(), mm.max()))
    bins = np.linspace(lo, hi, 30)
    ax.hist(mm, bins=bins, alpha=0.6, label="mismatched (shuffled)", color="C1")
    ax.hist(m, bins=bins, alpha=0.6, label="matched", color="C0")
    ax.set_xlabel("round-trip score (mean cosine similarity)")
    ax.set_ylabel("items")
    ax.set_title(f"AUROC {validation['auroc']:.3f} "
                 f"[{validation['auroc_ci'][0]:.3f}, {validation['auroc_ci'][1]:.3f}], "
                 f"gap {validation['gap']:.3f}")
    ax.legend(loc="upper left")
    return _save(fig, path)


def stress_width_figure(path, widths: dict[str, dict[str, np.ndarray]]) -> Path:
    """Violins of band widths per distortion (one panel each) and level."""
    names = list(widths)
    cols = min(3, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.8 * rows), squeeze=False,
                             sharey=True)
    for ax, name in zip(axes.flat, names, strict=False):
        levels = list(widths[name])
        data = [np.asarray(widths[name][lv], dtype=float) for lv in levels]
        parts = ax.violinplot(data, showmedians=True)
        for b in parts["bodies"]:
            b.set_alpha(0.6)
        ax.set_xticks(np.arange(1, len(levels) + 1), [label(v) for v in levels], fontsize=7,
                      rotation=20)
        ax.set_title(label(name), fontsize=9)
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("band width (native scale)", fontsize=8)
    fig.suptitle("Band widths under distortion (calibrated on clean items)", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def k_curve_figure(path, ks: dict[str, dict]) -> Path:
    """Coverage and mean width of the cluster-conservative rule against k (log2 axis),
    the automatic choice marked."""
    k = np.array([int(x) for x in ks])
    order = np.argsort(k)
    k = k[order]
    vals = [ks[str(x)] for x in k]
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    ax.plot(k, [v["width"] for v in vals], "o-", color="C0", label="mean width")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("clusters k")
    ax.set_ylabel("mean band width (native scale)", color="C0")
    ax2 = ax.twinx()
    ax2.plot(k, [v["coverage"] for v in vals], "s--", color="C1", label="coverage")
    ax2.set_ylabel("coverage", color="C1")
    ax2.set_ylim(0.5, 1.0)
    for x, v in zip(k, vals, strict=True):
        if v["auto"]:
            ax.axvline(x, color="grey", ls=":", lw=1)
            ax.annotate(f"auto k={x}", (x, ax.get_ylim()[1]), fontsize=8, ha="left",
                        va="top")
    ax.set_title("k-sensitivity of the cluster-conservative rule", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def domain_width_figure(path, shift: dict, target: float | None = None) -> Path:
    """Mean band width in and out of domain, plain and weighted, with coverage on top."""
    rows = [("in domain", shift["in_domain"]), ("out of domain", shift["out_of_domain"]),
            ("out, weighted", shift["out_of_domain_weighted"]),
            ("mixture", shift["mixture"]["unweighted"]),
            ("mixture, weighted", shift["mixture"]["weighted"])]
    fig, ax = plt.subplots(figsize=(6.0, 3.4))
    x = np.arange(len(rows))
    ax.bar(x, [r[1]["width"] for r in rows], color=["C0", "C3", "C2", "C3", "C2"])
    for i, (_, r) in enumerate(rows):
        ax.annotate(f"cover {r['coverage']:.2f}", (i, r["width"]), ha="center", va="bottom",
                    fontsize=8)
    ax.set_xticks(x, [r[0] for r in rows], fontsize=8, rotation=15)
    ax.set_ylabel("mean band width (native scale)")
    ax.set_title("Domain shift: split conformal, plain (red) and weighted (green)",
                 fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def distortion_examples_figure(path, examples: dict[str, list], levels) -> Path:
    """One item under every distortion (rows) at every level (columns)."""
    names = list(examples)
    fig, axes = plt.subplots(len(names), len(levels), figsize=(1.3 * len(levels),
                                                               1.35 * len(names)),
                             squeeze=False)
    for r, name in enumerate(names):
        for c, lv in enumerate(levels):
            ax = axes[r, c]
            ax.imshow(examples[name][c])
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(label(lv), fontsize=8)
            if c == 0:
                ax.set_ylabel(label(name), fontsize=8)
    fig.tight_layout()
    return _save(fig, path)
