"""This project's checkpoints, and `--init_checkpoint` from them, from original TF1 ones or from
a Hugging Face model directory (read as the TF1 checkpoint its names map to:
`modeling.hf_checkpoint.read_hf_as_tf1`).

Our checkpoints (`ckpt-<step>` in an output_dir) store the model as `{variable path: variable}`
(e.g. `bert/layer_0/self/query/kernel`), next to the optimizer and the input position. Keras 3
models do not expose their sub-layers to TF's object-based checkpoints, and the paths give
names that are the same in every task model, so a pre-training run's encoder loads into a
classifier or span labeler by name.

Every script loads `--init_checkpoint` here, in either layout, by one rule: the whole encoder of
the model the config describes must be in the checkpoint (else nothing is loaded: a config with
another num_hidden_layers, a checkpoint of another model), a head it lacks is newly initialised,
what it holds beyond the model (optimizer slots, another task's head) is left. Missing,
truncated and corrupt files are refused naming the file (`modeling.tf1_checkpoint`).
"""
import dataclasses
import os
import re

import tensorflow as tf
from absl import logging

from modeling import hf_checkpoint, lora, tf1_checkpoint
from bert_runner import adapters, startup


class ModelVariables(tf.Module):
    """Tracks every variable of a Keras model under its path."""

    def __init__(self, model):
        super().__init__(name="model_variables")
        self.by_path = {v.path: v.value for v in model.variables}


_KEY_PREFIX, _KEY_SUFFIX = "model/by_path/", "/.ATTRIBUTES/VARIABLE_VALUE"


def variable_path(key):
    """The variable path of a checkpoint key of `ModelVariables`, or None for entries that are not
    model weights (the optimizer's, the input position's).

    Keys are `model/by_path/<path>/.ATTRIBUTES/VARIABLE_VALUE` with TF's object-graph escaping
    of the path: "." → "..", "/" → ".S".
    """
    if not (key.startswith(_KEY_PREFIX) and key.endswith(_KEY_SUFFIX)):
        return None
    escaped = key[len(_KEY_PREFIX): -len(_KEY_SUFFIX)]
    return re.sub(r"\.(S|\.)", lambda m: "/" if m.group(1) == "S" else ".", escaped)


def _model_paths(model):
    # Dropout's random-number state is not a weight (and differs between task models).
    return {v.path: v for v in model.variables if "seed_generator" not in v.path}


@dataclasses.dataclass
class _Source:
    """A checkpoint seen in the model's naming: original names (a TF1 checkpoint) or variable
    paths (ours)."""

    prefix: str
    names: dict  # {name: model variable}
    shapes: dict  # {name: shape} of the checkpoint's model weights (no optimizer slots)
    get_tensor: object  # name -> np.ndarray
    encoder_names: list


def _source(model, path, flag, lora_adapters=None):
    """The checkpoint `path` as `model` loads it, with the adapters file `lora_adapters` (a LoRA
    run's, `bert_runner.adapters`) on top when given."""
    source = _base_source(model, path, flag)
    if lora_adapters:
        source = adapters.overlay(source, model, lora_adapters)
    return source


def _base_source(model, path, flag):
    encoder = tf1_checkpoint.encoder_of(model)
    startup.check_partial_directory(path, flag)
    if startup.is_hf_directory(path):
        tensors = hf_checkpoint.read_hf_as_tf1(path)
        return _Source(path, tf1_checkpoint.variable_map(model),
                       {n: v.shape for n, v in tensors.items()}, tensors.__getitem__,
                       [n for n, _ in tf1_checkpoint.encoder_variable_map(encoder)])
    prefix, reader, shapes = tf1_checkpoint.read_checkpoint(path, flag)
    if tf1_checkpoint.is_tf1_layout(shapes):
        keys = {n: n for n in shapes if not tf1_checkpoint.is_optimizer_entry(n)}
        names = tf1_checkpoint.variable_map(model)
        encoder_names = [n for n, _ in tf1_checkpoint.encoder_variable_map(encoder)]
    else:
        keys = {p: k for p, k in ((variable_path(k), k) for k in shapes)
                if p is not None and "seed_generator" not in p}
        names = _model_paths(model)
        # A LoRA model's adapters are new in any checkpoint but its own run's.
        encoder_names = [p for p in _model_paths(encoder) if not lora.is_adapter_path(p)]

    def read(name):
        return tf1_checkpoint.read_tensor(reader, prefix, keys[name], flag)

    # A LoRA run's checkpoint into a model without adapters (an export, another task): its
    # kernels load with the adapters merged in.
    merges = lora.checkpoint_merges(keys, names)
    adapter_paths = {path for adapter in merges.values() for path in adapter}

    def get_tensor(name):
        if name not in merges:
            return read(name)
        return lora.merged_value(read(name), *(read(path) for path in merges[name]))

    return _Source(prefix, names,
                   {n: shapes[k] for n, k in keys.items() if n not in adapter_paths},
                   get_tensor, encoder_names)


def identity_file(path, flag="--init_checkpoint"):
    """The file whose size and time identify the checkpoint `path` (a cache made from another
    one is not reused): a TF checkpoint's `.index`, a Hugging Face directory's weights file."""
    startup.check_partial_directory(path, flag)
    if startup.is_hf_directory(path):
        return next(os.path.join(path, name) for name in startup.HF_WEIGHT_FILES
                    if os.path.isfile(os.path.join(path, name)))
    return tf1_checkpoint.resolve_checkpoint_prefix(path, flag) + ".index"


def load_checkpoint(model, path, strict, flag=None, config_file=None, lora_adapters=None):
    """Loads `path` into `model`: an original-layout checkpoint by original variable name, one of
    ours by variable path (see the module docstring).

    strict=True: every variable on both sides, with its shape (e.g. a fine-tuned classifier to
    export); strict=False: see `initialize_from_checkpoint`. `flag` (the flag that named the
    checkpoint) and `config_file` (the model's bert_config.json) are named in the messages.
    `lora_adapters`: a LoRA run's adapters file to load on top (`bert_runner.adapters`).
    Returns the `tf1_checkpoint.LoadReport`.
    """
    source = _source(model, path, flag, lora_adapters)
    encoder = tf1_checkpoint.Encoder.of(model, source.encoder_names, config_file)
    return tf1_checkpoint.assign_checked(
        source.names, source.shapes, source.get_tensor,
        tf1_checkpoint.describe_source(source.prefix, flag), strict, encoder=encoder)


def initialize_from_checkpoint(model, init_checkpoint, flag="--init_checkpoint",
                               config_file=None, lora_adapters=None):
    """Loads `init_checkpoint` into `model`: the whole encoder, and the heads it has.

    Original-layout checkpoints (`bert_model.ckpt`) are matched by original variable name, ours by
    variable path; both log every variable as the original does (`*INIT_FROM_CKPT*`). A head the
    checkpoint lacks stays newly initialised (logged: "newly initialised: output_weights,
    output_bias"); checkpoint variables the model lacks (optimizer slots, another task's head)
    are left. Raises ValueError (see `check_init_checkpoint`) for a checkpoint that lacks an
    encoder variable or holds encoder layers the model lacks: a config that does not match the
    checkpoint (`config_file`, named in the message; default: --bert_config_file), or a
    checkpoint of another model. `flag` is the flag that named the checkpoint.
    """
    return load_checkpoint(model, init_checkpoint, False, flag, config_file, lora_adapters)


def check_init_checkpoint(model, init_checkpoint, flag="--init_checkpoint", config_file=None,
                          lora_adapters=None):
    """Checks, before any work, that `init_checkpoint` is readable and fits `model`.

    Reads every tensor the model would take (so a truncated or corrupt `.data` file is found now,
    named, not after the features are written) and compares names and shapes as
    `initialize_from_checkpoint` does; assigns nothing. Raises ValueError naming the checkpoint
    (the config file, each mismatched variable, the missing encoder variables), and
    FileNotFoundError saying what is there when it is absent.
    """
    source = _source(model, init_checkpoint, flag, lora_adapters)
    named = tf1_checkpoint.describe_source(source.prefix, flag)
    mismatched = [f"  shape mismatch {name}: model {list(var.shape)}, checkpoint "
                  f"{list(source.shapes[name])}" for name, var in source.names.items()
                  if name in source.shapes and tuple(source.shapes[name]) != tuple(var.shape)]
    if mismatched:
        task, record = startup.recorded_task(init_checkpoint)
        written_by = ([f"  it was written by a run of task {task!r} ({record}): another task's "
                       "head under the same names"] if task else [])
        raise ValueError("\n".join(
            [f"Checkpoint {named} does not fit the model of {config_file or '--bert_config_file'}:"]
            + mismatched + written_by))
    report = tf1_checkpoint.LoadReport(
        named, [n for n in source.names if n in source.shapes],
        [n for n in source.names if n not in source.shapes],
        sorted(n for n in source.shapes if n not in source.names), [])
    tf1_checkpoint.check_encoder(
        report, tf1_checkpoint.Encoder.of(model, source.encoder_names, config_file),
        source.shapes)
    for name in report.loaded:
        source.get_tensor(name)


def restore_newest_readable(manager, restore):
    """Restores the newest checkpoint of `manager` that reads, falling back to older ones.

    A checkpoint can be unreadable although the `checkpoint` file lists it: its `.data` file
    truncated (a full disk, a copy cut short) or corrupt, or its files deleted. Each such one is
    skipped with a warning, and the run resumes from the newest readable one, so only the steps
    after it are trained again. Restoring the older checkpoint assigns every variable again,
    so nothing of the failed attempt remains.

    Args:
      manager: a `tf.train.CheckpointManager`.
      restore: `path -> None`, restores one checkpoint (raises if it cannot be read).
    Returns:
      the path restored, or None when `manager` has no checkpoint.
    Raises:
      ValueError naming every checkpoint when none of them reads.
    """
    unreadable = []
    for path in reversed(manager.checkpoints):
        try:
            restore(path)
        except (IndexError, tf.errors.OpError) as e:  # truncation raises IndexError
            message = (str(e).strip().splitlines() or [""])[0]
            logging.warning("Checkpoint %s is unreadable (truncated or corrupt data file?): %s: %s",
                            path, type(e).__name__, message)
            unreadable.append(path)
            continue
        if unreadable:
            logging.warning("Resuming from %s, the newest readable checkpoint, instead of %s",
                            path, ", ".join(unreadable))
        return path
    if unreadable:
        raise ValueError(
            "No checkpoint in %s can be read (%s): move them away to start again from "
            "--init_checkpoint or from scratch" % (manager.directory, ", ".join(unreadable)))
    return None
