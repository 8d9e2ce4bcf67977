"""run.json, a run's record beside its checkpoints: what the run is (`bert_runner.run_identity`:
the task, hyper-parameters, model family and options, content hashes of what it read), written by
`bert_runner.driver`; a later script checks its flags against it, and its checkpoints are read as
the recorded family's (`checkpoints`).

Read and written here only; a `gs://` output_dir behaves as a local one. A run.json that exists
but is not a JSON object is refused naming it, whoever reads it: it is what tells which model the
checkpoints beside it are of. Imports no TensorFlow (the flag checks read it, `supplied`).
"""
import dataclasses
import json
import os
import re
from typing import Optional

from modeling.json_file import JsonFileError, read_json_object

RUN_RECORD = "run.json"
# The config of the model a run trained, which the driver writes beside its run.json.
CONFIG_FILE = "bert_config.json"
# The vocabulary's content hash (`bert_runner.run_identity`): a model read with another
# vocabulary is refused.
VOCAB_KEY = "vocab"
# Where the vocabulary the run read was (its --vocab_file, made absolute): looked for there when
# it is kept nowhere beside the run, taken only while its content is still the recorded hash.
VOCAB_PATH_KEY = "vocab_file"
# The model family of the run (`modeling.families`): its checkpoints are read as that family's.
FAMILY_KEY = "family"


def record_directories(checkpoint):
    """The directories whose files describe the run that wrote `checkpoint` (a run's output_dir,
    a checkpoint prefix in it; None: none): its own, then for a --seeds `seed_<n>` directory the
    run's output_dir (where run.json is)."""
    if not checkpoint:
        return []
    directory = (checkpoint if _is_directory(checkpoint) else os.path.dirname(checkpoint)) or "."
    # A local path made absolute (its name, even for "."); a URL (gs://, file://) as it is.
    full = directory.rstrip("/") if "://" in directory else os.path.abspath(directory)
    if re.fullmatch(r"seed_\d+", os.path.basename(full)):
        return [directory, os.path.dirname(full)]
    return [directory]


def _is_directory(path):
    if "://" not in path:
        return os.path.isdir(path)
    import tensorflow as tf  # an object store's folder (gs://): TensorFlow lists it

    return tf.io.gfile.isdir(path)


def read_run_file(path):
    """The JSON object a run keeps in `path` beside its checkpoints (run.json, an evaluation's
    report) as a dict, or None when there is none.

    Raises:
      ValueError naming `path`: it is not a JSON object.
    """
    try:
        return read_json_object(path)
    except JsonFileError as e:
        raise ValueError(f"{e.path} is {e.reason}: restore it, or move the checkpoints beside it "
                         "away") from None


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """What the folders of the run that wrote a checkpoint say of it, read once
    (`read_record`).

    directories: `record_directories` of the checkpoint. path, record: its run.json and that as
    a dict (None, None: none, as beside an original checkpoint). config_file: the first
    bert_config.json in them, or None. objective, objective_file: the pretraining objective the
    run recorded and the file recording it, or None, None.
    """

    directories: tuple
    path: Optional[str] = None
    record: Optional[dict] = None
    config_file: Optional[str] = None
    objective: Optional[str] = None
    objective_file: Optional[str] = None


def read_record(checkpoint):
    """The `RunRecord` of the run that wrote `checkpoint` (a run's output_dir, a checkpoint
    prefix in it, a --seeds `seed_<n>` folder; None: none). Raises ValueError naming a run.json
    or bert_config.json that is not a JSON object."""
    directories = tuple(record_directories(checkpoint))
    path, record = _run_json(directories)
    config_file = next((os.path.join(d, CONFIG_FILE) for d in directories
                        if "://" not in d and os.path.isfile(os.path.join(d, CONFIG_FILE))),
                       None)
    return RunRecord(directories, path, record, config_file,
                     *_objective(directories, path, record))


def _objective(directories, path, record):
    """(pretraining objective, the file recording it), or (None, None): the
    "pretraining_objective" of the run.json in `directories` (`path`, read as `record`), else of
    the bert_config.json beside it (run_pretraining writes one; a config without the key, as the
    original's, is a masked LM)."""
    for directory in directories:
        for name, default in ((RUN_RECORD, None), (CONFIG_FILE, "mlm")):
            file = os.path.join(directory, name)
            read = record if file == path else read_run_file(file)
            objective = None if read is None else read.get("pretraining_objective", default)
            if objective:
                return objective, file
    return None, None


def run_record(checkpoint):
    """(path, dict) of the run.json of the run that wrote `checkpoint` (`record_directories`),
    or (None, None) when there is none (an original-layout checkpoint)."""
    return _run_json(record_directories(checkpoint))


def _run_json(directories):
    for directory in directories:
        path = os.path.join(directory, RUN_RECORD)
        record = read_run_file(path)
        if record is not None:
            return path, record
    return None, None


def output_dir_record(output_dir):
    """The run.json of `output_dir` as a dict, or None."""
    return read_run_file(os.path.join(output_dir, RUN_RECORD))


def write_output_dir_record(output_dir, record):
    from modeling.checkpoint.files import write_text_atomic  # imports TensorFlow, which readers skip

    write_text_atomic(os.path.join(output_dir, RUN_RECORD), json.dumps(record, indent=2) + "\n")


def vocab_location(vocab_file):
    """How run.json records the path of the vocabulary a run read (`VOCAB_PATH_KEY`): a local
    path made absolute (the run may have been started elsewhere), a URL as it is; None for
    none."""
    if not vocab_file:
        return None
    return vocab_file if "://" in vocab_file else os.path.abspath(vocab_file)
