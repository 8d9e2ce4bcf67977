"""The pretraining TFRecord schema and a fast serializer for it.

The schema is the original's (`create_pretraining_data.py` writes it, `run_pretraining.py` parses it),
so files made by either side train on the other. One record is a `tf.train.Example` with:

| feature              | dtype   | length                  | content / padding                          |
|----------------------|---------|-------------------------|--------------------------------------------|
| input_ids            | int64   | max_seq_length          | ids after masking, 0-padded                |
| input_mask           | int64   | max_seq_length          | 1 for real tokens, 0 for padding           |
| segment_ids          | int64   | max_seq_length          | 0 for [CLS] A [SEP], 1 for B [SEP], 0 pad  |
| masked_lm_positions  | int64   | max_predictions_per_seq | ascending, 0-padded                        |
| masked_lm_ids        | int64   | max_predictions_per_seq | original ids there, 0-padded               |
| masked_lm_weights    | float32 | max_predictions_per_seq | 1.0 real, 0.0 padding                      |
| next_sentence_labels | int64   | 1                       | 0 = actual next (IsNext), 1 = random next  |

Records made without next sentence prediction (`--next_sentence_prediction=false`) have no
`next_sentence_labels`; that absence is how `validation.check_records` recognises them. Records
of the left-to-right language model (`--pretraining_objective=ltr`, `pretraining.data.ltr`) have
the first three features alone: unmasked ids, every real position a next-token target.

`ExampleEncoder` writes the protobuf wire format directly: building `tf.train.Example` messages
costs several times more than creating the instance (`bench/create_pretraining_data.py`). The bytes parse to the
same message (tests compare against `tf.train.Example` and against the original's records).
Record bytes are not comparable across tools anyway: protobuf map order varies from run to run.
"""
import functools
import struct

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


def name_to_features(max_seq_length, max_predictions_per_seq, next_sentence=True,
                     masked_lm=True):
    """`tf.io.FixedLenFeature`s for `tf.io.parse_example`, exactly as the original run_pretraining.

    Args:
      next_sentence: False for records made without next sentence prediction (no label).
      masked_lm: False for the left-to-right model's records (no masked_lm_* features).
    Returns:
      dict feature name -> FixedLenFeature: ids/masks [max_seq_length] int64, masked_lm_*
      [max_predictions_per_seq] (int64; weights float32), next_sentence_labels [1] int64.
    """
    import tensorflow as tf  # Deferred: the schema names are useful without TensorFlow.
    seq, pred = [max_seq_length], [max_predictions_per_seq]
    spec = {
        "input_ids": tf.io.FixedLenFeature(seq, tf.int64),
        "input_mask": tf.io.FixedLenFeature(seq, tf.int64),
        "segment_ids": tf.io.FixedLenFeature(seq, tf.int64),
    }
    if masked_lm:
        spec["masked_lm_positions"] = tf.io.FixedLenFeature(pred, tf.int64)
        spec["masked_lm_ids"] = tf.io.FixedLenFeature(pred, tf.int64)
        spec["masked_lm_weights"] = tf.io.FixedLenFeature(pred, tf.float32)
    if next_sentence:
        spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    return spec


def _varint(n):
    """Protobuf base-128 varint of a non-negative int."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _delimited(tag, payload):
    """A length-delimited field: tag byte, varint length, payload."""
    return tag + _varint(len(payload)) + payload


# Wire tags (field number << 3 | wire type 2 = length-delimited).
_F1, _F2, _F3 = b"\x0a", b"\x12", b"\x1a"
_ONE_F32, _ZERO_F32 = struct.pack("<f", 1.0), struct.pack("<f", 0.0)


def _map_entry(name, feature):
    """Features.feature map entry {key: name, value: Feature}, as bytes."""
    return _delimited(_F1, _delimited(_F1, name.encode()) + _delimited(_F2, feature))


def _int64_entry(name, packed):
    """Entry of Feature{int64_list: Int64List{value: packed varints}}."""
    return _map_entry(name, _delimited(_F3, _delimited(_F1, packed)))


# The entries below depend on a few small ints only: computed once per distinct value.
@functools.lru_cache(maxsize=None)
def _input_mask_entry(length, max_seq_length):
    return _int64_entry("input_mask", b"\x01" * length + b"\x00" * (max_seq_length - length))


@functools.lru_cache(maxsize=None)
def _segment_ids_entry(num_a, length, max_seq_length):
    return _int64_entry("segment_ids", b"\x00" * num_a + b"\x01" * (length - num_a)
                        + b"\x00" * (max_seq_length - length))


@functools.lru_cache(maxsize=None)
def _weights_entry(num_masked, max_predictions_per_seq):
    packed = _ONE_F32 * num_masked + _ZERO_F32 * (max_predictions_per_seq - num_masked)
    return _map_entry("masked_lm_weights", _delimited(_F2, _delimited(_F1, packed)))


@functools.lru_cache(maxsize=None)
def _ids_entry_prefix(name, packed_length):
    """The bytes of an int64 entry before its packed values (they come last)."""
    return _int64_entry(name, b"\x00" * packed_length)[:-packed_length]


_LABEL_ENTRY = {False: _int64_entry("next_sentence_labels", b"\x00"),
                True: _int64_entry("next_sentence_labels", b"\x01")}


class ExampleEncoder(object):
    """Serializes `TrainingInstance`s to `tf.train.Example` bytes, padded as the original.

    Args:
      max_seq_length: length of input_ids / input_mask / segment_ids.
      max_predictions_per_seq: length of the masked_lm_* features.
      max_id: the largest token id that can occur.
      next_sentence: False to leave out next_sentence_labels.
      masked_lm: False to leave out the masked_lm_* features (the left-to-right model's records).
    """

    def __init__(self, max_seq_length, max_predictions_per_seq, max_id, next_sentence=True,
                 masked_lm=True):
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.masked_lm = masked_lm
        self.next_sentence = next_sentence
        self._label_entry = _LABEL_ENTRY if next_sentence else {False: b""}
        self._varint_of = [_varint(i) for i in range(max(max_id, max_seq_length) + 1)].__getitem__

    def _ids_entry(self, name, values, length):
        """Entry of an int64 feature: `values` zero-padded to `length`."""
        packed = b"".join(map(self._varint_of, values)) + b"\x00" * (length - len(values))
        return _ids_entry_prefix(name, len(packed)) + packed

    def encode(self, instance):
        """`TrainingInstance` -> serialized `tf.train.Example` (bytes)."""
        length = len(instance.input_ids)
        num_masked = len(instance.masked_lm_positions)
        if length > self.max_seq_length or num_masked > self.max_predictions_per_seq:
            raise ValueError("instance longer than max_seq_length / max_predictions_per_seq")
        entries = [
            self._ids_entry("input_ids", instance.input_ids, self.max_seq_length),
            _input_mask_entry(length, self.max_seq_length),
            _segment_ids_entry(instance.num_a_tokens + 2, length, self.max_seq_length),
        ]
        if self.masked_lm:
            entries += [
                self._ids_entry("masked_lm_positions", instance.masked_lm_positions,
                                self.max_predictions_per_seq),
                self._ids_entry("masked_lm_ids", instance.masked_lm_ids,
                                self.max_predictions_per_seq),
                _weights_entry(num_masked, self.max_predictions_per_seq),
            ]
        entries.append(self._label_entry[instance.is_random_next])
        body = b"".join(entries)
        return _F1 + _varint(len(body)) + body

    def encode_packed(self, instances, max_sequences_per_row):
        """Masked-LM `TrainingInstance`s -> one packed row (`packing`'s schema), serialized."""
        ids, segments, positions, sequence_ids, starts = [], [], [], [], []
        masked_positions, masked_ids = [], []
        for slot, instance in enumerate(instances):
            start = len(ids)
            starts.append(start)
            ids += instance.input_ids
            segments += instance.segment_ids
            positions += range(len(instance.input_ids))
            sequence_ids += [slot + 1] * len(instance.input_ids)
            masked_positions += [start + p for p in instance.masked_lm_positions]
            masked_ids += instance.masked_lm_ids
        s, p, k = self.max_seq_length, self.max_predictions_per_seq, max_sequences_per_row
        if len(ids) > s or len(masked_positions) > p or len(instances) > k:
            raise ValueError("row longer than max_seq_length / max_predictions_per_seq / "
                             "max_sequences_per_row")
        entries = [
            self._ids_entry("input_ids", ids, s),
            _input_mask_entry(len(ids), s),
            self._ids_entry("segment_ids", segments, s),
            self._ids_entry("position_ids", positions, s),
            self._ids_entry("sequence_ids", sequence_ids, s),
            self._ids_entry("masked_lm_positions", masked_positions, p),
            self._ids_entry("masked_lm_ids", masked_ids, p),
            _weights_entry(len(masked_positions), p),
            self._ids_entry("sequence_starts", starts, k),
        ]
        if self.next_sentence:
            entries.append(self._ids_entry(
                "next_sentence_labels", [int(i.is_random_next) for i in instances], k))
        body = b"".join(entries)
        return _F1 + _varint(len(body)) + body
