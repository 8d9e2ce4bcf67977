"""The config and vocabulary a run starts from, from its flags, and the pre-training objective
its starting checkpoint's run recorded.

The config comes from `--bert_config_file` (the original's `bert_config.json`, or a Hugging Face
`config.json`), or from the Hugging Face directory given as the checkpoint, or the output_dir of
the run that wrote it (`supplied`); the vocabulary from `--vocab_file` or those. Every script
reads them here (`model_files`), before any work.

The walk of a starting point (`resolve`, for `bert_runner.plan`) goes one way: the checkpoint is
opened once (`checkpoints.open_checkpoint`: the reader tells its layout, its run's record is
read once, the labels beside it), then the files come from what was opened (its config, the
files its run supplies from that record: `supplied`); nothing classifies or reads the path again.
A script that only needs the files (`model_files`) opens it only where they come from it.
"""
import dataclasses
import os
from typing import Optional

from bert_runner.runs import checkpoint_flags, checkpoints, supplied
from bert_runner.runs.record import read_record
from modeling import ConfigNeeded, checkpoint as model_checkpoint


@dataclasses.dataclass(frozen=True)
class ModelFiles:
    """The model a run starts from: its config, the file it was read from (named in messages),
    and the vocabulary (None when none was given or found)."""

    config: object  # the family's config (`modeling.BertConfig`)
    config_file: str
    vocab_file: Optional[str]


def model_files(bert_config_file, vocab_file, init_checkpoint, max_seq_length=None,
                flag="--init_checkpoint"):
    """The `ModelFiles` of a run, from the flags, a Hugging Face directory or a run's output_dir
    (`resolve`'s, opening the checkpoint only where the files come from it)."""
    return resolve(bert_config_file, vocab_file, init_checkpoint, max_seq_length, flag)[0]


def resolve(bert_config_file, vocab_file, init_checkpoint, max_seq_length=None,
            flag="--init_checkpoint", lora_adapters=None, open_checkpoint=False):
    """(`ModelFiles`, the `checkpoints.RunCheckpoint` of `init_checkpoint` with `lora_adapters` on
    top, opened once, or None): the config and vocabulary of a run, from the flags, a Hugging
    Face directory or a run's output_dir. The checkpoint is opened with `open_checkpoint`, and
    wherever the files come from it.

    When `init_checkpoint` (the checkpoint flag `flag`) is a Hugging Face model directory (or a
    weights file with its `config.json` beside it), its `config.json` is the config (its
    `"gelu"` read as the exact erf GELU) and its `vocab.txt` the vocabulary unless `vocab_file`
    is given; a TF Hub text-encoder SavedModel gives its encoder's settings and its vocabulary
    asset the same way; a `bert_config_file` given as well must describe the same model (else ValueError
    naming both files) and is used (its dropout rates). An original ELECTRA checkpoint (a
    released folder) without `bert_config_file` has its config read from its shapes by its
    family, and its `vocab.txt` beside it is the vocabulary unless `vocab_file` is given.
    A run's output_dir (or a checkpoint in it) without `bert_config_file` gives the
    bert_config.json the run wrote beside its run.json and, unless `vocab_file` is given, the
    vocabulary the run read (`supplied`; ValueError naming it when it is gone or changed).
    Otherwise `bert_config_file` is read (it is then required), and its pretraining objective
    checked against the one the checkpoint's run recorded (`check_objective`).
    `max_seq_length` is checked against the config's positions.
    """
    found = None
    if init_checkpoint and (open_checkpoint or not bert_config_file
                            or model_checkpoint.hf_home(init_checkpoint)
                            or model_checkpoint.is_saved_model(init_checkpoint)):
        # The one classification of the path: its layout, its run's record, its labels.
        found = checkpoints.open_checkpoint(init_checkpoint, flag, lora_adapters)
    else:
        checkpoint_flags.check_partial_directory(init_checkpoint, flag)
    if found is not None and found.config is not None:  # a Hugging Face or TF Hub directory
        return _carried_files(found, bert_config_file, vocab_file, max_seq_length, flag), found
    released = bool(init_checkpoint) and model_checkpoint.is_original_electra(
        found.location if found else init_checkpoint)
    if released and not bert_config_file:
        return _released_files(found, vocab_file, max_seq_length, flag), found
    if not bert_config_file:
        bert_config_file, vocab_file = _run_files(found, vocab_file, flag)
    config = model_checkpoint.load_config(bert_config_file, max_seq_length)
    check_objective(config, bert_config_file, init_checkpoint, flag, found and found.recorded)
    return ModelFiles(config, bert_config_file,
                      vocab_file or (_vocab_beside(init_checkpoint) if released else None)), found


def _carried_files(found, bert_config_file, vocab_file, max_seq_length, flag):
    """The files of a checkpoint that carries its config and vocabulary (a Hugging Face
    directory, a TF Hub SavedModel), `bert_config_file` in their place when it describes the
    same model."""
    config, config_file = found.config, found.config_file
    if bert_config_file:
        given = model_checkpoint.load_config(bert_config_file)
        differ = model_checkpoint.architecture_differences(given, config)
        if differ:
            raise ValueError(
                f"--bert_config_file={bert_config_file} does not describe the model of {flag}="
                f"{found.path} ({found.config_file}): {'; '.join(differ)}. Leave "
                "--bert_config_file out to use the directory's config")
        config, config_file = given, bert_config_file
    model_checkpoint.check_max_seq_length(config, max_seq_length, config_file)
    return ModelFiles(config, config_file, vocab_file or found.vocab_file)


def _run_files(found, vocab_file, flag):
    """(config file, vocabulary) of the run whose checkpoint `found` (opened; None: no
    checkpoint) is, when the config is not given: its bert_config.json, and the vocabulary it
    read unless `vocab_file` is given (None where it recorded none)."""
    files = found and supplied.supplied(found.path, flag, not vocab_file, found.recorded)
    if files is None:
        raise ValueError(supplied.required_unless("bert_config_file", flag))
    return files[0], vocab_file or files[1]


def _released_files(found, vocab_file, max_seq_length, flag):
    """The files of a checkpoint that comes without a config (a released ELECTRA folder, opened
    as `found`): the config its family reads from its shapes, the `vocab.txt` beside it."""
    read = found.family.config_from_checkpoint
    if read is None:
        raise ValueError(supplied.required_unless("bert_config_file", flag))
    try:
        config = read(found.shapes, checkpoint_flags.describe_source(found.location, flag))
    except ConfigNeeded as error:
        raise ValueError(f"{error}: pass the --hparams JSON it was pre-trained with as "
                         "--bert_config_file") from None
    model_checkpoint.check_max_seq_length(config, max_seq_length, found.location)
    return ModelFiles(config, found.location, vocab_file or _vocab_beside(found.location))


def _vocab_beside(checkpoint):
    """The `vocab.txt` in the folder of `checkpoint` (a released folder's), or None."""
    vocab = os.path.join(model_checkpoint.checkpoint_folder(checkpoint), "vocab.txt")
    return vocab if os.path.isfile(vocab) else None


def check_objective(config, bert_config_file, checkpoint, flag="--init_checkpoint",
                    recorded=None):
    """Refuses a config whose pretraining objective is not the one recorded beside `checkpoint`
    (`record.RunRecord.objective`; `recorded`: its record where already read): an LTR
    checkpoint with the original bert_config.json would silently become a bidirectional
    encoder, and the reverse a causal one."""
    recorded = recorded or read_record(checkpoint)
    if recorded.objective is not None and recorded.objective != config.pretraining_objective:
        raise ValueError(
            f"--bert_config_file={bert_config_file} describes a {config.pretraining_objective!r} "
            f"model but {flag}={checkpoint} was trained as {recorded.objective!r} "
            f"({recorded.objective_file}): pass the config that records its objective (the "
            "pre-training output_dir's bert_config.json)")
