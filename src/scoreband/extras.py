"""Optional dependencies and the extra that installs each: one table, read by the CLI's
guard (a missing optional module becomes one line naming the ``pip install`` command) and by
:func:`require` where a library function imports one."""

from __future__ import annotations

import importlib

from scoreband.errors import InputError

__all__ = ["EXTRAS", "install_hint", "require"]

#: top-level module -> the scoreband extra that installs it
EXTRAS = {
    "transformers": "hf", "tokenizers": "hf", "sentencepiece": "hf", "google": "hf",
    "diffusers": "hf", "albumentations": "stress", "albucore": "stress", "cv2": "stress",
    "ray": "ray", "pycocoevalcap": "text", "ppi_py": "systems", "open_clip": "open_clip",
    "torchmetrics": "torchmetrics", "lightning_utilities": "torchmetrics",
    "onnxruntime": "onnx", "onnx": "onnx", "onnxscript": "onnx", "inspect_ai": "harness",
}


def install_hint(module: str) -> str | None:
    """``pip install "scoreband[EXTRA]"`` for a missing optional module, None for others."""
    extra = EXTRAS.get(module.split(".")[0])
    if extra is None:
        return None
    if extra == "open_clip":
        return "pip install open_clip_torch"
    return f'pip install "scoreband[{extra}]"'


def require(module: str, what: str):
    """Import an optional module, or raise InputError saying which extra installs it.

    >>> require("json", "reading JSON").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        hint = install_hint(e.name or module) or f"pip install {module}"
        raise InputError(f"{what} needs {module}, which is not installed: {hint}") from None
