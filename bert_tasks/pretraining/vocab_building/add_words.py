"""Your words in a checkpoint's vocabulary (`add_vocab_words.py`).

Each new word becomes one word-piece of the vocabulary and one row of the model:

* The `[unusedN]` slots are taken first, in the order of their ids: the word replaces the slot's
  line of `vocab.txt`, so the vocabulary keeps its size and the checkpoint its shapes (the
  original README's advice, done for you and checked).
* The words left over are appended: `bert/embeddings/word_embeddings` and the masked-LM output
  bias `cls/predictions/output_bias` (when the checkpoint has the masked-LM head) grow by one row
  each, `vocab_size` grows with them.

A new word's row (`new_word_init`):

* `mean_of_pieces`: the mean of the rows of the word-pieces the old vocabulary split the word into,
  its output bias the mean of theirs. The word starts where the model already put its pieces.
* `random`: an appended row is drawn as the original draws word embeddings (truncated normal,
  stddev `initializer_range`), its output bias 0 (the original's zeros); an `[unusedN]` slot keeps
  its row and bias as they are, so a checkpoint whose words all went into slots is the input
  checkpoint, tensor for tensor.

The other tensors are copied bit for bit. What the checkpoint holds of the pre-training model is
written: the encoder, and the heads it has (none for an encoder alone, as a Hugging Face
`BertModel` directory or a sentence encoder). Only the model's weights are written (what a released
`bert_model.ckpt` holds): optimizer slots (`adam_m`, `adam_v`) and `global_step` are dropped,
because no script here (nor the original) reads them from `--init_checkpoint`: a run from it starts
its optimizer afresh. The config and vocabulary of a Hugging Face directory or a run's output_dir
are its own when not given (`bert_runner.runs.model_files`), and so is the casing it records.

Refused, every word named with its line: a word that is already a whole word-piece of the
vocabulary; one the BasicTokenizer would split (punctuation, spaces, CJK characters) or, with
`do_lower_case`, would change (capitals, accents), which no text could ever reach; one too long for
the WordPiece tokenizer; and a vocabulary whose number of lines is not the config's `vocab_size`
(the rows of the appended words would not be theirs). A word given twice is added once.
"""
import codecs
import copy
import dataclasses
import os
import re
import shutil
import uuid
from typing import Optional

import numpy as np
from absl import logging

from bert_runner import startup
from vocab import tokenization

INIT_CHOICES = ("mean_of_pieces", "random")
WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"
OUTPUT_BIAS = "cls/predictions/output_bias"
CHECKPOINT_NAME = "bert_model.ckpt"
_UNUSED = re.compile(r"\[unused\d+\]")
# Problems shown in a refusal; the count of the others follows.
_SHOWN = 20


@dataclasses.dataclass(frozen=True)
class Options(object):
    """The flags of `add_vocab_words.py` (see its definitions for their meaning).

    `vocab_file`, `bert_config_file`: None where `init_checkpoint` supplies them (a Hugging Face
    directory, a run's output_dir). `do_lower_case`: None for the casing the checkpoint records
    (a Hugging Face directory's tokenizer_config.json, a run's run.json), else True.
    """
    vocab_file: Optional[str]
    bert_config_file: Optional[str]
    init_checkpoint: str
    words_file: str
    output_dir: str
    do_lower_case: Optional[bool] = None
    new_word_init: str = "mean_of_pieces"
    random_seed: int = 12345


@dataclasses.dataclass(frozen=True)
class NewWord(object):
    """Where a word went: its id, the `[unusedN]` slot it took (None when appended), and the
    word-pieces the old vocabulary split it into."""
    word: str
    id: int
    slot: str
    old_pieces: tuple


@dataclasses.dataclass
class Result(object):
    """What `run` wrote."""
    words: list  # NewWord, in the order of the words file
    vocab_size: int  # of the written vocabulary and config
    checkpoint: str  # the written checkpoint's prefix
    heads: list  # the original names of the head variables written (none: the encoder alone)


def read_words(words_file):
    """The words of `words_file` (one a line; blank lines skipped; spaces around a word dropped)
    as [(line number, word)], each word once (later repetitions are logged and skipped).

    Read with plain Python, not TensorFlow's file API as a corpus is: a words file that cannot
    be read is refused before TensorFlow is even imported.
    """
    with open(words_file, "rb") as f:
        data = f.read().removeprefix(codecs.BOM_UTF8)
    words, first_line, repeated = [], {}, []
    for line_number, raw in enumerate(data.split(b"\n"), 1):
        try:
            word = raw.decode("utf-8").strip()
        except UnicodeDecodeError as e:
            raise ValueError("--words_file=%s line %d is not valid UTF-8 (byte %d of the line: "
                             "%r)" % (words_file, line_number, e.start + 1,
                                      raw[e.start:e.start + 1])) from e
        if not word:
            continue
        if word in first_line:
            repeated.append("%r (lines %d and %d)" % (word, first_line[word], line_number))
            continue
        first_line[word] = line_number
        words.append((line_number, word))
    if repeated:
        logging.warning("--words_file=%s repeats %d words, each added once: %s",
                        words_file, len(repeated), ", ".join(repeated[:_SHOWN]))
    if not words:
        raise ValueError("--words_file=%s holds no words (one word a line)" % words_file)
    return words


# Hugging Face's WordpieceTokenizer's max_input_chars_per_word (the original's is 200).
_HF_MAX_CHARS_PER_WORD = 100


def word_problems(words, vocab, do_lower_case):
    """Why words cannot be one word-piece of their own: a list of messages, one a word.

    Args:
      words: [(line number, word)].
      vocab: {token: id} of the old vocabulary.
      do_lower_case: the flag the model's text is tokenized with.
    """
    keep_case = tokenization.BasicTokenizer(do_lower_case=False)
    tokenizer = tokenization.BasicTokenizer(do_lower_case=do_lower_case)
    problems = []
    for line, word in words:
        where = "line %d %r" % (line, word)
        kept = keep_case.tokenize(word)
        if len(kept) == 1 and kept != [word]:
            seen = tokenizer.tokenize(word)[0]
            problems.append("%s loses characters the BasicTokenizer removes (control, format or "
                            "zero-width ones) and is seen as %r%s"
                            % (where, seen, (" (already in the vocabulary)" if seen in vocab
                                             else ": add %r" % seen)))
        elif kept != [word]:
            problems.append("%s is split by the BasicTokenizer into %s: punctuation, spaces and "
                            "CJK characters are always split off, so no text has it as one word"
                            % (where, " ".join(map(repr, tokenizer.tokenize(word))) or "nothing"))
        elif tokenizer.tokenize(word) != [word]:
            [seen] = tokenizer.tokenize(word)
            problems.append("%s changes under --do_lower_case=True (lower-cased, accents "
                            "stripped) into %r, which is what the model sees%s"
                            % (where, seen, (" (already in the vocabulary)" if seen in vocab
                                             else ": add %r" % seen)))
        elif word in vocab:
            problems.append("%s is already in the vocabulary (id %d)" % (where, vocab[word]))
        elif len(word) > tokenization.MAX_INPUT_CHARS_PER_WORD:
            problems.append("%s is longer than %d characters: the WordPiece tokenizer makes "
                            "such a word [UNK]" % (where, tokenization.MAX_INPUT_CHARS_PER_WORD))
    return problems


def place_words(words, vocab_lines, vocab):
    """[NewWord]: the `[unusedN]` slots first (in the order of their ids), then appended ids."""
    slots = iter([i for i, token in enumerate(vocab_lines) if _UNUSED.fullmatch(token)])
    pieces = tokenization.WordpieceTokenizer(vocab=vocab)
    placed, appended = [], 0
    for _, word in words:
        slot = next(slots, None)
        if slot is None:
            word_id, appended = len(vocab_lines) + appended, appended + 1
        else:
            word_id = slot
        placed.append(NewWord(word, word_id, None if slot is None else vocab_lines[slot],
                              tuple(pieces.tokenize(word))))
    return placed


def grown_rows(embeddings, bias, placed, vocab, opts, initializer_range):
    """The word-embedding table `[V', H]` and output bias `[V']` with the new words' rows (new
    arrays) from the old `[V, H]` and `[V]`; `bias` None (no masked-LM head) stays None."""
    num_appended = sum(word.slot is None for word in placed)
    new_rows = np.zeros((num_appended, embeddings.shape[1]), dtype=embeddings.dtype)
    if opts.new_word_init == "random":
        import keras  # Keras' TruncatedNormal initializer draws with this function
        new_rows[:] = keras.random.truncated_normal(
            new_rows.shape, stddev=initializer_range, seed=opts.random_seed)
    embeddings = np.concatenate([embeddings, new_rows])
    if bias is not None:
        bias = np.concatenate([bias, np.zeros(num_appended, dtype=bias.dtype)])
    if opts.new_word_init == "mean_of_pieces":
        for word in placed:
            ids = [vocab[piece] for piece in word.old_pieces]
            embeddings[word.id] = embeddings[ids].mean(axis=0)
            if bias is not None:
                bias[word.id] = bias[ids].mean()
    return embeddings, bias


def check_inputs(opts):
    """Reads and checks the words, the vocabulary and the config before any model is built.

    The config and vocabulary are `opts`' files, else those `opts.init_checkpoint` supplies (a
    Hugging Face directory, a run's output_dir: `bert_runner.runs.model_files`); the casing
    `opts.do_lower_case`, else the one the checkpoint records, else lower case.

    Returns (`opts` with those files and casing, config, vocab lines, {token: id}, [(line,
    word)]); raises ValueError naming the file (and the words with their lines).
    """
    if opts.new_word_init not in INIT_CHOICES:
        raise ValueError("--new_word_init=%s: must be one of %s"
                         % (opts.new_word_init, ", ".join(INIT_CHOICES)))
    words = read_words(opts.words_file)
    from bert_runner.runs import checkpoints, supplied
    from bert_runner.runs.model_files import model_files
    from modeling import families

    files = model_files(opts.bert_config_file, opts.vocab_file, opts.init_checkpoint)
    if files.vocab_file is None:
        raise ValueError(supplied.required_unless("vocab_file", "--init_checkpoint"))
    do_lower_case = opts.do_lower_case
    if do_lower_case is None:
        recorded = checkpoints.open_checkpoint(opts.init_checkpoint).do_lower_case
        do_lower_case = True if recorded is None else recorded
    opts = dataclasses.replace(opts, vocab_file=files.vocab_file,
                               bert_config_file=files.config_file, do_lower_case=do_lower_case)
    vocab_lines = tokenization.read_vocab_lines(opts.vocab_file)
    vocab = tokenization.load_vocab(opts.vocab_file)
    problems = word_problems(words, vocab, opts.do_lower_case)
    if problems:
        more = len(problems) - _SHOWN
        raise ValueError("--words_file=%s: %d of its %d words cannot be added:\n%s%s"
                         % (opts.words_file, len(problems), len(words),
                            "\n".join(problems[:_SHOWN]),
                            "\n... and %d more" % more if more > 0 else ""))
    long_words = [(line, word) for line, word in words if len(word) > _HF_MAX_CHARS_PER_WORD]
    if long_words:
        logging.warning(
            "--words_file=%s: %d word(s) longer than %d characters (line %d %r...): this "
            "project's tokenizer, as the original's, keeps words of up to %d characters whole, "
            "but Hugging Face's BertTokenizer reads such a word as [UNK]", opts.words_file,
            len(long_words), _HF_MAX_CHARS_PER_WORD, long_words[0][0], long_words[0][1][:20],
            tokenization.MAX_INPUT_CHARS_PER_WORD)
    config = files.config
    if len(vocab_lines) != config.vocab_size:
        raise ValueError(
            "%s has %d word-pieces but vocab_size in %s is %d: appended words would not get "
            "their own rows of the checkpoint. Pass the vocab.txt and %s that came with the "
            "checkpoint" % (opts.vocab_file, len(vocab_lines), opts.bert_config_file,
                            config.vocab_size, families.of_config(config).config_file))
    tokenization.validate_case_matches_checkpoint(opts.do_lower_case, opts.init_checkpoint)
    startup.warn_if_case_mismatch(vocab, opts.vocab_file, opts.do_lower_case)
    return opts, config, vocab_lines, vocab, words


def extend_checkpoint(opts):
    """Writes `vocab.txt`, `bert_config.json` and `bert_model.ckpt` with the words added into
    `opts.output_dir`; returns a `Result`. Everything is checked before anything is written, and
    the files are written in a temporary directory first, then moved in, so `output_dir` never
    holds some of them new and others half-written."""
    opts, config, vocab_lines, vocab, words = check_inputs(opts)
    from bert_runner.results import dirs_removed_if_failed, missing_dirs

    # A refusal below (the checkpoint does not fit) leaves no folder it made behind.
    with dirs_removed_if_failed(missing_dirs(opts.output_dir)):
        return _write(opts, config, vocab_lines, vocab, words)


def _write(opts, config, vocab_lines, vocab, words):
    """`run`'s work once the inputs are checked."""
    from bert_runner.results import check_writable_dir
    from bert_runner.runs import checkpoints as run_checkpoints
    from modeling import checkpoint as checkpoints, families

    check_writable_dir(opts.output_dir, "output_dir")
    held = [name for name in (CHECKPOINT_NAME + ".index", "bert_config.json", "vocab.txt")
            if os.path.exists(os.path.join(opts.output_dir, name))]
    if held:
        raise ValueError("--output_dir=%s already holds %s (a model): the model with the words "
                         "added would replace it; choose a new or empty --output_dir"
                         % (opts.output_dir, ", ".join(held)))
    placed = place_words(words, vocab_lines, vocab)
    model = families.build_model("pretrainer", config)
    # The whole encoder is required (the loader refuses less); the heads are written where the
    # checkpoint has them: an encoder alone (a Hugging Face BertModel) gets none invented.
    report = run_checkpoints.load_checkpoint(model, opts.init_checkpoint, strict=False,
                                             flag="--init_checkpoint",
                                             config_file=opts.bert_config_file)
    weights = {name: var.numpy() for name, var in checkpoints.variables_by_name(model).items()}
    heads = [name for name, _ in model.tf1_head_variables() if name in report.loaded]
    weights[WORD_EMBEDDINGS], bias = grown_rows(
        weights[WORD_EMBEDDINGS], weights[OUTPUT_BIAS] if OUTPUT_BIAS in heads else None, placed,
        vocab, opts, config.initializer_range)
    if bias is not None:
        weights[OUTPUT_BIAS] = bias

    new_lines = list(vocab_lines) + [None] * sum(w.slot is None for w in placed)
    for word in placed:
        new_lines[word.id] = word.word
    new_config = copy.deepcopy(config)
    new_config.vocab_size = len(new_lines)
    encoder = families.build_model("encoder", new_config)
    for name, var in checkpoints.variables_by_name(encoder).items():
        var.assign(weights[name])

    staging = os.path.join(opts.output_dir, ".add_vocab_words.tmp-%s" % uuid.uuid4().hex)
    try:
        os.makedirs(staging)
        checkpoints.write_original(encoder, os.path.join(staging, CHECKPOINT_NAME),
                                   {name: weights[name] for name in heads})
        new_config.to_json_file(os.path.join(staging, "bert_config.json"))
        with open(os.path.join(staging, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("".join(token + "\n" for token in new_lines))
        # The checkpoint first and the vocabulary last: a reader that finds the new vocab.txt
        # finds the config and checkpoint it belongs to.
        for name in (CHECKPOINT_NAME + ".data-00000-of-00001", CHECKPOINT_NAME + ".index",
                     "bert_config.json", "vocab.txt"):
            os.replace(os.path.join(staging, name), os.path.join(opts.output_dir, name))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _log(placed, opts, len(vocab_lines), len(new_lines), heads)
    return Result(placed, len(new_lines), os.path.join(opts.output_dir, CHECKPOINT_NAME), heads)


def _log(placed, opts, old_size, new_size, heads):
    in_slots = [w for w in placed if w.slot is not None]
    for word in placed:
        logging.info("  %s: id %d (%s), was %s", word.word, word.id,
                     word.slot or "appended", " ".join(word.old_pieces))
    # The heads by their scopes (cls/predictions, cls/seq_relationship).
    scopes = sorted({"/".join(name.split("/")[:2]) for name in heads})
    logging.info("Added %d words to %s: %d into [unused*] slots, %d appended (vocab_size %d -> "
                 "%d; new rows: %s). Wrote vocab.txt, bert_config.json and %s (%s) in %s; its "
                 "text is tokenized with --do_lower_case=%s",
                 len(placed), opts.vocab_file, len(in_slots), len(placed) - len(in_slots),
                 old_size, new_size, opts.new_word_init, CHECKPOINT_NAME,
                 "the encoder and " + ", ".join(scopes) if scopes
                 else "the encoder alone: the checkpoint holds no pre-training head",
                 opts.output_dir, opts.do_lower_case)
