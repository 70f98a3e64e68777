"""Row jobs: every command that turns a table into the same table with columns added, row by
row (``apply``, ``score``, ``judge``, ``judge --pairwise``, ``roundtrip``, a triage or pairwise
rule), registered by name in :data:`JOBS` (as :data:`scoreband.formats.FORMATS` registers the
table formats), and one :func:`run` that carries any of them over a table: locally (the whole
table, or streamed chunk by chunk when both files can be) or on Ray, with the resume journal
and the output's provenance. The API's faces (:func:`scoreband.api.apply_file`,
``api.score``, ``api.judge`` ...) and the CLI's row commands are this one call.

A job names its stage as ``"module:function"`` (a factory building the
:class:`~scoreband.engine.rows.Stage` from plain values), so a Ray actor builds it too; a new
row job is one :func:`register_job` line (and its stage beside what it runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scoreband.engine.journal import discard_journal
from scoreband.engine.rows import RowRun, Stage, build_stage, run_file, run_rows
from scoreband.engine.stream import as_text
from scoreband.errors import ERROR_COLUMN, InputError
from scoreband.provenance import write_provenance
from scoreband.registry import Registry
from scoreband.tables import read_table, write_table

__all__ = ["Job", "JOBS", "RayEngine", "register_job", "get_job", "run", "CHUNK_ROWS", "score",
           "judge", "judge_pairwise", "roundtrip"]

#: rows per chunk of a streamed run (a vectorized stage, which keeps no journal: 10x)
CHUNK_ROWS = 10_000


@dataclass(frozen=True)
class Job:
    """One row job: ``stage`` (``"module:function"``) builds its stage from plain values;
    ``error_column`` is the column of a failed row's reason (a name of
    :data:`scoreband.errors.ERROR_COLUMN`'s values); a ``vectorized`` job computes whole
    chunks (bigger chunks and Ray batches, no journal)."""

    name: str
    stage: str
    error_column: str
    help: str
    vectorized: bool = False

    def build(self, options: dict) -> Stage:
        """The stage ``stage(**options)``."""
        return build_stage(self.stage, options)


#: every row job by name
JOBS = Registry("row job")


def register_job(job: Job) -> Job:
    """Add ``job`` to :data:`JOBS` (its name once)."""
    JOBS.register(job.name, help=job.help, factory=lambda: job, job=job)
    return job


def get_job(job: str | Job) -> Job:
    """The registered job of that name (a :class:`Job` is returned as it is)."""
    return job if isinstance(job, Job) else JOBS.resolve(job)[0].info["job"]


register_job(Job("apply", "scoreband.apply_stage:apply_stage", ERROR_COLUMN["apply"],
                 "a calibrator's bands for every row", vectorized=True))
register_job(Job("score", "scoreband.scorers.stages:score_stage", ERROR_COLUMN["score"],
                 "a scorer's median and band for every image-caption row"))
register_job(Job("score-clip-s", "scoreband.scorers.stages:score_stage",
                 ERROR_COLUMN["clip-s"], "the CLIP-S point score of every row"))
register_job(Job("judge", "scoreband.judge_stage:judge_stage", ERROR_COLUMN["judge"],
                 "a VLM judge's score-token log-probs for every row"))
register_job(Job("judge-pairwise", "scoreband.pairwise.extract:pair_judge_stage",
                 ERROR_COLUMN["pairwise"], "a pairwise judge's verdicts in both orders"))
register_job(Job("roundtrip", "scoreband.roundtrip.metric:roundtrip_stage",
                 ERROR_COLUMN["roundtrip"], "the round-trip score of every caption"))
register_job(Job("triage", "scoreband.decisions.rule:rule_stage", ERROR_COLUMN["triage"],
                 "a triage rule's trust-or-escalate decision for every row", vectorized=True))
register_job(Job("pairwise-rule", "scoreband.decisions.rule:rule_stage",
                 ERROR_COLUMN["pairwise-rule"], "a pairwise rule's verdict for every pair",
                 vectorized=True))
register_job(Job("cascade", "scoreband.decisions.rule:rule_stage", ERROR_COLUMN["cascade"],
                 "a cascade rule's judge (or human) for every row", vectorized=True))


@dataclass(frozen=True)
class RayEngine:
    """Where :func:`run` runs a job on Ray Data: ``actors`` stage replicas with ``num_gpus``
    each, on a local Ray or the cluster at ``address`` (default ``$RAY_ADDRESS``)."""

    actors: int = 2
    num_gpus: float = 0.0
    address: str | None = None


def run(job: str | Job, table, out, *, options: dict, engine: str | RayEngine = "local",
        local: dict | None = None, df=None, post: Callable | None = None,
        components: dict | None = None, progress=None, stream: bool | None = None,
        chunk_rows: int | None = None, on_rows: Callable[[int], None] | None = None,
        provenance: bool = True) -> tuple[RowRun, Stage | None]:
    """Run ``job`` (a name of :data:`JOBS`) over the table at ``table`` into ``out``;
    returns ``(run, stage)`` (the stage None on Ray, whose stages live in its actors).

    ``options``: the plain values the stage is built from (what a Ray actor gets too);
    ``local``: values only a stage built here gets (callbacks, objects in memory);
    ``df``: a table already read (run whole); ``post(table)``: a whole-table step before
    writing; ``components``: provenance records beside the stage's own; ``progress``: a
    console for the progress bar; ``stream``: True to stream whatever the formats, None to
    stream where both files' formats can be; ``provenance``: write ``OUT.provenance.json``.
    A run into a text format keeps every input cell byte for byte; a row that fails keeps
    empty outputs and its reason in the job's error column; a rerun resumes from
    ``OUT.partial.jsonl`` (not a vectorized job: recomputing is faster than journaling)."""
    from scoreband.files import check_output, output_policy
    from scoreband.formats import split_address

    job = get_job(job)
    out = Path(out)
    # the user's files are never written over, from Python as from the CLI (whose policy,
    # when one is in force, this one adds to): the table and the files the job reads
    ins = [("`table`", split_address(table)[1]),
           *((f"`{k}`", v) for k, v in options.items()
             if k in ("calibrator", "rule", "source") and isinstance(v, (str, Path)))]
    with output_policy(inputs=ins):
        check_output(out, what="`out`")
        return _run(job, table, out, options, engine, local, df, post, components, progress,
                    stream, chunk_rows, on_rows, provenance)


def _run(job, table, out, options, engine, local, df, post, components, progress, stream,
         chunk_rows, on_rows, provenance):
    if isinstance(engine, RayEngine):
        if df is not None or post is not None:
            raise InputError("the Ray engine runs on the table as it is (no whole-table step "
                             "before or after); run it locally")
        return _ray(job, table, out, options, engine, components, provenance), None
    if engine != "local":
        raise InputError(f"`engine` {engine!r}: choose local or ray")
    from scoreband.formats import resolve, split_address  # the table's format and file

    stage = job.build({**options, **(local or {}), "base_dir": split_address(table)[1].parent})
    # a vectorized stage (apply) keeps no journal: it never reads, writes or removes one
    journal = None if stage.vectorized else Path(str(out) + ".partial.jsonl")
    if stream is None:
        stream = (df is None and post is None and resolve(table)[0].streamable
                  and resolve(out, write=True)[0].streamable)
    if stream:
        chunk = chunk_rows or (10 * CHUNK_ROWS if stage.vectorized else CHUNK_ROWS)
        res = run_file(table, stage, out, journal=journal, progress=progress,
                       chunk_rows=chunk, on_rows=on_rows)
    else:
        # cells read as text (JSON values as they are): the table comes back as it went in
        res = run_rows(read_table(table, text=as_text(out)) if df is None else df, stage,
                       journal=journal, progress=progress)
        if post is not None:
            post(res.table)
        write_table(res.table, out)
        discard_journal(journal)  # the table is complete (only a journal scoreband wrote)
    if provenance:
        comps = {**(components or {}), **(stage.components() if hasattr(stage, "components")
                                          else {})}
        cal = getattr(stage, "calibrator", None)
        write_provenance(out, comps, files={"calibrator": cal} if cal else {})
    return res, stage


def _ray(job: Job, table, out, options, engine: RayEngine, components,
         provenance: bool) -> RowRun:
    from scoreband.engine.ray_engine import stage_ray  # lazy: Ray is an extra

    n, failures = stage_ray(table, out, job.stage, options, error_column=job.error_column,
                            actors=engine.actors, num_gpus=engine.num_gpus,
                            address=engine.address, vectorized=job.vectorized)
    if provenance:
        write_provenance(out, {**(components or {}), "engine": {
            "name": "ray", "actors": engine.actors, "num_gpus": engine.num_gpus}})
    return RowRun(None, n, failures)


# ------------------------------------------------------------------ faces
def _face(job: str, table, out, engine, options: dict) -> RowRun:
    res, stage = run(job, table, out, options=options, engine=engine)
    res.stage = stage  # what the stage learned (its judge, its errors); None on Ray
    return res


def score(table, out, *, engine: str | RayEngine = "local", **options) -> RowRun:
    """``scoreband score`` in Python: a scorer's median and band for every image-caption row
    of the table at ``table``, written with every input row and column to ``out``.
    ``options``: the score stage's (:func:`scoreband.scorers.stages.score_stage`:
    ``model=``, ``backbone=``, ``scorer=`` ``"clip-s"``, ``image_col=``, ``text_col=``,
    ``batch_size=``, ``device=``, ``dtype=``, ``runtime=``). Returns the
    :class:`~scoreband.engine.rows.RowRun` (rows, failures, counts, summary)."""
    return _face("score-clip-s" if options.get("scorer") else "score", table, out, engine,
                 options)


def judge(table, out, *, judge: str, engine: str | RayEngine = "local",
          **options) -> RowRun:
    """``scoreband judge`` in Python: the score-token log-probs of the judge ``judge`` (a
    name of :data:`scoreband.judges.registry.JUDGES`) for every row. ``options``: the judge
    stage's (:func:`scoreband.judge_stage.judge_stage`: ``prompt=`` a dict of
    :class:`~scoreband.judge_stage.JudgePrompt`'s arguments, default ``{"lo": 1, "hi": 5}``
    as the command's ``--scale 1,5``, ``judge_options=``,
    ``concurrency=``, ``stop_after=``, ``image_col=``, ``instruction_col=``,
    ``response_col=``)."""
    options.setdefault("prompt", {"lo": 1, "hi": 5})  # the command's --scale 1,5
    options.setdefault("judge_options", {})
    return _face("judge", table, out, engine, {"judge_spec": judge, **options})


def judge_pairwise(table, out, *, judge: str, engine: str | RayEngine = "local",
                   **options) -> RowRun:
    """``scoreband judge --pairwise`` in Python: a pairwise judge's verdicts on every pair of
    responses, in both orders. ``options``: the stage's
    (:func:`scoreband.pairwise.extract.pair_judge_stage`: ``tie=``, ``judge_options=``,
    ``response_a=``, ``response_b=``, ``image_col=``, ``instruction_col=``, ``rubric=``,
    ``template=`` ...)."""
    return _face("judge-pairwise", table, out, engine, {"judge_spec": judge, **options})


def roundtrip(table, out, *, generator: dict, encoder: dict,
              engine: str | RayEngine = "local", **options) -> RowRun:
    """``scoreband roundtrip`` in Python: the round-trip score of every caption (images
    generated from it, encoded, compared with the row's image). ``generator`` / ``encoder``:
    ``{"spec": NAME, ...options offered to it}``; ``options``: the stage's
    (:func:`scoreband.roundtrip.metric.roundtrip_stage`: ``n_gen=``, ``seed=``,
    ``image_col=``, ``text_col=``, ``keep_dir=``)."""
    return _face("roundtrip", table, out, engine,
                 {"generator": generator, "encoder": encoder, **options})
