"""The quantile scorer: a backbone, a point head and quantile heads, saved as safetensors.

``QuantileScorer`` is the facade the CLI and the demo use: images + texts in,
:class:`~scoreband.records.Predictions` out (median, the 90 % pair, all 11 quantiles and an
image embedding for clustering).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn

from scoreband.backbones import resolve_backbone
from scoreband.backbones.embedded import (  # noqa: F401  (bundled_model_dir re-exported)
    EmbeddedConfig,
    EmbeddedCrossEncoder,
    WordTokenizer,
    bundled_model_dir,
    preprocess_images,
    read_model_folder,
)
from scoreband.errors import InputError
from scoreband.records import QUANTILE_LEVELS, Predictions
from scoreband.scorers.heads import ChainedQuantileHead, PointHead, UnconstrainedQuantileHead

__all__ = ["ScorerModel", "QuantileScorer", "HEAD_KINDS", "bundled_model_dir"]

#: quantile head name -> (class, loss)
HEAD_KINDS = {
    "chained_ci": (ChainedQuantileHead, "ci"),
    "chained_pinball": (ChainedQuantileHead, "pinball"),
    "unconstrained_pinball": (UnconstrainedQuantileHead, "pinball"),
}


class ScorerModel(nn.Module):
    """Backbone + point head + named quantile heads."""

    def __init__(self, cfg: EmbeddedConfig, heads=tuple(HEAD_KINDS)):
        super().__init__()
        self.cfg = cfg
        self.backbone = EmbeddedCrossEncoder(cfg)
        self.point = PointHead(cfg.dim, cfg.dropout)
        self.heads = nn.ModuleDict({k: HEAD_KINDS[k][0](cfg.dim) for k in heads})

    def represent(self, pixels, ids) -> torch.Tensor:
        return self.backbone(pixels, ids)


class QuantileScorer:
    """Load a trained scorer and score (image, caption) pairs.

    ``QuantileScorer.load(DIR)`` reads a folder written by :func:`train_scorer`
    (``config.json`` + ``model.safetensors``).
    """

    def __init__(self, model: ScorerModel, tokenizer: WordTokenizer, meta: dict,
                 fingerprint: str, path: Path | None = None):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.meta = meta
        self.fingerprint = fingerprint
        self.path = path

    # ----------------------------------------------------------------- persistence
    @classmethod
    def load(cls, source: str | Path = "embedded:default") -> QuantileScorer:
        """Load from a model folder, or ``embedded:default`` for the bundled model."""
        s = str(source)
        if s.startswith("embedded:"):
            resolve_backbone(s)  # errors list the choices
            path = bundled_model_dir()
        else:
            path = Path(s)
        folder = read_model_folder(path)
        meta, w_file = folder["meta"], folder["weights_file"]
        model = ScorerModel(folder["config"], heads=tuple(meta.get("heads", HEAD_KINDS)))
        missing, unexpected = model.load_state_dict(folder["state"], strict=False)
        if missing or unexpected:
            raise InputError(f"{w_file} does not match its config: missing {missing[:5]}, "
                             f"unexpected {unexpected[:5]}")
        return cls(model, folder["tokenizer"], meta, folder["fingerprint"], path)

    @staticmethod
    def save(model: ScorerModel, tokenizer: WordTokenizer, path, extra: dict | None = None):
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        from scoreband.io import atomic_path, atomic_write_text

        with atomic_path(path / "model.safetensors") as tmp:
            save_file(state, tmp)
        meta = {"format": "scoreband.scorer", "format_version": 1,
                "backbone_name": "embedded:default", "backbone": model.cfg.to_dict(),
                "vocab": tokenizer.vocab, "heads": list(model.heads.keys()),
                "levels": list(QUANTILE_LEVELS), **(extra or {})}
        atomic_write_text(path / "config.json", json.dumps(meta, indent=2))
        from scoreband.files import write_checksums

        write_checksums(path, ["config.json", "model.safetensors"])

    # ----------------------------------------------------------------- scoring
    def _batches(self, images, texts, batch_size):
        n = len(texts)
        if len(images) != n:
            raise InputError(f"got {len(images)} images and {n} texts")
        for s in range(0, n, batch_size):
            px = preprocess_images(images[s:s + batch_size], self.model.cfg.image_size)
            ids, trunc, nw = self.tokenizer.batch(texts[s:s + batch_size])
            yield s, px, ids, trunc, nw

    @torch.inference_mode()
    def represent(self, images, texts, batch_size: int = 256) -> tuple[np.ndarray, np.ndarray]:
        """Joint representations (n, d) and image-only embeddings (n, d)."""
        h, e = [], []
        for _, px, ids, _, _ in self._batches(images, texts, batch_size):
            h.append(self.model.represent(px, ids))
            e.append(self.model.backbone.image_embedding(px))
        return torch.cat(h).numpy(), torch.cat(e).numpy()

    @torch.inference_mode()
    def predict_heads(self, images, texts, heads=None,
                      batch_size: int = 256) -> dict[str, Predictions]:
        """Predictions of several quantile heads from one backbone pass per batch."""
        heads = list(self.model.heads) if heads is None else list(heads)
        for h in heads:
            if h not in self.model.heads:
                raise InputError(f"unknown head {h!r}; available: {', '.join(self.model.heads)}")
        self.model.eval()
        qs: dict[str, list] = {h: [] for h in heads}
        emb = []
        for _, px, ids, _, _ in self._batches(images, texts, batch_size):
            rep = self.model.represent(px, ids)
            for h in heads:
                qs[h].append(self.model.heads[h](rep))
            emb.append(self.model.backbone.image_embedding(px))
        e = torch.cat(emb).double().numpy()
        out = {}
        for h in heads:
            q = torch.cat(qs[h]).double().numpy()
            out[h] = Predictions(median=q[:, 5], lo=q[:, 0], hi=q[:, 10], quantiles=q,
                                 levels=QUANTILE_LEVELS, embedding=e)
        return out

    def predict(self, images, texts, head: str = "chained_ci",
                batch_size: int = 256) -> Predictions:
        """Median, 90 % pair, 11 quantiles and image embedding on [0, 1]."""
        return self.predict_heads(images, texts, [head], batch_size)[head]

    @torch.inference_mode()
    def point(self, images, texts, batch_size: int = 256) -> np.ndarray:
        self.model.eval()
        out = [self.model.point(self.model.represent(px, ids))
               for _, px, ids, _, _ in self._batches(images, texts, batch_size)]
        return torch.cat(out).double().numpy()

    @torch.inference_mode()
    def mc_dropout(self, images, texts, passes: int = 25, seed: int = 0,
                   batch_size: int = 256, on_batch=None) -> Predictions:
        """MC-dropout baseline: the point model with dropout on, ``passes`` forward passes;
        median and the 5 % / 95 % empirical quantiles of the samples. ``on_batch(done,
        total)`` hears about progress after every pass, in item-passes."""
        gen_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        self.model.train()  # dropout on (no batch-norm in this model)
        try:
            samples = []
            total = passes * len(texts)
            for s, px, ids, _, _ in self._batches(images, texts, batch_size):
                draws = []
                for k in range(passes):
                    draws.append(self.model.point(self.model.represent(px, ids)))
                    if on_batch is not None:  # item-passes done, of all
                        on_batch(s * passes + (k + 1) * len(px), total)
                samples.append(torch.stack(draws, dim=1))
            s = torch.cat(samples).double().numpy()
        finally:
            self.model.eval()
            torch.random.set_rng_state(gen_state)
        q = np.quantile(s, QUANTILE_LEVELS, axis=1).T
        return Predictions(median=np.median(s, axis=1), lo=q[:, 0], hi=q[:, 10], quantiles=q,
                           levels=QUANTILE_LEVELS)
