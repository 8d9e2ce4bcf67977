"""Packed pretraining records: several sentence pairs in one row of `max_seq_length` tokens.

At `max_seq_length=512` over half the tokens of Wikipedia's pairs are padding (Krell et al.
2021, arXiv 2107.02027; `bench/packing.py` prints the share on the bundled novels); a packed row
fills that room with more pairs, so a step of the same static shape trains on more tokens. Each
pair keeps what it has unpacked: its positions restart at 0 (`position_ids`), its attention
stays inside it (`sequence_ids`, `modeling.attention.mask_bias`), its masked tokens are
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
# Rows kept open for the next pairs: more fill rows better, and hold more records in memory.
OPEN_ROWS = 64
PACKED_FEATURES = ("position_ids", "sequence_ids", "sequence_starts")


def filled_slots(sequence_starts):
    """float32 `[B, K]`: 1.0 for each row's sequence slots that hold a pair (slot 0, and every
    later slot whose start is not 0), else 0.0. Any backend (`keras.ops`)."""
    from keras import ops

    slots = ops.arange(ops.shape(sequence_starts)[1])
    return ops.cast(ops.logical_or(ops.not_equal(sequence_starts, 0), slots[None, :] == 0),
                    "float32")


def packed_name_to_features(max_seq_length, max_sequences_per_row, next_sentence=True):
    """The `tf.io.FixedLenFeature`s packed records add to (or change in) `features.name_to_features`'s."""
    import tensorflow as tf

    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
            for name in ("position_ids", "sequence_ids")}
    spec["sequence_starts"] = tf.io.FixedLenFeature([max_sequences_per_row], tf.int64)
    if next_sentence:
        spec["next_sentence_labels"] = tf.io.FixedLenFeature([max_sequences_per_row], tf.int64)
    return spec


class FirstFit(object):
    """Items (pairs) into rows, first fit: each goes to the first open row where its tokens,
    its masked tokens and a slot fit, else to a new row; with `open_rows` rows open, the
    fullest is closed first. The same items in the same order always give the same rows.

    `add(item, tokens, predictions)` returns the rows it closed (lists of items); `flush()` the
    rest, in the order they were opened.
    """

    def __init__(self, max_seq_length, max_predictions_per_seq, max_sequences_per_row,
                 open_rows=OPEN_ROWS):
        if max_sequences_per_row < 2:
            raise ValueError("max_sequences_per_row=%d: packing needs 2 or more"
                             % max_sequences_per_row)
        self.capacity = (max_seq_length, max_predictions_per_seq, max_sequences_per_row)
        self.open_rows = open_rows
        self._open = []  # [items, tokens, predictions]
        self.num_items = self.num_rows = self.num_tokens = 0

    def add(self, item, tokens, predictions):
        closed = []
        max_tokens, max_predictions, max_items = self.capacity
        row = next((r for r in self._open if r[1] + tokens <= max_tokens
                    and r[2] + predictions <= max_predictions and len(r[0]) < max_items), None)
        if row is None:
            if len(self._open) == self.open_rows:
                fullest = max(range(len(self._open)), key=lambda i: self._open[i][1])
                closed.append(self._open.pop(fullest)[0])
            row = [[], 0, 0]
            self._open.append(row)
        row[0].append(item)
        row[1] += tokens
        row[2] += predictions
        self.num_items += 1
        self.num_tokens += tokens
        self.num_rows += len(closed)
        return closed

    def flush(self):
        rows, self._open = [r[0] for r in self._open], []
        self.num_rows += len(rows)
        return rows

    def stats(self):
        """`(pairs, rows, padding share unpacked, padding share packed)` so far."""
        slots = self.capacity[0]
        unpacked = 1.0 - self.num_tokens / max(self.num_items * slots, 1)
        packed = 1.0 - self.num_tokens / max(self.num_rows * slots, 1)
        return self.num_items, self.num_rows, unpacked, packed


def pack_instances(instances, max_seq_length, max_predictions_per_seq, max_sequences_per_row,
                   open_rows=OPEN_ROWS):
    """`TrainingInstance`s -> (rows: lists of instances, the `FirstFit`, for its `stats()`).
    `features.ExampleEncoder.encode_packed` writes each row."""
    fit = FirstFit(max_seq_length, max_predictions_per_seq, max_sequences_per_row, open_rows)
    rows = []
    for instance in instances:
        rows += fit.add(instance, len(instance.input_ids), len(instance.masked_lm_positions))
    return rows + fit.flush(), fit
