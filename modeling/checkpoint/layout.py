"""Which layout a starting point is in, from its files alone (no TensorFlow, no reading of
weights): a Hugging Face model directory or weights file, or a TensorFlow checkpoint (an original
TF1 one or one of this project's runs: told apart by its variable names, `modeling.checkpoint.reader`).
"""
import os
import re

from modeling.checkpoint.errors import CheckpointError
from modeling.hf_directory import HF_WEIGHT_FILES, is_hf_directory
from modeling.json_file import read_json_object

# A LoRA run's adapters file (`adapters`), in its output_dir: safetensors, but not a model.
ADAPTERS_FILE = "lora_adapters.safetensors"


def is_hf_weights_file(path):
    """True when `path` is a Hugging Face weights file (`*.safetensors`, `pytorch_model.bin`),
    not a LoRA run's adapters file (given with --lora_adapters, over its base)."""
    name = os.path.basename(path or "")
    return bool(path) and os.path.isfile(path) and name != ADAPTERS_FILE and (
        name.endswith(".safetensors") or name == "pytorch_model.bin")


def hf_home(path):
    """The Hugging Face directory `path` names (the directory itself, or the folder of a weights
    file with its `config.json` beside it), or None."""
    if is_hf_directory(path):
        return path
    if is_hf_weights_file(path):
        folder = os.path.dirname(path) or "."
        if os.path.isfile(os.path.join(folder, "config.json")):
            return folder
    return None


def is_hugging_face(path):
    """True when `path` is in the Hugging Face layout: a model directory or a weights file."""
    return is_hf_directory(path) or is_hf_weights_file(path)


def read_casing(directory):
    """The `do_lower_case` of a Hugging Face directory's `tokenizer_config.json`, or None."""
    value = (read_json_object(os.path.join(directory, "tokenizer_config.json")) or {}).get(
        "do_lower_case")
    return value if isinstance(value, bool) else None


def check_partial_directory(path):
    """Refuses a directory that holds part of the Hugging Face layout and no TF checkpoint (a
    `config.json` without weights, weights without `config.json`), saying what is missing
    (`CheckpointError`)."""
    if not path or not os.path.isdir(path) or is_hf_directory(path):
        return
    has_config = os.path.isfile(os.path.join(path, "config.json"))
    weights = [n for n in HF_WEIGHT_FILES if os.path.isfile(os.path.join(path, n))]
    if not has_config and not weights:
        return
    if any(n.endswith(".index") or n == "checkpoint" for n in os.listdir(path)):
        return
    lacks = ("model.safetensors or pytorch_model.bin" if has_config else "config.json")
    raise CheckpointError(f"{path} is neither a TensorFlow checkpoint nor a Hugging Face model "
                          f"directory: it holds {'config.json' if has_config else weights[0]} "
                          f"but no {lacks} (and no *.index)", path)


# The first keys of an original ELECTRA pre-training checkpoint's index (sorted names, each the
# first of its prefix, so stored whole): the released folders, which come without a config.
_ELECTRA_KEYS = (b"discriminator_predictions/dense", b"electra/embeddings/")
_CHECKPOINT_STATE = re.compile(r'^model_checkpoint_path:\s*"([^"]+)"', re.MULTILINE)


def index_file(path):
    """The `.index` of the TensorFlow checkpoint `path` names (a prefix, one of its files, or a
    folder with a `checkpoint` state file or one `*.index`), or None, without TensorFlow."""
    if not path:
        return None
    path = re.sub(r"\.(index|data-\d{5}-of-\d{5})$", "", os.fspath(path))
    if os.path.isdir(path):
        try:
            with open(os.path.join(path, "checkpoint"), encoding="utf-8") as f:
                found = _CHECKPOINT_STATE.search(f.read())
        except OSError:
            found = None
        if found:
            return index_file(os.path.join(path, found.group(1)))
        indexes = [n for n in os.listdir(path) if n.endswith(".index")]
        return os.path.join(path, indexes[0]) if len(indexes) == 1 else None
    return path + ".index" if os.path.isfile(path + ".index") else None


def is_original_electra(path):
    """True when `path` names an original ELECTRA pre-training checkpoint (a released
    `electra_small` folder as it unzips: its config is read from its shapes)."""
    index = index_file(path)
    if index is None:
        return False
    with open(index, "rb") as f:
        head = f.read(1 << 16)
    return all(key in head for key in _ELECTRA_KEYS)


def checkpoint_folder(path):
    """The folder of the TensorFlow checkpoint `path` names (`index_file`), or None."""
    index = index_file(path)
    return None if index is None else os.path.dirname(index) or "."


# A classifier's or tagger's labels in output order, beside a run's checkpoints and in a Hugging
# Face export of its run (`hugging_face`).
LABEL_LIST_FILE = "label_list.txt"
