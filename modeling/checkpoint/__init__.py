"""What a checkpoint is, read and written in one place: each layout's names and arrays, and
their loading into a model.

The one reader (`reader.open_checkpoint`) takes whatever a user may give as a starting point (an
original TF1 prefix or folder, one of this project's `ckpt-N` or output_dirs, a Hugging Face
directory or weights file, a LoRA run's adapters over its base) and returns a `Checkpoint`: its
layout and model family, what it carries (config, vocabulary, casing), and the loading of its
weights by the family's names, adapters merged. The one writer (`writer`) writes the original
layout, Hugging Face's and a LoRA run's adapters; `config_files` reads a config file by its
family.

It knows no run: run.json, label lists, seed folders, content hashes and the config and
vocabulary a run starts from are the machinery's (`bert_runner.runs`), which opens a checkpoint
with its run's record.

Scripts, tasks and the machinery import this package only; the layouts' modules (`original`,
`hugging_face`, `adapters`) and the families' names (`modeling.families`) are its own.

Its refusals (`errors`) name the file and know where, so that the machinery, which knows where the
user gave a path, says so beside it.

The names below are imported on first use: `layout` (which layout a path is in) and `errors` load
without TensorFlow, for the checks of a script's command line.
"""
from modeling.lazy_names import module_getattr

# Public name: (its module, its name there).
_PUBLIC = {
    "ADAPTERS_FILE": ("modeling.checkpoint.layout", "ADAPTERS_FILE"),
    "AdaptersError": ("modeling.checkpoint.errors", "AdaptersError"),
    "Checkpoint": ("modeling.checkpoint.reader", "Checkpoint"),
    "CheckpointError": ("modeling.checkpoint.errors", "CheckpointError"),
    "CheckpointNotFoundError": ("modeling.checkpoint.errors", "CheckpointNotFoundError"),
    "HF_DIRECTORY": ("modeling.hf_directory", "HF_DIRECTORY"),
    "HUGGING_FACE": ("modeling.checkpoint.reader", "HUGGING_FACE"),
    "TF_HUB": ("modeling.checkpoint.reader", "TF_HUB"),
    "TF_HUB_DESCRIPTION": ("modeling.checkpoint.tf_hub", "DESCRIPTION_FILE"),
    "LABEL_LIST_FILE": ("modeling.checkpoint.layout", "LABEL_LIST_FILE"),
    "ModelVariables": ("modeling.checkpoint.reader", "ModelVariables"),
    "ORIGINAL": ("modeling.checkpoint.reader", "ORIGINAL"),
    "RUN": ("modeling.checkpoint.reader", "RUN"),
    "architecture_differences": ("modeling.checkpoint.config_files", "architecture_differences"),
    "check_adapters_task": ("modeling.checkpoint.adapters", "check_task"),
    "check_init_checkpoint": ("modeling.checkpoint.reader", "check_init_checkpoint"),
    "check_max_seq_length": ("modeling.checkpoint.config_files", "check_max_seq_length"),
    "check_partial_directory": ("modeling.checkpoint.layout", "check_partial_directory"),
    "checkpoint_folder": ("modeling.checkpoint.layout", "checkpoint_folder"),
    "encoder_of": ("modeling.checkpoint.original", "encoder_of"),
    "hf_home": ("modeling.checkpoint.layout", "hf_home"),
    "initialize_from_checkpoint": ("modeling.checkpoint.reader", "initialize_from_checkpoint"),
    "is_hugging_face": ("modeling.checkpoint.layout", "is_hugging_face"),
    "is_saved_model": ("modeling.checkpoint.tf_hub", "is_saved_model"),
    "saved_model_casing": ("modeling.checkpoint.tf_hub", "read_casing"),
    "saved_model_vocab": ("modeling.checkpoint.tf_hub", "vocab_file"),
    "is_original_electra": ("modeling.checkpoint.layout", "is_original_electra"),
    "is_pooler": ("modeling.checkpoint.original", "is_pooler"),
    "read_casing": ("modeling.checkpoint.layout", "read_casing"),
    "load_checkpoint": ("modeling.checkpoint.reader", "load_checkpoint"),
    "load_config": ("modeling.checkpoint.config_files", "load_config"),
    "open_checkpoint": ("modeling.checkpoint.reader", "open_checkpoint"),
    "recorded_adapter_labels": ("modeling.checkpoint.adapters", "recorded_labels"),
    "variables_by_name": ("modeling.checkpoint.original", "variable_map"),
    "write_adapters": ("modeling.checkpoint.writer", "write_adapters"),
    "write_hugging_face": ("modeling.checkpoint.writer", "write_hugging_face"),
    "write_original": ("modeling.checkpoint.writer", "write_original"),
}
__all__ = sorted(_PUBLIC)

__getattr__ = module_getattr(__name__, _PUBLIC, globals())
