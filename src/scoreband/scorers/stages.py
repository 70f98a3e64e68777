"""Scoring a table of (image path, caption) rows with a trained scorer and its calibrator.

Every row is kept: a row whose image or caption cannot be used gets empty band columns
and the reason in ``band_error``; the batch carries on.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from scoreband.apply_stage import BAND_COLUMNS, band_values
from scoreband.backbones import load_backbone
from scoreband.checksums import file_sha256
from scoreband.conformal import load_calibrator, shift_test
from scoreband.engine.cells import cell_text
from scoreband.engine.journal import row_key
from scoreband.engine.rows import Stage, run_rows
from scoreband.errors import ERROR_COLUMN, InputError
from scoreband.files import resolve_path
from scoreband.images import (  # noqa: F401  (load_image, MAX_PIXELS re-exported)
    DECODER_VERSION,
    MAX_PIXELS,
    image_digest,
    load_image,
    load_images,
)
from scoreband.scorers.scorer import Scorer
from scoreband.world import make_dataset

__all__ = ["load_image", "score_table", "score_stage", "score_any", "MAX_PIXELS",
           "ScoreStage", "ClipSStage"]


def _scorer_with_calibrator(model, device: str = "cpu", dtype=None, runtime: str = "eager"):
    """The scorer, its calibrator (checked against the scorer's fingerprint), the
    calibrator document and the file's hash (part of every journal key)."""
    scorer = Scorer.load(model, device=device, dtype=dtype, runtime=runtime)
    cal_path = scorer.path / "calibrator.json"
    if not cal_path.exists():
        raise InputError(f"model {str(model)!r} has no calibrator.json; run `scoreband train` "
                         "(which writes one) or calibrate it")
    cal, doc = load_calibrator(cal_path, scorer_fingerprint=scorer.fingerprint)
    return scorer, cal, doc, file_sha256(cal_path)


#: scored rows whose image embeddings the shift alarm compares with the calibration items
SHIFT_SAMPLE = 5000


def _usable_rows(stage, df, positions, size):
    """Split ``positions`` into usable rows ``(positions, images, captions)`` and records of
    the rest (``error`` says why). ``size``: images as arrays of that size; None: PIL
    images at their own size."""
    good, imgs, texts, bad = [], [], [], {}
    with_text = []
    for i in positions:
        text = cell_text(df, stage.text_col, i)
        if text is None:
            bad[i] = {"error": f"{stage.text_col}: empty caption"}
        else:
            with_text.append((i, text))
    cells = [df[stage.image_col].iloc[i] for i, _ in with_text]
    loaded = load_images(cells, size, stage.base_dir, min_edge=stage.min_edge)
    for (i, text), arr in zip(with_text, loaded, strict=True):
        if isinstance(arr, ValueError):
            bad[i] = {"error": f"{stage.image_col}: {arr}"}
            continue
        good.append(i)
        imgs.append(arr)  # an array at the model's size, or a PIL image (size None)
        texts.append(text)
    return good, imgs, texts, bad


class _PairStage(Stage):
    """A stage over (image, caption) rows with a model identified by ``fingerprint``."""

    fingerprint = ""
    #: the fewest pixels per edge the model's own preprocessing needs (PIL images only):
    #: larger JPEGs are decoded DCT-reduced towards it (:func:`scoreband.images.load_images`)
    min_edge = None

    def __init__(self, image_col, text_col, batch_size, base_dir):
        super().__init__(base_dir)
        self.image_col, self.text_col, self.batch_size = image_col, text_col, batch_size
        self.inputs = {"image_col": image_col, "text_col": text_col}

    def key(self, df, i):
        image = df[self.image_col].iloc[i]
        f = None if cell_text(df, self.image_col, i) is None else resolve_path(image,
                                                                              self.base_dir)
        return row_key(self.fingerprint, *self.setup, DECODER_VERSION, image, image_digest(f),
                       cell_text(df, self.text_col, i))

    def process(self, df, positions):
        good, imgs, texts, bad = _usable_rows(self, df, positions, self.image_size)
        done = dict(zip(good, self.predict(good, imgs, texts), strict=True)) if good else {}
        return [bad.get(i) or {**done[i], "error": ""} for i in positions]


class ScoreStage(_PairStage):
    """Bands from a trained scorer (any backbone, the bundled embedded model by default) and
    its calibrator. ``band_ood`` flags unknown words (where the tokenizer knows its
    vocabulary) and images unlike the calibration items (where the calibrator records
    them); ``band_truncated`` / ``n_tokens`` say how the caption fitted the text tower; the
    run's image embeddings feed the shift alarm."""

    label = "scoring"
    error_column = ERROR_COLUMN["score"]
    outputs = {**dict.fromkeys(BAND_COLUMNS, np.nan), ERROR_COLUMN["score"]: "",
               "band_truncated": False, "band_ood": "", "n_tokens": 0}
    flags = ("band_truncated", "band_ood")

    def __init__(self, model="embedded:default", *, image_col="image", text_col="caption",
                 batch_size=256, base_dir=None, device="cpu", dtype=None, runtime="eager"):
        super().__init__(image_col, text_col, batch_size, base_dir)
        self.model = model
        self.scorer, self.cal, doc, cal_sha = _scorer_with_calibrator(model, device, dtype,
                                                                      runtime)
        self.calibrator = self.scorer.path / "calibrator.json"
        self.head = doc.get("inputs", {}).get("head", "chained_ci")
        self.fingerprint, self.setup = self.scorer.fingerprint, (cal_sha, self.head)
        # the embedded models take arrays at their size; the others PIL images, a few at once
        self.image_size = self.scorer.input_size
        self.min_edge = self.scorer.min_image_edge
        if self.image_size is None:
            self.batch_size = min(batch_size, 64)
        self.ref = reference_items(self.scorer, doc)
        self.image_ood = ImageOOD(self.ref[0]) if self.ref is not None else None
        self.emb: list = []
        self._seen, self._rng = 0, np.random.default_rng(0)

    def predict(self, pos, imgs, texts):
        sc = self.scorer
        pred = sc.predict(np.stack(imgs) if self.image_size else imgs, texts, head=self.head)
        band = self.cal.predict(pred)
        self._keep(pred.embedding)
        img_why = (self.image_ood.reasons(imgs) if self.image_ood is not None
                   else [""] * len(imgs))
        oov = getattr(sc.tokenizer, "out_of_vocabulary", lambda t: "")
        values = band_values(band)
        recs = []
        for j, text in enumerate(texts):
            why = [w for w in (oov(text), img_why[j]) if w]
            recs.append({**{k: v[j] for k, v in values.items()},
                         "band_truncated": bool(sc.last_truncated[j]),
                         "n_tokens": int(sc.last_counts[j]), "band_ood": "; ".join(why)})
        return recs

    def _keep(self, emb) -> None:
        """A uniform sample of at most ``SHIFT_SAMPLE`` scored rows' image embeddings for the
        shift alarm (reservoir sampling, seeded), so memory stays bounded on any table."""
        for e in emb:
            self._seen += 1
            if len(self.emb) < SHIFT_SAMPLE:
                self.emb.append(e)
            else:
                j = int(self._rng.integers(self._seen))
                if j < SHIFT_SAMPLE:
                    self.emb[j] = e

    def constants(self):
        return {"scorer_fingerprint": self.fingerprint}

    def summary(self):
        emb = np.stack(self.emb) if self.emb else None
        return {"shift": shift_alarm(None if self.ref is None else self.ref[1], emb)}

    def components(self):
        return {"backbone": {**self.scorer.backbone.describe(),
                             "runtime": self.scorer.runtime},
                "scorer_fingerprint": self.fingerprint, "model": str(self.model)}


def score_table(df: pd.DataFrame, *, image_col: str = "image", text_col: str = "caption",
                model: str = "embedded:default", batch_size: int = 256,
                progress=None, base_dir=None, journal=None) -> tuple[pd.DataFrame, int, dict]:
    """Score every row; returns ``(table with band columns, number of bad rows, provenance
    components)``.

    Bands on the calibrator's scale (band_lo, band_median, band_hi; 1-5 for the bundled
    model) and on [0, 1] (band_lo01, band_median01, band_hi01); band_error names the problem of a
    row that could not be scored; band_truncated flags captions cut to the model's length.
    ``journal`` (a path): every finished row is appended and flushed there as it is done, and
    a rerun after an interruption reuses those rows (the row engine, as for ``judge`` and
    ``roundtrip``).
    """
    if batch_size < 1:
        raise InputError(f"`batch_size` must be >= 1, got {batch_size}")
    stage = ScoreStage(model, image_col=image_col, text_col=text_col,
                       batch_size=batch_size, base_dir=base_dir)
    run = run_rows(df, stage, journal=journal, progress=progress)
    run.table.attrs.update(reused_rows=run.reused, shift=run.summary["shift"])
    return run.table, len(run.failures), stage.components()


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
    if reference is None or embeddings is None or len(embeddings) < 20:
        return None
    return {**shift_test(reference, embeddings),
            "reference": f"{len(reference)} calibration items"}


class ClipSStage(_PairStage):
    """CLIP-S point scores (w = 2.5, max(cos, 0); no band) with a dual-encoder backbone."""

    label = "CLIP-S"
    error_column = ERROR_COLUMN["clip-s"]
    outputs = {"clip_s": np.nan, ERROR_COLUMN["clip-s"]: "", "truncated": False, "n_tokens": 0}
    flags = ("truncated",)
    image_size = None

    def __init__(self, backbone, *, image_col="image", text_col="caption", batch_size=32,
                 base_dir=None, device="cpu", dtype="float32"):
        super().__init__(image_col, text_col, batch_size, base_dir)
        self.bb = load_backbone(backbone, device=device, dtype=dtype)
        if getattr(self.bb, "kind", "") != "dual-encoder":
            raise InputError(f"CLIP-S needs a dual encoder (hf:... or open_clip:...), got "
                             f"{backbone!r}")
        self.fingerprint = json.dumps(self.bb.describe(), sort_keys=True, default=str)
        self.setup = ("clip-s",)
        self.min_edge = getattr(self.bb, "min_image_edge", None)

    def predict(self, pos, imgs, texts):
        import torch

        from scoreband.backbones.dual import clip_s  # lazy: loads httpx, rich

        tb, tr, ct = self.bb.encode_text(texts)
        with torch.inference_mode():
            ei, et = self.bb.embeddings(self.bb.preprocess(imgs), tb)
        sc = clip_s(ei.float().cpu().numpy(), et.float().cpu().numpy())
        return [{"clip_s": sc[j], "truncated": bool(tr[j]), "n_tokens": int(ct[j])}
                for j in range(len(texts))]

    def components(self):
        from scoreband.backbones.dual import CLIP_S_W  # lazy: loads httpx, rich

        return {"backbone": self.bb.describe(), "scorer": {
            "name": "clip-s", "w": CLIP_S_W, "formula": "w * max(cos(e_img, e_txt), 0)"}}


def score_stage(*, model=None, backbone: str = "embedded:default", scorer: str | None = None,
                image_col: str = "image", text_col: str = "caption", batch_size: int = 256,
                base_dir=None, device: str = "cpu", dtype=None,
                runtime: str = "eager") -> _PairStage:
    """The stage for what was asked: a point scorer (``scorer="clip-s"`` on a dual encoder),
    a model trained on a registered backbone, or a quantile scorer (the bundled one by
    default; ``runtime`` ``"onnx"`` runs an embedded model through ONNX Runtime). Its
    ``error_column``, ``components()`` and ``calibrator`` file say the rest."""
    if batch_size < 1:
        raise InputError(f"`batch_size` must be >= 1, got {batch_size}")
    kw = dict(image_col=image_col, text_col=text_col, base_dir=base_dir)
    if scorer is not None:
        if scorer != "clip-s":
            raise InputError(f"`scorer` {scorer!r}: the only point scorer is clip-s")
        if model is not None:
            raise InputError("`scorer` clip-s uses `backbone`, not `model`")
        if runtime != "eager":
            raise InputError(f"`runtime` {runtime!r} is for the embedded models, not clip-s")
        st = ClipSStage(backbone, batch_size=min(batch_size, 64), device=device,
                        dtype=dtype or "float32", **kw)
        st.calibrator = None
        return st
    if backbone != "embedded:default" and model is None:
        raise InputError(f"`backbone` {backbone}: bands need a model trained on it "
                         "(scoreband train TABLE --backbone ... --out DIR, then --model "
                         "DIR), or use `scorer` clip-s")
    return ScoreStage(str(model) if model else backbone, batch_size=batch_size,
                      device=device, dtype=dtype, runtime=runtime, **kw)


def score_any(df: pd.DataFrame, *, journal=None, progress=None, **kw) -> dict:
    """Score a table in memory with :func:`score_stage` (same arguments). Returns
    ``{table, n_bad, components, files, error_column}``."""
    stage = score_stage(**kw)
    run = run_rows(df, stage, journal=journal, progress=progress)
    run.table.attrs.update(reused_rows=run.reused, **run.summary)
    return dict(table=run.table, n_bad=len(run.failures), components=stage.components(),
                files={"calibrator": stage.calibrator} if stage.calibrator else {},
                error_column=stage.error_column)
