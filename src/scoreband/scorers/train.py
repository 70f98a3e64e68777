"""Training: a point head first (with the backbone), then quantile heads initialised from it.

AdamW, batch 16, early stopping on the validation loss, group batching by k-means clusters
of image embeddings, safetensors checkpoints after every epoch, resumable. The loop is shared
by every scorer family (:class:`PointTask`; the embedded scorer's is here, heads on a backbone
in :mod:`scoreband.scorers.train_backbone`). After training: the calibrate step
(:mod:`scoreband.scorers.calibrate`), held-out metrics (:mod:`scoreband.scorers.heldout`), the
model card (:mod:`scoreband.scorers.card`); claiming the output folder is
:mod:`scoreband.scorers.model_folder`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from scoreband.backbones.embedded import (
    EmbeddedBackbone,
    EmbeddedConfig,
    EmbeddedCrossEncoder,
    WordTokenizer,
    preprocess_images,
)
from scoreband.clustering import choose_k, fit_kmeans
from scoreband.errors import InputError
from scoreband.files import atomic_path, atomic_write_text, remove_output, remove_stale_temps
from scoreband.json_io import read_json
from scoreband.scorers.calibrate import calibrate_model
from scoreband.scorers.card import write_embedded_card
from scoreband.scorers.heads import HEAD_KINDS, PointHead, count_crossings
from scoreband.scorers.heldout import heldout_metrics
from scoreband.scorers.losses import centered_interval_loss, pinball_loss
from scoreband.scorers.model_folder import plain_name
from scoreband.scorers.scorer import Scorer
from scoreband.world import make_dataset

__all__ = ["TrainConfig", "group_batches", "train_scorer", "train_quantile_scorer",
           "PointTask", "EmbeddedTask", "fit_head", "cluster_labels"]


@dataclass
class TrainConfig:
    epochs: int = 30
    head_epochs: int = 200
    batch_size: int = 16
    lr: float = 1e-3
    head_lr: float = 1e-3
    weight_decay: float = 0.01
    patience: int = 15
    clusters: int | str = "auto"
    seed: int = 0
    aux_weight: float = 0.2

    def __post_init__(self) -> None:
        if self.clusters != "auto":
            try:
                self.clusters = int(self.clusters)
            except (TypeError, ValueError):
                raise InputError(f"`clusters` expects an integer or 'auto', got "
                                 f"{self.clusters!r}") from None


def group_batches(labels: np.ndarray, batch_size: int, rng: np.random.Generator) -> list:
    """One epoch of mini-batches, each drawn from a single cluster.

    Items are shuffled within each cluster and cut into batches; the batches are then put
    in random order, so a cluster's batches come up in proportion to its size.
    """
    batches = []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        batches.extend(idx[s:s + batch_size] for s in range(0, len(idx), batch_size))
    order = rng.permutation(len(batches))
    return [batches[i] for i in order]


def cluster_labels(emb: np.ndarray, k, seed: int) -> tuple[np.ndarray, dict]:
    """k-means labels of the image embeddings, for group batching.

    ``k="auto"`` picks k by elbow + silhouette (one cluster when fewer than 20 items leave
    nothing to choose); a given k is capped at the number of items.
    """
    n = len(emb)
    if k == "auto":
        if n < 20:
            return np.zeros(n, dtype=int), {"k": 1}
        sel = choose_k(emb, seed=seed)
        k = sel.k
        info = {"k": k, "elbow": sel.elbow, "silhouette": dict(zip(sel.ks, sel.silhouette,
                                                                      strict=True))}
    else:
        info = {"k": int(k)}
    k = min(int(k), n)
    labels = fit_kmeans(emb, k, seed=seed)[0] if k > 1 else np.zeros(n, dtype=int)
    return labels, info


def fit_head(head, loss_fn, h_tr, y_tr, h_va, y_va, labels, *, lr: float, epochs: int,
             batch_size: int, weight_decay: float, patience: int, seed: int,
             min_delta: float = 1e-6, on_epoch: Callable[[int, float], None] | None = None
             ) -> dict:
    """Train one head on frozen representations: AdamW, group batches, early stopping on
    the validation loss (an improvement must exceed ``min_delta``); the best weights are
    loaded back. ``on_epoch(epoch, val_loss)`` follows every epoch that does not stop.
    Returns ``{"epochs", "best_val"}``."""
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=weight_decay)
    best, bad, best_sd, hist = float("inf"), 0, None, []
    for ep in range(epochs):
        rng = np.random.default_rng(seed * 7919 + ep)
        head.train()
        for b in group_batches(labels, batch_size, rng):
            bi = torch.as_tensor(b)
            loss = loss_fn(head(h_tr[bi]), y_tr[bi])
            opt.zero_grad()
            loss.backward()
            opt.step()
        head.eval()
        with torch.no_grad():
            vl = float(loss_fn(head(h_va), y_va))
        hist.append(vl)
        if vl < best - min_delta:
            best, bad = vl, 0
            best_sd = {k: v.clone() for k, v in head.state_dict().items()}
        else:
            bad += 1
            if bad >= patience:
                break
        if on_epoch:
            on_epoch(ep + 1, vl)
    head.load_state_dict(best_sd)
    return {"epochs": len(hist), "best_val": best}


class _Checkpoint:
    """The stage-1 checkpoint: weights, optimizer and RNG state of the last finished epoch
    (and the best weights so far) in files named by their epoch, listed by ``state.json``,
    which is written last (atomically). A kill at any moment leaves ``state.json`` naming a
    complete set. The next save removes the files of the epochs before (those the previous
    ``state.json`` named) and the temporary files of a killed writer of its own files;
    any other file in the folder is not scoreband's and stays."""

    def __init__(self, folder: Path):
        self.dir = Path(folder)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.state_file = self.dir / "state.json"

    def load_state(self) -> dict:
        if not self.state_file.exists():
            return {}
        state = read_json(self.state_file, what="checkpoint state")
        if not isinstance(state, dict):
            raise InputError(f"{self.state_file}: not a checkpoint state (a JSON object); "
                             "remove the checkpoint folder to start over")
        return state

    def save(self, state: dict, tensors: dict[str, dict], opt, epoch: int) -> dict:
        files = dict(state.get("files", {}))
        old = {str(v) for v in files.values()}
        for name, sd in tensors.items():
            files[name] = f"{name}-{epoch}.safetensors"
            with atomic_path(self.dir / files[name]) as tmp:
                save_file({k: v.detach().contiguous() for k, v in sd.items()}, tmp)
        files["optimizer"] = f"optimizer-{epoch}.pt"
        with atomic_path(self.dir / files["optimizer"]) as tmp:
            torch.save(opt.state_dict(), tmp)
        state = {**state, "files": files}
        atomic_write_text(self.state_file, json.dumps(state, indent=2))
        keep = {"state.json", *files.values()}
        for name in set(old) - keep:  # the epochs before: files this checkpoint wrote
            if plain_name(name):
                remove_output(self.dir / name, mine=True)
        for name in keep:  # temp files of a writer of these names killed mid-write
            remove_stale_temps(self.dir / name)
        return state

    def tensors(self, state: dict, name: str) -> dict:
        return load_file(str(self.dir / state["files"][name]))

    def optimizer(self, state: dict) -> dict:
        return torch.load(self.dir / state["files"]["optimizer"], weights_only=True)


class PointTask:
    """What the first training stage trains, for one scorer family: the backbone (or not)
    with the point head. :func:`train_quantile_scorer` runs every family through the same
    loop (group batches, AdamW, early stopping, per-epoch checkpoints, resume) and then
    fits the quantile heads on the representations the task gives. An auxiliary loss (the
    embedded world's per-patch targets) is part of the task's :meth:`batch_loss`."""

    #: an epoch improves on the best validation loss only by more than this
    min_delta = 0.0
    #: the same for the quantile heads' early stopping
    head_min_delta = 1e-6
    #: whether stage 1 changes the image embeddings (False: its clusters serve the heads too)
    trains_backbone = True

    def identity(self) -> dict:
        """What a checkpoint must have been made with to be continued (model config)."""
        raise NotImplementedError

    def n_train(self) -> int:
        raise NotImplementedError

    def state_dict(self) -> dict:
        raise NotImplementedError

    def load_state_dict(self, sd: dict) -> None:
        raise NotImplementedError

    def param_groups(self, cfg: TrainConfig) -> list[dict]:
        raise NotImplementedError

    def image_embeddings(self) -> np.ndarray:
        """Image embeddings of the training items (k-means clusters for group batches)."""
        raise NotImplementedError

    def set_train(self, on: bool) -> None:
        raise NotImplementedError

    def batch_loss(self, b: np.ndarray, cfg: TrainConfig) -> torch.Tensor:
        raise NotImplementedError

    def val_loss(self) -> float:
        raise NotImplementedError

    def representations(self) -> tuple:
        """``(h_tr, y_tr, h_va, y_va)`` of the trained backbone, for the quantile heads."""
        raise NotImplementedError

    def head_owner(self):
        """The module with ``.point`` and ``.heads`` (by kind)."""
        raise NotImplementedError


def _point_epoch(task: PointTask, opt, labels, cfg: TrainConfig, rng) -> float:
    """One epoch of stage 1 over group batches; the mean training loss."""
    task.set_train(True)
    tot, cnt = 0.0, 0
    for b in group_batches(labels, cfg.batch_size, rng):
        loss = task.batch_loss(b, cfg)
        opt.zero_grad()
        loss.backward()
        opt.step()
        tot += float(loss.detach()) * len(b)
        cnt += len(b)
    task.set_train(False)
    return tot / cnt


def _train_point(task: PointTask, ck: _Checkpoint, cfg: TrainConfig, on_epoch) -> dict:
    """Stage 1, resumable from ``ck`` at the last finished epoch (weights, optimizer, RNG and
    early-stopping state restored: a resumed run equals an uninterrupted one)."""
    state = ck.load_state()
    opt = torch.optim.AdamW(task.param_groups(cfg), lr=cfg.lr, weight_decay=cfg.weight_decay)
    # what must match for a resumed run to continue this one (more epochs are allowed)
    train_keys = {k: v for k, v in asdict(cfg).items()
                  if k not in ("epochs", "head_epochs", "patience")}
    if state.get("stage1"):
        if "files" not in state:
            raise InputError(f"{ck.dir} is a checkpoint of an older scoreband; delete it to "
                             "train afresh")
        _check_resumable(ck, state, task.identity(), train_keys)
        task.load_state_dict(ck.tensors(state, "last"))
        opt.load_state_dict(ck.optimizer(state))
        torch.set_rng_state(ck.tensors(state, "rng")["torch"])  # dropout goes on as it was
        s1 = state["stage1"]
    else:
        labels, cinfo = cluster_labels(task.image_embeddings(), cfg.clusters, cfg.seed)
        s1 = {"epoch": 0, "best": float("inf"), "bad": 0, "done": False, "history": [],
              "clusters": cinfo, "labels": labels.tolist()}
    labels = np.asarray(s1["labels"])
    while not s1["done"] and s1["epoch"] < cfg.epochs:
        ep = s1["epoch"]
        mean_loss = _point_epoch(task, opt, labels, cfg, np.random.default_rng(
            cfg.seed * 1000 + ep))
        val_loss = task.val_loss()
        s1["epoch"] = ep + 1
        s1["history"].append({"epoch": ep + 1, "train": mean_loss, "val": val_loss})
        tensors = {"last": task.state_dict()}
        if val_loss < s1["best"] - task.min_delta:
            s1["best"], s1["bad"] = val_loss, 0
            tensors["best"] = task.state_dict()
        else:
            s1["bad"] += 1
            s1["done"] = s1["bad"] >= cfg.patience
        tensors["rng"] = {"torch": torch.get_rng_state()}
        state = ck.save({**state, "backbone": task.identity(), "train": train_keys,
                         "stage1": s1}, tensors, opt, ep + 1)
        if on_epoch:
            on_epoch("point", ep + 1, mean_loss, val_loss)
    task.load_state_dict(ck.tensors(state, "best"))
    task.set_train(False)
    return {k: s1[k] for k in ("epoch", "best", "history", "clusters", "labels")}


def train_quantile_scorer(task: PointTask, out_dir, cfg: TrainConfig,
                          on_epoch: Callable[[str, int, float, float], None] | None = None
                          ) -> dict:
    """The one training function of every scorer family: stage 1 (:func:`_train_point`,
    checkpointed in ``out_dir/checkpoint``), then every quantile head initialised from the
    point head and fitted on the trained backbone's representations, with group batches
    from clusters of its image embeddings. Returns the report (the caller saves the model
    in its family's format). The caller seeds torch (before building its modules)."""
    t0 = time.perf_counter()
    stage1 = _train_point(task, _Checkpoint(Path(out_dir) / "checkpoint"), cfg, on_epoch)
    labels = np.asarray(stage1.pop("labels"))
    h_tr, y_tr, h_va, y_va = task.representations()
    if task.trains_backbone:  # the trained backbone embeds the images anew
        hlabels, hinfo = cluster_labels(task.image_embeddings(), cfg.clusters, cfg.seed)
    else:  # the same embeddings: the same clusters (k-means and k choice are seeded)
        hlabels, hinfo = labels, stage1["clusters"]

    def fit_kw(name):
        return dict(lr=cfg.head_lr, epochs=cfg.head_epochs, batch_size=cfg.batch_size,
                    weight_decay=cfg.weight_decay, patience=cfg.patience, seed=cfg.seed,
                    min_delta=task.head_min_delta,
                    on_epoch=(lambda ep, vl: on_epoch(name, ep, float("nan"), vl))
                    if on_epoch else None)

    heads = fit_quantile_heads(task.head_owner(), h_tr, y_tr, h_va, y_va, hlabels, fit_kw)
    return {"train_config": asdict(cfg), "n_train": task.n_train(), "n_val": len(y_va),
            "stage1": stage1, "heads": heads, "head_clusters": hinfo,
            "seconds": round(time.perf_counter() - t0, 1)}


def _point_loss(model, px, ids, y):
    return ((model.point(model.represent(px, ids)) - y) ** 2).mean()


def _cell_loss(model, px, colour, shape):
    """Auxiliary loss: colour and shape of the object in each patch (world facts)."""
    lc, ls = model.backbone.cell_logits(px)
    ce = torch.nn.functional.cross_entropy
    return ce(lc.reshape(-1, lc.shape[-1]), colour.reshape(-1)) + ce(
        ls.reshape(-1, ls.shape[-1]), shape.reshape(-1))


@torch.no_grad()
def _represent_all(model, px, ids, bs=512):
    return torch.cat([model.represent(px[s:s + bs], ids[s:s + bs])
                      for s in range(0, len(px), bs)])


def _check_resumable(ck: _Checkpoint, state: dict, identity: dict, train_keys: dict) -> None:
    """A checkpoint continues only the run that wrote it (more epochs are allowed)."""
    if state.get("backbone") != identity:
        raise InputError(
            f"{ck.dir} holds a checkpoint of another model configuration "
            f"({state.get('backbone')}); delete it to start afresh, or use another `out`"
        )
    old = state.get("train", train_keys)
    diff = sorted(k for k in train_keys if old.get(k) != train_keys[k])
    if diff:
        raise InputError(
            f"{ck.dir} holds a checkpoint trained with other settings ("
            + ", ".join(f"{k}: {old.get(k)!r} there, {train_keys[k]!r} now" for k in diff)
            + "); rerun with the same settings to resume, or `overwrite`")


class ScorerModel(nn.Module):
    """The embedded scorer as one module while it trains from scratch: its encoder, point
    head and quantile heads (saved as a :class:`~scoreband.scorers.scorer.Scorer`)."""

    def __init__(self, cfg: EmbeddedConfig, heads=tuple(HEAD_KINDS)):
        super().__init__()
        self.cfg = cfg
        self.backbone = EmbeddedCrossEncoder(cfg)
        self.point = PointHead(cfg.dim, cfg.dropout)
        self.heads = nn.ModuleDict({k: HEAD_KINDS[k][0](cfg.dim) for k in heads})

    def represent(self, pixels, ids) -> torch.Tensor:
        return self.backbone(pixels, ids)


class EmbeddedTask(PointTask):
    """The embedded scorer: its backbone and point head train end to end, with the
    auxiliary per-patch loss when the data come from the embedded world (4x4 cells)."""

    def __init__(self, model: ScorerModel, tok, train, val, cfg: TrainConfig):
        bcfg = model.cfg
        self.model, self.bcfg = model, bcfg
        self.px_tr = preprocess_images(train.images, bcfg.image_size)
        self.ids_tr, _, _ = tok.batch(train.captions)
        self.y_tr = torch.tensor(train.y01, dtype=torch.float32)
        self.px_va = preprocess_images(val.images, bcfg.image_size)
        self.ids_va, _, _ = tok.batch(val.captions)
        self.y_va = torch.tensor(val.y01, dtype=torch.float32)
        n_patch = (bcfg.image_size // bcfg.patch) ** 2
        aux = (getattr(train, "cell_colour", None) is not None and n_patch == 16
               and cfg.aux_weight > 0)
        self.cells = (torch.as_tensor(train.cell_colour),
                      torch.as_tensor(train.cell_shape)) if aux else None

    def identity(self):
        return self.bcfg.to_dict()

    def n_train(self):
        return len(self.y_tr)

    def state_dict(self):
        return self.model.state_dict()

    def load_state_dict(self, sd):
        self.model.load_state_dict(sd, strict=False)

    def param_groups(self, cfg):
        return [{"params": list(self.model.backbone.parameters())
                 + list(self.model.point.parameters())}]

    @torch.no_grad()
    def image_embeddings(self):
        return self.model.backbone.image_embedding(self.px_tr).numpy()

    def set_train(self, on):
        self.model.train(on)

    def batch_loss(self, b, cfg):
        bi = torch.as_tensor(b)
        loss = _point_loss(self.model, self.px_tr[bi], self.ids_tr[bi], self.y_tr[bi])
        if self.cells is not None:
            loss = loss + cfg.aux_weight * _cell_loss(self.model, self.px_tr[bi],
                                                      self.cells[0][bi], self.cells[1][bi])
        return loss

    @torch.no_grad()
    def val_loss(self, bs=512):
        self.model.eval()
        tot = 0.0
        for s in range(0, len(self.y_va), bs):
            sl = slice(s, s + bs)
            tot += float(_point_loss(self.model, self.px_va[sl], self.ids_va[sl],
                                     self.y_va[sl])) * len(self.y_va[sl])
        return tot / len(self.y_va)

    def representations(self):
        return (_represent_all(self.model, self.px_tr, self.ids_tr), self.y_tr,
                _represent_all(self.model, self.px_va, self.ids_va), self.y_va)

    def head_owner(self):
        return self.model


def fit_quantile_heads(model, h_tr, y_tr, h_va, y_va, labels, fit_kw) -> dict:
    """Every quantile head of ``model`` (anything with ``.heads`` by kind and ``.point``)
    initialised from the point head and fitted with its loss on cached representations;
    ``fit_kw(name)`` gives :func:`fit_head`'s settings. Returns the report per head."""
    report = {}
    for name, (_, loss_name) in HEAD_KINDS.items():
        head = model.heads[name]
        head.init_from_point(model.point)
        loss_fn = centered_interval_loss if loss_name == "ci" else pinball_loss
        r = fit_head(head, loss_fn, h_tr, y_tr, h_va, y_va, labels, **fit_kw(name))
        with torch.no_grad():
            crossings = count_crossings(head(h_va))
        report[name] = {"loss": loss_name, **r, "val_crossings": crossings}
    return report


def train_scorer(train, val, out_dir, cfg: TrainConfig | None = None,
                 backbone_cfg: EmbeddedConfig | None = None,
                 on_epoch: Callable[[str, int, float, float], None] | None = None) -> dict:
    """Train the embedded scorer on world datasets ``train`` / ``val`` (with ``images``,
    ``captions`` and ``y01``) with :func:`train_quantile_scorer`; write the model to
    ``out_dir``. Resumes from ``out_dir/checkpoint`` when it exists. Returns the report."""
    cfg = cfg or TrainConfig()
    torch.manual_seed(cfg.seed)
    bcfg = backbone_cfg or EmbeddedConfig()
    tok = WordTokenizer(max_len=bcfg.max_len)
    bcfg.vocab_size = len(tok)
    model = ScorerModel(bcfg)
    report = train_quantile_scorer(EmbeddedTask(model, tok, train, val, cfg), out_dir, cfg,
                                   on_epoch)
    enc = model.backbone.state_dict()
    Scorer.save(out_dir, EmbeddedBackbone.from_parts("embedded:default", bcfg, tok, enc, ""),
                model, backbone_state=enc, training=report)
    return report


def train_embedded(out_dir, cfg: TrainConfig, *, n_train: int = 8000, n_val: int = 1000,
                   n_cal: int = 2000, n_heldout: int = 1000, annotators: int = 3,
                   command: str = "", on_epoch=None, on_step=None,
                   alpha: float = 0.1) -> dict:
    """Train the embedded scorer from scratch on the embedded world, calibrate it at
    ``alpha`` on a fresh in-domain set and write its model card. Returns ``{report,
    calibration, heldout}``."""
    step = on_step or (lambda msg: None)
    step("generating the embedded world ...")
    tr = make_dataset(n_train, cfg.seed + 1, n_annotators=annotators, name="train")
    va = make_dataset(n_val, cfg.seed + 2, n_annotators=annotators, name="val")
    report = train_scorer(tr, va, out_dir, cfg, on_epoch=on_epoch)
    step("calibrating on a fresh in-domain set ...")
    calib = calibrate_model(out_dir, n=n_cal, seed=cfg.seed + 7, alpha=alpha)
    step("held-out evaluation ...")
    held = heldout_metrics(out_dir, n=n_heldout, seed=cfg.seed + 9)
    write_embedded_card(out_dir, command or f"scoreband train --out {out_dir}", report, calib,
                        held)
    return {"report": report, "calibration": calib, "heldout": held}
