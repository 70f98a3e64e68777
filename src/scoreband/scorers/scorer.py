"""The one scorer: a registered backbone (the embedded model, BEiT-3, CLIP, open_clip ...)
plus a head set (a point head and the quantile heads), in one folder format.

``Scorer.load(DIR)`` or ``Scorer.load("embedded:default")`` (the bundled model); every
scorer has ``predict`` / ``predict_heads`` (one backbone pass for several heads), ``point``,
``mc_dropout``, ``represent`` and a ``fingerprint`` that calibrators are bound to.

The folder (format ``scoreband.scorer``, version 2): ``config.json`` (the backbone's
address, its weights' fingerprint, the head set's width and dropout, the levels, the
training report), ``model.safetensors`` (``point.*`` and ``heads.*``; ``backbone.*`` too
when the backbone's weights belong to the model - the embedded models, which are trained
whole, and fine-tuned backbones), ``SHA256SUMS``, ``calibrator.json`` and ``MODEL_CARD.md``.
Older folders load as they are: version 1 of the embedded format (the same files) and
``scoreband.backbone-scorer`` folders (``heads.safetensors`` + ``backbone.safetensors``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from scoreband.backbones import load_backbone, resolve_backbone
from scoreband.backbones.embedded import (
    EmbeddedBackbone,
    bundled_model_dir,
    read_model_config,
    read_model_folder,
)
from scoreband.checksums import file_sha256, verify_checksums, write_checksums
from scoreband.datatypes import QUANTILE_LEVELS, Predictions
from scoreband.errors import InputError
from scoreband.files import atomic_path, atomic_write_text
from scoreband.schemas import BackboneModelDoc, ScorerDoc, validate
from scoreband.scorers.heads import HEAD_KINDS, HeadSet

__all__ = ["Scorer", "FORMAT", "FORMAT_VERSION", "LEGACY_BACKBONE_FORMAT", "bundled_model_dir"]

FORMAT = "scoreband.scorer"
FORMAT_VERSION = 2
#: the folders of heads on a registered backbone before version 2 (still loaded)
LEGACY_BACKBONE_FORMAT = "scoreband.backbone-scorer"
_FIX = "the model folder is damaged: retrain it or restore the file"


def _weights(f: Path) -> dict:
    try:
        return load_file(str(f))  # checks the header and the tensors' byte ranges
    except Exception as e:  # safetensors raises its own error type for a damaged file
        raise InputError(f"{f} cannot be read as safetensors weights ({type(e).__name__}: "
                         f"{' '.join(str(e).split())[:120]}); the file is truncated or "
                         "damaged: retrain or restore it") from None


def _part(state: dict, prefix: str) -> dict:
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}


class Scorer:
    """A backbone and a head set, loaded from a model folder (see the module docstring)."""

    def __init__(self, backbone, heads: HeadSet, meta: dict, fingerprint: str,
                 path: Path | None = None):
        self.backbone = backbone
        self.heads = heads.eval()
        self.meta = meta
        self.fingerprint = fingerprint
        self.path = path
        #: the images :meth:`predict` takes as uint8 arrays of this size (the embedded
        #: models); None: PIL images of any size
        self.input_size = getattr(backbone, "input_size", None)
        #: with PIL images, the fewest pixels per edge the backbone's preprocessing needs
        #: (larger JPEGs may be decoded smaller, down to it); None: unknown, full size
        self.min_image_edge = getattr(backbone, "min_image_edge", None)
        #: rows per backbone pass by default
        self.batch_size = getattr(backbone, "batch_size", 32)
        #: how the backbone runs: eager torch, or onnx (ONNX Runtime)
        self.runtime = "eager"
        self.last_truncated = np.zeros(0, dtype=bool)
        self.last_counts = np.zeros(0, dtype=int)

    @property
    def tokenizer(self):
        """The backbone's tokenizer (the embedded models' word tokenizer flags unknown
        words), or None."""
        return getattr(self.backbone, "tokenizer", None)

    # ----------------------------------------------------------------- persistence
    @staticmethod
    def save(path, backbone, heads: HeadSet, *, backbone_state: dict | None = None,
             training: dict | None = None) -> None:
        """Write the folder's ``config.json``, ``model.safetensors`` and ``SHA256SUMS``;
        ``backbone_state``: backbone weights that belong to the model (embedded models,
        fine-tuned backbones), stored as ``backbone.*``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        state = {f"point.{k}": v for k, v in heads.point.state_dict().items()}
        state.update({f"heads.{k}": v for k, v in heads.heads.state_dict().items()})
        if backbone_state is not None:
            state.update({f"backbone.{k}": v for k, v in backbone_state.items()})
        with atomic_path(path / "model.safetensors") as tmp:
            save_file({k: v.detach().cpu().contiguous() for k, v in state.items()}, tmp)
        # an embedded architecture with its weights in the file is rebuilt from the file
        # alone; any other backbone is loaded by its address and checked by fingerprint
        own = backbone_state is not None and isinstance(backbone, EmbeddedBackbone)
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION,
                "backbone_name": backbone.name,
                "backbone_fingerprint": None if own else backbone.fingerprint,
                "backbone_in_file": backbone_state is not None,
                "backbone": backbone.cfg.to_dict() if own else None,
                "vocab": backbone.tokenizer.vocab if own else None,
                "dim": backbone.dim, "dropout": heads.point.drop.p,
                "heads": list(heads.heads.keys()), "levels": list(QUANTILE_LEVELS),
                "provenance": backbone.describe(), "training": training}
        atomic_write_text(path / "config.json", json.dumps(meta, indent=2, default=str))
        write_checksums(path, ["config.json", "model.safetensors"])

    @classmethod
    def load(cls, source="embedded:default", *, backbone=None, device: str = "cpu",
             dtype: str | None = None, runtime: str = "eager") -> Scorer:
        """A model folder, or ``embedded:default`` for the bundled model. ``backbone``: an
        already loaded backbone to put the heads on (its weights are checked against the
        folder's); ``device`` / ``dtype`` for a registered backbone loaded here;
        ``runtime`` ``"onnx"``: the embedded encoder through ONNX Runtime (falls back to
        eager torch, with a warning, where it cannot run)."""
        scorer = cls._load(source, backbone=backbone, device=device, dtype=dtype)
        if runtime != "eager":
            use = getattr(scorer.backbone, "use_runtime", None)
            if use is None:
                raise InputError(f"`runtime` {runtime!r} is for the embedded models; "
                                 f"{scorer.backbone.name} runs in torch")
            scorer.runtime = use(runtime)
        return scorer

    @classmethod
    def _load(cls, source, *, backbone=None, device: str = "cpu",
              dtype: str | None = None) -> Scorer:
        s = str(source)
        if s.startswith("embedded:"):
            resolve_backbone(s)  # errors list the choices
            path = bundled_model_dir()
        else:
            path = Path(s)
        cfg_file = path / "config.json"
        meta = read_model_config(path)
        if meta.get("format") == LEGACY_BACKBONE_FORMAT:
            return cls._load_legacy(path, meta, backbone, device, dtype)
        if meta.get("format_version") == 1 or meta.get("backbone_in_file") and \
                meta.get("backbone"):
            # an embedded architecture with its weights in the file (version 1: always)
            folder = read_model_folder(path)
            cfg, state, fingerprint = folder["config"], folder["state"], folder["fingerprint"]
            backbone = EmbeddedBackbone.from_parts(meta.get("backbone_name", "embedded:default"),
                                                   cfg, folder["tokenizer"],
                                                   _part(state, "backbone."), fingerprint)
            meta = {**meta, "dim": cfg.dim, "dropout": meta.get("dropout", cfg.dropout)}
        else:
            validate(ScorerDoc, meta, cfg_file,
                     fix="the model folder is damaged or not a scoreband model: retrain it "
                         "with `scoreband train` or restore the file")
            w_file = path / "model.safetensors"
            if not w_file.exists():
                raise InputError(f"model folder {str(path)!r} has no {w_file.name}; train "
                                 "one with `scoreband train --out DIR`")
            state = _weights(w_file)
            verify_checksums(path)  # well-formed, but edited since it was written?
            backbone = cls._registered(meta, backbone, device, dtype)
            if meta.get("backbone_in_file"):  # fine-tuned
                backbone.trainable().load_state_dict(_part(state, "backbone."))
            h = hashlib.sha256(file_sha256(w_file).encode())
            h.update(str(backbone.fingerprint).encode())
            fingerprint = h.hexdigest()[:16]
        heads = HeadSet(meta["dim"], meta.get("dropout", 0.1),
                        kinds=tuple(meta.get("heads") or HEAD_KINDS))
        missing, unexpected = heads.load_state_dict(
            {k: v for k, v in state.items() if not k.startswith("backbone.")}, strict=False)
        if missing or unexpected:
            raise InputError(f"{path / 'model.safetensors'} does not match its config: "
                             f"missing {missing[:5]}, "
                             f"unexpected {unexpected[:5]}")
        return cls(backbone, heads, meta, fingerprint, path)

    @staticmethod
    def _registered(meta: dict, backbone, device, dtype):
        """The registered backbone the heads sit on, checked against the weights they were
        trained on."""
        if backbone is None:
            prov = meta.get("provenance", {})
            backbone = load_backbone(meta["backbone_name"], device=device,
                                     dtype=dtype or prov.get("dtype", "float32"),
                                     image_size=(prov.get("config") or {}).get("img_size"))
        if backbone.fingerprint != meta["backbone_fingerprint"]:
            raise InputError(f"the backbone {meta['backbone_name']!r} has other weights than the "
                             f"model was trained on (sha256 {backbone.fingerprint} vs "
                             f"{meta['backbone_fingerprint']})")
        return backbone

    @classmethod
    def _load_legacy(cls, path: Path, meta: dict, backbone, device, dtype) -> Scorer:
        """A ``scoreband.backbone-scorer`` folder (before version 2): its fingerprint is
        computed as it was then, so its calibrator still matches."""
        validate(BackboneModelDoc, meta, path / "config.json", fix=_FIX)
        verify_checksums(path)
        backbone = cls._registered(meta, backbone, device, dtype)
        if (path / "backbone.safetensors").exists():
            backbone.trainable().load_state_dict(_weights(path / "backbone.safetensors"))
        heads = HeadSet(meta["dim"], meta.get("dropout", 0.1))
        heads.load_state_dict(_weights(path / "heads.safetensors"))
        h = hashlib.sha256((path / "heads.safetensors").read_bytes())
        h.update(str(backbone.fingerprint).encode())
        if (path / "backbone.safetensors").exists():
            h.update((path / "backbone.safetensors").read_bytes())
        return cls(backbone, heads, meta, h.hexdigest()[:16], path)

    # ----------------------------------------------------------------- scoring
    def _batches(self, images, texts, batch_size: int | None):
        n = len(texts)
        if len(images) != n:
            raise InputError(f"got {len(images)} images and {n} texts")
        bs = batch_size or self.batch_size
        bb = self.backbone
        for s in range(0, n, bs):
            px = bb.preprocess(images[s:s + bs])
            tb, trunc, counts = bb.encode_text(list(texts[s:s + bs]))
            yield px, tb, trunc, counts

    @torch.inference_mode()
    def predict_heads(self, images, texts, heads=None,
                      batch_size: int | None = None) -> dict[str, Predictions]:
        """Predictions of several quantile heads from one backbone pass per batch (median,
        the 90 % pair, the 11 quantiles and the image embedding, on [0, 1]); the captions'
        truncation flags and token counts are in ``last_truncated`` / ``last_counts``."""
        heads = list(self.heads.heads) if heads is None else list(heads)
        for h in heads:
            if h not in self.heads.heads:
                raise InputError(f"unknown head {h!r}; available: {', '.join(self.heads.heads)}")
        qs: dict[str, list] = {h: [] for h in heads}
        emb, trunc, counts = [], [], []
        both = getattr(self.backbone, "represent_and_embed", None)  # one pass, one graph
        for px, tb, tr, ct in self._batches(images, texts, batch_size):
            rep, e = both(px, tb) if both else (self.backbone.represent(px, tb),
                                                 self.backbone.image_embedding(px))
            rep = rep.float().cpu()
            for h in heads:
                qs[h].append(self.heads.heads[h](rep))
            emb.append(e.float().cpu())
            trunc.append(tr)
            counts.append(ct)
        self.last_truncated = np.concatenate(trunc) if trunc else np.zeros(0, dtype=bool)
        self.last_counts = np.concatenate(counts) if counts else np.zeros(0, dtype=int)
        e = torch.cat(emb).double().numpy() if emb else np.zeros((0, self.backbone.dim))
        out = {}
        for h in heads:
            q = torch.cat(qs[h]).double().numpy() if qs[h] else np.zeros((0, 11))
            out[h] = Predictions(median=q[:, 5], lo=q[:, 0], hi=q[:, 10], quantiles=q,
                                 levels=QUANTILE_LEVELS, embedding=e)
        return out

    def predict(self, images, texts, head: str = "chained_ci",
                batch_size: int | None = None) -> Predictions:
        """Median, 90 % pair, 11 quantiles and image embedding on [0, 1]."""
        return self.predict_heads(images, texts, [head], batch_size)[head]

    @torch.inference_mode()
    def represent(self, images, texts, batch_size: int | None = None):
        """Joint representations (n, d) and image-only embeddings (n, d), as arrays."""
        h, e = [], []
        for px, tb, _, _ in self._batches(images, texts, batch_size):
            h.append(self.backbone.represent(px, tb).float().cpu())
            e.append(self.backbone.image_embedding(px).float().cpu())
        return torch.cat(h).numpy(), torch.cat(e).numpy()

    @torch.inference_mode()
    def point(self, images, texts, batch_size: int | None = None) -> np.ndarray:
        """The point head's score on [0, 1]."""
        out = [self.heads.point(self.backbone.represent(px, tb).float().cpu())
               for px, tb, _, _ in self._batches(images, texts, batch_size)]
        return torch.cat(out).double().numpy()

    @torch.inference_mode()
    def mc_dropout(self, images, texts, passes: int = 25, seed: int = 0,
                   batch_size: int | None = None, on_batch=None) -> Predictions:
        """The MC-dropout baseline: the point model with dropout on, ``passes`` samples per
        item; median and the empirical quantiles of the samples. A backbone with dropout of
        its own (the embedded models: ``stochastic``) runs again for every pass; the others
        run once and the point head's dropout makes the samples. ``on_batch(done, total)``
        hears about progress in item-passes."""
        state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        stochastic = getattr(self.backbone, "stochastic", False)
        module = self.backbone.trainable() if stochastic else None
        if module is not None:
            module.train()
        self.heads.train()
        try:
            samples, done, total = [], 0, passes * len(texts)
            for px, tb, _, _ in self._batches(images, texts, batch_size):
                if stochastic:
                    draws = []
                    for k in range(passes):
                        draws.append(self.heads.point(self.backbone.represent(px, tb)))
                        if on_batch is not None:
                            on_batch(done + (k + 1) * len(px), total)
                else:
                    rep = self.backbone.represent(px, tb).float().cpu()
                    draws = [self.heads.point(rep) for _ in range(passes)]
                    if on_batch is not None:
                        on_batch(done + passes * len(px), total)
                done += passes * len(px)
                samples.append(torch.stack(draws, dim=1))
            s = torch.cat(samples).double().numpy()
        finally:
            if module is not None:
                module.eval()
            self.heads.eval()
            torch.random.set_rng_state(state)
        q = np.quantile(s, QUANTILE_LEVELS, axis=1).T
        return Predictions(median=np.median(s, axis=1), lo=q[:, 0], hi=q[:, 10], quantiles=q,
                           levels=QUANTILE_LEVELS)
