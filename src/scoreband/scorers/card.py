"""MODEL_CARD.md for every trained scorer (the embedded model and heads on a backbone): what
it is, the exact command, the versions, the training facts, each head's fit, the calibrator
and, where measured, held-out metrics."""

from __future__ import annotations

from pathlib import Path

from scoreband._version import __version__
from scoreband.files import atomic_write_text

__all__ = ["write_model_card", "write_embedded_card"]


def write_model_card(model_dir, *, title: str, description: str, command: str,
                     seconds: float, facts: list[str], heads: dict, calibration: dict,
                     heldout: dict | None = None) -> Path:
    """Write ``model_dir/MODEL_CARD.md``; ``heads``: name -> {loss, epochs, best_val,
    val_crossings}; ``calibration``: {omega, beta, n, source}."""
    import torch

    lines = [f"# {title}", "", description, "", "## How it was trained", "", "```",
             command or "(from the Python API)", "```", "",
             f"scoreband {__version__}, torch {torch.__version__}, {seconds} s on "
             f"{torch.get_num_threads()} CPU threads.", ""]
    lines += [f"* {f}" for f in facts]
    lines += ["", "| head | loss | epochs | best val loss | crossed val items |",
              "|---|---|---|---|---|"]
    for k, v in heads.items():
        lines.append(f"| {k} | {v['loss']} | {v['epochs']} | {v['best_val']:.5f} | "
                     f"{v['val_crossings']} |")
    lines += ["", f"Calibrator: CRC on the chained CI-loss head, omega = "
              f"{calibration['omega']:.2f}, beta = {calibration['beta']:.4f}, fitted on "
              f"{calibration['n']} {calibration.get('source', 'held-out items')}.", ""]
    if heldout:
        lines += ["## Held-out metrics (fresh 5-annotator test set)", ""]
        lines += [f"- {k}: {v:.4f}" if isinstance(v, float) else f"- {k}: {v}"
                  for k, v in heldout.items()]
        lines.append("")
    path = Path(model_dir) / "MODEL_CARD.md"
    atomic_write_text(path, "\n".join(lines))
    return path


def write_embedded_card(model_dir, command: str, report: dict, calib: dict,
                        heldout: dict) -> Path:
    """MODEL_CARD.md of the embedded scorer (:func:`write_model_card` with its text)."""
    s1 = report["stage1"]
    return write_model_card(
        model_dir, title="embedded quantile scorer",
        description="A tiny joint-attention cross-encoder (conv stem -> one token per 16x16 "
        "patch, caption words, 2 transformer layers of width 64) with a point head and three "
        "quantile heads (chained + centered interval loss, chained + pinball, unconstrained + "
        "pinball), trained from scratch on CPU on the embedded synthetic world. Simulated data "
        "only: it scores the embedded world's images and captions, nothing else.",
        command=command, seconds=report["seconds"],
        facts=[f"training items: {report['n_train']}, validation items: {report['n_val']}",
               f"point stage: {s1['epoch']} epochs, best validation MSE {s1['best']:.4f}",
               f"group batching with k = {s1['clusters']['k']} clusters"],
        heads=report["heads"],
        calibration={**calib, "source": "fresh in-domain items"}, heldout=heldout)
