"""example, datasets, world: tables to try scoreband on."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

from scoreband.api import (
    BENCHMARKS,
    atomic_write_bytes,
    load_benchmark,
    make_dataset,
    write_provenance,
    write_table,
)
from scoreband.cli._app import app, console, fail, guard, styled
from scoreband.textsafe import plain


@app.command()
@guard
def example(
    out: Annotated[Path, typer.Option("--out", help="Where to write the example table.")] =
    Path("example_predictions.csv"),
):
    """Write the example predictions table shipped with scoreband.

    2,000 simulated quantile-scorer outputs with 3 annotators each: the table
    ``scoreband.example_table()`` points to; its columns are described in the README's quick
    start.
    """
    src = resources.files("scoreband") / "data" / "example_predictions.csv"
    atomic_write_bytes(out, src.read_bytes())

    write_provenance(out, {"table": "the bundled example predictions (embedded world, seeded)"})
    console.print(f"wrote {plain(out)}; try:")
    # one physical line, never wrapped, so that copy-paste runs the whole command
    console.print(f"scoreband evaluate {out} --ratings ratings --scale 1,5 --median median "
                  "--lo q05 --hi q95 --pred-scale 0,1 --method crc --groups task",
                  soft_wrap=True)


# ------------------------------------------------------------------ datasets
datasets_app = typer.Typer(help="Public human-rating benchmarks: list them, or turn a local "
                                "copy into a standard table.", no_args_is_help=True)
app.add_typer(datasets_app, name="datasets")


@datasets_app.command("list")
def datasets_list():
    """The benchmarks, their native scales, splits, annotator counts and expected files."""
    for b in BENCHMARKS.values():
        console.print(b.describe())


@datasets_app.command("prepare")
@guard
def datasets_prepare(
    name: Annotated[str, typer.Argument(help="Benchmark (see `scoreband datasets list`).")],
    root: Annotated[Path, typer.Argument(help="Folder of the local copy.")],
    out: Annotated[Path, typer.Option("--out", help="Standard table to write.")],
    split: Annotated[str | None, typer.Option("--split", help="Split (default: the test "
                                                              "split).")] = None,
    image_dir: Annotated[Path | None, typer.Option(
        "--image-dir", help="Where images stored inside Parquet / arrow files are written "
                            "(default ROOT/.scoreband-images).")] = None,
):
    """Write one split of a benchmark as a standard table: id, image, caption, target
    (native scale), target01, n_ratings, ratings, references, task, split. Then e.g.:
    scoreband score TABLE --model DIR, or scoreband train TABLE --backbone ...
    --target target --scale A,B.
    """
    df, b = load_benchmark(name, root, split, image_dir)
    write_table(df, out)

    write_provenance(out, {"benchmark": {"name": b.name, "root": str(root), "split": split,
                                         "scale": [b.scale.lo, b.scale.hi]}})
    missing = int((~df["image"].map(lambda p: Path(p).is_file())).sum())
    split_name = df["split"].iloc[0] if len(df) else ""
    console.print(f"wrote {plain(out)}: {len(df)} rows of {b.name} ({split_name}),"
                  f" scale {b.scale.lo:g}-{b.scale.hi:g}")
    if missing:
        console.print(styled(f"{missing} image files not found", "yellow"))


# ------------------------------------------------------------------ world
@app.command("world")
@guard
def world(
    out: Annotated[Path, typer.Option("--out", help="Output folder (world.csv + images/).")]
    = Path("world"),
    n: Annotated[int, typer.Option("--n", min=1, max=1_000_000, help="Items.")] = 200,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1,
                                      help="Random seed (same seed, same result).")] = 0,
    style: Annotated[str, typer.Option("--style", help="photo | painting (out of domain).")]
    = "photo",
    annotators: Annotated[int, typer.Option("--annotators", min=1, max=1000,
                                            help="Simulated ratings per "
                                                 "item.")] = 3,
    p_corrupt: Annotated[float, typer.Option(
        "--p-corrupt", min=0, max=1,
        help="Share of captions with corruptions (0: only correct captions).")]
    = 0.6,
):
    """Write items of the embedded world as a table with PNG images.

    To try every command on: columns id, image, caption, task, ratings (';'-separated
    1-5), human (their mean),
    true_score, domain, and instruction / response (the caption as a response to judge).

    Example: scoreband world --out w && scoreband score w/world.csv --out scored.csv
    """
    if style not in ("photo", "painting"):
        fail(f"--style {style!r}: choose photo or painting")
    if not 0 <= p_corrupt <= 1:
        fail(f"--p-corrupt must be in [0, 1], got {p_corrupt}")
    ds = make_dataset(n, seed, style=style, n_annotators=annotators, p_corrupt=p_corrupt,
                      name=f"world-{style}")
    df = ds.to_frame(Path(out) / "images")
    df["image"] = [str(Path(p).relative_to(out)) for p in df["image"]]
    df["instruction"] = "Describe the picture in one sentence."
    df["response"] = df["caption"]
    write_table(df, Path(out) / "world.csv")

    write_provenance(Path(out) / "world.csv", {"world": {
        "n": n, "seed": seed, "style": style, "annotators": annotators,
        "p_corrupt": p_corrupt}})
    console.print(f"wrote {Path(out) / 'world.csv'} ({n} items, images in "
                  f"{Path(out) / 'images'})")
