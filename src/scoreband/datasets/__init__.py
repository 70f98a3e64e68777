"""Loaders for the public human-rating benchmarks BEiTScore++ reports on (and the MLLM-as-a-Judge
benchmark), each turning the files of a local copy into one standard table:

``id, image, caption, target, target01, n_ratings, ratings, references, task, split``

* ``image``: a path (images stored inside Parquet / arrow files are written once as PNGs to
  ``image_dir``); ``target`` on the benchmark's native scale, ``target01`` on [0, 1];
  ``n_ratings``: annotators behind the target where the benchmark publishes them (the
  achievable grid of boundary adjustment), else empty; ``ratings``: the individual ratings,
  ';'-separated, where published; ``references``: ';'-separated reference captions;
  ``task``: the category column where the benchmark has one.

Nothing is downloaded: each loader documents the file layout it expects under ROOT and
names the missing file when it is not there. ``scoreband datasets prepare NAME ROOT`` writes
the table; ``scoreband train/score/evaluate`` then take it like any other.

The package holds one module per benchmark loader, :mod:`~scoreband.datasets.common` (the
standard table and the loaders' shared helpers), :mod:`~scoreband.datasets.generic` and the
registry (:mod:`~scoreband.datasets.registry`).
"""

from scoreband.datasets.common import COLUMNS
from scoreband.datasets.generic import load_generic
from scoreband.datasets.registry import BENCHMARKS, Benchmark, list_benchmarks, load_benchmark

__all__ = ["BENCHMARKS", "Benchmark", "load_benchmark", "list_benchmarks", "load_generic",
           "COLUMNS"]
