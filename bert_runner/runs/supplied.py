"""The config and vocabulary a run's output_dir supplies for its own checkpoints, so that a run
directory (or a `ckpt-N` in it, or a --seeds `seed_<n>` folder) is a starting point on its own,
as a Hugging Face directory is:

    found = of_checkpoint("/tmp/embeddings/ckpt-6")
    found.config_file     /tmp/embeddings/bert_config.json (the driver writes it beside run.json)
    found.vocab_file      the vocabulary the run read, or None with `found.vocab_problem` saying why

run.json records the vocabulary by its content hash (`bert_runner.run_identity`) and, since runs
record it, by the path it was read from (`VOCAB_PATH_KEY`: a run trained from scratch with a
--vocab_file kept elsewhere). The vocabulary is looked for where a run keeps or found one: a
`vocab.txt` in the run's folders or one level below them (an embedding run's
`sentence_transformers/`), the recorded path, then beside the checkpoint the run started from (its
recorded --init_checkpoint: a Hugging Face directory or a released folder; another run's, followed
the same way). Only a file whose content has the recorded hash is taken: a file of the same name
with other word-pieces would give the model other ids.

Reads local files with `os` only: the scripts' flag checks use it before TensorFlow is imported
(`bert_runner.flags.require_model_files`).
"""
import dataclasses
import hashlib
import os
from typing import Optional

from bert_runner.runs.record import VOCAB_KEY, VOCAB_PATH_KEY, read_record
from modeling.checkpoint import HF_DIRECTORY, checkpoint_folder, hf_home

VOCAB_FILE = "vocab.txt"
# A run started from a run started from ...: how far back the vocabulary is followed.
_MAX_RUNS_BACK = 4


@dataclasses.dataclass(frozen=True)
class RunModelFiles:
    """What a run's folders supply: its record, its config file and its vocabulary (None: the
    run read none, or `vocab_problem` says why it is not at hand: gone, changed, kept nowhere)."""

    record_path: str
    config_file: Optional[str]
    vocab_file: Optional[str]
    vocab_problem: Optional[str] = None


def of_checkpoint(path):
    """The `RunModelFiles` of the run that wrote `path` (an output_dir, a `ckpt-N` prefix in it,
    a `seed_<n>` folder), or None when no run.json describes it (an original checkpoint, a
    Hugging Face directory) or it is on an object store (gs://: its files are read locally).
    ValueError naming a run.json that is not a JSON object."""
    return _of_checkpoint(path, _MAX_RUNS_BACK)


def _of_checkpoint(path, runs_back, recorded=None):
    """`of_checkpoint`, following at most `runs_back` runs back; `recorded`: the `RunRecord` of
    `path` where already read."""
    if "://" in path:
        return None
    return _of_record(recorded or read_record(path), runs_back)


def _of_record(recorded, runs_back):
    """`of_checkpoint` of the checkpoint whose run's `record.RunRecord` is `recorded`."""
    if recorded.record is None:
        return None
    vocab_file, problem = _recorded_vocab(recorded.record, recorded.path, recorded.directories,
                                          runs_back)
    return RunModelFiles(recorded.path, recorded.config_file, vocab_file, problem)


def _sha256_prefix(path):
    """`hashes.fingerprint` of a file: its SHA-256, 16 hex digits."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def _vocabs_in(directories):
    """The `vocab.txt` files in `directories` and in their sub-folders (a Hugging Face copy of the
    model the run wrote there)."""
    found = []
    for directory in directories:
        found.append(os.path.join(directory, VOCAB_FILE))
        try:
            children = sorted(os.listdir(directory))
        except OSError:
            continue
        found += [os.path.join(directory, child, VOCAB_FILE) for child in children
                  if os.path.isdir(os.path.join(directory, child))]
    return [path for path in found if os.path.isfile(path)]


def _recorded_vocab(record, record_path, directories, runs_back):
    """(the vocabulary file whose content is the one `record` hashes, None) or (None, why not)."""
    digest = record.get(VOCAB_KEY)
    if not isinstance(digest, str):
        return None, None  # a run that read no text (pre-training on records)
    candidates = _vocabs_in(directories)
    gone = None
    recorded = record.get(VOCAB_PATH_KEY)
    if isinstance(recorded, str) and recorded and "://" not in recorded:
        if os.path.isfile(recorded):
            candidates.append(recorded)
        else:
            gone = f"{recorded}, the vocabulary it read, no longer exists"
    # The checkpoints the run read its model from: the one it started from and, for a student,
    # the teacher it distilled (which read the same vocabulary).
    for key, how in (("init_checkpoint", "it started from"),
                     ("teacher", "it distilled as its teacher")):
        found, missing = _vocabs_beside(record.get(key), how, runs_back)
        candidates += found
        gone = gone or missing
    candidates = list(dict.fromkeys(candidates))
    for candidate in candidates:
        if _sha256_prefix(candidate) == digest:
            return candidate, None
    if gone:
        return None, f"{gone} ({record_path})"
    if candidates:
        return None, (f"{', '.join(candidates)} hold(s) another vocabulary than the one its run "
                      f"read ({record_path} records its content)")
    return None, (f"its run ({record_path}) read a vocabulary kept neither beside it nor beside "
                  "the checkpoint it started from")


def _vocabs_beside(start, how, runs_back):
    """([vocabulary files beside the checkpoint `start` and of the run that wrote it], why one
    that should be there is not, or None)."""
    if not isinstance(start, str) or not start or "://" in start:
        return [], None
    home = hf_home(start) or checkpoint_folder(start) or (start if os.path.isdir(start) else None)
    if home is None:
        if os.path.exists(start) or os.path.exists(start + ".index"):
            return [], None
        # run.json keeps the flag as typed: a relative path is the run's directory's.
        return [], (f"{start}, the checkpoint {how}, no longer exists" if os.path.isabs(start)
                    else f"{start}, the checkpoint {how} (a path relative to where the run was "
                    "started), is not found from this directory")
    found, gone = [], None
    beside = os.path.join(home, VOCAB_FILE)
    if os.path.isfile(beside):
        found.append(beside)
    elif hf_home(start):  # a Hugging Face directory's own vocabulary, deleted
        gone = (f"{beside}, the vocabulary of the Hugging Face directory {how}, no longer "
                "exists")
    started_from = _of_checkpoint(start, runs_back - 1) if runs_back else None
    if started_from is not None and started_from.vocab_file:
        found.append(started_from.vocab_file)
    return found, gone


# What a checkpoint flag may name instead of --bert_config_file and --vocab_file, beside a
# Hugging Face directory (`layout.HF_DIRECTORY`).
RUN_DIRECTORY = ("a run's output_dir (or a checkpoint in it) whose bert_config.json and "
                 "vocabulary are at hand")


def required_unless(name, flag):
    """The refusal of a command without `--name` (bert_config_file, vocab_file) whose checkpoint
    flag `flag` supplies none."""
    return (f"--{name} is required unless {flag} is {HF_DIRECTORY}, a TF Hub text-encoder "
            f"SavedModel, or {RUN_DIRECTORY}")


def supplied(path, flag, needs_vocab, recorded=None):
    """(config file, vocabulary or None) that the run whose checkpoint `flag`=`path` is supplies
    (its bert_config.json, the vocabulary it read), or None where no run's config is there;
    `recorded`: that run's `record.RunRecord` where already read. Raises ValueError naming what
    is gone when `needs_vocab` (no --vocab_file given) and the vocabulary the run read is not at
    hand."""
    if not path:
        return None
    found = _of_checkpoint(path, _MAX_RUNS_BACK, recorded)
    if found is None or not found.config_file:
        return None
    if needs_vocab and found.vocab_problem:
        raise ValueError(f"--vocab_file is required with {flag}={path}: {found.vocab_problem}; "
                         "pass the vocab.txt its run read")
    return found.config_file, found.vocab_file
