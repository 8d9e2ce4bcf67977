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

`Packer` packs a stream of unpacked records first-fit into a bounded set of open rows: the same
records in the same order always give the same rows.
"""
import numpy as np

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


class Packer(object):
    """Packs unpacked pretraining records (serialized `tf.train.Example`s) into packed ones
    (`FirstFit`; its args).

    Use: `rows = list(packer.pack(records)) + list(packer.flush())`; `packer.stats()` after.
    """

    def __init__(self, max_seq_length, max_predictions_per_seq, max_sequences_per_row,
                 open_rows=OPEN_ROWS):
        self.fit = FirstFit(max_seq_length, max_predictions_per_seq, max_sequences_per_row,
                            open_rows)
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.max_sequences_per_row = max_sequences_per_row

    def pack(self, records):
        """Yields packed serialized records as rows fill; keeps the rest open for `flush`."""
        for record in records:
            pair = _parse(record)
            length = int(pair["input_mask"].sum())
            predictions = int(np.count_nonzero(pair.get("masked_lm_weights", ())))
            for row in self.fit.add((pair, length, predictions), length, predictions):
                yield self._finish(row)

    def flush(self):
        """Yields the rows still open, in the order they were opened."""
        for row in self.fit.flush():
            yield self._finish(row)

    def stats(self):
        return self.fit.stats()

    def _finish(self, row):
        """The packed record (serialized) of a row's `(parsed pair, tokens, predictions)`."""
        s, p, k = self.max_seq_length, self.max_predictions_per_seq, self.max_sequences_per_row
        out = {name: np.zeros(s, np.int64) for name in
               ("input_ids", "input_mask", "segment_ids", "position_ids", "sequence_ids")}
        masked = "masked_lm_positions" in row[0][0]
        labels = "next_sentence_labels" in row[0][0]
        if masked:
            out.update(masked_lm_positions=np.zeros(p, np.int64), masked_lm_ids=np.zeros(p, np.int64),
                       masked_lm_weights=np.zeros(p, np.float32))
        out["sequence_starts"] = np.zeros(k, np.int64)
        if labels:
            out["next_sentence_labels"] = np.zeros(k, np.int64)
        start = done = 0
        for slot, (pair, length, predictions) in enumerate(row):
            span = slice(start, start + length)
            for name in ("input_ids", "input_mask", "segment_ids"):
                out[name][span] = pair[name][:length]
            out["position_ids"][span] = np.arange(length)
            out["sequence_ids"][span] = slot + 1
            out["sequence_starts"][slot] = start
            if labels:
                out["next_sentence_labels"][slot] = pair["next_sentence_labels"][0]
            if masked:
                taken = slice(done, done + predictions)
                out["masked_lm_positions"][taken] = pair["masked_lm_positions"][:predictions] + start
                out["masked_lm_ids"][taken] = pair["masked_lm_ids"][:predictions]
                out["masked_lm_weights"][taken] = pair["masked_lm_weights"][:predictions]
            start += length
            done += predictions
        return _serialize(out)


def _parse(record):
    import tensorflow as tf

    example = tf.train.Example.FromString(record)
    return {name: np.array(feature.float_list.value if feature.HasField("float_list")
                           else feature.int64_list.value)
            for name, feature in example.features.feature.items()}


def _serialize(features):
    import tensorflow as tf

    feature = {}
    for name, values in features.items():
        if values.dtype == np.float32:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
