"""label_list.txt, a classifier's or tagger's labels in output order, one per line, beside a
run's checkpoints (run_classifier --task_name=multilabel, run_ner), through `tf.io.gfile`; a LoRA
run's adapters file records its head's labels itself."""
import dataclasses
import os

import tensorflow as tf

from bert_runner.runs.record import record_directories
from modeling import checkpoint as checkpoints

LABEL_LIST_FILE = checkpoints.LABEL_LIST_FILE


@dataclasses.dataclass(frozen=True)
class RecordedLabels:
    """The labels recorded with a model, in output order: `checkpoint` (the model: a run's
    output_dir or checkpoint, a LoRA adapters file), `labels` (a tuple of str), `file` (where:
    label_list.txt, or the adapters file itself)."""

    checkpoint: str
    labels: tuple
    file: str


def label_list_path(checkpoint, directories=None):
    """The label_list.txt of the run that wrote `checkpoint` (a run's output_dir, or a ckpt-N
    prefix; `directories`: its `record_directories` where known): beside it, or for a --seeds
    `seed_<n>` directory the run's output_dir's, the label set its seeds share."""
    directories = directories or record_directories(checkpoint)
    for directory in directories:
        path = os.path.join(directory, LABEL_LIST_FILE)
        if tf.io.gfile.exists(path):
            return path
    return os.path.join(directories[0], LABEL_LIST_FILE)


def recorded_labels(checkpoint, directories=None):
    """The labels recorded beside `checkpoint` as a list of str (LoRA adapters: in their
    file's record); None when there are none. `directories`: as `label_list_path`'s."""
    found = recorded(checkpoint, directories)
    return None if found is None else list(found.labels)


def recorded(checkpoint, directories=None):
    """The `RecordedLabels` of `checkpoint` (`recorded_labels`), or None."""
    if str(checkpoint).endswith(checkpoints.ADAPTERS_FILE) and tf.io.gfile.exists(checkpoint):
        labels = checkpoints.recorded_adapter_labels(checkpoint)
        return None if labels is None else RecordedLabels(checkpoint, tuple(labels), checkpoint)
    path = label_list_path(checkpoint, directories)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return RecordedLabels(checkpoint, tuple(line for line in f.read().splitlines() if line),
                              path)


def write_label_list(output_dir, labels):
    from modeling.checkpoint.files import write_text_atomic

    write_text_atomic(os.path.join(output_dir, LABEL_LIST_FILE), "\n".join(labels) + "\n")


def governing(output_dir, lora_adapters=None, started=None):
    """The `RecordedLabels` that govern the labels of the model a run starts from: `output_dir`'s
    when it holds a checkpoint (the run resumes, evaluates or predicts with it), else
    `lora_adapters`' (their head is loaded onto the base), else `started` (those recorded with
    the --init_checkpoint, read when it was opened); None when none recorded any."""
    if tf.train.latest_checkpoint(output_dir):
        return recorded(output_dir)
    return (recorded(lora_adapters) if lora_adapters else None) or started


def check_recorded_labels(labels, checkpoint, flag, given):
    """Refuses `labels` (what `flag`=`given` makes) unless they are the labels recorded beside
    `checkpoint`, in their order: another order or set would name the model's outputs wrongly.
    Nothing recorded: accepted."""
    check_labels(labels, recorded(checkpoint), flag, given)


def check_labels(labels, found, flag, given):
    """`check_recorded_labels` against the `RecordedLabels` `found` (None: accepted)."""
    if found is not None and tuple(labels) != found.labels:
        raise ValueError(
            f"{flag}={given}: the model at {found.checkpoint} was trained with the labels "
            f"{','.join(found.labels)} in this order (its "
            f"{'record' if found.file == found.checkpoint else LABEL_LIST_FILE}); "
            f"give them in that order, or leave {flag} out")
