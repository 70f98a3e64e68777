"""Options shared by several commands."""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Annotated, Any

import typer

from scoreband.api import METHODS
from scoreband.errors import InputError


def _column(flag: str, help: str):
    """An optional column-name option."""
    return Annotated[str | None, typer.Option(flag, help=help)]


Table_ = Annotated[Path, typer.Argument(help="Table: .csv .tsv .jsonl .json .parquet, a "
                                             "Hugging Face datasets directory, an Inspect / "
                                             "lm-eval / promptfoo / OpenAI-answers file, or "
                                             "FORMAT:PATH.")]
TargetOpt = _column("--target", "Column of the human target (mean rating).")
RatingsOpt = _column("--ratings", "Column of ';'-separated annotator ratings (replaces "
                     "--target; the target is their mean and the achievable grid follows from "
                     "their count).")
def check_scale(ctx: typer.Context, param: typer.CallbackParam, value):
    """A scale option read as 'A,B' before any work (``--scale 1-4`` is refused at once,
    not after the table was read and the splits run)."""
    if value is None:
        return value
    from scoreband.api import Scale

    try:
        Scale.parse(value, integer=False if param.name == "pred_scale" else None,
                    name=param.name)
    except InputError as e:
        raise typer.BadParameter(str(e).replace(f"`{param.name}` ", "")) from None
    return value


ScaleOpt = Annotated[str, typer.Option("--scale", callback=check_scale,
                                       help="Native scale of the target, 'A,B' (e.g. 1,5 or "
                                            "0,1).")]
MedianOpt = _column("--median", "Column of the point prediction.")
LoOpt = _column("--lo", "Column of the uncalibrated 90 % interval's lower end (for CRC).")
HiOpt = _column("--hi", "Column of the uncalibrated 90 % interval's upper end (for CRC).")
def split_commas(values: list[str] | None) -> list[str] | None:
    """A list option given either way: repeated (``--features a --features b``), as a comma
    list (``--features a,b``) or both; names in the order given, empty parts dropped.

    >>> split_commas(["a,b", " c "])
    ['a', 'b', 'c']
    """
    if not values:
        return values
    return [p.strip() for v in values for p in str(v).split(",") if p.strip()]


def _columns_list(flag: str, help: str):
    """An optional list-of-columns option: a comma list, repeated, or both."""
    return Annotated[list[str] | None, typer.Option(
        flag, callback=split_commas, help=help + " A comma list or the option repeated.")]


FeaturesOpt = _columns_list("--features", "Feature columns for learned calibrators (names "
                                          "or globs, e.g. 'logp_*').")
EmbeddingOpt = _columns_list("--embedding", "Embedding columns for k-means clusters (names "
                                            "or globs).")
GroupsOpt = _column("--groups", "Column of group / task labels.")
MethodOpt = Annotated[str, typer.Option(
    "--method", help=METHODS.help_text() + ". " + "; ".join(
        f"{e.name}: {e.help}" for e in METHODS.entries()) + ".")]
MapOpt = Annotated[str, typer.Option(
    "--map", help="isotonic | linear | none: map a raw point metric (any scale) onto the "
                  "target's scale, fitted on its own share of the calibration items.")]
RandomizeOpt = Annotated[bool | None, typer.Option(
    "--randomize/--no-randomize", help="Randomised tie-breaking (smoothed conformal p-values) "
                                       "for split, cqr, chr, marginal and auto: coverage "
                                       "1 - alpha in expectation on discrete targets instead "
                                       "of over-covering. Default: on for chr and auto, off "
                                       "for the others.")]
def open_unit(value: float | None) -> float | None:
    """An option that must lie strictly between 0 and 1 (checked before any work)."""
    if value is not None and not 0 < value < 1:
        raise typer.BadParameter(f"{value:g} is not in (0, 1), both ends excluded")
    return value


def positive(value: float | None) -> float | None:
    """An option that must be a finite number above 0 (checked before any work)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"{value:g} is not a finite number above 0")
    return value


AlphaOpt = Annotated[float, typer.Option("--alpha", callback=open_unit,
                                         help="Target miscoverage, in (0, 1).")]
DeltaOpt = Annotated[float | None, typer.Option(
    "--delta", callback=open_unit,
    help="A training-conditional guarantee: coverage >= 1 - alpha with probability "
         ">= 1 - delta over the calibration draw (a later conformal rank, from the exact "
         "Beta tail; per group with --mondrian). Not for weighted-split, crc-same and the "
         "cluster rules, which say why. Default: none (1 - alpha on average over "
         "calibrations).")]
MondrianOpt = Annotated[bool, typer.Option(
    "--mondrian", help="Group-conditional calibration: per --groups label, or Easy/Medium/Hard "
                       "difficulty groups when no --groups is given.")]
AdjustOpt = Annotated[bool, typer.Option(
    "--adjust-boundary", help="Snap bands to the achievable targets (integer scales).")]
PredScaleOpt = Annotated[str | None, typer.Option(
    "--pred-scale", callback=check_scale, help="Scale of the prediction columns, 'A,B' (default: --scale; a "
                         "quantile head writes 0,1).")]
KOpt = Annotated[str, typer.Option("--clusters", help="k for the cluster rules, or 'auto' "
                                                      "(elbow + silhouette).")]
IdOpt = Annotated[str | None, typer.Option("--id-col", help="Column naming each row in "
                                                            "error reports.")]
NRatingsOpt = Annotated[int | None, typer.Option(
    "--n-ratings", min=1, max=10_000,
    help="Annotators behind each --target value: the targets' achievable grid "
         "(a --ratings column gives it per row).")]
ScorerOpt = Annotated[str | None, typer.Option(
    "--scorer-id", help="Fingerprint of the scorer that made the predictions; a calibrator "
                        "refuses predictions from another scorer.")]




MondrianByOpt = Annotated[str | None, typer.Option(
    "--mondrian-by", help="given | difficulty | predicted: what the --mondrian groups are "
                          "(implies --mondrian). predicted: bins of the point score "
                          "(quantiles fitted on a share of the calibration items that the "
                          "conformal step never sees), the remedy when coverage differs by "
                          "predicted level. Default: given with --groups, else difficulty.")]

#: each option's typer declaration, by the name of the field it fills (a ColumnSpec or
#: CalibrationConfig field); the defaults come from those classes, not from here
_COLUMN_OPTS = {"scale": ScaleOpt, "target": TargetOpt, "ratings": RatingsOpt,
                "median": MedianOpt, "lo": LoOpt, "hi": HiOpt, "features": FeaturesOpt,
                "embedding": EmbeddingOpt, "groups": GroupsOpt,
                "pred_scale": PredScaleOpt}
_CONFIG_OPTS = {"method": MethodOpt, "alpha": AlphaOpt, "delta": DeltaOpt,
                "mondrian": MondrianOpt,
                "mondrian_by": MondrianByOpt, "clusters": KOpt,
                "map": MapOpt, "randomize": RandomizeOpt, "adjust_boundary": AdjustOpt}
#: a field whose Python name is not a good parameter name (``map`` is a builtin)
PARAM_NAME = {"map": "map_"}
#: the fields a command reads from its `--config FILE` (rarely used), not from a flag
FILE_FIELDS = ("small_group", "id_col")


def calibration_options(spec: type | None = None, config: type | None = None
                        ) -> tuple[tuple[str, ...], tuple[str, ...], dict]:
    """``(COLUMN_KEYS, CONFIG_KEYS, CALIBRATION_OPTIONS)`` from the one definition of each
    schema: :class:`scoreband.columns.ColumnSpec`'s shared-option fields and every field of
    :class:`scoreband.api.CalibrationConfig` (``spec`` / ``config``: other dataclasses, for
    the test that a new field shows up), with the config's defaults (a column option
    defaults to None: not given). A field without an option declaration here is an error at
    import."""
    from scoreband.api import CalibrationConfig, ColumnSpec, shared_option_fields

    config = config or CalibrationConfig
    col_keys = shared_option_fields(spec or ColumnSpec)
    cfg_keys = tuple(f.name for f in fields(config))
    missing = [k for k in col_keys if k not in _COLUMN_OPTS and k not in FILE_FIELDS] + \
              [k for k in cfg_keys if k not in _CONFIG_OPTS and k not in FILE_FIELDS]
    if missing:
        raise RuntimeError(f"no CLI option declared for field(s) {', '.join(missing)} "
                           "(scoreband.cli._options)")
    opts = {}
    for k in col_keys:
        if k not in FILE_FIELDS:
            opts[k] = (_COLUMN_OPTS[k], ... if k == "scale" else None)
    for f in fields(config):
        if f.name in FILE_FIELDS:
            continue
        opts[PARAM_NAME.get(f.name, f.name)] = (
            _CONFIG_OPTS[f.name], f.default if f.default is not MISSING else ...)
    return col_keys, cfg_keys, opts


#: the options evaluate and calibrate share (one definition): name -> (type, default); with
#: --n-ratings, which is an argument of the calls rather than a field
COLUMN_KEYS, CONFIG_KEYS, CALIBRATION_OPTIONS = calibration_options()
CALIBRATION_OPTIONS["n_ratings"] = (NRatingsOpt, None)


def with_options(options: dict):
    """Give a command taking ``**opts`` the named options as well as its own (typer reads
    the signature set here), so an option list shared by commands is written once."""
    def add(fn):
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=t,
                                   default=d) for name, (t, d) in options.items()]
        fn.__signature__ = sig.replace(parameters=own + extra)
        return fn

    return add


#: the prediction columns a saved calibrator recorded, overridable by recalibrate and apply
PREDICTION_OVERRIDES = {"median": (MedianOpt, None), "lo": (LoOpt, None), "hi": (HiOpt, None)}


def split_options(opts: dict, knobs: dict) -> tuple[dict, dict]:
    """``(columns, calibration config)`` for :mod:`scoreband.api` from the shared options
    and the knobs read from ``--config`` (:data:`CALIBRATION_KNOBS`)."""
    given = {**opts, **{k: knobs[k] for k in FILE_FIELDS}}
    cols = {k: given[k] for k in COLUMN_KEYS}
    cols["features"] = cols["features"] or ()
    cols["embedding"] = cols["embedding"] or ()
    cfg = {k: given[PARAM_NAME.get(k, k)] for k in CONFIG_KEYS}
    return cols, cfg


DeviceOpt = Annotated[str, typer.Option("--device", help="cpu | cuda.")]
DtypeOpt = Annotated[str, typer.Option("--dtype", help="float32 | bfloat16 | float16.")]
BaseUrlOpt = Annotated[str, typer.Option(
    "--base-url", help="openai: endpoint root ($OPENAI_API_KEY is sent if set).")]
HtmlOpt = Annotated[Path | None, typer.Option(
    "--html", help="Write the HTML report here (none unless given).")]
#: the studies write their report into their output folder unless told otherwise
StudyHtmlOpt = Annotated[Path | None, typer.Option(
    "--html", help="Write the HTML report here instead of OUT/report.html.")]

ImageColOpt = Annotated[str, typer.Option(
    "--image-col", help="Column of image paths (absolute, or relative to the table's folder).")]
TextColOpt = Annotated[str, typer.Option("--text-col", help="Column of captions.")]

#: the batch engine options of score and apply, written once
ENGINE_OPTIONS = {
    "engine": (Annotated[str, typer.Option(
        "--engine", help="local (this process) | ray (Ray Data: one actor per model replica; "
                         "needs scoreband[ray]).")], "local"),
    "ray_address": (Annotated[str | None, typer.Option(
        "--ray-address", help="ray: an existing cluster (default $RAY_ADDRESS, else a local "
                              "Ray started here).")], None),
    "actors": (Annotated[int, typer.Option("--actors", min=1, help="ray: actors (model "
                                                                   "replicas).")], 2),
    "num_gpus": (Annotated[float, typer.Option("--num-gpus", min=0, help="ray: GPUs per "
                                                                         "actor.")], 0.0),
}


def check_engine(opts: dict) -> bool:
    """True for the Ray engine; a clear error for an unknown one."""
    if opts["engine"] not in ("local", "ray"):
        raise InputError(f"--engine {opts['engine']!r}: choose local or ray")
    return opts["engine"] == "ray"


class LaterPath(os.PathLike):
    """An output path the command checks itself (``--apply-out``): read by the output
    policy as neither an input nor, until it is declared one, an output."""

    def __init__(self, path: str):
        self.path = Path(path)

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)


def later_path(value: str | None):
    return None if value is None else LaterPath(value)

#: the human preference of a pair table (triage / systems --pairwise): a label column, or
#: vote counts
PairLabelOpt = Annotated[str | None, typer.Option(
    "--label-col", help="(pairwise) Column of the human preference: A / B / tie, or 1 / 2 / "
                        "0 (empty = unlabeled).")]
PairVotesOpt = Annotated[str | None, typer.Option(
    "--votes", help="(pairwise) Instead of --label-col: vote-count columns "
                    "'A_COL,B_COL[,TIE_COL]'.")]


def split_columns(values: list[str] | None) -> list[str]:
    """Repeatable or comma-separated column options (``--feature a,b --feature c``)."""
    out = []
    for v in values or []:
        out += [c.strip() for c in v.split(",") if c.strip()]
    return out


# ------------------------------------------------------------------ --config FILE
# A command keeps at most 25 options: its rarely used knobs are read from one JSON or TOML
# file instead (`--config FILE`), each with its default, type and check, declared once per
# command as a dict of Knob. Written here (not with pydantic) because the messages name the
# option (`--config knobs.toml: retries is -1; expected an integer in [0, 100]`) as every
# other CLI refusal does.
@dataclass(frozen=True)
class Knob:
    """One rarely used knob: ``default``, the JSON ``kind`` (int, float, str or bool; a
    float knob takes an integer too), ``expect`` (the accepted values, in words, for the
    refusal), ``ok`` (the value check) and ``help``. ``nullable``: null / absent is the
    default's meaning (a default of None)."""

    default: Any
    kind: type
    expect: str
    help: str
    ok: Callable[[Any], bool] = lambda v: True
    nullable: bool = False


def int_knob(default: int, lo: int, hi: int, help: str) -> Knob:
    return Knob(default, int, f"an integer in [{lo}, {hi}]", help, lambda v: lo <= v <= hi)


def choice_knob(default: str | None, choices: tuple[str, ...], help: str) -> Knob:
    return Knob(default, str, " | ".join(choices), help, lambda v: v in choices,
                nullable=default is None)


def config_help(knobs: dict[str, Knob]) -> str:
    """The ``--config`` option's help: every knob with its default."""
    parts = [f"{k} ({v.help}; default {_show_default(v.default)})" for k, v in knobs.items()]
    return "JSON or TOML file (by its suffix) of rarely used knobs: " + "; ".join(parts) + "."


def _show_default(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return "none" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def config_option(knobs: dict[str, Knob]):
    """The ``--config FILE`` option of a command whose rare knobs are ``knobs``."""
    return Annotated[Path | None, typer.Option("--config", help=config_help(knobs))]


def _kind_ok(v, knob: Knob) -> bool:
    if v is None:
        return knob.nullable
    if isinstance(v, bool) or knob.kind is bool:
        return isinstance(v, bool) and knob.kind is bool
    if knob.kind is float:
        return isinstance(v, (int, float)) and math.isfinite(v)
    return isinstance(v, knob.kind)


#: the largest knobs file read (a few lines are expected)
MAX_CONFIG_BYTES = 1 << 20


def read_knobs(path: Path | None, knobs: dict[str, Knob]) -> dict:
    """The knobs of ``--config FILE`` (JSON, or TOML by its suffix) with their defaults; an
    unreadable file, an unknown key or a bad value is refused naming it and the fix."""
    if path is None:
        return {k: v.default for k, v in knobs.items()}
    where = f"--config {str(path)!r}"
    if Path(path).suffix.lower() == ".toml":
        import tomllib

        from scoreband.api import check_readable

        p = check_readable(path, "--config")  # never a FIFO or a device
        if p.stat().st_size > MAX_CONFIG_BYTES:
            raise InputError(f"{where} is {p.stat().st_size:,} bytes: a knobs file is a few "
                             "lines")
        try:
            doc = tomllib.loads(p.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError) as e:
            raise InputError(f"{where} cannot be read as TOML: {e}") from None
    else:  # the one JSON reader: a regular file, bounded in size and depth
        from scoreband.api import read_json

        doc = read_json(path, what="--config", max_bytes=MAX_CONFIG_BYTES,
                        fix="a knobs file is a JSON object (or TOML, named *.toml)")
    if not isinstance(doc, dict):
        raise InputError(f"{where}: expected an object of knobs ({', '.join(knobs)})")
    for k, v in doc.items():
        if k not in knobs:
            raise InputError(f"{where}: unknown key {k!r}; known: {', '.join(knobs)}")
        knob = knobs[k]
        if not _kind_ok(v, knob) or (v is not None and not knob.ok(v)):
            raise InputError(f"{where}: {k} is {v!r}; expected {knob.expect}")
    return {k: (float(doc[k]) if knobs[k].kind is float and doc.get(k) is not None else
                doc[k]) if k in doc else v.default for k, v in knobs.items()}


#: the calibration fields calibrate and evaluate read from `--config FILE` (FILE_FIELDS)
CALIBRATION_KNOBS = {
    "small_group": choice_knob("full", ("full", "pool-together", "error"),
                               "Mondrian groups too small for alpha: full (the whole scale, "
                               "flagged; the only band valid for each small group), "
                               "pool-together (one pooled band: valid for the small groups "
                               "together, not each) or error"),
    "id_col": Knob(None, str, "a column name", "column naming each row in error reports",
                   lambda v: v.strip() != "", nullable=True),
}
assert set(CALIBRATION_KNOBS) == set(FILE_FIELDS)
