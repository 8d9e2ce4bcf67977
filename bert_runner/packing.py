"""Packed rows: several sequences in one row of `max_seq_length` tokens, for steps of static shape.

Under XLA (GPUs, TPUs) every step computes the whole `[batch, max_seq_length]` grid, so padding
costs as much as text. Packing fills a row's padding with more sequences (Krell et al. 2021,
arXiv 2107.02027). Each sequence keeps what it has unpacked: its positions restart at 0
(`position_ids`), its attention stays inside it (`sequence_ids`,
`modeling.layers.attention.mask_bias`), and its own [CLS] is pooled (`sequence_starts`,
`modeling.BertModel.pool`), so a head sees the same vectors as on the unpacked rows and a loss
averaged over the filled slots (`slot_mean`) is the unpacked batch's mean over rows.

This module holds what pre-training and fine-tuning share: the first-fit packer (`FirstFit`),
the filled slots of a batch, and the packing of fine-tuning records (`RecordPacker`, used by
`bert_runner.splits` for `--max_sequences_per_row`). Pre-training's records
(the pre-training task's `data.packing`) add their masked tokens.

A packed fine-tuning record holds the task's features with these changes (K =
max_sequences_per_row):

| feature                             | length          | content / padding                  |
|-------------------------------------|-----------------|------------------------------------|
| input_ids, input_mask, segment_ids  | max_seq_length  | the sequences one after another    |
| position_ids                        | max_seq_length  | position inside its sequence       |
| sequence_ids                        | max_seq_length  | 1, 2, ... per sequence, 0 padding  |
| sequence_starts                     | K               | each sequence's [CLS] position     |
| every other feature (label_ids, is_real_example) | K × its own | each sequence's, 0-padded |

Slot 0 always holds a sequence (at position 0); a later slot is filled where its start is not 0
(`filled_slots`).
"""
import numpy as np

# Rows kept open for the next sequences: more fill rows better, and hold more of them in memory.
OPEN_ROWS = 64
# The features that run along the tokens of a fine-tuning record; the others are per sequence.
TOKEN_FEATURES = ("input_ids", "input_mask", "segment_ids")


def filled_slots(sequence_starts):
    """float32 `[B, K]`: 1.0 for each row's sequence slots that hold a sequence (slot 0, and
    every later slot whose start is not 0), else 0.0. Any backend (`keras.ops`)."""
    from keras import ops

    slots = ops.arange(ops.shape(sequence_starts)[1])
    return ops.cast(ops.logical_or(ops.not_equal(sequence_starts, 0), slots[None, :] == 0),
                    "float32")


def slot_mean(per_slot, sequence_starts):
    """The mean of `per_slot` `[B·K]` (one value per sequence slot, row-major) over the filled
    slots of `sequence_starts` `[B, K]`: the unpacked batch's mean over its rows."""
    from keras import ops

    weights = ops.reshape(filled_slots(sequence_starts), (-1,))
    return ops.sum(per_slot * weights) / ops.sum(weights)


class FirstFit(object):
    """Items (sequences) into rows, first fit: each goes to the first open row where its tokens,
    its masked tokens and a slot fit, else to a new row; with `open_rows` rows open, the
    fullest is closed first. The same items in the same order always give the same rows.

    `add(item, tokens, predictions)` returns the rows it closed (lists of items); `flush()` the
    rest, in the order they were opened. Fine-tuning items have no masked tokens: 0 of 0.
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
        """`(sequences, rows, padding share unpacked, padding share packed)` so far."""
        slots = self.capacity[0]
        unpacked = 1.0 - self.num_tokens / max(self.num_items * slots, 1)
        packed = 1.0 - self.num_tokens / max(self.num_rows * slots, 1)
        return self.num_items, self.num_rows, unpacked, packed


def packed_feature_spec(feature_spec, max_seq_length, max_sequences_per_row):
    """The `tf.io.FixedLenFeature`s of `RecordPacker`'s records for a task's `feature_spec`:
    the token features as they are, each other feature `[K, *its shape]`, and the packing's."""
    import tensorflow as tf

    k = max_sequences_per_row
    spec = {name: (value if name in TOKEN_FEATURES
                   else tf.io.FixedLenFeature([k, *value.shape], value.dtype))
            for name, value in feature_spec.items()}
    spec.update({name: tf.io.FixedLenFeature([max_seq_length], tf.int64)
                 for name in ("position_ids", "sequence_ids")})
    spec["sequence_starts"] = tf.io.FixedLenFeature([k], tf.int64)
    return spec


class RecordPacker(object):
    """Packs a fine-tuning split's `tf.train.Example`s (right-padded rows of the task's
    `feature_spec`) first-fit into rows of up to `max_sequences_per_row` sequences.

        packer = RecordPacker(task.feature_spec(True), 128, 4)
        write_records(path, packer.pack(records))
        sequences, rows, padding_before, padding_after = packer.fit.stats()
    """

    def __init__(self, feature_spec, max_seq_length, max_sequences_per_row, open_rows=OPEN_ROWS):
        missing = [name for name in TOKEN_FEATURES if name not in feature_spec]
        if missing:
            raise ValueError("packing needs the token features %s; the records have %s"
                             % (", ".join(missing), ", ".join(sorted(feature_spec))))
        self.feature_spec = feature_spec
        self.max_seq_length = max_seq_length
        self.max_sequences_per_row = max_sequences_per_row
        self.fit = FirstFit(max_seq_length, 0, max_sequences_per_row, open_rows)

    def pack(self, records):
        """Yields the packed `tf.train.Example`s of `records`, each row once it is closed."""
        for record in records:
            values = {name: _values(record, name) for name in self.feature_spec}
            length = int(np.sum(values["input_mask"]))
            if np.any(values["input_mask"][length:]):
                raise ValueError("packing needs right-padded records: input_mask %s"
                                 % values["input_mask"].tolist())
            for row in self.fit.add((values, length), length, 0):
                yield self._encode(row)
        for row in self.fit.flush():
            yield self._encode(row)

    def _encode(self, row):
        """One packed `tf.train.Example` of `row`: [(feature values, real length)]."""
        import tensorflow as tf
        from bert_runner.tfrecords import float_feature, int_feature

        s, k = self.max_seq_length, self.max_sequences_per_row
        lengths = [length for _, length in row]
        row = [values for values, _ in row]
        starts = np.cumsum([0] + lengths[:-1])
        columns = {name: np.concatenate([item[name][:n] for item, n in zip(row, lengths)])
                   for name in TOKEN_FEATURES}
        columns["position_ids"] = np.concatenate([np.arange(n) for n in lengths])
        columns["sequence_ids"] = np.repeat(np.arange(1, len(row) + 1), lengths)
        features = {name: int_feature(np.pad(values, (0, s - len(values))).tolist())
                    for name, values in columns.items()}
        features["sequence_starts"] = int_feature(np.pad(starts, (0, k - len(row))).tolist())
        for name, spec in self.feature_spec.items():
            if name in TOKEN_FEATURES:
                continue
            values = np.concatenate([item[name] for item in row])
            values = np.pad(values, (0, (k - len(row)) * int(np.prod(spec.shape, dtype=int))))
            features[name] = (float_feature(values.tolist()) if spec.dtype == tf.float32
                              else int_feature(values.tolist()))
        return tf.train.Example(features=tf.train.Features(feature=features))


def _values(record, name):
    """The values of feature `name` of a `tf.train.Example` as a numpy array."""
    feature = record.features.feature[name]
    return np.asarray(getattr(feature, feature.WhichOneof("kind")).value)
