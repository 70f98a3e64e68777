"""The library names ``scoreband.api`` hands out besides its own faces: what the CLI (whose one
door into the library is :mod:`scoreband.api`) and a user reach as ``scoreband.api.NAME``,
each imported from the module where it lives on first use (PEP 562, in ``api.__getattr__``),
so that ``import scoreband.api`` stays light. A name moves: its line here moves with it."""

from __future__ import annotations

__all__ = ["ELSEWHERE", "STUDIES", "NAMES"]

#: ``{module: names}``
ELSEWHERE = {
    "scoreband.tables": "read_table write_table table_columns",
    "scoreband.files": "check_output check_readable output_policy atomic_write_bytes "
                       "distinct_outputs",
    "scoreband.json_io": "write_json read_json",
    "scoreband.provenance": "provenance write_provenance",
    "scoreband.extras": "install_hint",
    "scoreband.datatypes": "Scale",
    "scoreband.columns": "ColumnSpec needed_columns shared_option_fields",
    "scoreband.conformal": "METHODS load_calibrator",
    "scoreband.conformal.base": "guarantee_of delta_of",
    "scoreband.conformal.recalibrate": "label_plan min_labels conditional_plan",
    "scoreband.metrics": "band_usefulness",
    "scoreband.formats": "resolve split_address",
    "scoreband.engine.stream": "as_text iter_chunks",
    "scoreband.engine.rows": "check_added_columns",
    "scoreband.report.html": "write_report",
    "scoreband.report.sections": "kinds_help",
    "scoreband.decisions.monitor": "MonitorResult",
    "scoreband.decisions.triage": "RULE_FORMAT fit_triage",
    "scoreband.decisions.rule": "RULES load_rule rule_format",
    "scoreband.decisions.cascade_rule": "cascade load_cascade_rule",
    "scoreband.decisions.score_cascade": "fit_score_cascade",
    "scoreband.decisions.report": "write_triage_html",
    "scoreband.pairwise.selective": "PAIR_RULE_FORMAT PAIR_COLUMNS fit_pairwise_triage",
    "scoreband.pairwise.pairs": "make_pairs pair_labels",
    "scoreband.pairwise.ranking": "rank_systems",
    "scoreband.pairwise.report": "position_bias_by_task",
    "scoreband.system_level": "MIN_LABELS",
    "scoreband.system_level.study": "systems_study",
    "scoreband.system_level.design": "write_design",
    "scoreband.evaluation": "EvaluateResult",
    "scoreband.datasets": "BENCHMARKS load_benchmark",
    "scoreband.world": "make_dataset",
    "scoreband.judges.registry": "JUDGES",
    "scoreband.judge_stage": "JudgePrompt",
    "scoreband.backbones": "BACKBONES resolve_backbone",
    "scoreband.scorers": "load_scorer",
    "scoreband.scorers.model_folder": "claim_model_folder",
    "scoreband.scorers.train": "TrainConfig train_embedded",
    "scoreband.scorers.train_backbone": "BackboneTrainConfig train_on_table",
    "scoreband.roundtrip.captioner": "caption_with",
    "scoreband.roundtrip.encoders": "ENCODERS make_encoder",
    "scoreband.roundtrip.generators": "GENERATORS make_generator",
    "scoreband.roundtrip.text_metrics": "add_text_metrics",
    "scoreband.studies.stress": "table_items",
}
#: the studies, as modules (``api.judge_study.run(...)``), loaded on first use as well
STUDIES = {"demo_study": "scoreband.studies.demo", "judge_study": "scoreband.studies.judge",
           "roundtrip_study": "scoreband.studies.roundtrip",
           "stress_study": "scoreband.studies.stress"}
NAMES = {name: module for module, names in ELSEWHERE.items() for name in names.split()}
