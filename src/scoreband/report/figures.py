"""Figures a user looks at: band-width distributions and qualitative examples."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: never needs a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from scoreband.io import atomic_path  # noqa: E402

__all__ = ["width_figure", "examples_figure"]


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
