"""Figures a user looks at: band-width distributions and qualitative examples."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: never needs a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from scoreband.io import atomic_path  # noqa: E402

__all__ = ["width_figure", "examples_figure", "reliability_figure", "roundtrip_figure"]


def _save(fig, path) -> Path:
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    return path


def width_figure(path, widths: dict[str, np.ndarray], unit: str = "1-5 scale") -> Path:
    """Box plot of calibrated band widths per test set."""
    fig, ax = plt.subplots(figsize=(1.8 + 1.4 * len(widths), 3.6))
    names = list(widths)
    ax.boxplot([widths[n] for n in names], showfliers=False)
    ax.set_xticks(range(1, len(names) + 1), names)
    for i, n in enumerate(names, 1):
        ax.scatter([i], [np.mean(widths[n])], marker="D", color="C3", zorder=3,
                   label="mean" if i == 1 else None)
    ax.set_ylabel(f"90 % band width ({unit})")
    ax.set_title("Calibrated band widths per test set")
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
        cap = textwrap.fill(ds.captions[i], 34)
        ax.set_title(cap, fontsize=7)
        human = ds.ratings[i].mean()
        ax.set_xlabel(f"score {band.median[i]:.2f}  band [{band.lo[i]:.2f}, {band.hi[i]:.2f}]\n"
                      f"human {human:.2f}  task {ds.tasks[i]}", fontsize=7)
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
        ax.barh(y, w, color=["C3" if tasks[t]["recommendation"].startswith("use") else "C0"
                             for t in names])
        ax.set_yticks(y, names, fontsize=8)
        ax.set_xlim(0, k - 1)
        ax.set_xlabel(f"mean band width (of {k - 1})")
        ax.set_title(judge, fontsize=9)
        ax2 = ax.twiny()
        ax2.plot(cov, y, "k^", label="coverage")
        ax2.set_xlim(0.5, 1.0)
        ax2.set_xlabel("coverage (triangles)", fontsize=8)
    fig.suptitle("Reliability map (red: use pairwise ranking)", fontsize=10)
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
