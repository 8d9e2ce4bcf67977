"""label_list.txt, a classifier's or tagger's labels in output order, one per line, beside a
run's checkpoints (run_classifier --task_name=multilabel, run_ner), through `tf.io.gfile`; a LoRA
run's adapters file records its head's labels itself."""
import os

import tensorflow as tf

from bert_runner.runs.record import record_directories
from modeling import checkpoint as checkpoints

LABEL_LIST_FILE = checkpoints.LABEL_LIST_FILE


def label_list_path(checkpoint):
    """The label_list.txt of the run that wrote `checkpoint` (a run's output_dir, or a ckpt-N
    prefix): beside it, or for a --seeds `seed_<n>` directory the run's output_dir's, the label
    set its seeds share."""
    directories = record_directories(checkpoint)
    for directory in directories:
        path = os.path.join(directory, LABEL_LIST_FILE)
        if tf.io.gfile.exists(path):
            return path
    return os.path.join(directories[0], LABEL_LIST_FILE)


def labels_record_path(checkpoint):
    """Where `recorded_labels(checkpoint)` reads them: a LoRA adapters file itself, else the
    label_list.txt beside the checkpoint."""
    if str(checkpoint).endswith(checkpoints.ADAPTERS_FILE):
        return checkpoint
    return label_list_path(checkpoint)


def recorded_labels(checkpoint):
    """The labels recorded beside `checkpoint` as a list of str (LoRA adapters: in their
    file's record); None when there are none."""
    if str(checkpoint).endswith(checkpoints.ADAPTERS_FILE) and tf.io.gfile.exists(checkpoint):
        return checkpoints.recorded_adapter_labels(checkpoint)
    path = label_list_path(checkpoint)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return [line for line in f.read().splitlines() if line]


def write_label_list(output_dir, labels):
    from modeling.checkpoint.files import write_text_atomic

    write_text_atomic(os.path.join(output_dir, LABEL_LIST_FILE), "\n".join(labels) + "\n")


def labels_governing(output_dir, init_checkpoint, lora_adapters=None):
    """Where the labels of the model a run starts from are recorded: `output_dir` when it holds
    a checkpoint (the run resumes, evaluates or predicts with it), else `lora_adapters` (their
    head is loaded onto the base) or `init_checkpoint` (its head is loaded with the encoder),
    the first whose run recorded labels; None when none did."""
    if tf.train.latest_checkpoint(output_dir):
        return output_dir
    for start in (lora_adapters, init_checkpoint):
        if start and recorded_labels(start) is not None:
            return start
    return None


def check_recorded_labels(labels, checkpoint, flag, given):
    """Refuses `labels` (what `flag`=`given` makes) unless they are the labels recorded beside
    `checkpoint`, in their order: another order or set would name the model's outputs wrongly.
    Nothing recorded: accepted."""
    recorded = recorded_labels(checkpoint)
    if recorded is not None and list(labels) != recorded:
        raise ValueError(
            f"{flag}={given}: the model at {checkpoint} was trained with the labels "
            f"{','.join(recorded)} in this order (its "
            f"{'record' if labels_record_path(checkpoint) == checkpoint else LABEL_LIST_FILE}); "
            f"give them in that order, or leave {flag} out")
