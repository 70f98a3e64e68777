"""The one image decoder of scoreband: every path that reads an image (score, judge,
roundtrip, stress, the Ray engine, images from an endpoint) goes through :func:`decode_image`
or :func:`load_image`, so a file means the same picture everywhere.

* Every mode PIL reads becomes RGB by its meaning, not by PIL's default conversion: 16-bit
  greyscale (``I;16*``, and ``I``, taken as 16-bit) scaled by 255/65535 rather than clipped
  (PIL's ``convert`` turns a 16-bit picture white), floating point (``F``) read as [0, 1]
  when it lies there, alpha (``RGBA``, ``LA``, ``PA``, ``P`` with transparency) composited
  on white, CMYK, palette and 1-bit as PIL converts them; the EXIF orientation applied.
* Limits are per-row errors (:class:`ValueError` with a reason a user can act on): files
  above :data:`MAX_IMAGE_BYTES`, images above :data:`MAX_PIXELS`, decompression bombs,
  truncated or non-image files.
* Hashes for journals and caches are streamed (:func:`image_digest`), never a whole-file read.
* Speed: where the model needs fewer pixels than a JPEG holds, libjpeg-turbo decodes it at
  a reduced DCT scale (simplejpeg; PIL's ``draft`` where simplejpeg is missing, the same
  pixels); plain 8-bit PNGs are decoded by libpng (imagecodecs; the same pixels as PIL);
  one resize (:func:`resize_square`, PIL's bicubic filter in torch's vectorised kernel);
  a batch's images decoded in threads (:func:`load_images`). Every other file, and any
  file those libraries refuse, is decoded by PIL.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from scoreband.files import resolve_path

__all__ = ["load_image", "load_images", "thread_pool", "decode_image", "to_rgb",
           "resize_square", "read_image_bytes", "image_digest", "image_input", "MAX_PIXELS",
           "MAX_IMAGE_BYTES"]

#: images above this many pixels are refused (a decompression bomb or a mistake)
MAX_PIXELS = 50_000_000
#: image files above this many bytes are refused before they are read
MAX_IMAGE_BYTES = 256 << 20
#: which pixels the decoder gives for a model's size: part of the journal key of every row a
#: model scores, so a job resumed after an upgrade recomputes rows decoded the older way
#: (2: libjpeg-turbo's DCT scaling and torch's resize, issue 25)
DECODER_VERSION = 2
#: decode JPEGs DCT-reduced where the model needs fewer pixels (off: at full size, as
#: before issue 25; benchmarks/clip_s_speed.py)
DCT_SCALING = True
#: decode plain 8-bit PNGs with libpng through imagecodecs (off: PIL; benchmarks)
FAST_PNG = True


def _check_size(p: Path) -> int:
    size = os.stat(p).st_size
    if size > MAX_IMAGE_BYTES:
        raise ValueError(f"image file is {size / 2**20:,.0f} MiB, above the "
                         f"{MAX_IMAGE_BYTES >> 20} MiB scoreband reads: {str(p)!r}")
    return size


def _path(path, base_dir=None) -> Path:
    if path is None or (isinstance(path, float) and math.isnan(path)) or str(path).strip() == "":
        raise ValueError("no image path (empty cell)")
    try:
        p = resolve_path(path, base_dir)
        if not p.is_file():
            raise ValueError(f"image file not found: {str(p)[:200]!r}")
    except OSError as e:  # a name too long for the file system, a bad character
        raise ValueError(f"not a usable image path ({e.strerror or e}): "
                         f"{str(path)[:80]!r}...") from None
    return p


def read_image_bytes(path, base_dir=None) -> bytes:
    """The bytes of an image file (to upload it), refused above :data:`MAX_IMAGE_BYTES`."""
    p = _path(path, base_dir)
    size = _check_size(p)
    with open(p, "rb") as f:
        # the size stat gave, plus one byte to see growth (a read of the cap itself
        # allocated 256 MiB per image: 0.1 ms each)
        data = f.read(size + 1)
        if len(data) > size:
            data += f.read(MAX_IMAGE_BYTES + 1 - len(data))
    if len(data) > MAX_IMAGE_BYTES:
        raise ValueError(f"image file grew above {MAX_IMAGE_BYTES >> 20} MiB while read")
    return data


def image_digest(path) -> str:
    """SHA-256 (hex) of a file's bytes, read in 1 MiB chunks; for a file above
    :data:`MAX_IMAGE_BYTES` (which no command reads) a digest of its size and modification
    time; "" when there is no readable file."""
    try:
        if path is None or not Path(path).is_file():
            return ""
        st = os.stat(path)
        if st.st_size > MAX_IMAGE_BYTES:
            return "large:" + hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return ""


def to_rgb(im: Image.Image) -> Image.Image:
    """An opened image as 8-bit RGB by what its mode means (see the module docstring).

    >>> white = Image.fromarray(np.full((2, 2), 65535, dtype=np.uint16))
    >>> grey = Image.fromarray(np.full((2, 2), 32896, dtype=np.uint16))  # 128 * 257
    >>> [np.asarray(to_rgb(im))[0, 0].tolist() for im in (white, grey)]
    [[255, 255, 255], [128, 128, 128]]
    """
    mode = im.mode
    if mode.startswith("I;16") or mode == "I":
        a = np.asarray(im).astype(np.float64)
        g = np.clip(np.rint(a * (255.0 / 65535.0)), 0, 255).astype(np.uint8)
        return Image.fromarray(g, "L").convert("RGB")
    if mode == "F":
        a = np.asarray(im).astype(np.float64)
        a = np.nan_to_num(a, nan=0.0, posinf=0.0, neginf=0.0)
        scale = 255.0 if a.size and a.max() <= 1.0 else 1.0
        return Image.fromarray(np.clip(np.rint(a * scale), 0, 255).astype(np.uint8),
                               "L").convert("RGB")
    if mode == "P" and "transparency" in im.info:
        im, mode = im.convert("RGBA"), "RGBA"
    if mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = im.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    if mode == "RGB":
        return im
    return im.convert("RGB")


def resize_square(rgb: np.ndarray, size: int) -> np.ndarray:
    """An RGB uint8 array (H, W, 3) resized to ``size`` x ``size`` with PIL's bicubic filter
    (a = -0.5, its support widened by the scale factor when shrinking, as
    ``Image.resize(BICUBIC)`` does), run by torch's vectorised uint8 kernel, about 4x
    faster than PIL's. On photo-like images within 4 grey levels of PIL's result, 0.3 on
    average (tests/test_io.py): both round and clip to 8 bits between the two passes, and
    PIL chooses which pass comes first while torch always starts horizontally. Falls back to
    PIL where torch's kernel is missing. The array returned may be a strided view."""
    h, w = rgb.shape[:2]
    if (h, w) == (size, size):
        return rgb
    try:
        import torch  # lazy: loads torch (the scorers that ask for a size have loaded it)

        if not (rgb.flags.writeable and rgb.flags.c_contiguous):
            rgb = np.array(rgb)  # torch takes writable memory only (PIL's arrays are not)
        x = torch.from_numpy(rgb).permute(2, 0, 1).unsqueeze(0)
        y = torch.nn.functional.interpolate(x, size=(size, size), mode="bicubic",
                                            antialias=True, align_corners=False)
        # a (H, W, 3) view of the kernel's (3, H, W) output: the batch's np.stack makes
        # the one copy (a copy here would cost as much as the resize)
        return y[0].permute(1, 2, 0).numpy()
    except (ImportError, RuntimeError, NotImplementedError):  # an old torch without it
        return np.asarray(Image.fromarray(rgb).resize((size, size), Image.Resampling.BICUBIC))


def _rgb_sized(im: Image.Image, size: int | None, own: bool = False):
    """EXIF orientation, RGB by meaning (:func:`to_rgb`), then, when ``size`` is given, the
    uint8 array of :func:`resize_square`: what every image goes through, from a file or from
    memory. ``size`` None: the RGB PIL image at its own size. ``own``: ``im`` was decoded
    here, so it is turned upright in place (``exif_transpose`` otherwise copies every
    image, turned or not)."""
    if own:
        ImageOps.exif_transpose(im, in_place=True)
        rgb = to_rgb(im)
    else:
        rgb = to_rgb(ImageOps.exif_transpose(im))
    return rgb if size is None else resize_square(np.asarray(rgb, dtype=np.uint8), size)


def decode_image(source, size: int | None = None, base_dir=None) -> Image.Image:
    """Open, check and convert one image (a path, or the bytes of an image file) to RGB,
    resized to ``size`` x ``size`` (bicubic) when given. Raises ValueError with a reason
    a user can act on."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        out = _decode(source, size, base_dir)
    return out if size is None else Image.fromarray(out)


def _bombs_are_errors() -> None:
    """PIL's decompression-bomb warning as an error for the whole process, once: the
    threads of :func:`load_images` cannot each scope it (``warnings.catch_warnings`` is not
    thread-safe). Images above :data:`MAX_PIXELS` are refused before PIL's own limit."""
    if not any(f[0] == "error" and f[2] is Image.DecompressionBombWarning
               for f in warnings.filters):
        warnings.filterwarnings("error", category=Image.DecompressionBombWarning)


def load_images(values, size: int | None, base_dir=None, *, min_edge: int | None = None
                ) -> list:
    """:func:`load_image` of many cells at once, one per thread (the decoders and the resize
    release the GIL): each result is the uint8 array (``size`` given) or the RGB PIL image
    (``size`` None), or the ValueError that image raised, in the order given.

    ``min_edge`` (with ``size`` None): the fewest pixels the model's own preprocessing needs
    on each edge; a larger JPEG is decoded at a reduced DCT scale that keeps both edges at
    ``min_edge`` or more (the image then arrives smaller than the file)."""
    _bombs_are_errors()

    def one(v):
        try:
            return _decode(v, size, base_dir, min_edge)
        except ValueError as e:
            return e

    values = list(values)
    if len(values) < 2 or not PARALLEL:
        return [one(v) for v in values]
    return list(thread_pool().map(one, values))


_POOL = None
#: decode a batch's images in threads (off: one after another; benchmarks/clip_s_speed.py)
PARALLEL = True


def thread_pool():
    """One worker thread per core, shared by the image work that releases the GIL
    (decoding here, the CLIP preprocessing of :mod:`scoreband.backbones.dual`)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1),
                                   thread_name_prefix="scoreband-images")
    return _POOL


def _read(source, base_dir) -> bytes:
    if isinstance(source, (bytes, bytearray)):
        if len(source) > MAX_IMAGE_BYTES:
            raise ValueError(f"image data is above the {MAX_IMAGE_BYTES >> 20} MiB scoreband "
                             "reads")
        return bytes(source)
    return read_image_bytes(source, base_dir)


def _decode(source, size: int | None, base_dir, min_edge: int | None = None):
    """One image: the uint8 array of ``size`` x ``size``, or the RGB PIL image (``size``
    None, at its own size or DCT-reduced towards ``min_edge``)."""
    data = _read(source, base_dir)
    need = size if size is not None else min_edge
    try:
        # from memory: no file stays open, so the image needs no copy to outlive one
        im = Image.open(io.BytesIO(data))
        w, h = im.size
        if w * h > MAX_PIXELS:
            raise ValueError(f"image too large ({w}x{h} pixels > {MAX_PIXELS:,})")
        jpeg = bool(need) and DCT_SCALING and im.format == "JPEG"
        a = (_png_fast(data, im) if im.format == "PNG" else
             _jpeg_reduced(data, im, need) if jpeg else None)
        if a is not None:
            return resize_square(a, size) if size is not None else Image.fromarray(a)
        if jpeg:
            # libjpeg decodes at 1/2, 1/4 or 1/8 of the size for free (DCT scaling):
            # the smallest scale still holding need x need, then the one resize
            im.draft(None, (need, need))
        im.load()
        rgb = _rgb_sized(im, size, own=True)
    except ValueError:
        raise
    except (UnidentifiedImageError, Image.DecompressionBombError,
            Image.DecompressionBombWarning) as e:
        raise ValueError(f"not a readable image ({type(e).__name__})") from None
    except (OSError, SyntaxError, EOFError) as e:  # truncated or corrupt files
        raise ValueError(f"image could not be decoded: {e}") from None
    return rgb


def _png_fast(data: bytes, im: Image.Image) -> np.ndarray | None:
    """An 8-bit RGB or greyscale PNG without transparency or EXIF decoded by libpng through
    imagecodecs (1.4x PIL's decoder, and it releases the GIL: 1.7x on 2 threads), as the
    RGB array PIL would give, pixel for pixel (lossless). None for anything else (palette,
    alpha, 16 bits, an EXIF orientation to apply), where imagecodecs is missing, or where
    libpng reports an error: PIL then decodes it and gives its verdict."""
    if not FAST_PNG or im.mode not in ("RGB", "L") or "transparency" in im.info \
            or "exif" in im.info or data.find(b"eXIf") >= 0:  # (PIL finds eXIf after IDAT
        return None                                          # only by decoding)
    try:
        import imagecodecs  # lazy: an optional binding (PIL decodes where it is missing)

        a = imagecodecs.png_decode(data)
    except Exception:  # noqa: BLE001 - ImportError, or libpng's PngError on a bad file
        return None
    if a.dtype != np.uint8 or a.shape[:2] != (im.size[1], im.size[0]):
        return None  # 16 bits per sample: PIL keeps the high bytes; leave it to PIL
    if a.ndim == 2:
        a = np.repeat(a[:, :, None], 3, axis=2)
    return a if a.ndim == 3 and a.shape[2] == 3 else None


#: EXIF orientation -> the transpose that shows the picture upright (as ImageOps applies it)
_ORIENT = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
           4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE,
           6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
           8: Image.Transpose.ROTATE_90}


def dct_reduced_size(w: int, h: int, need: int) -> dict:
    """simplejpeg's ``min_width`` / ``min_height`` for the smallest of the scales 1, 1/2,
    1/4, 1/8 that keeps both edges of a ``w`` x ``h`` JPEG >= ``need`` (the scale PIL's
    ``draft`` picks). libjpeg's scaled size is the rounded-up quotient, so asking for it
    picks exactly that scale.

    >>> dct_reduced_size(640, 480, 224)
    {'min_width': 320, 'min_height': 240}
    """
    s = next(s for s in (8, 4, 2, 1) if s == 1 or min(w, h) // s >= need)
    return {"min_width": -(-w // s), "min_height": -(-h // s)}


def _jpeg_reduced(data: bytes, im: Image.Image, need: int) -> np.ndarray | None:
    """A YCbCr or greyscale JPEG decoded by libjpeg-turbo through simplejpeg at the
    smallest of the scales 1, 1/2, 1/4, 1/8 keeping both edges >= ``need`` (the scales PIL's
    ``draft`` picks, with the same pixels), upright by its EXIF orientation; faster than
    PIL (one call on the whole buffer, no chunked reads). None where simplejpeg is missing,
    the image is CMYK, or libjpeg reports anything (the PIL path then decodes it and gives
    PIL's verdict)."""
    if im.mode not in ("RGB", "L"):
        return None
    try:
        import simplejpeg  # lazy: a small binding; optional where no wheel exists

        a = simplejpeg.decode_jpeg(data, colorspace="RGB", **dct_reduced_size(*im.size, need))
    except (ImportError, ValueError):
        return None
    method = _ORIENT.get(im.getexif().get(0x0112, 1))
    if method is not None:
        a = np.asarray(Image.fromarray(a).transpose(method))
    return a


def load_image(path, size: int | None, base_dir=None) -> np.ndarray:
    """:func:`decode_image` as a uint8 array (H, W, 3).

    A relative path is looked up from the working directory, then from ``base_dir`` (the
    table's folder). Raises ValueError with a reason a user can act on.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        out = _decode(path, size, base_dir)
    return out if size is not None else np.asarray(out, dtype=np.uint8)


def image_input(image, size: int | None):
    """Any one image a Python caller holds - a path, the bytes of a file, a PIL image, or
    an array / torch tensor (H, W, 3) or (3, H, W), uint8 or floats in [0, 1] - as the
    scorers take it: a uint8 array of ``size`` x ``size`` (None: a PIL image at its own
    size), converted like a file is (:func:`to_rgb`, bicubic resize).

    >>> image_input(np.zeros((3, 8, 8), dtype=np.float32) + 1.0, 4)[0, 0].tolist()
    [255, 255, 255]
    """
    if isinstance(image, (str, Path, bytes, bytearray)):
        im = decode_image(image, size)
    elif isinstance(image, Image.Image):
        return _rgb_sized(image, size)
    else:
        a = image.detach().cpu().numpy() if hasattr(image, "detach") else np.asarray(image)
        if a.ndim == 3 and a.shape[0] in (1, 3, 4) and a.shape[-1] not in (1, 3, 4):
            a = np.moveaxis(a, 0, -1)
        if a.ndim == 3 and a.shape[-1] == 1:
            a = a[..., 0]
        if a.ndim not in (2, 3) or (a.ndim == 3 and a.shape[-1] not in (3, 4)):
            raise ValueError(f"an image array must be (H, W, 3) or (3, H, W), got {a.shape}")
        if a.size > MAX_PIXELS * 4:
            raise ValueError(f"image too large ({a.shape})")
        if a.dtype != np.uint8:
            a = np.nan_to_num(a.astype(np.float64))
            a = np.clip(np.rint(a * 255.0 if a.size and a.max() <= 1.0 else a), 0, 255)
            a = a.astype(np.uint8)
        return _rgb_sized(Image.fromarray(a), size)
    return np.asarray(im, dtype=np.uint8) if size is not None else im

