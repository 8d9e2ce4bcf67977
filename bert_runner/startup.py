"""Checks every script runs before doing any work, so bad combinations fail in seconds with a
message that names the file, instead of hours later (or silently, as in the original).

Light to import (no TensorFlow): create_pretraining_data's pipeline uses `warn_if_case_mismatch`
too, and its spawned worker processes import the pipeline; `run_files` (TensorFlow's gfile, seconds
to import in each worker) is imported by the two functions that read a run's files.
"""
import dataclasses
import json
import os
from typing import Optional

from absl import logging

from vocab import tokenization

# A vocabulary is taken as uncased when at most this share of its word-pieces with a cased letter
# have an upper-case one (the released uncased and Chinese vocabularies: 0 and 2 of 3,885, "<S>"
# and "<T>"), and as cased from this share up (a cased vocabulary keeps its capitalised words).
UNCASED_MAX_SHARE = 0.002
CASED_MIN_SHARE = 0.05
# Fewer word-pieces with letters than this say nothing about the case.
_MIN_CASED_ENTRIES = 20


# The config keys that decide a model's outputs: a `--bert_config_file` given with a Hugging Face
# directory must agree on these (dropout rates may differ: they only change training).
_ARCHITECTURE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                      "intermediate_size", "max_position_embeddings", "type_vocab_size",
                      "hidden_act")
# The weights of a Hugging Face directory (`modeling.hf_checkpoint.read_hf_weights` reads either).
HF_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
HF_DIRECTORY = "a Hugging Face model directory (config.json, model.safetensors or " \
               "pytorch_model.bin, vocab.txt)"


@dataclasses.dataclass(frozen=True)
class ModelFiles:
    """The model a run starts from: its config, the file it was read from (named in messages),
    and the vocabulary (None when none was given or found)."""

    config: object  # modeling.BertConfig
    config_file: str
    vocab_file: Optional[str]


def is_hf_directory(path):
    """True when `path` is a directory holding `config.json` and one of `HF_WEIGHT_FILES`."""
    return bool(path) and os.path.isfile(os.path.join(path, "config.json")) and any(
        os.path.isfile(os.path.join(path, name)) for name in HF_WEIGHT_FILES)


def check_partial_directory(path, flag=None):
    """Refuses a directory that holds part of the Hugging Face layout and no TF checkpoint (a
    `config.json` without weights, weights without `config.json`), saying what is missing."""
    if not path or not os.path.isdir(path) or is_hf_directory(path):
        return
    has_config = os.path.isfile(os.path.join(path, "config.json"))
    weights = [n for n in HF_WEIGHT_FILES if os.path.isfile(os.path.join(path, n))]
    if not has_config and not weights:
        return
    if any(n.endswith(".index") or n == "checkpoint" for n in os.listdir(path)):
        return
    lacks = ("model.safetensors or pytorch_model.bin" if has_config else "config.json")
    named = f"{path} ({flag})" if flag else path
    raise ValueError(f"{named} is neither a TensorFlow checkpoint nor a Hugging Face model "
                     f"directory: it holds {'config.json' if has_config else weights[0]} but no "
                     f"{lacks} (and no *.index)")


def model_files(bert_config_file, vocab_file, init_checkpoint, max_seq_length=None,
                flag="--init_checkpoint"):
    """The config and vocabulary of a run, from the flags or from a Hugging Face directory.

    When `init_checkpoint` (the checkpoint flag `flag`) is a Hugging Face model directory, its
    `config.json` is the config (its `"gelu"` read as the exact erf GELU) and its `vocab.txt` the
    vocabulary unless `vocab_file` is given; a `bert_config_file` given as well must describe the
    same model (else ValueError naming both files) and is used (its dropout rates). Otherwise
    `bert_config_file` is read (it is then required). `max_seq_length` is checked against the
    config's positions.
    """
    from modeling import hf_checkpoint  # Keras comes with the package: imported when needed.

    check_partial_directory(init_checkpoint, flag)
    if not is_hf_directory(init_checkpoint):
        if not bert_config_file:
            raise ValueError(f"--bert_config_file is required unless {flag} is {HF_DIRECTORY}")
        config = load_config(bert_config_file, max_seq_length)
        check_objective(config, bert_config_file, init_checkpoint, flag)
        return ModelFiles(config, bert_config_file, vocab_file)
    hf_file = os.path.join(init_checkpoint, "config.json")
    config = hf_checkpoint.config_from_hf(hf_file)
    config_file = hf_file
    if bert_config_file:
        given = load_config(bert_config_file)
        differ = [f"{key} {getattr(given, key)!r} vs {getattr(config, key)!r}"
                  for key in _ARCHITECTURE_KEYS if getattr(given, key) != getattr(config, key)]
        if differ:
            raise ValueError(
                f"--bert_config_file={bert_config_file} does not describe the model of {flag}="
                f"{init_checkpoint} ({hf_file}): {'; '.join(differ)}. Leave --bert_config_file "
                "out to use the directory's config")
        config, config_file = given, bert_config_file
    check_max_seq_length(config, max_seq_length, config_file)
    hf_vocab = os.path.join(init_checkpoint, "vocab.txt")
    return ModelFiles(config, config_file,
                      vocab_file or (hf_vocab if os.path.isfile(hf_vocab) else None))


def recorded_objective(checkpoint):
    """(pretraining objective, the file recording it) of the run that wrote `checkpoint` (a
    directory or a checkpoint prefix), or (None, None): the "pretraining_objective" of the
    run.json beside it (or of the run's output_dir, for a --seeds `seed_<n>` directory), else of
    the bert_config.json beside it (run_pretraining writes one; a config without the key, as
    the original's, is a masked LM)."""
    from bert_runner import run_files  # not at the top: see the module docstring

    for directory in run_files.record_directories(checkpoint):
        for name, default in ((run_files.RUN_RECORD, None), ("bert_config.json", "mlm")):
            path = os.path.join(directory, name)
            recorded = run_files.read_json_object(path)
            objective = (None if recorded is None
                         else recorded.get("pretraining_objective", default))
            if objective:
                return objective, path
    return None, None


def recorded_task(checkpoint):
    """(task name, its run.json) of the run that wrote `checkpoint` (a directory or a checkpoint
    prefix; the run's output_dir for a --seeds `seed_<n>` directory), or (None, None)."""
    from bert_runner import run_files  # not at the top: see the module docstring

    path, record = run_files.run_record(checkpoint)
    task = (record or {}).get("task")
    return (task, path) if task else (None, None)


def check_objective(config, bert_config_file, checkpoint, flag="--init_checkpoint"):
    """Refuses a config whose pretraining objective is not the one recorded beside `checkpoint`
    (`recorded_objective`): an LTR checkpoint with the original bert_config.json would silently
    become a bidirectional encoder, and the reverse a causal one."""
    recorded, path = recorded_objective(checkpoint)
    if recorded is not None and recorded != config.pretraining_objective:
        raise ValueError(
            f"--bert_config_file={bert_config_file} describes a {config.pretraining_objective!r} "
            f"model but {flag}={checkpoint} was trained as {recorded!r} ({path}): pass the config "
            "that records its objective (the pre-training output_dir's bert_config.json)")


# Keys only a Hugging Face config.json has (the original's bert_config.json has none of them).
_HF_CONFIG_KEYS = ("model_type", "architectures", "transformers_version")


def load_config(bert_config_file, max_seq_length=None):
    """Reads and validates `bert_config.json`; checks `max_seq_length` fits its positions.

    A Hugging Face `config.json` (it has `model_type`, `architectures` or
    `transformers_version`) is read as one: its `"gelu"` is the exact erf GELU
    (`hf_checkpoint.config_from_hf`), where the original's `"gelu"` is the tanh form."""
    from modeling import hf_checkpoint  # Keras comes with the package: imported when needed.
    from modeling.config import BertConfig

    if _is_hf_config(bert_config_file):
        config = hf_checkpoint.config_from_hf(bert_config_file)
    else:
        config = BertConfig.from_json_file(bert_config_file)
    check_max_seq_length(config, max_seq_length, bert_config_file)
    return config


def _is_hf_config(path):
    """Whether `path` is a Hugging Face config.json (False where it cannot be read as a JSON
    object: `BertConfig.from_json_file` then says why)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and any(key in data for key in _HF_CONFIG_KEYS)


def check_max_seq_length(config, max_seq_length, bert_config_file):
    """Refuses a `max_seq_length` (None: not checked) beyond the config's positions."""
    if max_seq_length is not None and max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"Cannot use sequence length {max_seq_length} because the BERT model was only trained "
            f"up to sequence length {config.max_position_embeddings} ({bert_config_file})"
        )


def check_vocab_matches_config(vocab, vocab_file, config, bert_config_file):
    """The original trains with ids ≥ vocab_size into a NaN loss; we refuse at start-up."""
    if len(vocab) == 0:
        raise ValueError(f"Vocabulary file {vocab_file} is empty")
    largest_id = max(vocab.values())
    if largest_id >= config.vocab_size:
        raise ValueError(
            f"Vocabulary file {vocab_file} has ids up to {largest_id} but vocab_size in "
            f"{bert_config_file} is {config.vocab_size}: the vocabulary does not belong to this model"
        )


def vocab_case(vocab):
    """(word-pieces holding a letter that has case, those of them with an upper-case letter);
    the bracketed special tokens ([UNK], [unused0], ...) are left out."""
    cased = upper = 0
    for token in vocab:
        if token.startswith("[") and token.endswith("]"):
            continue
        if any(c.lower() != c.upper() for c in token):
            cased += 1
            upper += any(c.isupper() for c in token)
    return cased, upper


def case_mismatch(vocab, vocab_file, do_lower_case):
    """The warning when `--do_lower_case` contradicts the case of the vocabulary, else None.

    The original's check knows the released checkpoints' names only; this one reads the
    vocabulary. `--do_lower_case=False` with an uncased vocabulary makes every word with a capital
    letter [UNK]; `--do_lower_case=True` with a cased one never uses its capitalised word-pieces.
    """
    cased, upper = vocab_case(vocab)
    if cased < _MIN_CASED_ENTRIES:
        return None
    share = upper / cased
    if not do_lower_case and share <= UNCASED_MAX_SHARE:
        return (f"{vocab_file} looks uncased ({upper} of its {cased} word-pieces with letters have "
                f"a capital: {share:.1%}) but --do_lower_case=False: every word with a capital "
                "letter becomes [UNK]. Pass --do_lower_case=True for an uncased model, or the "
                "vocab.txt of a cased one.")
    if do_lower_case and share >= CASED_MIN_SHARE:
        return (f"{vocab_file} looks cased ({upper} of its {cased} word-pieces with letters have "
                f"a capital: {share:.1%}) but --do_lower_case=True: the input is lower-cased and "
                "those word-pieces are never used. Pass --do_lower_case=False for a cased model, "
                "or the vocab.txt of an uncased one.")
    return None


def warn_if_case_mismatch(vocab, vocab_file, do_lower_case):
    """Logs `case_mismatch`'s warning, if any (the run goes on, as the original's would);
    returns it."""
    warning = case_mismatch(vocab, vocab_file, do_lower_case)
    if warning:
        logging.warning("%s", warning)
    return warning


def load_tokenizer(vocab_file, do_lower_case, init_checkpoint, config, bert_config_file):
    """Builds the faithful tokenizer after the original's case check and our vocab-size check;
    warns when `do_lower_case` does not fit the vocabulary's case (`case_mismatch`)."""
    tokenization.validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
    tokenizer = tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case)
    check_vocab_matches_config(tokenizer.vocab, vocab_file, config, bert_config_file)
    warn_if_case_mismatch(tokenizer.vocab, vocab_file, do_lower_case)
    return tokenizer
