"""The building blocks of the HTML report's sections: inline SVG figures from matplotlib,
number formatting, tables and figures as the template renders them, and the figures several
sections draw (bars with intervals, lines). Every section (its own module, named in
:mod:`scoreband.report.sections`) builds its blocks from these."""

from __future__ import annotations

import io

import numpy as np

from scoreband.textsafe import fig as label

__all__ = ["svg", "pyplot", "fmt", "mean_std", "table_block", "fig_block", "findings_block",
           "bar_figure", "lines_figure", "FINDINGS_DEFINITIONS"]


#: what a finding marked "no" means (the demo's and the stress study's findings)
FINDINGS_DEFINITIONS = [
    ("claim marked no", "A claim of the paper this run did not reproduce: the measured value "
                        "lies outside the bound the claim states. On the small embedded "
                        "world with few splits a claim can miss by chance; rerun with more "
                        "--seeds (and more items) before concluding that it fails."),
]


def svg(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # no XML prologue inside HTML


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text: small and searchable
    # labels are data (textsafe.fig escapes their "$"); never LaTeX from a user's rc file
    matplotlib.rcParams["text.usetex"] = False
    import matplotlib.pyplot as plt

    return plt


def fmt(v, d: int = 3) -> str:
    return "-" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{v:.{d}f}"


def table_block(header, rows, title=None) -> dict:
    return {"kind": "table", "header": header, "rows": rows, "title": title}


def fig_block(svg, caption) -> dict:
    return {"kind": "figure", "svg": svg, "caption": caption}


def findings_block(findings: list[dict]) -> dict:
    """The claims a study checked, each marked yes / no (its definitions:
    :data:`FINDINGS_DEFINITIONS`)."""
    return {"kind": "findings", "findings": findings}


def bar_figure(labels, values, *, xlabel: str, target: float | None = None,
               colors=None, intervals=None) -> str:
    """Horizontal bars; ``intervals``: (lo, hi) per bar, drawn as error bars."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 0.42 * len(labels) + 1.2))
    y = np.arange(len(labels))
    xerr = None
    if intervals is not None:
        v = np.asarray(values, dtype=float)
        lo, hi = np.asarray(intervals, dtype=float).T
        xerr = np.vstack([np.maximum(v - lo, 0), np.maximum(hi - v, 0)])
    ax.barh(y, values, color=colors or "#2b6cb0", xerr=xerr, ecolor="#1b1b1b", capsize=3)
    if target is not None:
        ax.axvline(target, color="#276749", ls="--", lw=1, label=f"target {target:.2f}")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_yticks(y, [label(v) for v in labels], fontsize=8)
    ax.set_xlabel(xlabel)
    ax.invert_yaxis()
    return svg(fig)


def lines_figure(series: dict[str, tuple[list, list]], *, xlabel: str, ylabel: str,
                 target: float | None = None, logx: bool = False, xticks=None) -> str:
    """One line per series ``name -> (x, y)``, the ``target`` dashed."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for name, (x, y) in series.items():
        ax.plot(x, y, "o-", label=label(name))
    if target is not None:
        ax.axhline(target, color="#276749", ls="--", lw=1, label=f"target {target:.2f}")
    if logx:
        ax.set_xscale("log", base=2)
    if xticks is not None:
        ax.set_xticks(range(len(xticks)), [label(v) for v in xticks])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, ncol=2)
    return svg(fig)


def mean_std(d) -> str:
    """``mean ± std`` of a summary over resplits (``-`` where there is none)."""
    return "-" if not isinstance(d, dict) else f"{fmt(d.get('mean'))} ± {fmt(d.get('std'))}"
