"""Draw docs/world.png: what the embedded world's items look like (the README's section on
making an in-domain image of your own). `python scripts/world_picture.py [--out PATH]`."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from scoreband.world import make_dataset


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent.parent / "docs" /
                    "world.png")
    a = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    photo = make_dataset(6, seed=3, n_annotators=3)
    paint = make_dataset(2, seed=4, style="painting", n_annotators=3)
    fig, axes = plt.subplots(2, 4, figsize=(9, 5.4))
    items = [(photo, i) for i in range(6)] + [(paint, i) for i in range(2)]
    for ax, (ds, i) in zip(axes.flat, items, strict=True):
        ax.imshow(ds.images[i], interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        mean = ds.ratings[i].mean()
        ax.set_title("\n".join(textwrap.wrap(f"{ds.captions[i]}", 26)[:3])
                     + f"\n[{ds.style}; human {mean:.2f}]", fontsize=7.5)
    fig.tight_layout()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
