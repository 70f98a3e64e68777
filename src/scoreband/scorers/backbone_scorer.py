"""Quantile heads on any registered backbone (BEiT-3, CLIP, open_clip, embedded), trained on
a user's table: the BEiTScore++ method on real backbones.

Training (``train_backbone_scorer``):
1. representations: with a frozen backbone they are computed once and cached on disk
   (``MODEL_DIR/cache/``, keyed by the backbone's weights hash and the data), so reruns and
   the head stage cost no backbone pass; with fine-tuning the backbone is trained with the
   point head (lower learning rate) and the representations are recomputed afterwards;
2. point head (MSE) first, group batches from k-means clusters of the image embeddings, early
   stopping on the validation part;
3. quantile heads initialised from the point head (chained + centred interval loss: the
   calibrated head; unconstrained + pinball as the baseline), on the frozen representations;
4. calibration: CRC on a held-out part of the validation table (never the early-stopping
   part), written as ``calibrator.json``.
The MC-dropout baseline is the point head with dropout on (``BackboneScorer.mc_dropout``).

Saved model folder: ``config.json`` (format ``scoreband.backbone-scorer``, the backbone
address and fingerprint, dims, training report), ``heads.safetensors``, ``backbone.safetensors``
when fine-tuned, ``calibrator.json`` and ``MODEL_CARD.md``.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from scoreband.errors import InputError
from scoreband.records import QUANTILE_LEVELS, Predictions
from scoreband.scorers.heads import PointHead
from scoreband.scorers.model import HEAD_KINDS
from scoreband.scorers.pairs import take_rows
from scoreband.scorers.train import (
    TrainConfig,
    cluster_labels,
    fit_head,
    fit_quantile_heads,
    group_batches,
)

__all__ = ["BackboneTrainConfig", "HeadSet", "BackboneScorer", "train_backbone_scorer",
           "FORMAT"]

FORMAT = "scoreband.backbone-scorer"


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


class HeadSet(nn.Module):
    """Point head + the quantile heads on a representation of width ``dim``."""

    def __init__(self, dim: int, dropout: float = 0.1):
        super().__init__()
        self.point = PointHead(dim, dropout)
        self.heads = nn.ModuleDict({k: cls(dim) for k, (cls, _) in HEAD_KINDS.items()})


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
    from scoreband.io import atomic_path

    with atomic_path(f) as tmp:
        save_file({"reps": reps.contiguous(), "emb": emb.contiguous(),
                   "trunc": torch.from_numpy(trunc.astype(np.uint8)),
                   "counts": torch.from_numpy(counts.astype(np.int64))}, tmp)
    return reps, emb, trunc, counts


def _head_kw(cfg: BackboneTrainConfig, on_epoch, tag: str) -> dict:
    return dict(lr=cfg.lr, batch_size=cfg.batch_size, weight_decay=cfg.weight_decay,
                patience=cfg.patience, seed=cfg.seed, min_delta=1e-7,
                on_epoch=(lambda ep, vl: on_epoch(tag, ep, vl)) if on_epoch else None)


def _fine_tune_point(backbone, heads, train, va, y_tr, y_va, cfg, on_epoch, report):
    """Full fine-tuning: backbone + point head on mini-batches of images and texts, early
    stopping on ``va``; the best state is loaded back. Returns (cluster labels, cluster
    info, truncated-caption flags of the training rows)."""
    module = backbone.trainable()
    _, e_tr, tr_trunc, _ = _represent(backbone, train["images"], train["texts"], cfg.batch_size)
    labels, cinfo = cluster_labels(e_tr.numpy(), cfg.clusters, cfg.seed)
    opt = torch.optim.AdamW([
        {"params": heads.point.parameters(), "lr": cfg.lr},
        {"params": module.parameters(), "lr": cfg.backbone_lr}],
        weight_decay=cfg.weight_decay)
    best, bad, best_state, hist = float("inf"), 0, None, []
    dev = getattr(backbone, "device", "cpu")
    heads.point.to(dev)  # the point head trains beside the backbone, then returns
    for ep in range(cfg.epochs):
        module.train()
        heads.train()
        for b in group_batches(labels, cfg.batch_size, np.random.default_rng(ep)):
            bi = torch.as_tensor(b)
            px = backbone.preprocess(train["images"][list(b)])
            tb, _, _ = backbone.encode_text([train["texts"][i] for i in b])
            rep = backbone.represent(px, tb)
            loss = nn.functional.mse_loss(heads.point(rep), y_tr[bi].to(rep.device))
            opt.zero_grad()
            loss.backward()
            opt.step()
        module.eval()
        heads.eval()
        h_va, _, _, _ = _represent(backbone, va["images"], va["texts"], cfg.batch_size)
        with torch.no_grad():
            vl = float(nn.functional.mse_loss(heads.point(h_va.to(dev)), y_va.to(dev)))
        hist.append(vl)
        if on_epoch:
            on_epoch("point+backbone", ep + 1, vl)
        if vl < best - 1e-7:
            best, bad = vl, 0
            best_state = ({k: v.detach().clone() for k, v in module.state_dict().items()},
                          {k: v.clone() for k, v in heads.point.state_dict().items()})
        else:
            bad += 1
            if bad >= cfg.patience:
                break
    module.load_state_dict(best_state[0])
    heads.point.load_state_dict(best_state[1])
    heads.point.cpu()
    module.eval()
    report["point"] = {"epochs": len(hist), "best_val": best, "fine_tuned": True}
    return labels, cinfo, tr_trunc


def _calibrate_heads(out: Path, backbone, ca: dict, alpha: float) -> dict:
    """CRC of the saved model's chained head on the calibration half, saved beside it."""
    from scoreband.conformal import CRC, save_calibrator

    scorer = BackboneScorer.load(out, backbone=backbone)
    pred = scorer.predict(ca["images"], ca["texts"])
    c = CRC(alpha, scale=ca["scale"]).fit(pred, ca["y01"])
    n = len(ca["texts"])
    save_calibrator(out / "calibrator.json", c, scorer_fingerprint=scorer.fingerprint,
                    inputs={"head": "chained_ci", "pred_scale": [0, 1],
                            "calibration_set": {"n": n, "source": "validation table "
                                                "(the half not used for early stopping)"}})
    return {"omega": c.params_["omega"], "beta": c.params_["beta"], "n": n}


def train_backbone_scorer(backbone, train, val, out_dir, cfg: BackboneTrainConfig | None = None,
                          on_epoch=None, command: str = "") -> dict:
    """Train heads (and optionally the backbone) on ``train`` and ``val`` dicts with
    ``images`` (PIL), ``texts``, ``y01``, ``image_ids`` and ``scale`` (records.Scale), and
    ``n_ratings`` (per-row counts or a number) on ``val``; write the model to ``out_dir``."""
    cfg = cfg or BackboneTrainConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    t0 = time.perf_counter()
    if len(val["texts"]) < 20:
        raise InputError(f"the validation table has {len(val['texts'])} usable rows; at least "
                         "20 are needed (half for early stopping, half for calibration)")
    # the validation table: one part for early stopping, one part for calibration
    rng = np.random.default_rng(cfg.seed)
    perm = rng.permutation(len(val["texts"]))
    es, cal = np.sort(perm[: len(perm) // 2]), np.sort(perm[len(perm) // 2:])

    va, ca = take_rows(val, es), take_rows(val, cal)
    y_tr = torch.tensor(train["y01"], dtype=torch.float32)
    y_va = torch.tensor(va["y01"], dtype=torch.float32)
    heads = HeadSet(backbone.dim, cfg.dropout)
    cache = out / "cache"
    report: dict = {"train_config": asdict(cfg), "n_train": len(y_tr), "n_early_stop": len(es),
                    "n_calibration": len(cal), "backbone": backbone.describe()}
    if cfg.freeze_backbone:
        h_tr, e_tr, tr_trunc, _ = _cached_reps(backbone, train["images"], train["texts"],
                                               train["image_ids"], cache, cfg.batch_size)
        h_va, _, _, _ = _cached_reps(backbone, va["images"], va["texts"], va["image_ids"],
                                     cache, cfg.batch_size)
        labels, cinfo = cluster_labels(e_tr.numpy(), cfg.clusters, cfg.seed)
        report["point"] = fit_head(heads.point, nn.functional.mse_loss, h_tr, y_tr, h_va,
                                   y_va, labels, epochs=cfg.epochs, **_head_kw(cfg, on_epoch,
                                                                               "point"))
    else:
        labels, cinfo, tr_trunc = _fine_tune_point(backbone, heads, train, va, y_tr, y_va,
                                                   cfg, on_epoch, report)
        h_tr, _, _, _ = _represent(backbone, train["images"], train["texts"], cfg.batch_size)
        h_va, _, _, _ = _represent(backbone, va["images"], va["texts"], cfg.batch_size)
    report["clusters"] = cinfo
    report["train_truncated"] = int(tr_trunc.sum())
    heads.eval()
    report["heads"] = fit_quantile_heads(
        heads, h_tr, y_tr, h_va, y_va, labels,
        lambda name: dict(epochs=cfg.head_epochs, **_head_kw(cfg, on_epoch, name)))
    report["seconds"] = round(time.perf_counter() - t0, 1)
    BackboneScorer.save(out, backbone, heads, report,
                        backbone_state=None if cfg.freeze_backbone else
                        backbone.trainable().state_dict())
    report["calibration"] = _calibrate_heads(out, backbone, ca, cfg.alpha)
    _write_card(out, report, command)
    return report


def _write_card(out: Path, report: dict, command: str = "") -> None:
    from scoreband.scorers.card import write_model_card

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
               f"point head: {report['point']['epochs']} epochs, best val MSE "
               f"{report['point']['best_val']:.5f}",
               f"{report['train_truncated']} training captions were truncated to the text "
               "tower's length"],
        heads=report["heads"],
        calibration={**report["calibration"], "source": "held-out validation rows"})


class BackboneScorer:
    """A trained head set on a backbone, loaded from a model folder."""

    def __init__(self, backbone, heads: HeadSet, meta: dict, path: Path):
        self.backbone = backbone
        self.heads = heads.eval()
        self.meta = meta
        self.path = path
        h = hashlib.sha256((path / "heads.safetensors").read_bytes())
        h.update(str(backbone.fingerprint).encode())
        if (path / "backbone.safetensors").exists():
            h.update((path / "backbone.safetensors").read_bytes())
        self.fingerprint = h.hexdigest()[:16]

    @staticmethod
    def save(path, backbone, heads: HeadSet, report: dict, backbone_state=None) -> None:
        from scoreband.io import atomic_path, atomic_write_text

        path = Path(path)
        with atomic_path(path / "heads.safetensors") as tmp:
            save_file({k: v.contiguous() for k, v in heads.state_dict().items()}, tmp)
        if backbone_state is not None:
            with atomic_path(path / "backbone.safetensors") as tmp:
                save_file({k: v.detach().cpu().contiguous() for k, v in backbone_state.items()},
                          tmp)
        meta = {"format": FORMAT, "format_version": 1, "backbone_name": backbone.name,
                "backbone_fingerprint": backbone.fingerprint, "dim": backbone.dim,
                "dropout": report["train_config"]["dropout"],
                "fine_tuned": backbone_state is not None, "levels": list(QUANTILE_LEVELS),
                "provenance": backbone.describe(), "training": report}
        atomic_write_text(path / "config.json", json.dumps(meta, indent=2, default=str))

    @classmethod
    def load(cls, path, *, backbone=None, device: str = "cpu", dtype: str | None = None):
        from scoreband.backbones import load_backbone

        path = Path(path)
        meta = json.loads((path / "config.json").read_text())
        if meta.get("format") != FORMAT:
            raise InputError(f"{path} is not a backbone scorer (format {meta.get('format')!r})")
        if backbone is None:
            prov = meta.get("provenance", {})
            backbone = load_backbone(meta["backbone_name"], device=device,
                                     dtype=dtype or prov.get("dtype", "float32"),
                                     image_size=(prov.get("config") or {}).get("img_size"))
        if backbone.fingerprint != meta["backbone_fingerprint"]:
            raise InputError(f"the backbone {meta['backbone_name']!r} has other weights than the "
                             f"model was trained on (sha256 {backbone.fingerprint} vs "
                             f"{meta['backbone_fingerprint']})")
        if (path / "backbone.safetensors").exists():
            backbone.trainable().load_state_dict(load_file(path / "backbone.safetensors"))
        heads = HeadSet(meta["dim"], meta.get("dropout", 0.1))
        heads.load_state_dict(load_file(path / "heads.safetensors"))
        return cls(backbone, heads, meta, path)

    def predict(self, images, texts, head: str = "chained_ci",
                batch_size: int = 32) -> Predictions:
        """Median, 90 % pair, 11 quantiles and the image embedding, on [0, 1]."""
        if head not in self.heads.heads:
            raise InputError(f"unknown head {head!r}; available: {', '.join(self.heads.heads)}")
        reps, emb, trunc, counts = _represent(self.backbone, list(images), list(texts),
                                              batch_size)
        with torch.inference_mode():
            q = self.heads.heads[head](reps).double().numpy()
        p = Predictions(median=q[:, 5], lo=q[:, 0], hi=q[:, 10], quantiles=q,
                        levels=QUANTILE_LEVELS, embedding=emb.double().numpy())
        self.last_truncated, self.last_counts = trunc, counts
        return p

    def point(self, images, texts, batch_size: int = 32) -> np.ndarray:
        reps, _, _, _ = _represent(self.backbone, list(images), list(texts), batch_size)
        with torch.inference_mode():
            return self.heads.point(reps).double().numpy()

    def mc_dropout(self, images, texts, passes: int = 25, seed: int = 0,
                   batch_size: int = 32) -> Predictions:
        """The point head with dropout on, ``passes`` samples (one backbone pass: the
        backbones here have no dropout at inference)."""
        reps, _, _, _ = _represent(self.backbone, list(images), list(texts), batch_size)
        state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        self.heads.point.train()
        try:
            with torch.inference_mode():
                s = torch.stack([self.heads.point(reps) for _ in range(passes)], 1)
        finally:
            self.heads.point.eval()
            torch.random.set_rng_state(state)
        s = s.double().numpy()
        q = np.quantile(s, QUANTILE_LEVELS, axis=1).T
        return Predictions(median=np.median(s, axis=1), lo=q[:, 0], hi=q[:, 10], quantiles=q,
                           levels=QUANTILE_LEVELS)


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
    from scoreband.backbones import load_backbone
    from scoreband.io import read_table
    from scoreband.provenance import write_provenance
    from scoreband.records import Scale
    from scoreband.scorers.pairs import load_pairs

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
