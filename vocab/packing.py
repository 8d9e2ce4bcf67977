"""`[CLS] A [SEP] (B [SEP])` packing of word-pieces into fixed-length model inputs, as the
original's run_classifier `convert_single_example` and extract_features `convert_examples_to_features`.

One place for the layout every sentence (pair) task uses (classifier, extract_features, SWAG, ...):

    tokens, segment_ids = pack_pair(tokens_a, tokens_b, max_seq_length)
    input_ids, input_mask, segment_ids = pad_inputs(
        tokenizer.convert_tokens_to_ids(tokens), segment_ids, max_seq_length)

`vocab.fast_tokenizer.FastBertTokenizer.pack` is the same layout and truncation vectorised in the
TensorFlow graph (for raw-text SavedModels); the tests check the two agree.
"""


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """Truncates a sequence pair in place to `max_length` tokens in total.

    Pops from the end of the longer list, from B on ties: deterministic, unlike the random
    truncation of create_pretraining_data.
    """
    while len(tokens_a) + len(tokens_b) > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()


def pack_pair(tokens_a, tokens_b, max_seq_length):
    """The original layout of one example, truncated to fit `max_seq_length`.

    Args:
      tokens_a: list of word-pieces; tokens_b: list of word-pieces, or None/empty for a single
        sequence (the original's `if tokens_b:`: an empty B gives a single-sequence encoding).
      max_seq_length: int, at least 3 (2 without B).
    Returns:
      (tokens, segment_ids): `[CLS] A [SEP]` with segment 0, then `B [SEP]` with segment 1; at
      most max_seq_length long (A and B are copied, not changed).
    """
    tokens_a = list(tokens_a)
    tokens_b = list(tokens_b) if tokens_b else None
    if tokens_b:
        # Account for [CLS], [SEP], [SEP] with "- 3".
        truncate_seq_pair(tokens_a, tokens_b, max_seq_length - 3)
    else:
        # Account for [CLS] and [SEP] with "- 2".
        tokens_a = tokens_a[:max_seq_length - 2]
    tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
    segment_ids = [0] * len(tokens)
    if tokens_b:
        tokens += tokens_b + ["[SEP]"]
        segment_ids += [1] * (len(tokens_b) + 1)
    return tokens, segment_ids


def pad_inputs(input_ids, segment_ids, max_seq_length):
    """Zero-pads to `max_seq_length`: returns (input_ids, input_mask, segment_ids), lists of int."""
    padding = [0] * (max_seq_length - len(input_ids))
    return (list(input_ids) + padding, [1] * len(input_ids) + padding,
            list(segment_ids) + padding)
