"""This project's checkpoints, and `--init_checkpoint` from them or from original TF1 ones.

Our checkpoints (`ckpt-<step>` in an output_dir) store the model as `{variable path: variable}`
(e.g. `bert/layer_0/self/query/kernel`), next to the optimizer and the input position. Keras 3
models do not expose their sub-layers to TF's object-based checkpoints, and the paths give
names that are the same in every task model, so a pre-training run's encoder loads into a
classifier or span labeler by name.
"""
import tensorflow as tf
from absl import logging

from modeling import tf1_checkpoint


class ModelVariables(tf.Module):
    """Tracks every variable of a Keras model under its path."""

    def __init__(self, model):
        super().__init__(name="model_variables")
        self.by_path = {v.path: v.value for v in model.variables}


def _checkpoint_key(path):
    # TF's object-graph escaping of names: "." → "..", "/" → ".S".
    return "model/by_path/" + path.replace(".", "..").replace("/", ".S") + "/.ATTRIBUTES/VARIABLE_VALUE"


def load_project_checkpoint(model, path, strict=False):
    """Loads model weights from one of our checkpoints, by variable path (see module docstring)."""
    prefix, reader, shapes = tf1_checkpoint.read_checkpoint(path)
    names = {v.path: v for v in model.variables if "seed_generator" not in v.path}
    keys = {p: _checkpoint_key(p) for p in names}
    available = {p: shapes[k] for p, k in keys.items() if k in shapes}
    return tf1_checkpoint.assign_checked(
        names, available, lambda p: reader.get_tensor(keys[p]), prefix, strict)


def initialize_from_checkpoint(model, init_checkpoint):
    """Loads what matches from `init_checkpoint` into `model`; heads it lacks stay newly initialised.

    Original-layout checkpoints (`bert_model.ckpt`) are matched by original variable name, ours by
    variable path; both log every variable as the original does (`*INIT_FROM_CKPT*`).
    """
    if tf1_checkpoint.is_tf1_checkpoint(init_checkpoint):
        return tf1_checkpoint.load_tf1_checkpoint(model, init_checkpoint, strict=False)
    return load_project_checkpoint(model, init_checkpoint, strict=False)


def check_init_checkpoint(model, init_checkpoint):
    """Checks, before any work, that `init_checkpoint` is readable and fits `model`.

    Reads every tensor the model would take (so a truncated or corrupt `.data` file is found now,
    named, not after the features are written) and compares shapes; assigns nothing.
    Raises ValueError naming the file (and each mismatched variable), FileNotFoundError if absent.
    """
    prefix, reader, shapes = tf1_checkpoint.read_checkpoint(init_checkpoint)
    if tf1_checkpoint.is_tf1_checkpoint(init_checkpoint):
        names = tf1_checkpoint.variable_map(model)
        keys = {name: name for name in names if name in shapes}
    else:
        names = {v.path: v for v in model.variables if "seed_generator" not in v.path}
        keys = {p: _checkpoint_key(p) for p in names if _checkpoint_key(p) in shapes}
    mismatched = [f"  shape mismatch {name}: model {list(names[name].shape)}, checkpoint "
                  f"{list(shapes[key])}" for name, key in keys.items()
                  if tuple(shapes[key]) != tuple(names[name].shape)]
    if mismatched:
        raise ValueError("\n".join(
            [f"Checkpoint {prefix} (--init_checkpoint) does not fit the model of "
             "--bert_config_file:"] + mismatched))
    if not keys:
        raise ValueError(f"Checkpoint {prefix} (--init_checkpoint) holds none of the model's "
                         "variables: is it a BERT checkpoint?")
    for name, key in keys.items():
        try:
            reader.get_tensor(key)
        except Exception as e:  # truncated files raise IndexError, OpError or DataLossError
            raise ValueError(
                f"Checkpoint {prefix} (--init_checkpoint) is unreadable at {key} (truncated or "
                f"corrupt data file {prefix}.data-*?): {type(e).__name__}: {e}") from e


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
