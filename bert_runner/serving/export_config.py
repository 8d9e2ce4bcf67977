"""What export_model.py exports, and how: its flags as one frozen value, made once in the script.

    config = run_flags.config_from_flags(ExportConfig, given=run_flags.given_names())
    config = provenance.follow_run_record(config)    # the settings left out: its run's
    registry.get(config.format).export(config, files)

Every export of this package and of the tasks' serving modules reads this value, not the flags
(each field is export_model.py's flag of its name: its default, help and range are there).
"""
import dataclasses
from typing import FrozenSet, List, Optional


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    """The model to export, the format and where it goes; the sequence length and casing it
    serves; each format's own settings (docs/export.md)."""

    checkpoint: str
    export_dir: str
    format: str = "classifier"
    bert_config_file: Optional[str] = None
    vocab_file: Optional[str] = None
    do_lower_case: bool = True
    max_seq_length: int = 128
    mixed_precision: Optional[str] = None
    # A sentence vector (--format=embedding, huggingface, litert, onnx).
    pooling: Optional[str] = None
    normalize: bool = False
    # LiteRT and ONNX.
    quantization: str = "float32"
    calibration_file: Optional[str] = None
    # run_classifier's models.
    task_name: Optional[str] = None
    labels: Optional[List[str]] = None
    multi_label_threshold: float = 0.5
    long_documents: bool = False
    window_aggregation: str = "mean"
    # run_squad's (--doc_stride also for --long_documents; None: the format's default).
    doc_stride: Optional[int] = None
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    full_width_windows: bool = False
    version_2_with_negative: bool = False
    null_score_diff_threshold: Optional[float] = None
    # run_ner's.
    entity_types: Optional[List[str]] = None
    encoder_only: bool = False
    # The names of the flags the command line gave: the others may take what the run that
    # wrote the checkpoint recorded (`provenance.follow_run_record`).
    given: FrozenSet[str] = frozenset()
