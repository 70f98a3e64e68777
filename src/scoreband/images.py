"""Opening one image for a model: checks with reasons a user can act on (a leaf module: the
scorers, judges and the round trip all read images through it)."""

from __future__ import annotations

import math
import warnings

import numpy as np
from PIL import Image, UnidentifiedImageError

from scoreband.batch import resolve_path

__all__ = ["load_image", "MAX_PIXELS"]

#: images above this many pixels are refused (a decompression bomb or a mistake)
MAX_PIXELS = 50_000_000


def load_image(path, size: int | None, base_dir=None) -> np.ndarray:
    """Open, check and resize one image to ``size`` x ``size`` RGB (bicubic; ``size=None``
    keeps the image's own size).

    A relative path is looked up from the working directory, then from ``base_dir`` (the
    table's folder). Raises ValueError with a reason a user can act on.
    """
    if path is None or (isinstance(path, float) and math.isnan(path)) or str(path).strip() == "":
        raise ValueError("no image path (empty cell)")
    p = resolve_path(path, base_dir)
    if not p.is_file():
        raise ValueError(f"image file not found: {str(p)!r}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(p) as im:
                w, h = im.size
                if w * h > MAX_PIXELS:
                    raise ValueError(f"image too large ({w}x{h} pixels > {MAX_PIXELS:,})")
                im.load()
                rgb = im.convert("RGB")
                if size is not None:
                    rgb = rgb.resize((size, size), Image.Resampling.BICUBIC)
    except ValueError:
        raise
    except (UnidentifiedImageError, Image.DecompressionBombError,
            Image.DecompressionBombWarning) as e:
        raise ValueError(f"not a readable image ({type(e).__name__})") from None
    except OSError as e:  # truncated or corrupt files
        raise ValueError(f"image could not be decoded: {e}") from None
    return np.asarray(rgb, dtype=np.uint8)
