"""What a checkpoint is, read and written in one place.

The one reader (`reader.open_checkpoint`) takes whatever a user may give as a starting point (an
original TF1 prefix or folder, one of this project's `ckpt-N` or output_dirs, a Hugging Face
directory or weights file, a LoRA run's adapters over its base) and returns a `Checkpoint`: its
layout and model family, what it carries (config, vocabulary, casing), the run record and labels
of the run that wrote it, and the loading of its weights by the family's names, adapters merged.
The one writer (`writer`) writes the original layout, Hugging Face's and a LoRA run's adapters;
`run_files` reads and writes the files a run keeps beside its checkpoints; `model_files` gives the
config and vocabulary a run starts from.

Scripts, tasks and the machinery import this package only; the layouts' modules (`original`,
`hugging_face`, `adapters`) and the families' names (`modeling.families`) are its own.
"""
from modeling.checkpoint import run_files
from modeling.checkpoint.layout import HF_DIRECTORY, check_partial_directory, is_hf_directory
from modeling.checkpoint.model_files import (
    ModelFiles, check_max_seq_length, hf_home, load_config, model_files, recorded_objective,
    recorded_task)
from modeling.checkpoint.original import LoadReport, resolve_checkpoint_prefix
from modeling.checkpoint.original import variable_map as variables_by_name
from modeling.checkpoint.reader import (
    HUGGING_FACE, ORIGINAL, RUN, Checkpoint, ModelVariables, check_init_checkpoint,
    identity_file, initialize_from_checkpoint, load_checkpoint, open_checkpoint,
    restore_newest_readable)
from modeling.checkpoint.adapters import ADAPTERS_FILE, check_task as check_adapters_task
from modeling.checkpoint.writer import write_adapters, write_hugging_face, write_original

__all__ = [
    "ADAPTERS_FILE", "Checkpoint", "HF_DIRECTORY", "HUGGING_FACE", "LoadReport", "ModelFiles",
    "ModelVariables", "ORIGINAL", "RUN", "check_adapters_task", "check_init_checkpoint",
    "check_max_seq_length", "check_partial_directory", "hf_home", "identity_file",
    "initialize_from_checkpoint", "is_hf_directory", "load_checkpoint", "load_config",
    "model_files", "open_checkpoint", "recorded_objective", "recorded_task",
    "resolve_checkpoint_prefix", "restore_newest_readable", "run_files", "variables_by_name",
    "write_adapters",
    "write_hugging_face", "write_original",
]
