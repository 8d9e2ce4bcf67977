"""Checks, before training, that pretraining TFRecords fit the flags and the model.

A mismatch otherwise shows up late and obscurely: a record longer than `--max_seq_length` fails
inside the input pipeline with a shape error, a token id beyond the model's vocabulary gives an
index error (or, on some devices, silent garbage), and files without records make the
repeating training input wait forever at full CPU. `check_records` reads the **first record of
each file** only (milliseconds per file, remote files too), so it catches files made with other
flags or for another model, not a corrupt record further on.
"""
import dataclasses
import struct

from absl import logging

from bert_tasks.pretraining.data.reading import InputError, describe_files

_INT64, _FLOAT = "int64_list", "float_list"
_SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
_PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
_LABEL = "next_sentence_labels"


@dataclasses.dataclass(frozen=True)
class RecordsInfo(object):
    """What `check_records` found.

    Attributes:
      next_sentence: whether the records carry next_sentence_labels (False: made with
        `create_pretraining_data.py --next_sentence_prediction=false`).
      empty_files: files that hold no record (the others do).
      sequences_per_row: 1, or K for packed records (`data.packing`: up to K pairs a row).
      masks: whether the records carry masked_lm_* features (False: the left-to-right model's,
        or the original ELECTRA's, which `data.electra_masking` masks per batch).
    """
    next_sentence: bool
    empty_files: tuple = ()
    sequences_per_row: int = 1
    masks: bool = True


def _tf():
    import tensorflow as tf  # Deferred, as in the rest of the package.
    return tf


def first_record(path):
    """The first serialized record of TFRecord file `path` (bytes), or None if it has none.

    Reads the TFRecord framing itself (8-byte little-endian length, 4-byte CRC of it, the data,
    4-byte CRC of the data; the CRCs are left to training's reader): `tf.data` here would start
    TensorFlow's eager context, after which a multi-worker strategy can no longer be created.

    Raises:
      InputError: the file cannot be read or is not an uncompressed TFRecord file.
    """
    tf = _tf()
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            header = f.read(12)
            if not header:
                return None
            length = struct.unpack("<Q", header[:8])[0] if len(header) == 12 else -1
            size = tf.io.gfile.stat(path).length
            if not 0 <= length <= size - 16:
                raise InputError(
                    "input file %s: not an uncompressed TFRecord file (its first record would "
                    "have %d bytes; the file has %d)" % (path, length, size))
            return f.read(length)
    except tf.errors.OpError as e:
        raise InputError("input file %s: cannot read it (%s)" % (path, e.message)) from e


def _parse(path, record):
    """Serialized record -> {feature name: (kind, list of values)}; InputError naming `path`."""
    from google.protobuf.message import DecodeError
    try:
        example = _tf().train.Example.FromString(record)
    except DecodeError as e:
        raise InputError("input file %s: the first record is not a tf.train.Example (%s)"
                         % (path, e)) from e
    return {name: (feature.WhichOneof("kind"),
                   list(getattr(feature, feature.WhichOneof("kind")).value)
                   if feature.WhichOneof("kind") else [])
            for name, feature in example.features.feature.items()}


def check_example(path, features, max_seq_length, max_predictions_per_seq, vocab_size,
                  type_vocab_size=None, masked_lm=True, unmasked=False):
    """Raises InputError if one parsed record (`_parse`) does not fit the flags and model.

    The message names the file, what the record holds, and the flag or config field to change.
    `masked_lm`: False for the left-to-right model, whose records have no masked_lm_* features
    (`data.ltr`); None for ELECTRA, which takes records with them or without any (the original
    ELECTRA's, masked per batch: `data.electra_masking`). `unmasked`: the records must be
    unmasked (`--input_format=unmasked_records`: each predicted position still holds its own
    token, masked_lm_ids).
    """
    def fail(message, *args):
        raise InputError("input file %s: first record: " % path + message % args)

    either = masked_lm is None
    if either:
        masked_lm = _has_masks(features)
    predictions = _PREDICTION_FEATURES if masked_lm else ()
    if not masked_lm and any(name in features for name in _PREDICTION_FEATURES):
        fail("holds masked_lm_positions: masked-LM records, whose input_ids hold [MASK]; the "
             "left-to-right model (--pretraining_objective=ltr) trains on records made with "
             "create_pretraining_data.py --pretraining_objective=ltr")
    missing = [n for n in _SEQUENCE_FEATURES + predictions if n not in features]
    if missing:
        ltr = ("; records of a left-to-right model (create_pretraining_data.py "
               "--pretraining_objective=ltr) have none: train them with run_pretraining.py "
               "--pretraining_objective=ltr, and the original ELECTRA's (its "
               "build_pretraining_dataset.py) with --pretraining_objective=electra "
               "--input_format=records" if missing == list(_PREDICTION_FEATURES) else "")
        fail("lacks %s; pretraining records (create_pretraining_data.py) have %s%s",
             ", ".join(missing), ", ".join(_SEQUENCE_FEATURES + predictions), ltr)
    for name in _SEQUENCE_FEATURES + _PREDICTION_FEATURES + (_LABEL,):
        if name not in features:
            continue
        want = _FLOAT if name == "masked_lm_weights" else _INT64
        if features[name][0] != want:
            fail("%s is a %s, expected a %s", name, features[name][0], want)
    for names, flag, value in [(_SEQUENCE_FEATURES, "max_seq_length", max_seq_length),
                               (predictions, "max_predictions_per_seq",
                                max_predictions_per_seq)]:
        for name in names:
            have = len(features[name][1])
            if have != value:
                fail("%s has %d values but --%s=%d: set --%s=%d, the value the data was made "
                     "with (or make the data again with --%s=%d)",
                     name, have, flag, value, flag, have, flag, value)
    if "sequence_ids" in features and "sequence_starts" not in features:
        fail("has sequence_ids but no sequence_starts: packed records "
             "(create_pretraining_data.py --max_sequences_per_row) have both")
    slots = _sequences_per_row(features)
    if _LABEL in features and len(features[_LABEL][1]) != slots:
        fail("%s has %d values, expected %d", _LABEL, len(features[_LABEL][1]), slots)
    if slots > 1 and not masked_lm and not either:
        fail("is packed (sequence_ids): the left-to-right model trains on unpacked records")
    for name in ("input_ids", "masked_lm_ids")[:2 if masked_lm else 1]:
        largest = max(features[name][1], default=0)
        if largest >= vocab_size:
            fail("%s holds token id %d but the model config's vocab_size is %d: the data was "
                 "made with a larger vocab_file than the model's", name, largest, vocab_size)
    largest = max(features["masked_lm_positions"][1], default=0) if masked_lm else 0
    if largest >= max_seq_length:
        fail("masked_lm_positions holds position %d, beyond --max_seq_length=%d",
             largest, max_seq_length)
    if unmasked and masked_lm:
        _check_unmasked(features, fail)
    largest = max(features["segment_ids"][1], default=0)
    if type_vocab_size is not None and largest >= type_vocab_size:
        fail("segment_ids holds %d but the model config's type_vocab_size is %d",
             largest, type_vocab_size)


def _check_unmasked(features, fail):
    """Fails where a predicted position holds another token than its masked_lm_id ([MASK] or
    a random word-piece): masked records, which dynamic masking would mask a second time."""
    ids = features["input_ids"][1]
    predicted = [(position, label) for position, label, weight in zip(
        *(features[name][1] for name in _PREDICTION_FEATURES)) if weight > 0]
    changed = sum(ids[position] != label for position, label in predicted)
    if changed:
        fail("%d of its %d predicted positions hold another token than masked_lm_ids ([MASK] or a "
             "random word-piece): masked records, which --input_format=unmasked_records would "
             "mask again. Train them with --input_format=records, or make unmasked records "
             "with create_pretraining_data.py --mask_token_prob=0 --random_token_prob=0",
             changed, len(predicted))


def _has_masks(features):
    """Whether a parsed record carries masked_lm_* features (any of them: the others are then
    required)."""
    return any(name in features for name in _PREDICTION_FEATURES)


def _sequences_per_row(features):
    """K of a packed record (its sequence_starts' length), 1 for an unpacked one."""
    return len(features["sequence_starts"][1]) if "sequence_ids" in features else 1


def check_records(files, max_seq_length, max_predictions_per_seq, vocab_size,
                  type_vocab_size=None, next_sentence=None, masked_lm=True, unmasked=False):
    """Checks the first record of each file; returns `RecordsInfo`.

    Args:
      files: list of TFRecord paths (expanded, not patterns).
      max_seq_length, max_predictions_per_seq: the training flags.
      vocab_size, type_vocab_size: from the model's bert_config.json (type_vocab_size optional).
      next_sentence: True to require next_sentence_labels, None to accept either (see
        `RecordsInfo.next_sentence`).
      masked_lm, unmasked: what the records must be (`check_example`; masked_lm None: with
        masks or without, ELECTRA's).
    Raises:
      InputError naming the file and the flag or config field, when no file holds a record, a
      first record does not fit, some files have next_sentence_labels and others not (or, with
      `masked_lm` None, some masks and others not), or `next_sentence` is True and they have
      none.
    """
    if not files:
        raise InputError("no input files")
    with_label, without_label, empty, by_slots = [], [], [], {}
    by_masks = {True: [], False: []}
    for path in files:
        record = first_record(path)
        if record is None:
            empty.append(path)
            continue
        features = _parse(path, record)
        check_example(path, features, max_seq_length, max_predictions_per_seq, vocab_size,
                      type_vocab_size, masked_lm, unmasked)
        (with_label if _LABEL in features else without_label).append(path)
        by_masks[_has_masks(features)].append(path)
        by_slots.setdefault(_sequences_per_row(features), []).append(path)
    if len(by_slots) > 1:
        raise InputError("the input files hold rows of different packing: %s; train on one kind"
                         % "; ".join("%d pair(s) a row in %s" % (k, describe_files(v))
                                     for k, v in sorted(by_slots.items())))
    if not with_label and not without_label:
        raise InputError("%s no records (an input without text? create_pretraining_data.py "
                         "now refuses to write such files)" % _holds(empty))
    if empty:
        logging.warning("%s no records; training reads the other files", _holds(empty))
    if by_masks[True] and by_masks[False]:
        raise InputError(
            "some input files carry masks (masked_lm_*: %s) and some carry none (the original "
            "ELECTRA's: %s): train on one kind" % (describe_files(by_masks[True]),
                                                  describe_files(by_masks[False])))
    if with_label and without_label:
        raise InputError(
            "some input files have next_sentence_labels (%s) and some have none (%s, made with "
            "--next_sentence_prediction=false): train on one kind"
            % (describe_files(with_label), describe_files(without_label)))
    if next_sentence and without_label:
        raise InputError(
            "%s: the records have no next_sentence_labels (made with "
            "--next_sentence_prediction=false); train without next sentence prediction"
            % describe_files(without_label))
    return RecordsInfo(next_sentence=bool(with_label), empty_files=tuple(empty),
                       sequences_per_row=next(iter(by_slots), 1), masks=bool(by_masks[True]))


def _holds(files):
    return ("input file %s holds" if len(files) == 1 else "input files %s hold") % (
        describe_files(files))
