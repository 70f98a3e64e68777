"""The cases of the method contract, declared once and read from the registry: every
``--method`` name of :data:`scoreband.conformal.METHODS` with the columns its class declares
it ``needs`` (plus, for the few that need more, the options below), and the variants that
put a wrapper or a switch on a method (randomised tie-breaking, Mondrian groups, a monotone
map, boundary snapping). A method added to the registry gets a case without a line here.

Each case is ``(method, make_calibrator options, the CLI flags that mean the same)``, on
:func:`tests.golden.cases.judge_table`.
"""

from __future__ import annotations

import warnings

import pandas as pd

from scoreband.columns import ColumnSpec, load_inputs
from scoreband.conformal import METHODS, make_calibrator
from scoreband.conformal.base import calibrator_class
from scoreband.conformal.randomness import frame_keys
from scoreband.datatypes import Scale

__all__ = ["SCALE", "BASE", "PRED", "FEATURES", "INTERVAL", "CASES",
           "library_band", "spec_from_flags"]

SCALE = Scale(1, 5, integer=True)
BASE = ["--target", "human", "--scale", "1,5", "--n-ratings", "3"]
#: the judge table's columns for each input a method can declare (``needs``)
INPUT_FLAGS = {"median": ["--median", "judge_expected"], "interval": ["--lo", "lo", "--hi", "hi"],
               "features": ["--features", "logp_*"], "embedding": ["--embedding", "emb_*"]}
PRED = INPUT_FLAGS["median"]
INTERVAL = PRED + INPUT_FLAGS["interval"]
FEATURES = PRED + INPUT_FLAGS["features"]
#: what a method needs beyond the inputs its class declares: (options, CLI flags)
METHOD_OPTIONS = {
    "crc-cluster": ({"n_clusters": 3}, ["--embedding", "emb_*", "--clusters", "3"]),
    "crc-cluster-mondrian": ({"n_clusters": 3}, ["--embedding", "emb_0,emb_1",
                                                 "--clusters", "3"]),
    "auto": ({}, INPUT_FLAGS["features"] + INPUT_FLAGS["interval"]),  # every candidate
}
#: a method with one more option: name -> (method, options, CLI flags added to the
#: method's own; ``None`` flags: these flags alone, instead of the method's)
VARIANTS = {
    "split-randomize": ("split", {"randomize": True}, ["--randomize"]),
    "cqr-randomize": ("cqr", {"randomize": True}, ["--randomize"]),
    "marginal-randomize": ("marginal", {"randomize": True}, ["--randomize"]),
    "chr-no-randomize": ("chr", {"randomize": False}, ["--no-randomize"]),
    "auto-boundary": ("auto", {"adjust_boundary": True}, ["--adjust-boundary"]),
    "mondrian-split": ("split", {"mondrian": "given"}, ["--mondrian", "--groups", "task"]),
    "mondrian-chr": ("chr", {"mondrian": "given"}, ["--mondrian", "--groups", "task"]),
    "difficulty-crc": ("crc", {"mondrian": "difficulty"}, ["--mondrian"]),
    "fitted-median-only": ("fitted", {}, None, PRED),
    "isotonic-split": ("split", {"map": "isotonic"}, None,
                       ["--median", "clip_score", "--map", "isotonic"]),
    "linear-auto": ("auto", {"map": "linear"}, None,
                    ["--median", "clip_score", "--features", "logp_*", "--map", "linear"]),
}


def method_flags(name: str) -> list[str]:
    """The CLI flags of a ``--method`` name: the point column, the columns of every input
    its class declares, and its :data:`METHOD_OPTIONS`."""
    flags = list(PRED)
    for alt in calibrator_class(name).needs:
        for i in alt:
            if INPUT_FLAGS[i][0] not in flags:
                flags += INPUT_FLAGS[i]
    return flags + METHOD_OPTIONS.get(name, ({}, []))[1]


def _cases() -> dict[str, tuple[str, dict, list[str]]]:
    out = {name: (name, dict(METHOD_OPTIONS.get(name, ({}, []))[0]), method_flags(name))
           for name in METHODS.names()}
    for name, (method, kw, extra, *alone) in VARIANTS.items():
        flags = alone[0] if extra is None else method_flags(method) + extra
        out[name] = (method, {**METHOD_OPTIONS.get(method, ({}, []))[0], **kw}, flags)
    return out


CASES = _cases()
SWITCHES = ("--mondrian", "--randomize", "--no-randomize", "--adjust-boundary")


def spec_from_flags(flags: list[str]) -> ColumnSpec:
    """The ColumnSpec the CLI builds from these flags (for the library side of a case)."""
    flags = [f for f in flags if f not in SWITCHES]
    opts = dict(zip(flags[::2], flags[1::2], strict=False))
    get = opts.get
    return ColumnSpec(
        scale=SCALE, target="human", median=get("--median"), lo=get("--lo"), hi=get("--hi"),
        features=get("--features"), embedding=get("--embedding"), groups=get("--groups"),
        raw_predictions="--map" in opts)


def library_band(name: str, df_cal: pd.DataFrame, df_test: pd.DataFrame):
    """``(calibrator, band, test inputs)`` of a case through the library, the rows keyed as
    the commands key them."""
    method, kw, flags = CASES[name]
    spec = spec_from_flags(flags).resolved(df_cal.columns)
    cal_in = load_inputs(df_cal, spec, n_ratings=3)
    test_in = load_inputs(df_test, spec, require_target=False)
    # the rows' identities, as the commands take them (randomised tie-breaking): every cell
    # of the row as the command reads it (apply reads a table without the target columns)
    cal_in.pred.keys = frame_keys(df_cal.iloc[cal_in.rows])
    test_in.pred.keys = frame_keys(df_test.drop(columns=["human", "ratings"],
                                                errors="ignore").iloc[test_in.rows])
    cal = make_calibrator(method, 0.1, scale=SCALE, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal.fit(cal_in.pred, cal_in.y01, groups=cal_in.groups)
        band = cal.predict(test_in.pred, groups=test_in.groups)
    return cal, band, test_in
