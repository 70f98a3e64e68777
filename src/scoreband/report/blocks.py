"""The building blocks of the HTML report's sections: inline SVG figures from matplotlib,
number formatting, tables and figures as the template renders them. Shared by
:mod:`scoreband.report.html` and its sections in their own modules
(:mod:`scoreband.report.systems`)."""

from __future__ import annotations

import io

import numpy as np

__all__ = ["svg", "pyplot", "fmt", "table_block", "fig_block"]


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
