"""Original TF1 checkpoints (`bert_model.ckpt`) in and out, with the original variable names.

A model's family names its encoder's variables (`modeling.families`); each task model names its
own head (`tf1_head_variables()`), so this module imports no task model. Loading needs no
conversion step: the released files are read directly. `save_tf1_checkpoint` writes a TF1 V2
checkpoint (`.index` + `.data-00000-of-00001`) that the original code, `tf.train.load_checkpoint`
and other converters read. Scripts reach this module through `modeling.checkpoint`.
"""
import collections
import collections.abc
import dataclasses
import glob
import os
import re

import numpy as np
import tensorflow as tf
from absl import logging

from modeling import families
from modeling.checkpoint.errors import CheckpointError, CheckpointNotFoundError

# Checkpoint entries written by the original optimizer; never model weights.
_OPTIMIZER_SUFFIXES = ("/adam_m", "/adam_v")
_OPTIMIZER_NAMES = ("global_step",)


def encoder_names(model):
    """`[(original name, variable)]` of the encoder of `model`, by its family."""
    return families.of_model(model).encoder_names(encoder_of(model))


def variable_map(model):
    """Ordered `{original name: variable}` for an encoder or a task model.

    A task model (`modeling.bert.task_models.BertTaskModel`) names its head's variables itself, with
    `tf1_head_variables()`; the family names the encoder's.
    """
    if encoder_of(model) is model:
        return collections.OrderedDict(encoder_names(model))
    head_variables = getattr(model, "tf1_head_variables", None)
    if head_variables is None:
        raise TypeError(
            f"{type(model).__name__} has no tf1_head_variables(): a task model must declare the "
            "original-layout names of its head (see modeling.bert.task_models.BertTaskModel)")
    bilstm = getattr(model, "bilstm", None)
    on_top = bilstm.tf1_variables() if bilstm is not None else []
    return collections.OrderedDict(encoder_names(model) + on_top + list(head_variables()))


_SHARD_SUFFIX = re.compile(r"\.(index|data-\d{5}-of-\d{5})$")
# A directory listing is shown in a message up to this many entries.
_LISTED_ENTRIES = 12
# An encoder layer's variables in both layouts: `<scope>/encoder/layer_<i>/...` (original names)
# and `<scope>/layer_<i>/...` (our variable paths).
_LAYER = re.compile(r"^\w+/(?:encoder/)?layer_(\d+)/")


def _first_layer(match):
    """`_LAYER.sub` replacement: the same name in layer 0."""
    return match.group(0)[: match.start(1) - match.start(0)] + "0/"


def _listing(paths, limit=5):
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def resolve_checkpoint_prefix(path):
    """Accepts a checkpoint prefix, its `.index`/`.data-*` file, or a directory holding one.

    Raises `CheckpointNotFoundError` (a FileNotFoundError) naming `path` and saying what is there
    instead: for a directory, its checkpoints or (when it holds none) its files and
    the prefix to pass; for a prefix, whether its `.data` file is there without its `.index`, and
    the checkpoints its directory does hold.
    """
    path = _SHARD_SUFFIX.sub("", os.fspath(path))
    if os.path.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        found = sorted(glob.glob(os.path.join(path, "*.index")))
        if len(found) == 1:
            return found[0][: -len(".index")]
        raise CheckpointNotFoundError(_describe_directory(path, found), path)
    if not os.path.exists(path + ".index"):
        raise CheckpointNotFoundError(_describe_missing_index(path), path)
    return path


def _describe_directory(path, found):
    if found:
        prefixes = [f[: -len(".index")] for f in found]
        return (f"{path} holds {len(found)} checkpoints but no checkpoint "
                f"file naming the newest: pass one prefix, e.g. {prefixes[-1]} (found "
                f"{_listing([os.path.basename(p) for p in prefixes])})")
    entries = sorted(e + ("/" if os.path.isdir(os.path.join(path, e)) else "")
                     for e in os.listdir(path))
    message = (f"{path} is a directory with no checkpoint in it "
               "(no *.index file)")
    if not entries:
        message += "; it is empty"
    elif len(entries) <= _LISTED_ENTRIES:
        message += "; it holds " + ", ".join(entries)
    else:
        message += f"; it holds {len(entries)} files and directories"
    nested = sorted(glob.glob(os.path.join(path, "*", "*.index")))
    if nested:
        return message + (". Checkpoints one level down: "
                          + _listing([n[: -len(".index")] for n in nested]))
    return message + (f". Pass a checkpoint's prefix, e.g. {os.path.join(path, 'bert_model.ckpt')} "
                      "for bert_model.ckpt.index with bert_model.ckpt.data-00000-of-00001")


def _describe_missing_index(path):
    parent = os.path.dirname(path) or "."
    message = f"Checkpoint {path} not found: "
    if not os.path.isdir(parent):
        return message + f"the directory {parent} does not exist"
    message += f"{path}.index does not exist"
    data = sorted(glob.glob(glob.escape(path) + ".data-*"))
    if data:
        return message + (f"; {os.path.basename(data[0])} is there without it (a copy cut short? "
                          "copy the .index with the .data file)")
    if os.path.isfile(path):
        return message + (f"; {path} is a file, not a checkpoint: pass the prefix of "
                          "PREFIX.index and PREFIX.data-00000-of-00001")
    others = sorted(f[: -len(".index")] for f in glob.glob(os.path.join(glob.escape(parent),
                                                                        "*.index")))
    if others:
        return message + f"; {parent} holds the checkpoint(s) {_listing(others)}"
    return message + f"; {parent} holds no checkpoint (*.index)"


def read_checkpoint(path):
    """`{name: np.ndarray}` lazily: returns (prefix, reader, {name: shape}). An index that does
    not read raises `CheckpointError` naming the prefix."""
    prefix = resolve_checkpoint_prefix(path)
    try:
        reader = tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as e:
        raise CheckpointError(f"Checkpoint {prefix} is unreadable: its index {prefix}.index is "
                              f"corrupt or truncated ({_first_line(e)}); copy the checkpoint "
                              "again", prefix) from e
    return prefix, reader, reader.get_variable_to_shape_map()


def read_tensor(reader, prefix, key):
    """`reader.get_tensor(key)`; a missing, truncated or corrupt `.data` file raises
    `CheckpointError` naming the checkpoint, the variable and the file (TensorFlow says IndexError, or an OpError
    with a page of C++ context)."""
    try:
        return reader.get_tensor(key)
    except (IndexError, OSError, tf.errors.OpError) as e:
        data = sorted(glob.glob(glob.escape(prefix) + ".data-*"))
        if not data:
            raise CheckpointError(
                f"Checkpoint {prefix} is unreadable: its data file "
                f"{prefix}.data-00000-of-00001 is missing (deleted, or not copied with "
                f"{os.path.basename(prefix)}.index)", prefix) from e
        raise CheckpointError(
            f"Checkpoint {prefix} is unreadable at {key}: its data file "
            f"{_listing(data, 2)} is truncated or corrupt ({type(e).__name__}: {_first_line(e)}); "
            "copy the checkpoint again", prefix) from e


def _first_line(error):
    text = getattr(error, "message", None) or str(error)
    return (text.strip().splitlines() or [""])[0]


def is_tf1_layout(shapes):
    """True when the `{name: shape}` of a checkpoint has original names, not our object paths."""
    return not any(name.endswith("/.ATTRIBUTES/VARIABLE_VALUE") for name in shapes)


def encoder_of(model):
    """The encoder of `model` (an encoder, or a task model holding one as `bert`)."""
    encoder_class = families.of_model(model).models["encoder"]
    return model if isinstance(model, encoder_class) else model.encoder


@dataclasses.dataclass
class LoadReport:
    """What a load did; names are original variable names, or our variable paths."""

    checkpoint: str
    loaded: list
    missing: list  # in the model, not in the checkpoint (left at their initial values)
    unexpected: list  # in the checkpoint, not in the model (optimizer slots excluded)
    mismatched: list  # (name, model shape, checkpoint shape)


@dataclasses.dataclass
class Encoder:
    """What `assign_checked` requires of the encoder, also when not strict.

    names: the model's encoder variable names (as the checkpoint names them): each must be in
      the checkpoint, and the checkpoint may hold no encoder layer beyond the model's (both mean
      another model: a config with another num_hidden_layers, a checkpoint of another model).
      A fine-tuning head the checkpoint lacks is only newly initialised.
    num_hidden_layers: the config's, for the message.
    config_file: the config file the model was built from, for the message (default: "its
      bert_config.json", `ModelFamily.config_named`).
    """

    names: collections.abc.Collection
    num_hidden_layers: int = None
    config_file: str = None
    family: object = None  # its `modeling.family.ModelFamily`, for the message

    @classmethod
    def of(cls, model, names, config_file=None):
        return cls(set(names), encoder_of(model).config.num_hidden_layers, config_file,
                   families.of_model(model))


def is_optimizer_entry(name):
    return name in _OPTIMIZER_NAMES or name.endswith(_OPTIMIZER_SUFFIXES)


def assign_checked(names, source_shapes, get_tensor, source, strict, encoder=None):
    """Assigns `get_tensor(name)` to `names[name]` after checking names and shapes.

    Args:
        names: `{name: variable}` of the model. source_shapes: `{name: shape}` available.
        get_tensor: name -> np.ndarray. source: file name for messages. strict: see above.
        encoder: an `Encoder`, or None (no requirement beyond `strict`).
    Returns a `LoadReport`; raises `CheckpointError` naming `source` (assigning nothing) on any
    mismatch.
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
        raise CheckpointError(_describe_problems(report, names, strict, encoder), source)
    if encoder is not None:
        check_encoder(report, encoder, source_shapes)
    for name in report.loaded:
        names[name].assign(np.asarray(get_tensor(name)).astype(np.dtype(names[name].dtype)))
    if not strict:
        _log_init_from_checkpoint(report, names)
    return report


def is_pooler(name):
    """Whether `name` is of the encoder's pooler (`<scope>/pooler/dense/*`)."""
    return "/pooler/" in name


def check_encoder(report, encoder, source_shapes):
    """Refuses a checkpoint that lacks part of the model's encoder, or holds encoder variables
    the model lacks (see `Encoder`). The pooler is not required: Hugging Face's span and tag
    models (`BertForQuestionAnswering`, `BertForTokenClassification`) are saved without it, as
    their tasks never read it; a model that does is given a new one, as a new head."""
    required = {n for n in encoder.names if not is_pooler(n)}
    missing = [n for n in report.missing if n in required]
    # Layers beyond the model's: a variable of the model's layer 0 under another layer's name
    # (optimizer slots and anything else the checkpoint holds are left alone).
    extra = [n for n in report.unexpected
             if _LAYER.match(n) and _LAYER.sub(_first_layer, n, count=1) in encoder.names]
    if not missing and not extra:
        return
    family = encoder.family or families.of_original_names(())
    config = family.config_named(encoder.config_file)
    message = f"Checkpoint {report.checkpoint} does not hold the encoder of the model of {config}: "
    if missing:
        message += (f"{len(missing)} of its {len(required)} encoder variables are missing "
                    f"({_listing(missing, 3)})")
    else:
        message += (f"it holds {len(extra)} encoder variables the model lacks "
                    f"({_listing(extra, 3)})")
    layers = {int(m.group(1)) for m in map(_LAYER.match, source_shapes) if m}
    if layers and encoder.num_hidden_layers is not None:
        message += (f"; the config has num_hidden_layers={encoder.num_hidden_layers}, the "
                    f"checkpoint {max(layers) + 1} encoder layers")
    elif encoder.family and not any(n.startswith(f"{encoder.family.original_scope}/")
                                    for n in source_shapes):
        name = encoder.family.name.upper()
        message += (f"; it holds no {name} encoder (is it a {name} checkpoint? it holds "
                    f"{_listing(sorted(source_shapes), 3) or 'nothing'})")
    raise CheckpointError(message + f". Use the {family.config_file} that came with the "
                          "checkpoint: nothing was loaded", report.checkpoint)


def _describe_problems(report, names, strict, encoder=None):
    config_file = encoder.family.config_file if encoder and encoder.family else "bert_config.json"
    lines = [f"Checkpoint {report.checkpoint} does not match the model:"]
    for name, model_shape, ckpt_shape in report.mismatched:
        lines.append(f"  shape mismatch {name}: model {list(model_shape)}, checkpoint {list(ckpt_shape)}")
        if name.endswith("word_embeddings"):
            lines.append(
                f"    (vocab_size in {config_file} must equal the checkpoint's vocabulary size)"
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
