"""The files a run keeps beside its checkpoints, read and written here only, through
`tf.io.gfile` (a `gs://` output_dir behaves as a local one):

    run.json          what the run is (`bert_runner.run_identity`: the task, hyper-parameters,
                      model family and options, content hashes of what it read), written by
                      `bert_runner.driver`; a later script checks its flags against it
    label_list.txt    a classifier's or tagger's labels in output order, one per line
                      (run_classifier --task_name=multilabel, run_ner)

A run.json that exists but is not a JSON object is refused naming it, whoever reads it: it is
what tells which model the checkpoints beside it are of.
"""
import json
import os

import tensorflow as tf

from modeling.checkpoint.files import write_text_atomic
from modeling.checkpoint import layout
from modeling.checkpoint.layout import RUN_RECORD, run_directories

# The vocabulary's content hash in run.json, under the name its readers use here.
VOCAB_KEY = layout.VOCAB_KEY
VOCAB_PATH_KEY = layout.VOCAB_PATH_KEY
LABEL_LIST_FILE = layout.LABEL_LIST_FILE


def _directory(checkpoint):
    """The directory of `checkpoint`: a run's output_dir, or the folder of a ckpt-N prefix."""
    return (checkpoint if tf.io.gfile.isdir(checkpoint) else os.path.dirname(checkpoint)) or "."


def record_directories(checkpoint):
    """The directories whose files describe the run that wrote `checkpoint` (a directory or a
    checkpoint prefix; None: none): its own, then for a --seeds `seed_<n>` directory the run's
    output_dir (where run.json is)."""
    if not checkpoint:
        return []
    return run_directories(_directory(checkpoint))


# The model family of the run (`modeling.families`), in run.json: the reader reads its checkpoints
# as that family's.
FAMILY_KEY = "family"


def read_json_object(path):
    """The JSON object in `path`, or None when there is no such file.

    Raises:
      ValueError naming `path`: it is not a JSON object.
    """
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    try:
        value = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"{path} is not valid JSON ({error}): restore it, or move the "
                         "checkpoints beside it away") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} is not a JSON object: restore it, or move the checkpoints "
                         "beside it away")
    return value


def output_dir_record(output_dir):
    """The run.json of `output_dir` as a dict, or None."""
    return read_json_object(os.path.join(output_dir, RUN_RECORD))


def write_output_dir_record(output_dir, record):
    write_text_atomic(os.path.join(output_dir, RUN_RECORD), json.dumps(record, indent=2) + "\n")


def vocab_location(vocab_file):
    """How run.json records the path of the vocabulary a run read (`VOCAB_PATH_KEY`): a local
    path made absolute (the run may have been started elsewhere), a URL as it is; None for
    none."""
    if not vocab_file:
        return None
    return vocab_file if "://" in vocab_file else os.path.abspath(vocab_file)


def run_record(checkpoint):
    """(path, dict) of the run.json of the run that wrote `checkpoint` (`record_directories`),
    or (None, None) when there is none (an original-layout checkpoint)."""
    for directory in record_directories(checkpoint):
        path = os.path.join(directory, RUN_RECORD)
        record = read_json_object(path)
        if record is not None:
            return path, record
    return None, None


def label_list_path(checkpoint):
    """The label_list.txt of the run that wrote `checkpoint` (a run's output_dir, or a ckpt-N
    prefix): beside it, or for a --seeds `seed_<n>` directory the run's output_dir's, the label
    set its seeds share."""
    for directory in record_directories(checkpoint):
        path = os.path.join(directory, LABEL_LIST_FILE)
        if tf.io.gfile.exists(path):
            return path
    return os.path.join(_directory(checkpoint), LABEL_LIST_FILE)


def labels_record_path(checkpoint):
    """Where `recorded_labels(checkpoint)` reads them: a LoRA adapters file itself, else the
    label_list.txt beside the checkpoint."""
    if str(checkpoint).endswith(layout.ADAPTERS_FILE):
        return checkpoint
    return label_list_path(checkpoint)


def recorded_labels(checkpoint):
    """The labels recorded beside `checkpoint` as a list of str (LoRA adapters: in their
    file's record); None when there are none."""
    if str(checkpoint).endswith(layout.ADAPTERS_FILE) and tf.io.gfile.exists(checkpoint):
        from modeling.checkpoint import adapters

        return adapters.recorded_labels(checkpoint)
    path = label_list_path(checkpoint)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return [line for line in f.read().splitlines() if line]


def write_label_list(output_dir, labels):
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
