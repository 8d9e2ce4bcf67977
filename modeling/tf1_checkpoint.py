"""Original TF1 checkpoints (`bert_model.ckpt`) in and out, with the original variable names.

The encoder's names are in `modeling.checkpoint_names`; each task model names its own head
(`tf1_head_variables()`), so this module imports no task model. Loading needs no conversion
step: `load_tf1_checkpoint(model, path)` reads the released files directly. `save_tf1_checkpoint` writes a TF1 V2 checkpoint (`.index` +
`.data-00000-of-00001`) that the original code, `tf.train.load_checkpoint` and other converters read.
"""
import collections
import dataclasses
import glob
import os

import numpy as np
import tensorflow as tf
from absl import logging

from modeling.bert_model import BertModel
from modeling.checkpoint_names import encoder_variable_map

# Checkpoint entries written by the original optimizer; never model weights.
_OPTIMIZER_SUFFIXES = ("/adam_m", "/adam_v")
_OPTIMIZER_NAMES = ("global_step",)


def variable_map(model):
    """Ordered `{original name: variable}` for a `BertModel` or a task model.

    A task model (`modeling.task_models.BertTaskModel`) names its head's variables itself, with
    `tf1_head_variables()`; this module knows only the encoder.
    """
    if isinstance(model, BertModel):
        return collections.OrderedDict(encoder_variable_map(model))
    head_variables = getattr(model, "tf1_head_variables", None)
    if head_variables is None:
        raise TypeError(
            f"{type(model).__name__} has no tf1_head_variables(): a task model must declare the "
            "original-layout names of its head (see modeling.task_models.BertTaskModel)")
    return collections.OrderedDict(encoder_variable_map(model.bert) + list(head_variables()))


def resolve_checkpoint_prefix(path):
    """Accepts a checkpoint prefix, its `.index`/`.data-*` file, or a directory holding one."""
    path = os.fspath(path)
    for suffix in (".index", ".data-00000-of-00001"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
    if os.path.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        found = sorted(glob.glob(os.path.join(path, "*.index")))
        if len(found) != 1:
            raise FileNotFoundError(
                f"{path}: expected one checkpoint (*.index) in this directory, found {len(found)}"
            )
        return found[0][: -len(".index")]
    if not os.path.exists(path + ".index"):
        raise FileNotFoundError(
            f"Checkpoint {path} not found: expected {path}.index and {path}.data-00000-of-00001"
        )
    return path


def read_checkpoint(path):
    """`{name: np.ndarray}` lazily: returns (prefix, reader, {name: shape})."""
    prefix = resolve_checkpoint_prefix(path)
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as e:
        raise ValueError(f"Checkpoint {prefix} is unreadable (corrupt or partial?): {e}") from e
    return prefix, reader, reader.get_variable_to_shape_map()


def is_tf1_checkpoint(path):
    """True for original-layout checkpoints, False for this project's object-based ones."""
    _, _, shapes = read_checkpoint(path)
    return not any(name.endswith("/.ATTRIBUTES/VARIABLE_VALUE") for name in shapes)


@dataclasses.dataclass
class LoadReport:
    """What `load_tf1_checkpoint` did; names are original variable names."""

    checkpoint: str
    loaded: list
    missing: list  # in the model, not in the checkpoint (left at their initial values)
    unexpected: list  # in the checkpoint, not in the model (optimizer slots excluded)
    mismatched: list  # (name, model shape, checkpoint shape)


def _is_optimizer_entry(name):
    return name in _OPTIMIZER_NAMES or name.endswith(_OPTIMIZER_SUFFIXES)


def load_tf1_checkpoint(model, path, strict=True):
    """Loads an original-layout checkpoint into `model` (a `BertModel` or a task model).

    strict=True: every model variable must be present with its shape and every checkpoint
    weight must belong to the model; otherwise nothing is assigned and ValueError names every
    missing, unexpected and mis-shaped variable with both shapes.
    strict=False (fine-tuning from a pre-training checkpoint): assigns what matches by name
    and shape, and logs each variable as the original does (`*INIT_FROM_CKPT*`).
    """
    prefix, reader, shapes = read_checkpoint(path)
    shapes = {n: s for n, s in shapes.items() if not _is_optimizer_entry(n)}
    return assign_checked(variable_map(model), shapes, reader.get_tensor, prefix, strict)


def assign_checked(names, source_shapes, get_tensor, source, strict):
    """Assigns `get_tensor(name)` to `names[name]` after checking names and shapes.

    Args:
        names: `{name: variable}` of the model. source_shapes: `{name: shape}` available.
        get_tensor: name -> np.ndarray. source: file name for messages. strict: see above.
    Returns a `LoadReport`; raises ValueError (assigning nothing) on any mismatch.
    """
    report = LoadReport(source, [], [], [], [])
    for name, var in names.items():
        if name not in source_shapes:
            report.missing.append(name)
        elif tuple(source_shapes[name]) != tuple(var.shape):
            report.mismatched.append((name, tuple(var.shape), tuple(source_shapes[name])))
        else:
            report.loaded.append(name)
    report.unexpected = sorted(n for n in source_shapes if n not in names)
    if report.mismatched or (strict and (report.missing or report.unexpected)):
        raise ValueError(_describe_problems(report, names, strict))
    for name in report.loaded:
        names[name].assign(np.asarray(get_tensor(name)).astype(np.dtype(names[name].dtype)))
    if not strict:
        _log_init_from_checkpoint(report, names)
    return report


def _describe_problems(report, names, strict):
    lines = [f"Checkpoint {report.checkpoint} does not match the model:"]
    for name, model_shape, ckpt_shape in report.mismatched:
        lines.append(f"  shape mismatch {name}: model {list(model_shape)}, checkpoint {list(ckpt_shape)}")
        if name.endswith("word_embeddings"):
            lines.append(
                "    (vocab_size in bert_config.json must equal the checkpoint's vocabulary size)"
            )
    if strict:
        lines += [f"  missing from checkpoint: {n} {list(names[n].shape)}" for n in report.missing]
        lines += [f"  not in the model: {n}" for n in report.unexpected]
    return "\n".join(lines)


def _log_init_from_checkpoint(report, names):
    loaded = set(report.loaded)
    logging.info("**** Trainable Variables ****")
    for name, var in names.items():
        init = ", *INIT_FROM_CKPT*" if name in loaded else ""
        logging.info("  name = %s, shape = %s%s", name, list(var.shape), init)
    logging.info(
        "Initialised %d of %d variables from %s; newly initialised: %s",
        len(loaded),
        len(names),
        report.checkpoint,
        ", ".join(report.missing) or "none",
    )


def save_tf1_checkpoint(model, prefix, extra_tensors=None):
    """Writes `model` as an original-layout TF1 checkpoint at `prefix`.

    `extra_tensors` ({name: array}) adds entries such as `global_step` or `<var>/adam_m`.
    Files are written under a temporary prefix and renamed (index last), so a reader never
    sees a half-written checkpoint. Returns `prefix`.
    """
    prefix = os.fspath(prefix)
    tensors = collections.OrderedDict(
        (name, tf.convert_to_tensor(var)) for name, var in variable_map(model).items()
    )
    for name, value in (extra_tensors or {}).items():
        tensors[name] = tf.convert_to_tensor(value)
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    tmp = f"{prefix}.tmp-{os.getpid()}"
    tf.raw_ops.SaveV2(
        prefix=tmp,
        tensor_names=list(tensors),
        shape_and_slices=[""] * len(tensors),
        tensors=list(tensors.values()),
    )
    if os.path.exists(prefix + ".index"):
        os.remove(prefix + ".index")
    os.replace(tmp + ".data-00000-of-00001", prefix + ".data-00000-of-00001")
    os.replace(tmp + ".index", prefix + ".index")
    return prefix
