"""What a checkpoint is, read and written in one place.

The one reader (`reader.open_checkpoint`) takes whatever a user may give as a starting point (an
original TF1 prefix or folder, one of this project's `ckpt-N` or output_dirs, a Hugging Face
directory or weights file, a LoRA run's adapters over its base) and returns a `Checkpoint`: its
layout and model family, what it carries (config, vocabulary, casing), the run record and labels
of the run that wrote it, and the loading of its weights by the family's names, adapters merged.
The one writer (`writer`) writes the original layout, Hugging Face's and a LoRA run's adapters;
`run_files` reads and writes the files a run keeps beside its checkpoints; `config_files`
(`model_files`) gives the config and vocabulary a run starts from, and `run_model_files` those a
run's output_dir supplies for its own checkpoints.

Scripts, tasks and the machinery import this package only; the layouts' modules (`original`,
`hugging_face`, `adapters`) and the families' names (`modeling.families`) are its own.

The names below are imported on first use: `layout` (which layout a path is in) loads without
TensorFlow, for the checks of a script's flags.
"""
from modeling.lazy_names import module_getattr

# Public name: (its module, its name there).
_PUBLIC = {
    "ADAPTERS_FILE": ("modeling.checkpoint.layout", "ADAPTERS_FILE"),
    "Checkpoint": ("modeling.checkpoint.reader", "Checkpoint"),
    "HF_DIRECTORY": ("modeling.hf_directory", "HF_DIRECTORY"),
    "HUGGING_FACE": ("modeling.checkpoint.reader", "HUGGING_FACE"),
    "ModelFiles": ("modeling.checkpoint.config_files", "ModelFiles"),
    "ModelVariables": ("modeling.checkpoint.reader", "ModelVariables"),
    "ORIGINAL": ("modeling.checkpoint.reader", "ORIGINAL"),
    "RUN": ("modeling.checkpoint.reader", "RUN"),
    "check_adapters_task": ("modeling.checkpoint.adapters", "check_task"),
    "check_init_checkpoint": ("modeling.checkpoint.reader", "check_init_checkpoint"),
    "check_partial_directory": ("modeling.checkpoint.layout", "check_partial_directory"),
    "checkpoint_folder": ("modeling.checkpoint.layout", "checkpoint_folder"),
    "hf_home": ("modeling.checkpoint.layout", "hf_home"),
    "identity_file": ("modeling.checkpoint.reader", "identity_file"),
    "initialize_from_checkpoint": ("modeling.checkpoint.reader", "initialize_from_checkpoint"),
    "is_original_electra": ("modeling.checkpoint.layout", "is_original_electra"),
    "is_pooler": ("modeling.checkpoint.original", "is_pooler"),
    "read_casing": ("modeling.checkpoint.layout", "read_casing"),
    "load_checkpoint": ("modeling.checkpoint.reader", "load_checkpoint"),
    "load_config": ("modeling.checkpoint.config_files", "load_config"),
    "model_files": ("modeling.checkpoint.config_files", "model_files"),
    "open_checkpoint": ("modeling.checkpoint.reader", "open_checkpoint"),
    "recorded_objective": ("modeling.checkpoint.config_files", "recorded_objective"),
    "restore_newest_readable": ("modeling.checkpoint.reader", "restore_newest_readable"),
    "variables_by_name": ("modeling.checkpoint.original", "variable_map"),
    "write_adapters": ("modeling.checkpoint.writer", "write_adapters"),
    "write_hugging_face": ("modeling.checkpoint.writer", "write_hugging_face"),
    "write_original": ("modeling.checkpoint.writer", "write_original"),
}
__all__ = sorted(_PUBLIC) + ["run_files", "run_model_files"]

__getattr__ = module_getattr(__name__, _PUBLIC, globals())
