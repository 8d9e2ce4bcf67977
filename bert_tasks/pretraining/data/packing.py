"""Packed pretraining records: several sentence pairs in one row of `max_seq_length` tokens.

At `max_seq_length=512` over half the tokens of Wikipedia's pairs are padding (Krell et al.
2021, arXiv 2107.02027; `bench/packing.py` prints the share on the bundled novels); a packed row
fills that room with more pairs, so a step of the same static shape trains on more tokens. Each
pair keeps what it has unpacked: its positions restart at 0 (`position_ids`), its attention
stays inside it (`sequence_ids`, `modeling.layers.attention.mask_bias`), its masked tokens are
predicted as before and its next-sentence label is read from its own [CLS] (`sequence_starts`);
the losses are the means over the same masked tokens and the same pairs. Packed and unpacked
batches of the same pairs give the same losses and gradients (tests/test_packing.py).

A packed record holds the unpacked schema (`features`) with these changes:

| feature              | dtype   | length                  | content / padding                         |
|----------------------|---------|-------------------------|-------------------------------------------|
| input_ids, input_mask, segment_ids | int64 | max_seq_length | the pairs one after another, 0-padded |
| position_ids         | int64   | max_seq_length          | position inside its pair, 0-padded        |
| sequence_ids         | int64   | max_seq_length          | 1, 2, ... for each pair, 0 on padding     |
| masked_lm_*          |         | max_predictions_per_seq | every pair's, positions in the row        |
| sequence_starts      | int64   | max_sequences_per_row   | each pair's [CLS] position, 0-padded      |
| next_sentence_labels | int64   | max_sequences_per_row   | each pair's label, 0-padded               |

Slot 0 always holds a pair (at position 0); a later slot is filled where its start is not 0
(`filled_slots`). `max_predictions_per_seq` is the row's capacity: a pair joins a row only if its
tokens, its masked tokens and a free slot all fit.

`pack_instances` packs sentence pairs first-fit into a bounded set of open rows (`FirstFit`): the
same pairs in the same order always give the same rows. create_pretraining_data packs each
chunk's pairs where it makes them (`processing.ChunkProcessor`), before they are serialized.
"""
from bert_runner.packing import OPEN_ROWS, FirstFit


def packed_name_to_features(max_seq_length, max_sequences_per_row, next_sentence=True):
    """The `tf.io.FixedLenFeature`s packed records add to (or change in) `features.name_to_features`'s."""
    import tensorflow as tf

    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
            for name in ("position_ids", "sequence_ids")}
    spec["sequence_starts"] = tf.io.FixedLenFeature([max_sequences_per_row], tf.int64)
    if next_sentence:
        spec["next_sentence_labels"] = tf.io.FixedLenFeature([max_sequences_per_row], tf.int64)
    return spec


def pack_instances(instances, max_seq_length, max_predictions_per_seq, max_sequences_per_row,
                   open_rows=OPEN_ROWS):
    """`TrainingInstance`s -> (rows: lists of instances, the `FirstFit`, for its `stats()`).
    `features.ExampleEncoder.encode_packed` writes each row."""
    fit = FirstFit(max_seq_length, max_predictions_per_seq, max_sequences_per_row, open_rows)
    rows = []
    for instance in instances:
        rows += fit.add(instance, len(instance.input_ids), len(instance.masked_lm_positions))
    return rows + fit.flush(), fit
