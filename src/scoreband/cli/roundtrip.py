"""roundtrip and roundtrip-study: the caption -> image -> embedding round-trip score."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scoreband.api import (
    ENCODERS,
    GENERATORS,
    Scale,
    add_text_metrics,
    as_text,
    caption_with,
    make_encoder,
    make_generator,
    read_table,
)
from scoreband.cli._app import app, console, err, fail, finish_rows, guard, report_rows, run_study
from scoreband.cli._options import (
    ENGINE_OPTIONS,
    AlphaOpt,
    BaseUrlOpt,
    DeviceOpt,
    DtypeOpt,
    ImageColOpt,
    NRatingsOpt,
    StudyHtmlOpt,
    Table_,
    TargetOpt,
    TextColOpt,
    check_scale,
    with_options,
)
from scoreband.cli._rows import run_stage
from scoreband.textsafe import plain

GeneratorOpt = Annotated[str, typer.Option(
    "--generator", help=GENERATORS.help_text() + ".")]
EncoderOpt = Annotated[str, typer.Option(
    "--encoder", help=ENCODERS.help_text() + " (CLIP/SigLIP vision tower, ViT, DINOv2, "
                      "ResNet).")]
NGenOpt = Annotated[int, typer.Option("--n-gen", min=1, max=1000,
                                      help="Generations per caption (seeds "
                                           "SEED, SEED+1, ...).")]


def _components(generator, encoder, steps, size, guidance, device, dtype, base_url, cache):
    gen = make_generator(generator, offered=dict(steps=steps, size=size, guidance=guidance,
                                                  device=device, dtype=dtype,
                                                  base_url=base_url, cache_dir=cache))
    return gen, make_encoder(encoder, offered=dict(device=device, dtype=dtype))


@app.command("roundtrip")
@guard
@with_options(ENGINE_OPTIONS)
def roundtrip(
    table: Table_,
    out: Annotated[Path, typer.Option("--out", help="Output table (every row kept).")],
    generator: GeneratorOpt = "embedded:renderer",
    encoder: EncoderOpt = "embedded:default",
    captioner: Annotated[str | None, typer.Option(
        "--captioner", help="hf:PATH_OR_ID of an image-to-text model: caption the images "
                            "first and score those captions (the model under test).")] = None,
    n_gen: NGenOpt = 4,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1,
                                      help="First generation seed.")] = 0,
    image_col: ImageColOpt = "image",
    text_col: TextColOpt = "caption",
    references: Annotated[str | None, typer.Option(
        "--references", help="Column of ';'-separated reference captions: adds BLEU-4, "
                             "ROUGE-L and CIDEr-D per row (needs scoreband[text]).")] = None,
    keep_images: Annotated[Path | None, typer.Option(
        "--keep-images", help="Folder to keep the generated images in.")] = None,
    steps: Annotated[int, typer.Option("--steps", min=1, max=10_000,
                                       help="diffusers: inference steps.")] = 25,
    size: Annotated[int, typer.Option("--size", min=8, max=4096,
                                      help="Generated image size (pixels).")] = 512,
    guidance: Annotated[float, typer.Option("--guidance", min=0, max=100,
                                            help="diffusers: guidance.")] = 7.5,
    device: DeviceOpt = "cpu",
    dtype: Annotated[str, typer.Option("--dtype", help="float32 | bfloat16 | float16 "
                                                       "(similarities are float32).")]
    = "float32",
    base_url: BaseUrlOpt = "https://api.openai.com/v1",
    cache: Annotated[Path | None, typer.Option(
        "--cache", help="openai: image cache folder (default OUT.cache/).")] = None,
    **engine_opts,
):
    """Round-trip score of every (image, caption) row.

    The caption is turned into --n-gen
    images by the generator, and the score is the mean cosine similarity between the
    original image's embedding and theirs (spread = their standard deviation). Adds
    roundtrip_score, roundtrip_spread, roundtrip_error (failed rows keep NaN, never a score),
    roundtrip_seeds; writes OUT.provenance.json. Rerunning resumes from OUT.partial.jsonl.

    Example (no download): scoreband world --out w && scoreband roundtrip w/world.csv
    --out rt.csv
    """
    if keep_images is not None and keep_images.exists() and not keep_images.is_dir():
        fail(f"--keep-images {str(keep_images)!r} is a file; give a folder for the images")
    if keep_images is not None and engine_opts["engine"] == "ray":
        fail("--keep-images writes on the machine that generates (a Ray worker's disk); run "
             "with --engine local to keep the images")
    opts = dict(device=device, dtype=dtype)
    gen = dict(spec=generator, steps=steps, size=size, guidance=guidance, base_url=base_url,
               cache_dir=cache if cache is not None else Path(str(out) + ".cache"), **opts)
    df, text_col, comps, post = _prepare(table, captioner, references, image_col, text_col,
                                         device, out)
    run, stage = run_stage(table, out, "roundtrip", dict(
        generator=gen, encoder=dict(spec=encoder, **opts), n_gen=n_gen, seed=seed,
        image_col=image_col, text_col=text_col, keep_dir=keep_images), engine_opts,
        df=df, post=post, components=comps)
    ok = run.rows - len(run.failures)
    mean = run.means.get("roundtrip_score")
    mean = f"; mean score {mean:.4f}" if mean is not None else ""
    finish_rows(run.failures, run.rows, "not scored",
                f"wrote {plain(out)}: {ok} of {run.rows} rows scored"
                + (f" ({run.reused} resumed)" if run.reused else "") + mean
                if ok else f"wrote {plain(out)}: no row could be scored")


def _prepare(table, captioner, references, image_col, text_col, device, out):
    """The whole-table steps around the round trip: captioning first (``--captioner``), the
    text metrics after (``--references``). Returns (table or None, the text column to
    score, provenance components, the step after)."""
    comps: dict = {}
    df = None
    if captioner is not None:
        df, text_col, comps["captioner"] = caption_with(
            captioner, read_table(table, text=as_text(out)), image_col=image_col,
            base_dir=Path(table).parent, device=device)
    post = None
    if references is not None:
        def post(res):
            corpus = add_text_metrics(res, text_col, references)
            comps["text_metrics_corpus"] = corpus
            console.print("text metrics (corpus): " + ", ".join(
                f"{k} {v:.3f}" for k, v in corpus.items() if k != "n"))
    return df, text_col, comps, post


@app.command("roundtrip-study")
@guard
def roundtrip_study(
    table: Annotated[Path | None, typer.Argument(
        help="Table of (image, caption[, human target]) rows; omit for the embedded world.")]
    = None,
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("roundtrip-study"),
    generator: GeneratorOpt = "embedded:renderer",
    encoder: EncoderOpt = "embedded:default",
    n_gen: NGenOpt = 4,
    n: Annotated[int, typer.Option("--n", min=20, max=1_000_000,
                                   help="World: images in the validation study "
                                        "(the calibration set has 4x as many).")] = 500,
    image_col: ImageColOpt = "image",
    text_col: TextColOpt = "caption",
    target: TargetOpt = None,
    scale: Annotated[str, typer.Option("--scale", callback=check_scale, help="Native scale of --target.")] = "1,5",
    n_ratings: NRatingsOpt = None,
    seeds: Annotated[int, typer.Option("--seeds", min=1, max=10_000,
                                       help="Random 50/50 splits.")] = 10,
    alpha: AlphaOpt = 0.1,
    steps: Annotated[int, typer.Option("--steps", min=1, max=10_000,
                                       help="diffusers: inference steps.")] = 25,
    size: Annotated[int, typer.Option("--size", min=8, max=4096,
                                      help="Generated image size.")] = 512,
    guidance: Annotated[float, typer.Option(
        "--guidance", min=0, max=100, help="diffusers: classifier-free guidance scale.")] = 7.5,
    device: DeviceOpt = "cpu",
    dtype: DtypeOpt = "float32",
    base_url: BaseUrlOpt = "https://api.openai.com/v1",
    html: StudyHtmlOpt = None,
):
    """Validate the round-trip score and calibrate a band around it.

    The round-trip validation study (matched vs shuffled captions: mean gap and AUROC with
    bootstrap 95 % intervals), plus a calibrated band around the round-trip score where human
    ratings exist (split CP on an isotonic map of the score, CRC with the seed spread as the
    raw interval; --seeds random splits). Writes results.json, results.md,
    roundtrip_scores.png and report.html.

    Without TABLE: the embedded world (correct reference captions for the validation study;
    corrupted captions with 3 simulated annotators each for the band).
    """
    from scoreband.api import roundtrip_study as study  # lazy: loads scipy, sklearn

    gen, enc = _components(generator, encoder, steps, size, guidance, device, dtype, base_url,
                           Path(out) / "generations")
    run_study("round-trip study ...", lambda step: study.run(
        gen, enc, table=table, n=n, n_gen=n_gen, image_col=image_col, text_col=text_col,
        target=target, scale=Scale.parse(scale), n_ratings=n_ratings, alpha=alpha,
        seeds=seeds, on_step=step, progress=err, on_rows=report_rows), out, html)
