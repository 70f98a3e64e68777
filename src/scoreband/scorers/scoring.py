"""Scoring a table of (image path, caption) rows with a trained scorer and its calibrator.

Every row is kept: a row whose image or caption cannot be used gets empty band columns
and the reason in ``band_error``; the batch carries on.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from scoreband.batch import (
    RowJournal,
    cell_text,
    file_digest,
    resolve_path,
    row_key,
    row_progress,
)
from scoreband.conformal import load_calibrator
from scoreband.errors import InputError
from scoreband.files import file_sha256
from scoreband.images import MAX_PIXELS, load_image  # noqa: F401  (re-exported)
from scoreband.scorers.model import QuantileScorer

__all__ = ["load_image", "score_table", "MAX_PIXELS"]





def _scorer_with_calibrator(model):
    """The quantile scorer, its calibrator (checked against the scorer's fingerprint), the
    calibrator document and the file's hash (part of every journal key)."""
    scorer = QuantileScorer.load(model)
    cal_path = (scorer.path / "calibrator.json") if scorer.path else None
    if cal_path is None or not cal_path.exists():
        raise InputError(f"model {model!r} has no calibrator.json; run `scoreband train` (which "
                         "writes one) or calibrate it")
    cal, doc = load_calibrator(cal_path, scorer_fingerprint=scorer.fingerprint)
    return scorer, cal, doc, file_sha256(cal_path)


def _band_batch(scorer, cal, head, imgs, texts, pos, image_ood, ood):
    """Bands of one batch of good rows; images unlike the model's world are added to their
    rows' ``ood`` reasons. Returns (band, image embeddings)."""
    pred = scorer.predict(np.stack(imgs), texts, head=head)
    if image_ood is not None:
        for i, why in zip(pos, image_ood.reasons(imgs), strict=True):
            if why:
                ood[i] = f"{ood[i]}; {why}" if ood[i] else why
    return cal.predict(pred), pred.embedding


def score_table(df: pd.DataFrame, *, image_col: str = "image", text_col: str = "caption",
                model: str = "embedded:default", batch_size: int = 256,
                progress=None, base_dir=None, journal=None) -> tuple[pd.DataFrame, int, dict]:
    """Score every row; returns ``(table with band columns, number of bad rows, provenance
    components)``.

    Bands are on [0, 1]: band_median, band_lo, band_hi; band_error names the problem of a
    row that could not be scored; band_truncated flags captions cut to the model's length.
    ``journal`` (a path): every finished row is appended and flushed there as it is done, and
    a rerun after an interruption reuses those rows (as ``judge`` and ``roundtrip`` do).
    """
    for flag, col in (("`image_col`", image_col), ("`text_col`", text_col)):
        if col not in df.columns:
            raise InputError(f"{flag} column {col!r} is not in the table; available: "
                             f"{', '.join(map(str, df.columns))}")
    if batch_size < 1:
        raise InputError(f"batch_size must be >= 1, got {batch_size}")
    scorer, cal, doc, cal_sha = _scorer_with_calibrator(model)
    head = doc.get("inputs", {}).get("head", "chained_ci")
    size = scorer.model.cfg.image_size
    n = len(df)
    errors = np.full(n, "", dtype=object)
    ood = np.full(n, "", dtype=object)
    truncated = np.zeros(n, dtype=bool)
    med = np.full(n, np.nan)
    lo = np.full(n, np.nan)
    hi = np.full(n, np.nan)
    reused = 0
    emb: list = []
    ref = reference_items(scorer, doc)
    image_ood = ImageOOD(ref[0]) if ref is not None else None

    with row_progress(progress, "scoring", n) as update, RowJournal(journal) as jr:
        for s in range(0, n, batch_size):
            e = min(n, s + batch_size)
            imgs, texts, pos, keys = [], [], [], {}
            for i in range(s, e):
                text = cell_text(df, text_col, i)
                image = df[image_col].iloc[i]
                key = None
                if journal is not None:
                    f = None if cell_text(df, image_col, i) is None else resolve_path(image,
                                                                                    base_dir)
                    key = row_key(scorer.fingerprint, cal_sha, head, image, file_digest(f), text)
                    rec = jr.get(key)
                    if rec is not None:
                        med[i], lo[i], hi[i] = (np.nan if rec[k] is None else rec[k]
                                                for k in ("median", "lo", "hi"))
                        errors[i], truncated[i] = rec["error"], rec["truncated"]
                        ood[i] = rec.get("ood", "")
                        reused += 1
                        continue
                keys[i] = key
                if text is None:
                    errors[i] = f"{text_col}: empty caption"
                    continue
                try:
                    imgs.append(load_image(image, size, base_dir))
                except ValueError as err:
                    errors[i] = f"{image_col}: {err}"
                    continue
                texts.append(text)
                pos.append(i)
                _, trunc, _ = scorer.tokenizer.encode(text)
                truncated[i] = trunc
                ood[i] = scorer.tokenizer.out_of_vocabulary(text)
            if pos:
                band, e_batch = _band_batch(scorer, cal, head, imgs, texts, pos, image_ood, ood)
                emb.append(e_batch)
                med[pos], lo[pos], hi[pos] = band.median01, band.lo01, band.hi01
            for i, key in keys.items():
                jr.add({"key": key, "median": _num(med[i]), "lo": _num(lo[i]),
                        "hi": _num(hi[i]), "error": errors[i], "truncated": bool(truncated[i]),
                        "ood": ood[i]})
            update(e)
    out = df.copy()
    out["band_median"] = med
    out["band_lo"] = lo
    out["band_hi"] = hi
    out["band_error"] = errors
    out["band_truncated"] = truncated
    out["band_ood"] = ood  # why the band may not mean much for this row ("" when none)
    out["scorer_fingerprint"] = scorer.fingerprint
    out.attrs["reused_rows"] = reused
    out.attrs["shift"] = shift_alarm(None if ref is None else ref[1],
                                     np.concatenate(emb) if emb else None)
    comps = {"backbone": {"backbone": model, "weights_sha256": scorer.fingerprint,
                          "preprocessing": {"size": size, "interpolation": "bicubic",
                                            "range": [-1, 1]}, "dtype": "float32"}}
    return out, int((errors != "").sum()), comps


_REFERENCE: dict = {}  # (scorer fingerprint, calibration set) -> reference items


def reference_items(scorer, calibrator_doc: dict, n_ref: int = 500):
    """``(images, image embeddings)`` of (a sample of) the items the calibrator was fitted
    on, which the embedded models regenerate from the world seed their calibrator records;
    None when the calibrator records none. Kept per process (a batch engine asks per batch)."""
    cs = calibrator_doc.get("inputs", {}).get("calibration_set", {})
    if "seed" not in cs:
        return None
    key = (scorer.fingerprint, json.dumps(cs, sort_keys=True), n_ref)
    if key not in _REFERENCE:
        from scoreband.world import make_dataset

        ds = make_dataset(min(n_ref, int(cs.get("n", n_ref))), int(cs["seed"]),
                          n_annotators=int(cs.get("n_annotators", 3)), name="calibration")
        _REFERENCE[key] = (ds.images, scorer.predict(ds.images, ds.captions).embedding)
    return _REFERENCE[key]


def image_statistics(images) -> np.ndarray:
    """Per image: the share of its modal colour, the log count of its colours (8 levels per
    channel) and the log mean absolute Laplacian (edge energy). The embedded model's own
    image embedding does not separate noise from its world (measured: a random-noise image
    sits at Mahalanobis distance 4-5, world images at 3-6), these do (noise 27, threshold 4)."""
    out = []
    for a in images:
        q = (np.asarray(a, dtype=np.uint8) // 32).reshape(-1, 3).astype(int)
        counts = np.bincount(q[:, 0] * 64 + q[:, 1] * 8 + q[:, 2], minlength=512)
        g = np.asarray(a, dtype=float).mean(2)
        lap = np.abs(4 * g[1:-1, 1:-1] - g[:-2, 1:-1] - g[2:, 1:-1] - g[1:-1, :-2]
                     - g[1:-1, 2:]).mean()
        out.append([counts.max() / len(q), np.log1p((counts > 0).sum()), np.log1p(lap)])
    return np.asarray(out)


class ImageOOD:
    """Flags images unlike the calibration images: the Mahalanobis distance of their
    :func:`image_statistics` (covariance by Ledoit-Wolf, scikit-learn) beyond 1.1 x the
    largest distance among the calibration images themselves (measured on 500 fresh world
    photos: 1 % flagged; paintings, noise and flat grey images: all flagged)."""

    def __init__(self, reference_images):
        from sklearn.covariance import LedoitWolf

        ref = image_statistics(reference_images)
        self.cov_ = LedoitWolf().fit(ref)
        self.threshold_ = 1.1 * float(np.sqrt(self.cov_.mahalanobis(ref)).max())

    def distances(self, images) -> np.ndarray:
        return np.sqrt(self.cov_.mahalanobis(image_statistics(images)))

    def reasons(self, images) -> list[str]:
        return [f"image unlike the model's world (distance {d:.1f} > {self.threshold_:.1f})"
                if d > self.threshold_ else "" for d in self.distances(images)]


def shift_alarm(reference, embeddings) -> dict | None:
    """Do the scored rows look like the items the calibrator was fitted on? A classifier
    two-sample test between their image embeddings and the ``reference`` ones (see
    :func:`reference_items`). None when there is nothing to compare with."""
    from scoreband.conformal import shift_test

    if reference is None or embeddings is None or len(embeddings) < 20:
        return None
    return {**shift_test(reference, embeddings),
            "reference": f"{len(reference)} calibration items"}


def _num(v) -> float | None:
    return None if np.isnan(v) else float(v)


def _row_batches(df, image_col, text_col, base_dir, batch_size, errors):
    """Batches ``(positions, PIL images, captions)`` of the usable rows; the reason a row is
    not usable goes into ``errors[position]``."""
    batch: list = []
    for i in range(len(df)):
        text = cell_text(df, text_col, i)
        if text is None:
            errors[i] = f"{text_col}: empty caption"
            continue
        try:
            img = Image.fromarray(load_image(df[image_col].iloc[i], None, base_dir))
        except ValueError as err:
            errors[i] = f"{image_col}: {err}"
            continue
        batch.append((i, img, text))
        if len(batch) >= batch_size:
            yield tuple(map(list, zip(*batch, strict=True)))
            batch = []
    if batch:
        yield tuple(map(list, zip(*batch, strict=True)))


def score_table_backbone(df: pd.DataFrame, model_dir, *, image_col: str = "image",
                         text_col: str = "caption", batch_size: int = 32, progress=None,
                         base_dir=None, device: str = "cpu",
                         dtype: str | None = None) -> tuple[pd.DataFrame, int, dict]:
    """``score_table`` for a model trained on a registered backbone (BEiT-3, CLIP ...).
    Returns ``(table, bad rows, provenance components)``."""
    from scoreband.scorers.backbone_scorer import BackboneScorer

    for flag, col in (("`image_col`", image_col), ("`text_col`", text_col)):
        if col not in df.columns:
            raise InputError(f"{flag} column {col!r} is not in the table; available: "
                             f"{', '.join(map(str, df.columns))}")
    scorer = BackboneScorer.load(model_dir, device=device, dtype=dtype)
    cal_path = Path(model_dir) / "calibrator.json"
    if not cal_path.exists():
        raise InputError(f"model {str(model_dir)!r} has no calibrator.json; retrain it or "
                         "calibrate it")
    cal, _ = load_calibrator(cal_path, scorer_fingerprint=scorer.fingerprint)
    n = len(df)
    cols = {k: np.full(n, np.nan) for k in ("band_median", "band_lo", "band_hi")}
    errors = np.full(n, "", dtype=object)
    trunc = np.zeros(n, dtype=bool)
    counts = np.zeros(n, dtype=int)
    for pos, images, texts in _row_batches(df, image_col, text_col, base_dir, batch_size,
                                           errors):
        band = cal.predict(scorer.predict(images, texts))
        cols["band_median"][pos] = band.median01
        cols["band_lo"][pos] = band.lo01
        cols["band_hi"][pos] = band.hi01
        trunc[pos] = scorer.last_truncated
        counts[pos] = scorer.last_counts
    out = df.copy()
    for k, v in cols.items():
        out[k] = v
    out["band_error"] = errors
    out["band_truncated"] = trunc
    out["n_tokens"] = counts
    out["scorer_fingerprint"] = scorer.fingerprint
    comps = {"backbone": scorer.backbone.describe(), "scorer_fingerprint": scorer.fingerprint,
             "model_dir": str(model_dir)}
    return out, int((errors != "").sum()), comps


def clip_s_table(df: pd.DataFrame, backbone: str, *, image_col: str = "image",
                 text_col: str = "caption", batch_size: int = 32, base_dir=None,
                 device: str = "cpu", dtype: str = "float32") -> tuple[pd.DataFrame, int, dict]:
    """CLIP-S point scores (w = 2.5, max(cos, 0); no band) with a dual-encoder backbone."""
    from scoreband.backbones import load_backbone
    from scoreband.backbones.dual import CLIP_S_W, clip_s

    bb = load_backbone(backbone, device=device, dtype=dtype)
    if getattr(bb, "kind", "") != "dual-encoder":
        raise InputError(f"CLIP-S needs a dual encoder (hf:... or open_clip:...), got "
                         f"{backbone!r}")
    import torch

    n = len(df)
    score = np.full(n, np.nan)
    errors = np.full(n, "", dtype=object)
    trunc = np.zeros(n, dtype=bool)
    counts = np.zeros(n, dtype=int)
    for pos, images, texts in _row_batches(df, image_col, text_col, base_dir, batch_size,
                                           errors):
        tb, tr, ct = bb.encode_text(texts)
        with torch.inference_mode():
            ei, et = bb.embeddings(bb.preprocess(images), tb)
        score[pos] = clip_s(ei.float().cpu().numpy(), et.float().cpu().numpy())
        trunc[pos], counts[pos] = tr, ct
    out = df.copy()
    out["clip_s"] = score
    out["score_error"] = errors
    out["truncated"] = trunc
    out["n_tokens"] = counts
    comps = {"backbone": bb.describe(), "scorer": {"name": "clip-s", "w": CLIP_S_W,
                                                   "formula": "w * max(cos(e_img, e_txt), 0)"}}
    return out, int((errors != "").sum()), comps


def model_format(model) -> str | None:
    """The ``format`` a model folder's config.json declares (None when unreadable: the loader
    then reports what is wrong with the folder)."""
    import json

    f = Path(model) / "config.json"
    try:
        doc = json.loads(f.read_text(encoding="utf-8")) if f.is_file() else None
    except (ValueError, UnicodeDecodeError):
        return None
    return doc.get("format") if isinstance(doc, dict) else None


def score_any(df: pd.DataFrame, *, model=None, backbone: str = "embedded:default",
              scorer: str | None = None, image_col: str = "image", text_col: str = "caption",
              batch_size: int = 256, base_dir=None, device: str = "cpu", dtype=None,
              journal=None, progress=None) -> dict:
    """Score a table with whatever was asked: a point scorer (``scorer="clip-s"`` on a dual
    encoder), a model trained on a registered backbone, or a quantile scorer (the bundled one
    by default). Returns ``{table, n_bad, components, files, error_column}``."""
    from scoreband.scorers.model import bundled_model_dir

    kw = dict(image_col=image_col, text_col=text_col, base_dir=base_dir)
    if scorer is not None:
        if scorer != "clip-s":
            raise InputError(f"`scorer` {scorer!r}: the only point scorer is clip-s")
        if model is not None:
            raise InputError("`scorer` clip-s uses `backbone`, not `model`")
        res, bad, comps = clip_s_table(df, backbone, batch_size=min(batch_size, 64),
                                       device=device, dtype=dtype or "float32", **kw)
        return dict(table=res, n_bad=bad, components=comps, files={},
                    error_column="score_error")
    if model is not None and model_format(model) == "scoreband.backbone-scorer":
        res, bad, comps = score_table_backbone(df, model, batch_size=min(batch_size, 64),
                                               device=device, dtype=dtype, **kw)
        cal = Path(model) / "calibrator.json"
    else:
        if backbone != "embedded:default" and model is None:
            raise InputError(f"`backbone` {backbone}: bands need a model trained on it "
                             "(scoreband train TABLE --backbone ... --out DIR, then --model "
                             "DIR), or use `scorer` clip-s")
        res, bad, comps = score_table(df, model=str(model) if model else backbone,
                                      batch_size=batch_size, progress=progress,
                                      journal=journal, **kw)
        cal = (Path(model) if model else bundled_model_dir()) / "calibrator.json"
    return dict(table=res, n_bad=bad, components=comps, files={"calibrator": cal},
                error_column="band_error")
