"""Checks every script runs before doing any work, so bad combinations fail in seconds with a
message that names the file, instead of hours later (or silently, as in the original)."""
from modeling.config import BertConfig
from vocab import tokenization


def load_config(bert_config_file, max_seq_length=None):
    """Reads and validates `bert_config.json`; checks `max_seq_length` fits its positions."""
    config = BertConfig.from_json_file(bert_config_file)
    if max_seq_length is not None and max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"Cannot use sequence length {max_seq_length} because the BERT model was only trained "
            f"up to sequence length {config.max_position_embeddings} ({bert_config_file})"
        )
    return config


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


def load_tokenizer(vocab_file, do_lower_case, init_checkpoint, config, bert_config_file):
    """Builds the faithful tokenizer after the original's case check and our vocab-size check."""
    tokenization.validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
    tokenizer = tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case)
    check_vocab_matches_config(tokenizer.vocab, vocab_file, config, bert_config_file)
    return tokenizer
