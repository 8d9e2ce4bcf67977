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

`ExampleEncoder` writes the protobuf wire format directly: building `tf.train.Example` messages
costs about 40 us a record, several times more than creating the instance. The bytes parse to the
same message (tests compare against `tf.train.Example` and against the original's records).
Record bytes are not comparable across tools anyway: protobuf map order varies from run to run.
"""
import struct

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


def name_to_features(max_seq_length, max_predictions_per_seq):
    """`tf.io.FixedLenFeature`s for `tf.io.parse_example`, exactly as the original run_pretraining.

    Returns:
      dict feature name -> FixedLenFeature: ids/masks [max_seq_length] int64, masked_lm_*
      [max_predictions_per_seq] (int64; weights float32), next_sentence_labels [1] int64.
    """
    import tensorflow as tf  # Deferred: the schema names are useful without TensorFlow.
    seq, pred = [max_seq_length], [max_predictions_per_seq]
    return {
        "input_ids": tf.io.FixedLenFeature(seq, tf.int64),
        "input_mask": tf.io.FixedLenFeature(seq, tf.int64),
        "segment_ids": tf.io.FixedLenFeature(seq, tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature(pred, tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature(pred, tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature(pred, tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


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


def _int64_feature(packed):
    """Feature{int64_list: Int64List{value (packed varints)}}."""
    return _delimited(_F3, _delimited(_F1, packed))


def _float_feature(packed):
    """Feature{float_list: FloatList{value (packed little-endian float32)}}."""
    return _delimited(_F2, _delimited(_F1, packed))


class ExampleEncoder(object):
    """Serializes `TrainingInstance`s to `tf.train.Example` bytes, padded as the original.

    Args:
      max_seq_length: length of input_ids / input_mask / segment_ids.
      max_predictions_per_seq: length of the masked_lm_* features.
      max_id: the largest token id that can occur (vocab ids, positions).
    """

    def __init__(self, max_seq_length, max_predictions_per_seq, max_id):
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self._varints = [_varint(i) for i in range(max(max_id, max_seq_length) + 1)]
        self._id_entry_prefix = {}  # (name, packed length) -> bytes of the entry up to the values

    def _int64_entry(self, name, values, pad):
        """Map entry for an int64 feature of `values` followed by `pad` zeros."""
        packed = b"".join(map(self._varints.__getitem__, values)) + b"\x00" * pad
        key = (name, len(packed))
        prefix = self._id_entry_prefix.get(key)
        if prefix is None:
            # Only the values vary between records with equal packed length: cache the framing.
            prefix = _map_entry(name, _int64_feature(b"\x00" * len(packed)))[:-len(packed)]
            self._id_entry_prefix[key] = prefix
        return prefix + packed

    def encode(self, instance):
        """`TrainingInstance` -> serialized `tf.train.Example` (bytes)."""
        seq_pad = self.max_seq_length - len(instance.input_ids)
        num_masked = len(instance.masked_lm_positions)
        pred_pad = self.max_predictions_per_seq - num_masked
        if seq_pad < 0 or pred_pad < 0:
            raise ValueError("instance longer than max_seq_length / max_predictions_per_seq")
        num_a = instance.num_a_tokens + 2  # [CLS] A [SEP]
        num_b = len(instance.input_ids) - num_a  # B [SEP]
        entries = (
            self._int64_entry("input_ids", instance.input_ids, seq_pad),
            _map_entry("input_mask", _int64_feature(
                b"\x01" * len(instance.input_ids) + b"\x00" * seq_pad)),
            _map_entry("segment_ids", _int64_feature(
                b"\x00" * num_a + b"\x01" * num_b + b"\x00" * seq_pad)),
            self._int64_entry("masked_lm_positions", instance.masked_lm_positions, pred_pad),
            self._int64_entry("masked_lm_ids", instance.masked_lm_ids, pred_pad),
            _map_entry("masked_lm_weights", _float_feature(
                _ONE_F32 * num_masked + _ZERO_F32 * pred_pad)),
            _map_entry("next_sentence_labels", _int64_feature(
                b"\x01" if instance.is_random_next else b"\x00")),
        )
        return _delimited(_F1, b"".join(entries))
