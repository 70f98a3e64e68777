"""Ray Data as the engine of ``apply``, ``score``, ``judge`` and ``roundtrip``
(``--engine ray``): the table becomes a Ray Dataset read in blocks, ``map_batches`` runs one
actor per model replica (a row stage built once per actor from plain values - apply's
calibrator shipped as its JSON text - and run by the same row engine as locally;
``num_gpus`` per actor where a GPU is), the
output streams back in the input's order into the same chunked writer the local engine
uses. Ray restarts an actor whose process died and resubmits its batches, so a killed worker
loses no row. Runs on a local Ray started here, or on a cluster (``address`` /
``RAY_ADDRESS``)."""

from __future__ import annotations

import logging
import os
import threading

from scoreband.engine.rows import build_stage, run_rows
from scoreband.engine.stream import ChunkWriter, as_text, iter_chunks
from scoreband.errors import InputError
from scoreband.extras import install_hint

__all__ = ["connect", "stage_ray"]

EXTRA = install_hint("ray")


def connect(address: str | None = None, *, actors: int = 2,
            timeout: float = 30.0) -> None:
    """Start a local Ray (``address`` None and no ``RAY_ADDRESS``) or connect to a cluster;
    an unreachable address fails within ``timeout`` seconds. A local Ray gets a CPU slot
    more than the actors take, so that reading tasks always find one (with every slot held
    by an actor the reads would wait for ever)."""
    try:
        import ray
    except ImportError:
        raise InputError(f"`engine` ray needs Ray Data: {EXTRA}") from None
    import ray.data

    logging.getLogger("ray.data").setLevel(logging.WARNING)  # scoreband reports progress
    ray.data.DataContext.get_current().enable_progress_bars = False
    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS") or None
    kw = dict(include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    if address is None:
        ray.init(num_cpus=max(os.cpu_count() or 1, actors + 1), **kw)
        return
    box: dict = {}

    def attempt():
        try:
            ray.init(address=address, **kw)
        except Exception as e:  # noqa: BLE001 - reported below with the address
            box["error"] = e

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive() or "error" in box:
        why = f"{type(box['error']).__name__}: {box['error']}" if "error" in box else \
            f"no answer within {timeout:.0f} s"
        raise InputError(f"cannot reach the Ray cluster at {address!r} ({why}); check "
                         "`ray_address` / RAY_ADDRESS, or omit it to run a local Ray")


def _dataset(table, block_rows: int, text: bool = True):
    import ray.data

    from scoreband.formats import get_format, resolve

    fmt, p = resolve(table)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True  # rows come back in the table's order
    if fmt is get_format("parquet"):
        # a file read as one block would be one task on one actor: cut it into blocks of
        # ``block_rows`` (a streaming split, no shuffle) so every actor gets work
        return ray.data.read_parquet(str(p)).repartition(target_num_rows_per_block=block_rows)
    # any other format: read by scoreband's own chunked reader (same types and guards as the
    # local engine; a format read whole is cut), handed to Ray block by block
    return ray.data.from_pandas(list(iter_chunks(table, block_rows, text=text)))


class _Stage:
    """One actor: one stage (one model replica, judge or generator), built once from plain
    values by ``factory`` ("module:function"), run on each batch by the row engine."""

    def __init__(self, factory: str, kw: dict):
        self.stage = build_stage(factory, kw)

    def __call__(self, batch):
        return run_rows(batch.reset_index(drop=True), self.stage, summarize=False).table


def _run(ds, fn, args, out, *, actors: int, num_gpus: float, batch_rows: int, on_rows=None,
         error_column: str | None = None, write_rows: int = 10_000
         ) -> tuple[int, dict[int, str]]:
    """Map the dataset and write it in order; returns (rows written, position -> reason of
    the rows whose ``error_column`` holds one), gathered as the batches pass."""
    from ray.data import ActorPoolStrategy

    mapped = ds.map_batches(fn, fn_constructor_args=args, batch_format="pandas",
                            batch_size=batch_rows, compute=ActorPoolStrategy(size=actors),
                            num_cpus=1, num_gpus=num_gpus)
    # Ray Data restarts an actor whose process died and resubmits its batches (its actor
    # defaults: max_restarts and max_task_retries -1); a Python error in a batch is not
    # retried, but the stages turn row errors into records, never exceptions
    done, failures = 0, {}
    with ChunkWriter(out) as w:
        # written in pieces of ``write_rows`` (Parquet row groups of a useful size)
        for batch in mapped.iter_batches(batch_format="pandas",
                                         batch_size=max(batch_rows, write_rows)):
            w.write(batch)
            if error_column in batch:
                errs = batch[error_column].astype(object).fillna("").astype(str).to_numpy()
                failures.update((done + i, errs[i]) for i in errs.nonzero()[0])
            done += len(batch)
            if on_rows:
                on_rows(done)
    return done, failures


def stage_ray(table, out, factory: str, kw: dict, *, error_column: str, actors: int = 2,
              num_gpus: float = 0.0, address: str | None = None, batch_rows: int = 256,
              on_rows=None, write_rows: int = 10_000,
              vectorized: bool = False) -> tuple[int, dict[int, str]]:
    """A row stage (``score``, ``judge``, ``roundtrip``, ``apply``) on Ray Data:
    ``factory(**kw)`` builds the stage in each actor (``base_dir`` is the table's folder);
    returns (rows written, position -> reason of the rows that failed). A ``vectorized``
    stage (apply) gets batches of 100,000 rows."""
    connect(address, actors=actors)
    if vectorized:
        batch_rows = max(batch_rows, 100_000)
    ds = _dataset(table, batch_rows if vectorized else 4 * batch_rows,  # a few batches a task
                  text=as_text(out))
    from scoreband.formats import split_address

    kw = {**kw, "base_dir": str(split_address(table)[1].parent.resolve())}
    return _run(ds, _Stage, (factory, kw), out, actors=actors, num_gpus=num_gpus,
                batch_rows=batch_rows, on_rows=on_rows, error_column=error_column,
                write_rows=write_rows)
