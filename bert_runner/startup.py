"""Checks of the vocabulary every script runs before doing any work, so bad combinations fail in
seconds with a message that names the file, instead of hours later (or silently, as in the
original), and of the model's settings that name a flag. The config and the checkpoint are
checked by `modeling.checkpoint`.

Light to import (no TensorFlow): create_pretraining_data's pipeline uses `warn_if_case_mismatch`
too, and its spawned worker processes import the pipeline.
"""
from absl import logging

from vocab import tokenization

# A vocabulary is taken as uncased when at most this share of its word-pieces with a cased letter
# have an upper-case one (the released uncased and Chinese vocabularies: 0 and 2 of 3,885, "<S>"
# and "<T>"), and as cased from this share up (a cased vocabulary keeps its capitalised words).
UNCASED_MAX_SHARE = 0.002
CASED_MIN_SHARE = 0.05
# Fewer word-pieces with letters than this say nothing about the case.
_MIN_CASED_ENTRIES = 20


def check_pooling(method, config):
    """Refuses --pooling=cls for a causal `config`: a left-to-right model's [CLS] row attends
    to itself only, so its vector is the same for every text (`modeling.layers.pooling`)."""
    if method == "cls" and config.causal:
        raise ValueError(
            "--pooling=cls of a left-to-right model (its config records \"pretraining_objective\""
            ": \"ltr\") gives every text the same vector (its [CLS] sees only itself): use "
            "--pooling=mean or max")


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
    tokens = [t for t in vocab if not (t.startswith("[") and t.endswith("]"))]
    # Each distinct character (a few thousand in a vocabulary) is looked at once, not once per
    # word-piece holding it: every script's start-up reads tens of thousands of word-pieces.
    characters = set().union(*tokens)
    has_case = {c for c in characters if c.lower() != c.upper()}
    capitals = {c for c in characters if c.isupper()}
    cased = [t for t in tokens if not has_case.isdisjoint(t)]
    return len(cased), sum(not capitals.isdisjoint(t) for t in cased)


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
