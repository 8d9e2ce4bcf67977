"""What a run is: every setting that changes its result, recorded in its run.json and compared
by every reader before it reuses, resumes or serves what the run wrote.

    identity = run_identity.of(task, run, train_examples=examples["train"], start=start)
    changed = run_identity.differences(recorded, identity)   # ["random_seed 12345 -> 1", ...]

The identity is a flat `{name: JSON value}`: the task and its own settings
(`Task.recorded_settings`: max_seq_length, long documents, pooling, teacher, ...), the
hyper-parameters (the layer-wise learning-rate decay as resolved), the seed, the model options
(BiLSTM, LoRA, precision, packing) and the fingerprints of what the run read: the starting
checkpoint, its config, the vocabulary and the training examples. A fingerprint is a content
hash, so a file edited in place or another file at the same path is seen; a path moved with the
same content is the same run.

`differences` compares the names both sides hold: a record written before a name was recorded
is not checked for it, except the layer-wise decay, which such a run trained without (1.0).
"""
import hashlib
import json
import os

import tensorflow as tf

from bert_runner import seeds as seed_sweeps
from bert_runner.runs import hashes, record as run_records
from bert_runner.runs.hashes import fingerprint
from modeling import families

# The RunConfig fields that change what training computes. --jit_compile is not one (the steps
# compute the same numbers with and without XLA), nor are batch sizes of evaluation and
# prediction, checkpointing or distribution.
TRAINING_FIELDS = (
    "learning_rate", "train_batch_size", "num_train_epochs", "warmup_proportion", "optimizer",
    "init_checkpoint", "mixed_precision", "gradient_accumulation_steps", "bilstm_on_top",
    "max_sequences_per_row", "lora_rank", "lora_alpha", "lora_targets", "lora_adapters",
    "random_seed", "do_lower_case")

# The layer-wise learning-rate decay, recorded as resolved (`RunConfig.layerwise_decay`): the
# flag's default is the model family's.
LAYERWISE_DECAY = "layerwise_lr_decay"
# What a run whose record predates a name trained with. Only a record made with the model's
# config at hand (it holds the config's hash) would hold the name had it been recorded then.
_BEFORE_RECORDED = {LAYERWISE_DECAY: 1.0}

# What the checkpoints compute from their input besides their weights: a command that only
# evaluates or predicts with them must give the same (another vocabulary, casing or pooling
# would score another model than the one trained). Windows and SQuAD's version are how the
# outputs are read, which an evaluation may choose.
MODEL_NAMES = (run_records.VOCAB_KEY, "do_lower_case", "pooling", "normalize")
# The same for a command that reads no text (records made before): no vocabulary, no casing.
MODEL_NAMES_NO_TEXT = ("pooling", "normalize")

# The starting point's content hash (`of_start`): a command's plan takes it when it opens the
# starting point, and `of` reads the path itself only when given no plan's `start`.
START_HASH = "init_checkpoint_sha256"
# The fingerprints' names in the record, and the RunConfig field whose file each hashes.
FINGERPRINTED = (("lora_adapters_sha256", "lora_adapters"),
                 (run_records.VOCAB_KEY, "vocab_file"))
CONFIG = "bert_config_sha256"
TRAIN_DATA = "train_data_sha256"
# A distillation teacher's content (`bert_tasks.classifier`'s recorded settings).
TEACHER_HASH = "teacher_sha256"
TRAIN_EXAMPLES = "train_examples"
# The newest checkpoint of an --init_checkpoint directory when the run started: a directory
# still being written (a pre-training run) starts later commands from newer checkpoints.
INIT_PREFIX = "init_checkpoint_prefix"


def examples_sha256(examples):
    """A short hash of a split's training data as `Task.training_data` gives it (the examples'
    text, labels and ids, in order; an object that is no list, as a whole)."""
    digest = hashlib.sha256()
    for example in examples if isinstance(examples, (list, tuple)) else [examples]:
        text = repr(example)
        if " object at 0x" in text:
            # A default repr holds a memory address: no run would ever resume.
            raise TypeError(f"{type(example).__name__} has no repr of its content (make it a "
                            "dataclass): its run's identity cannot be recorded")
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def records_sha256(files):
    """A short hash of TFRecord files given as they are (pre-training's --input_file): their
    names and sizes, which a rewrite changes, without reading gigabytes."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(f"{os.path.basename(path)}\0{tf.io.gfile.stat(path).length}\0".encode())
    return digest.hexdigest()[:16]


def config_sha256(config):
    """A short hash of a `BertConfig`'s values (not of its file's bytes: the same model written
    in another layout, or the copy a run writes beside its checkpoints, is the same config); the
    pretraining objective is recorded and checked apart."""
    values = {k: v for k, v in config.to_dict().items() if k != "pretraining_objective"}
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]


def of_start(path):
    """What the identity takes of the starting point `path` (--init_checkpoint; None: none):
    its content hash and, for a directory, its newest checkpoint when the run starts."""
    content, newest = hashes.fingerprint_and_newest(path)
    entries = {START_HASH: content}
    if path and tf.io.gfile.isdir(path):
        entries[INIT_PREFIX] = newest
    return entries


def of(task, run, config=None, train_examples=None, train_records=None, start=None):
    """The identity of `task` run with `run` (a `RunConfig`), the model built from `config`
    (a `BertConfig`; None: left out), trained on `train_examples` (as
    `task.read_examples("train")` returned them: `task.training_data` of them is hashed) or on
    the TFRecord files `train_records`; without either, the identity leaves the training data
    out. `start`: the run's `bert_runner.plan.StartingPoint`, whose `identity` holds what
    `of_start` gives (None: `of_start` of `run.init_checkpoint`)."""
    identity = {"task": task.name, "max_seq_length": task.max_seq_length,
                **{name: getattr(run, name) for name in TRAINING_FIELDS},
                **task.recorded_settings()}
    started = start.identity if start is not None else of_start(run.init_checkpoint)
    identity[START_HASH] = started[START_HASH]
    identity.update({key: fingerprint(getattr(run, field)) for key, field in FINGERPRINTED})
    if INIT_PREFIX in started:
        identity[INIT_PREFIX] = started[INIT_PREFIX]
    if config is not None:
        # The reader builds the model of this family from the run's checkpoints.
        identity[run_records.FAMILY_KEY] = families.of_config(config).name
        identity[CONFIG] = config_sha256(config)
        identity[LAYERWISE_DECAY] = run.layerwise_decay(config)
    elif run.layerwise_lr_decay is not None:
        identity[LAYERWISE_DECAY] = float(run.layerwise_lr_decay)
    if train_examples is not None:
        data = task.training_data(train_examples)
        identity[TRAIN_DATA] = examples_sha256(data)
        if isinstance(data, (list, tuple)):
            identity[TRAIN_EXAMPLES] = len(data)
    elif train_records:
        identity[TRAIN_DATA] = records_sha256(train_records)
    return identity


# A path's name in the record, and the name of its content's hash: a path whose content is the
# same is the same run (a file moved, a relative path against an absolute one).
_HASH_OF_PATH = {"init_checkpoint": START_HASH, **{field: key for key, field in FINGERPRINTED},
                 "teacher": TEACHER_HASH, "unlabeled_file": TRAIN_DATA, INIT_PREFIX: START_HASH}
# Hashes a command may not compute (no vocabulary given, no config at hand): not compared then.
_HASHES = set(_HASH_OF_PATH.values()) | {CONFIG}

# How long and at what rates a run trains. A run that differs from a recorded one only in them
# trains the same model on another schedule, which a new run started from its weights gives.
SCHEDULE = ("learning_rate", "num_train_epochs", "warmup_proportion", "num_train_steps",
            "num_warmup_steps")
# What only training reads, besides a task's `training_only_settings`: a command that only
# evaluates or predicts with a run's checkpoints leaves these flags at their defaults, so their
# differences from the run's are not worth saying.
TRAINING_ONLY = (*TRAINING_FIELDS, *SCHEDULE, LAYERWISE_DECAY, TRAIN_DATA, TRAIN_EXAMPLES,
                 INIT_PREFIX, START_HASH, "lora_adapters_sha256")
# Names whose difference is said in words rather than as two hashes.
_SAID = {TRAIN_DATA: "the training data differs",
         START_HASH: "the starting checkpoint's content differs",
         "lora_adapters_sha256": "the LoRA adapters' content differs",
         CONFIG: "the model config's content differs",
         run_records.VOCAB_KEY: "the vocabulary's content differs"}


def differences(recorded, current, names=None):
    """`["name recorded -> current", ...]` for the names both identities hold (`names`: only
    those) whose values differ; a content hash that differs is said in words. A record of a
    run made before the layer-wise decay was recorded is read as that run trained: decay 1.0."""
    current = _at_recorded_start(recorded, current)
    if CONFIG in recorded:
        recorded = {**_BEFORE_RECORDED, **recorded}
    changed = []
    for name, value in current.items():
        if names is not None and name not in names:
            continue
        if name not in recorded or recorded[name] == value or (value is None and name in _HASHES):
            continue
        hashed = _HASH_OF_PATH.get(name)
        if hashed and recorded.get(hashed) and recorded.get(hashed) == current.get(hashed):
            continue  # the same file at another path (moved, or relative against absolute)
        if name in _SAID:
            changed.append(_SAID[name])
        elif name == TRAIN_EXAMPLES:
            changed.append(f"training examples {recorded[name]} -> {value}")
        else:
            changed.append(f"{name} {recorded[name]!r} -> {value!r}")
    return changed


def only_schedule_differs(recorded, current):
    """Whether `current` differs from `recorded` in some of `SCHEDULE` and nothing else."""
    return bool(differences(recorded, current)) and not differences(
        recorded, current, names=[name for name in current if name not in SCHEDULE])


def _at_recorded_start(recorded, current):
    """`current` with an --init_checkpoint directory taken at the checkpoint the recorded run
    started from (when it is still there), not at its newest."""
    prefix = recorded.get(INIT_PREFIX)
    if (not prefix or current.get("init_checkpoint") != recorded.get("init_checkpoint")
            or current.get(INIT_PREFIX) == prefix):
        return current
    content = fingerprint(prefix)
    return {**current, INIT_PREFIX: prefix, START_HASH: content} if content \
        else current


def holds_checkpoints(output_dir, seed_dirs=True):
    """Whether `output_dir` (or, with `seed_dirs`, a seed directory in it) holds a checkpoint."""
    directories = [output_dir] + (seed_sweeps.seed_directories(output_dir) if seed_dirs else [])
    return any(hashes.newest_checkpoint(d) for d in directories)

