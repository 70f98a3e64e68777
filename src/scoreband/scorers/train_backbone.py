"""Quantile heads on any registered backbone (BEiT-3, CLIP, open_clip, embedded), trained on
a user's table: the BEiTScore++ method on real backbones.

Training (``train_backbone_scorer``):
1. representations: with a frozen backbone they are computed once and cached on disk
   (``MODEL_DIR/cache/``, keyed by the backbone's weights hash and the data), so reruns and
   the head stage cost no backbone pass; with fine-tuning the backbone is trained with the
   point head (lower learning rate) and the representations are recomputed afterwards;
2. point head (MSE) first, group batches from k-means clusters of the image embeddings, early
   stopping on the validation part, a checkpoint after every epoch (resumable) - the same
   loop as the embedded scorer's (``scorers.train.train_quantile_scorer``);
3. quantile heads initialised from the point head (chained + centred interval loss: the
   calibrated head; unconstrained + pinball as the baseline), on the frozen representations;
4. calibration: CRC on a held-out part of the validation table (never the early-stopping
   part), written as ``calibrator.json``.
The model is saved as the one scorer folder (:class:`~scoreband.scorers.scorer.Scorer`:
``config.json``, ``model.safetensors`` with the heads and, when fine-tuned, the backbone,
``calibrator.json``, ``MODEL_CARD.md``); its MC-dropout baseline is the point head with
dropout on (``Scorer.mc_dropout``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from scoreband.backbones import load_backbone
from scoreband.datatypes import Scale
from scoreband.errors import InputError
from scoreband.files import atomic_path
from scoreband.scorers.calibrate import calibrate_scorer
from scoreband.scorers.card import write_model_card
from scoreband.scorers.heads import HeadSet
from scoreband.scorers.pairs import load_pairs, take_rows
from scoreband.scorers.scorer import Scorer
from scoreband.scorers.train import PointTask, TrainConfig, train_quantile_scorer
from scoreband.tables import read_table

__all__ = ["BackboneTrainConfig", "train_backbone_scorer", "train_on_table"]


@dataclass
class BackboneTrainConfig(TrainConfig):
    """:class:`~scoreband.scorers.train.TrainConfig` for heads on a registered backbone
    (its own defaults, plus the backbone's learning rate when fine-tuned)."""

    batch_size: int = 32
    patience: int = 10
    backbone_lr: float = 1e-5
    freeze_backbone: bool = True
    alpha: float = 0.1
    dropout: float = 0.1
    head_lr: float | None = None  # None: the heads learn at ``lr``

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.head_lr is None:
            self.head_lr = self.lr


def _batches(n: int, size: int):
    for s in range(0, n, size):
        yield s, min(n, s + size)


def _represent(backbone, images, texts, batch_size: int = 32):
    """(representations, image embeddings, truncated flags, token counts); the tensors are
    float32 on the CPU whatever the backbone's device and dtype (the heads run there)."""
    reps, embs, trunc, counts = [], [], [], []
    with torch.inference_mode():
        for s, e in _batches(len(texts), batch_size):
            px = backbone.preprocess(images[s:e])
            tb, tr, ct = backbone.encode_text(texts[s:e])
            reps.append(backbone.represent(px, tb).float().cpu())
            embs.append(backbone.image_embedding(px).float().cpu())
            trunc.append(tr)
            counts.append(ct)
    return torch.cat(reps), torch.cat(embs), np.concatenate(trunc), np.concatenate(counts)


def _data_key(backbone, image_ids, texts) -> str:
    h = hashlib.sha256(json.dumps(backbone.describe(), sort_keys=True, default=str).encode())
    for i, t in zip(image_ids, texts, strict=True):
        h.update(str(i).encode())
        h.update(b"\0")
        h.update(t.encode())
        h.update(b"\1")
    return h.hexdigest()[:24]


def _cached_reps(backbone, images, texts, image_ids, cache_dir: Path, batch_size: int):
    key = _data_key(backbone, image_ids, texts)
    f = cache_dir / f"reps-{key}.safetensors"
    if f.exists():
        d = load_file(f)
        return d["reps"], d["emb"], d["trunc"].numpy().astype(bool), d["counts"].numpy()
    reps, emb, trunc, counts = _represent(backbone, images, texts, batch_size)
    cache_dir.mkdir(parents=True, exist_ok=True)

    with atomic_path(f) as tmp:
        save_file({"reps": reps.contiguous(), "emb": emb.contiguous(),
                   "trunc": torch.from_numpy(trunc.astype(np.uint8)),
                   "counts": torch.from_numpy(counts.astype(np.int64))}, tmp)
    return reps, emb, trunc, counts


class BackboneTask(PointTask):
    """A registered backbone under :func:`~scoreband.scorers.train.train_quantile_scorer`:
    frozen (the point head learns on cached representations) or fine-tuned with the point
    head (the backbone at ``backbone_lr``; representations recomputed afterwards)."""

    min_delta = 1e-7
    head_min_delta = 1e-7

    def __init__(self, backbone, heads: HeadSet, train: dict, va: dict,
                 cfg: BackboneTrainConfig, cache: Path):
        self.bb, self.heads, self.train_, self.va = backbone, heads, train, va
        self.frozen, self.bs = cfg.freeze_backbone, cfg.batch_size
        self.trains_backbone = not self.frozen
        self.y_tr = torch.tensor(train["y01"], dtype=torch.float32)
        self.y_va = torch.tensor(va["y01"], dtype=torch.float32)
        self.module = None if self.frozen else backbone.trainable()
        if self.frozen:
            self.h_tr, self.e_tr, self.truncated, _ = _cached_reps(
                backbone, train["images"], train["texts"], train["image_ids"], cache, self.bs)
            self.h_va, _, _, _ = _cached_reps(backbone, va["images"], va["texts"],
                                              va["image_ids"], cache, self.bs)
        else:
            _, self.e_tr, self.truncated, _ = _represent(backbone, train["images"],
                                                         train["texts"], self.bs)
        self.dev = getattr(backbone, "device", "cpu")

    def identity(self):
        return json.loads(json.dumps(self.bb.describe(), sort_keys=True, default=str))

    def n_train(self):
        return len(self.y_tr)

    def state_dict(self):
        sd = {f"point.{k}": v for k, v in self.heads.point.state_dict().items()}
        if self.module is not None:
            sd.update({f"backbone.{k}": v for k, v in self.module.state_dict().items()})
        return sd

    def load_state_dict(self, sd):
        for prefix, mod in (("point.", self.heads.point), ("backbone.", self.module)):
            if mod is not None:
                mod.load_state_dict({k[len(prefix):]: v for k, v in sd.items()
                                     if k.startswith(prefix)})

    def param_groups(self, cfg):
        groups = [{"params": self.heads.point.parameters(), "lr": cfg.lr}]
        if self.module is not None:
            self.heads.point.to(self.dev)  # the point head trains beside the backbone
            groups.append({"params": self.module.parameters(), "lr": cfg.backbone_lr})
        return groups

    def image_embeddings(self):
        return self.e_tr.numpy()

    def set_train(self, on):
        self.heads.train(on)
        if self.module is not None:
            self.module.train(on)

    def batch_loss(self, b, cfg):
        bi = torch.as_tensor(b)
        if self.frozen:
            return nn.functional.mse_loss(self.heads.point(self.h_tr[bi]), self.y_tr[bi])
        px = self.bb.preprocess(self.train_["images"][list(b)])
        tb, _, _ = self.bb.encode_text([self.train_["texts"][i] for i in b])
        rep = self.bb.represent(px, tb)
        return nn.functional.mse_loss(self.heads.point(rep), self.y_tr[bi].to(rep.device))

    @torch.no_grad()
    def val_loss(self):
        h = self.h_va if self.frozen else _represent(self.bb, self.va["images"],
                                                     self.va["texts"], self.bs)[0]
        dev = next(self.heads.point.parameters()).device
        return float(nn.functional.mse_loss(self.heads.point(h.to(dev)), self.y_va.to(dev)))

    def representations(self):
        self.heads.point.cpu()
        if not self.frozen:
            self.h_tr = _represent(self.bb, self.train_["images"], self.train_["texts"],
                                   self.bs)[0]
            self.h_va = _represent(self.bb, self.va["images"], self.va["texts"], self.bs)[0]
        return self.h_tr, self.y_tr, self.h_va, self.y_va

    def head_owner(self):
        return self.heads


def _calibrate_heads(out: Path, backbone, ca: dict, alpha: float) -> dict:
    """The one calibrate step (:func:`~scoreband.scorers.calibrate.calibrate_scorer`) on the
    calibration half of the validation table."""
    return calibrate_scorer(out, ca["images"], ca["texts"], ca["y01"], ca["scale"], alpha,
                            {"n": len(ca["texts"]), "source": "validation table (the half "
                             "not used for early stopping)"}, backbone=backbone)


def train_backbone_scorer(backbone, train, val, out_dir, cfg: BackboneTrainConfig | None = None,
                          on_epoch=None, command: str = "") -> dict:
    """Train heads (and optionally the backbone) on ``train`` and ``val`` dicts with
    ``images`` (PIL), ``texts``, ``y01``, ``image_ids`` and ``scale`` (records.Scale), and
    ``n_ratings`` (per-row counts or a number) on ``val``, with the one training function
    (:func:`~scoreband.scorers.train.train_quantile_scorer`: resumable per epoch); write the
    model to ``out_dir``, calibrate it on half of ``val`` and write its model card."""
    cfg = cfg or BackboneTrainConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    if len(val["texts"]) < 20:
        raise InputError(f"the validation table has {len(val['texts'])} usable rows; at least "
                         "20 are needed (half for early stopping, half for calibration)")
    # the validation table: one part for early stopping, one part for calibration
    perm = np.random.default_rng(cfg.seed).permutation(len(val["texts"]))
    es, cal = np.sort(perm[: len(perm) // 2]), np.sort(perm[len(perm) // 2:])
    va, ca = take_rows(val, es), take_rows(val, cal)
    heads = HeadSet(backbone.dim, cfg.dropout)
    task = BackboneTask(backbone, heads, train, va, cfg, out / "cache")
    report = train_quantile_scorer(task, out, cfg, on_epoch)
    report.update(n_early_stop=len(es), n_calibration=len(cal),
                  backbone=backbone.describe(), train_truncated=int(task.truncated.sum()))
    heads.eval()
    Scorer.save(out, backbone, heads, training=report,
                backbone_state=None if cfg.freeze_backbone else
                backbone.trainable().state_dict())
    report["calibration"] = _calibrate_heads(out, backbone, ca, cfg.alpha)
    _write_card(out, report, command)
    return report


def _write_card(out: Path, report: dict, command: str = "") -> None:
    b, cfg = report["backbone"], report["train_config"]
    write_model_card(
        out, title="quantile scorer on a backbone",
        description=f"Quantile heads (point, chained + centered interval loss, chained + "
        f"pinball, unconstrained + pinball) on `{b.get('backbone')}` (weights sha256 "
        f"{b.get('weights_sha256')}, dtype {b.get('dtype')}).",
        command=command, seconds=report["seconds"],
        facts=[f"training: {report['n_train']} rows; early stopping on "
               f"{report['n_early_stop']}; CRC calibration on {report['n_calibration']} "
               "held-out validation rows",
               "backbone " + ("frozen (cached representations)" if cfg["freeze_backbone"]
                              else "fine-tuned"),
               f"point stage: {report['stage1']['epoch']} epochs, best val MSE "
               f"{report['stage1']['best']:.5f}",
               f"{report['train_truncated']} training captions were truncated to the text "
               "tower's length"],
        heads=report["heads"],
        calibration={**report["calibration"], "source": "held-out validation rows"})


def split_holdout(data: dict, seed: int) -> tuple[dict, dict]:
    """Hold out a fifth of the rows (at least 20) for early stopping and calibration."""
    idx = np.random.default_rng(seed).permutation(len(data["texts"]))
    cut = max(20, len(idx) // 5)
    if len(idx) - cut < 10:
        raise InputError(f"{len(idx)} usable rows are too few to hold out a validation part; "
                         "give a validation table (`val`)")
    return take_rows(data, np.sort(idx[cut:])), take_rows(data, np.sort(idx[:cut]))


def train_on_table(table, out_dir, backbone: str, *, scale, target=None, ratings=None,
                   val=None, image_col: str = "image", text_col: str = "caption",
                   n_ratings=None, device: str = "cpu", dtype: str = "float32",
                   image_size=None, cfg: BackboneTrainConfig | None = None, on_rows=None,
                   on_epoch=None, command: str = "") -> dict:
    """Train heads on ``backbone`` from a table of (image, caption, human target) rows and
    write the model folder (heads, calibrator, model card, provenance). ``val``: a second
    table (half early stopping, half CRC calibration); default 20 % of ``table`` held out.
    ``on_rows(errors, total)`` hears about skipped rows."""
    from scoreband.provenance import write_provenance  # lazy: loads httpx, rich

    if scale is None:
        raise InputError("give `scale` A,B (the native scale of the human target)")
    if not (target or ratings):
        raise InputError("give the human target: `target` (a column of mean ratings) or "
                         "`ratings`")
    cfg = cfg or BackboneTrainConfig()
    kw = dict(scale=scale if isinstance(scale, Scale) else Scale.parse(scale),
              image_col=image_col, text_col=text_col, target=target, ratings=ratings,
              n_ratings=n_ratings)
    tr, errs = load_pairs(read_table(table), base_dir=Path(table).parent, **kw)
    if on_rows:
        on_rows(errs, len(tr["texts"]) + len(errs))
    if val is not None:
        va, verrs = load_pairs(read_table(val), base_dir=Path(val).parent, **kw)
        if on_rows:
            on_rows(verrs, len(va["texts"]) + len(verrs))
    else:
        tr, va = split_holdout(tr, cfg.seed)
    bb = load_backbone(backbone, device=device, dtype=dtype, image_size=image_size)
    report = train_backbone_scorer(bb, tr, va, out_dir, cfg, on_epoch=on_epoch,
                                   command=command)
    write_provenance(Path(out_dir) / "model", {"backbone": bb.describe()},
                     files={"calibrator": Path(out_dir) / "calibrator.json"})
    return report
