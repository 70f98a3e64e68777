"""Dual-encoder backbones (CLIP and the like) and the CLIP-S baseline.

* ``hf:MODEL_ID_OR_DIR``: transformers ``AutoModel`` + ``AutoProcessor`` (CLIP, SigLIP, ...
  anything with ``get_image_features`` / ``get_text_features``). transformers 5.x returns an
  output object from these (``BaseModelOutputWithPooling``): its ``pooler_output`` is the
  projected embedding.
* ``open_clip:ARCH:PRETRAINED_OR_PATH``: open_clip, when installed (it needs torchvision,
  which scoreband's CPU set-up avoids: see the README).

Long captions are truncated to the text tower's length keeping the end-of-text token
(the tokenizer's own truncation), and flagged per row with the token count, never silently.
The representation for a quantile head is ``[e_img, e_txt, e_img * e_txt, |e_img - e_txt|]``
of the L2-normalised embeddings (4 x projection dim), computed in float32.
"""

from __future__ import annotations

import numpy as np
import torch

from scoreband.errors import InputError
from scoreband.images import thread_pool
from scoreband.model_sources import model_source
from scoreband.provenance import plain_settings, weights_fingerprint

__all__ = ["HFDualEncoder", "OpenCLIPDualEncoder", "clip_s", "dual_features", "CLIP_S_W"]

#: CLIP-S (Hessel et al., 2021): w * max(cos(e_img, e_txt), 0) with w = 2.5
CLIP_S_W = 2.5


def clip_s(img_emb, txt_emb, w: float = CLIP_S_W) -> np.ndarray:
    """CLIP-S = w * max(cos, 0), in float32.

    >>> float(clip_s(np.array([[1.0, 0.0]]), np.array([[1.0, 1.0]]))[0])  # doctest: +ELLIPSIS
    1.767...
    """
    a = np.asarray(img_emb, dtype=np.float32)
    b = np.asarray(txt_emb, dtype=np.float32)
    cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1),
                                      1e-12)
    return w * np.maximum(cos, 0.0)


def dual_features(e_img: torch.Tensor, e_txt: torch.Tensor) -> torch.Tensor:
    """[e_img, e_txt, e_img * e_txt, |e_img - e_txt|] of the normalised embeddings."""
    a = nn_normalize(e_img.float())
    b = nn_normalize(e_txt.float())
    return torch.cat([a, b, a * b, (a - b).abs()], dim=1)


def nn_normalize(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=1, keepdim=True).clamp(min=1e-12)


#: CLIP's preprocessing run here, in threads (off: the processor's own loop; benchmarks)
FAST_CLIP = True


def _clip_pixels(im, short: int, resample: int, crop, scale, mean, std) -> np.ndarray:
    """One image through CLIP's preprocessing: resize the shortest edge to ``short`` (the
    longer one to ``int(short * long / short_side)``, as transformers computes it), centre
    crop, rescale, normalise; (3, h, w) float32."""
    if im.mode != "RGB":  # (convert copies even an RGB image)
        im = im.convert("RGB")
    w, h = im.size
    if w <= h:
        nw, nh = short, int(short * h / w)
    else:
        nw, nh = int(short * w / h), short
    im = im.resize((nw, nh), resample=resample)
    ch, cw = crop
    top, left = int((nh - ch) / 2), int((nw - cw) / 2)
    # crop the uint8 pixels, then one float copy scaled in place: the same arithmetic in
    # the same order as the processor's, on the crop only
    a = np.asarray(im)[top:top + ch, left:left + cw].transpose(2, 0, 1).astype(np.float32)
    a *= scale
    a -= mean[:, None, None]
    a /= std[:, None, None]
    return a


def _pooled(out) -> torch.Tensor:
    return out if isinstance(out, torch.Tensor) else out.pooler_output


class HFDualEncoder:
    """``hf:MODEL_ID_OR_DIR`` (see module docstring)."""

    kind = "dual-encoder"

    def __init__(self, source: str, *, device: str = "cpu", dtype: str = "float32"):
        from transformers import AutoModel, AutoProcessor

        self.name = f"hf:{source}"
        self.device, self.dtype = device, dtype
        try:
            source = model_source(source)
            self.processor = AutoProcessor.from_pretrained(source)
            self.model = AutoModel.from_pretrained(source, dtype=getattr(torch, dtype))
        except (OSError, ValueError) as e:
            raise InputError(f"could not load {source!r}: {e}. Fix: a directory saved with "
                             "save_pretrained (config.json, weights, tokenizer and "
                             "preprocessor files) or a hub id on a machine with internet"
                             ) from None
        if not (hasattr(self.model, "get_image_features")
                and hasattr(self.model, "get_text_features")):
            raise InputError(f"{source!r} ({type(self.model).__name__}) is not a dual encoder "
                             "with get_image_features / get_text_features")
        self.model = self.model.to(device).eval()
        self.tokenizer = self.processor.tokenizer
        cfg = self.model.config
        tcfg = getattr(cfg, "text_config", cfg)
        self.max_len = int(getattr(tcfg, "max_position_embeddings", 77))
        self.proj_dim = int(getattr(cfg, "projection_dim", 0) or self._probe_dim())
        self.dim = 4 * self.proj_dim
        self.fingerprint = weights_fingerprint(source)

    def _probe_dim(self) -> int:
        with torch.inference_mode():
            t = self.tokenizer(["a"], return_tensors="pt")
            return _pooled(self.model.get_text_features(**t.to(self.device))).shape[1]

    def describe(self) -> dict:
        ip = getattr(self.processor, "image_processor", None)
        return {"backbone": self.name, "weights_sha256": self.fingerprint,
                "model_type": self.model.config.model_type, "dtype": self.dtype,
                "device": self.device, "text_max_len": self.max_len,
                "preprocessing": {k: plain_settings(getattr(ip, k, None)) for k in (
                    "size", "crop_size", "image_mean", "image_std", "resample")},
                "representation": "[e_img, e_txt, e_img*e_txt, |e_img-e_txt|] (normalised)"}

    def preprocess(self, images) -> torch.Tensor:
        """Pixel values as the model's image processor makes them. For CLIP's processor
        (shortest-edge resize, centre crop, rescale, normalise) the same steps run here,
        one image per thread (PIL releases the GIL while it resizes): the same PIL resize,
        so the same pixels to float rounding (a test holds them to 1e-6), at about twice the
        speed of the processor's own loop; any other processor is called as it is."""
        steps = self._clip_steps() if FAST_CLIP else None
        if steps is None:
            return self.processor.image_processor(images=[im.convert("RGB") for im in images],
                                                  return_tensors="pt")["pixel_values"]
        arrs = list(thread_pool().map(lambda im: _clip_pixels(im, *steps), images))
        return torch.from_numpy(np.stack(arrs))

    @property
    def min_image_edge(self) -> int | None:
        """CLIP's processor resizes the shortest edge to this before its crop, so a JPEG may
        be decoded DCT-reduced down to it; None for any other processor (full size)."""
        steps = self._clip_steps()
        return None if steps is None else max(steps[0], *steps[2])

    def _clip_steps(self):
        """``(shortest edge, resample, crop (h, w), scale, mean, std)`` when the processor is
        CLIP's with every step on; None otherwise (the processor is used as it is)."""
        if hasattr(self, "_steps"):
            return self._steps
        ip = getattr(self.processor, "image_processor", None)
        self._steps = None
        if type(ip).__name__ in ("CLIPImageProcessor", "CLIPImageProcessorPil") and all(
                getattr(ip, k, False) for k in ("do_resize", "do_center_crop", "do_rescale",
                                                "do_normalize", "do_convert_rgb")):
            size, crop = ip.size, ip.crop_size
            short = size.get("shortest_edge") if hasattr(size, "get") else None
            ch = crop.get("height") if hasattr(crop, "get") else None
            cw = crop.get("width") if hasattr(crop, "get") else None
            if short and ch and cw and not (hasattr(size, "get") and size.get("longest_edge")):
                self._steps = (int(short), int(ip.resample), (int(ch), int(cw)),
                               np.float32(ip.rescale_factor),
                               np.asarray(ip.image_mean, dtype=np.float32),
                               np.asarray(ip.image_std, dtype=np.float32))
        return self._steps

    def encode_text(self, texts):
        texts = list(texts)
        full = self.tokenizer(texts, add_special_tokens=True)["input_ids"]
        counts = np.array([len(x) for x in full])
        trunc = counts > self.max_len
        # the tokenizer's truncation keeps the special end-of-text token at the end
        enc = self.tokenizer(texts, padding="max_length", truncation=True,
                             max_length=self.max_len, return_tensors="pt")
        return dict(enc), trunc, counts

    def _img(self, pixels):
        return _pooled(self.model.get_image_features(
            pixel_values=pixels.to(self.device, getattr(torch, self.dtype)))).float()

    def _txt(self, text):
        return _pooled(self.model.get_text_features(
            **{k: v.to(self.device) for k, v in text.items()})).float()

    def represent(self, pixels, text) -> torch.Tensor:
        return dual_features(self._img(pixels), self._txt(text))

    def embeddings(self, pixels, text) -> tuple[torch.Tensor, torch.Tensor]:
        return self._img(pixels), self._txt(text)

    def image_embedding(self, pixels) -> torch.Tensor:
        return self._img(pixels)

    def trainable(self) -> torch.nn.Module:
        return self.model


class OpenCLIPDualEncoder(HFDualEncoder):
    """``open_clip:ARCH:PRETRAINED_OR_PATH`` through open_clip (optional dependency)."""

    min_image_edge = None  # its transforms are opaque here: images arrive at full size

    def __init__(self, arch: str, pretrained: str, *, device: str = "cpu",
                 dtype: str = "float32"):
        try:
            import open_clip
        except ImportError:
            raise InputError(
                "open_clip is not installed. It requires torchvision, which a CPU torch from "
                "PyPI cannot import beside (scoreband's own set-up keeps torchvision out); on a "
                "machine with a matching torch/torchvision pair: pip install open_clip_torch. "
                "Or export the model to transformers format and use hf:DIR") from None
        self.name = f"open_clip:{arch}:{pretrained}"
        self.device, self.dtype = device, dtype
        model, _, preprocess = open_clip.create_model_and_transforms(arch, pretrained=pretrained)
        self.model = model.to(device, getattr(torch, dtype)).eval()
        self._pre = preprocess
        self._tok = open_clip.get_tokenizer(arch)
        self.max_len = int(getattr(self._tok, "context_length", 77))
        with torch.inference_mode():
            self.proj_dim = int(self.model.encode_text(self._tok(["a"]).to(device)).shape[1])
        self.dim = 4 * self.proj_dim
        self.fingerprint = weights_fingerprint(pretrained)

    def describe(self) -> dict:
        return {"backbone": self.name, "weights_sha256": self.fingerprint,
                "dtype": self.dtype, "device": self.device, "text_max_len": self.max_len,
                "preprocessing": repr(self._pre)}

    def preprocess(self, images):
        return torch.stack([self._pre(im.convert("RGB")) for im in images])

    def encode_text(self, texts):
        texts = list(texts)
        ids = self._tok(texts)
        eot = ids.argmax(dim=-1)  # open_clip's EOT has the largest id
        trunc = (eot == ids.shape[1] - 1).numpy()
        return {"ids": ids}, trunc, (eot + 1).numpy()

    def _img(self, pixels):
        return self.model.encode_image(pixels.to(self.device, getattr(torch, self.dtype))).float()

    def _txt(self, text):
        return self.model.encode_text(text["ids"].to(self.device)).float()
