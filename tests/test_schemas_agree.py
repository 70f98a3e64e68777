"""Each schema is written once and its other views are generated from it; these tests fail
when a view disagrees with its source, and show that a field added to the source reaches
every view (issue 33, item 5).

* the column fields: :class:`scoreband.columns.ColumnSpec` -> ``schemas.ColumnsDoc`` (the
  saved calibrator's ``inputs.columns``) and the CLI's ``COLUMN_KEYS`` / options;
* the calibration config: :class:`scoreband.api.CalibrationConfig` -> ``CONFIG_KEYS`` and the
  evaluate / calibrate option defaults;
* the error columns: ``scoreband.errors.ERROR_COLUMN`` -> each stage's ``error_column``.
"""

import importlib
from dataclasses import MISSING, field, fields, make_dataclass

import pytest
import typer

from scoreband.api import CalibrationConfig, config_fields
from scoreband.cli import _options
from scoreband.columns import ColumnSpec, column_fields, shared_option_fields
from scoreband.datatypes import Scale
from scoreband.errors import ERROR_COLUMN
from scoreband.schemas import ColumnsDoc, columns_doc


def _default(f):
    d = f.default
    return ... if d is MISSING else list(d) if isinstance(d, tuple) else d


# ------------------------------------------------------------------ the column fields
def test_columns_doc_has_every_column_field_with_its_default():
    doc = ColumnsDoc.model_fields
    assert list(doc) == list(column_fields())
    for f in fields(ColumnSpec):
        want = _default(f)
        if want is ...:
            assert doc[f.name].is_required(), f.name
        else:
            assert doc[f.name].default == want, f.name


def test_a_spec_saved_validates_and_reads_back_unchanged():
    spec = ColumnSpec.of(scale="1,5", ratings="r", median="m", lo="a", hi="b",
                         features="f1,f2", pred_scale=(0, 1), ratings_sep="|",
                         groups="task", split_by="item", id_col="id")
    d = spec.to_dict()
    assert list(d) == list(column_fields())
    assert ColumnsDoc.model_validate(d).model_dump() == d
    assert ColumnSpec.from_dict(d) == spec


def test_cli_column_keys_are_the_shared_option_fields():
    assert _options.COLUMN_KEYS == shared_option_fields()
    own = set(column_fields()) - set(_options.COLUMN_KEYS)
    # not shared options: split_by is each command's own (evaluate, calibrate), the other
    # two are set by the library (raw_predictions by --map) or have no flag
    assert own == {"split_by", "ratings_sep", "raw_predictions"}
    # each a flag, or a knob of --config (the rarely used ones), never both
    flags, knobs = set(_options.CALIBRATION_OPTIONS), set(_options.CALIBRATION_KNOBS)
    assert set(_options.COLUMN_KEYS) <= flags | knobs and not flags & knobs


# ------------------------------------------------------------------ the calibration config
def test_cli_config_keys_and_defaults_are_the_config_fields():
    assert _options.CONFIG_KEYS == config_fields()
    for f in fields(CalibrationConfig):
        if f.name in _options.CALIBRATION_KNOBS:  # read from --config FILE
            assert _options.CALIBRATION_KNOBS[f.name].default == f.default, f.name
            continue
        _, default = _options.CALIBRATION_OPTIONS[_options.PARAM_NAME.get(f.name, f.name)]
        assert default == f.default, f.name


@pytest.mark.parametrize("command", ["evaluate", "calibrate"])
def test_the_commands_show_the_config_defaults(command):
    from scoreband.cli import app

    cmd = typer.main.get_command(app).commands[command]
    params = {p.name: p for p in cmd.params}
    config_help = params["config"].help
    for f in fields(CalibrationConfig):
        if f.name in _options.CALIBRATION_KNOBS:  # a knob: its default in --config's help
            assert f"{f.name} (" in config_help and f"default {f.default}" in config_help
            continue
        p = params[_options.PARAM_NAME.get(f.name, f.name)]
        assert p.default == f.default, (command, f.name)
    for k in _options.COLUMN_KEYS:
        assert k in params or f"{k} (" in config_help, (command, k)


def test_split_options_give_what_the_api_takes():
    opts = {k: d if d is not ... else "1,5" for k, (_, d) in
            _options.CALIBRATION_OPTIONS.items()}
    knobs = {k: v.default for k, v in _options.CALIBRATION_KNOBS.items()}
    cols, cfg = _options.split_options(opts, knobs)
    assert ColumnSpec.of(cols).scale == Scale(1, 5, integer=True)
    assert CalibrationConfig.of(cfg) == CalibrationConfig()


# ------------------------------------------------------------------ a field added to the source
def test_a_field_added_to_column_spec_reaches_every_view(monkeypatch):
    Wider = make_dataclass("Wider", [("weight", "str | None", field(default=None))],
                           bases=(ColumnSpec,))
    assert "weight" in columns_doc(Wider).model_fields
    assert Wider.of({"scale": "1,5", "weight": "w"}).to_dict()["weight"] == "w"
    # the CLI refuses to build until the field has an option, then carries it
    with pytest.raises(RuntimeError, match="weight"):
        _options.calibration_options(spec=Wider)
    monkeypatch.setitem(_options._COLUMN_OPTS, "weight", _options.GroupsOpt)
    cols, _, opts = _options.calibration_options(spec=Wider)
    assert "weight" in cols and opts["weight"][1] is None
    # one the CLI does not share is marked in the source, and stays out of the options
    Quiet = make_dataclass("Quiet", [("note", "str", field(
        default="", metadata={"shared_option": False}))], bases=(ColumnSpec,))
    assert "note" in columns_doc(Quiet).model_fields
    assert "note" not in _options.calibration_options(spec=Quiet)[0]


def test_a_field_added_to_the_config_reaches_every_view(monkeypatch):
    Wider = make_dataclass("Wider", [("n_bins", int, field(default=5))],
                           bases=(CalibrationConfig,))
    assert "n_bins" in config_fields(Wider)
    assert Wider.of({"n_bins": 3}).n_bins == 3
    with pytest.raises(RuntimeError, match="n_bins"):
        _options.calibration_options(config=Wider)
    monkeypatch.setitem(_options._CONFIG_OPTS, "n_bins", _options.KOpt)
    _, keys, opts = _options.calibration_options(config=Wider)
    assert keys[-1] == "n_bins" and opts["n_bins"][1] == 5


# ------------------------------------------------------------------ the error columns
STAGES = [  # (module, class or attribute, ERROR_COLUMN key)
    ("scoreband.apply_stage", "ApplyStage", "apply"),
    ("scoreband.scorers.stages", "ScoreStage", "score"),
    ("scoreband.scorers.stages", "ClipSStage", "clip-s"),
    ("scoreband.judge_stage", "JudgeStage", "judge"),
    ("scoreband.roundtrip.metric", "RoundTripStage", "roundtrip"),
    ("scoreband.decisions.triage", "TriageRule", "triage"),
    ("scoreband.pairwise.extract", "PairJudgeStage", "pairwise"),
    ("scoreband.pairwise.selective", "PairRule", "pairwise-rule"),
    ("scoreband.decisions.cascade_rule", "CascadeRule", "cascade"),
    ("scoreband.decisions.score_cascade", "ScoreCascadeRule", "cascade"),
]


@pytest.mark.parametrize(("module", "name", "key"), STAGES)
def test_each_stage_writes_its_registered_error_column(module, name, key):
    stage = getattr(importlib.import_module(module), name)
    assert stage.error_column == ERROR_COLUMN[key]


def test_the_apply_band_columns_end_with_the_registered_error_column():
    import numpy as np

    from scoreband.apply_stage import ERROR_COLUMN as reexported
    from scoreband.apply_stage import band_columns
    from scoreband.columns import Inputs
    from scoreband.datatypes import Predictions

    assert reexported is ERROR_COLUMN
    inp = Inputs(Predictions(np.zeros(0)), None, np.zeros(0, dtype=int), [], None, None,
                 np.zeros(0))
    assert list(band_columns(None, inp, 2))[-1] == ERROR_COLUMN["apply"]
