"""Examples, features and classifier TFRecords, output-identical to the original run_classifier.py.

A classification task passes its label list; a regression task (STS-B) passes `label_list=None`,
which makes `label_id` the float score and the `label_ids` TFRecord feature a float. A multi-label
example's `label` is a tuple of label names, which makes `label_id` a multi-hot list over
`label_list` (int64 × num_labels in the TFRecord). With `doc_stride` (`--long_documents`) an
example longer than max_seq_length gives one record per window (`bert_tasks.classifier.windows`).
"""
import collections
import dataclasses
from typing import Optional, Union

from absl import logging
import tensorflow as tf

from bert_runner.tfrecords import float_feature, int_feature
from bert_tasks.classifier import windows
from vocab import packing


@dataclasses.dataclass
class InputExample:
    """A single training/test example for simple sequence classification.

    Attributes:
      guid: str, unique id for the example (e.g. "dev-3").
      text_a: str, the untokenized text of the first sequence.
      text_b: str or None, the untokenized text of the second sequence (sequence-pair tasks only).
      label: str or None, the label name (classification) or the score as text (regression); a
        tuple of label names for a multi-label example (empty: none applies). Test examples carry
        the task's placeholder label.
      index: str or None, the test file's own index/id column, which GLUE submission files are
        keyed by. Not in the original class; None outside test sets.
    """
    guid: Optional[str]
    text_a: Optional[str]
    text_b: Optional[str] = None
    label: Optional[str] = None
    index: Optional[str] = None


class PaddingInputExample:
    """Fake example that pads a set to a multiple of the batch size (all-zero features).

    The original appends these on TPU only, because TPUs need fixed batch shapes; the padded rows
    carry `is_real_example=False` so metrics ignore them. Here it makes the task's padding record,
    which `bert_runner.splits.write_split` appends.
    """


@dataclasses.dataclass
class InputFeatures:
    """A single set of features of data.

    Attributes:
      input_ids, input_mask, segment_ids: list of int, each of length max_seq_length.
      label_id: int (classification), float (regression), or a list of 0/1 ints over the label
        list (multi-label).
      is_real_example: bool, False for PaddingInputExample.
    """
    input_ids: list
    input_mask: list
    segment_ids: list
    label_id: Union[int, float]
    is_real_example: bool = True


def _label_id(example, label_list):
    """int index of the example's label in `label_list`, its float score when it is None, or
    the multi-hot list of a multi-label example's labels."""
    if label_list is None:
        return float(example.label)
    if isinstance(example.label, tuple):
        unknown = sorted(set(example.label) - set(label_list))
        if unknown:
            raise ValueError("example %s: unknown label(s) %s; expected some of %s"
                             % (example.guid, ", ".join(map(repr, unknown)),
                                ", ".join(map(repr, label_list))))
        return [int(label in example.label) for label in label_list]
    try:
        return label_list.index(example.label)
    except ValueError:
        expected = ", ".join(map(repr, label_list))
        raise ValueError("example %s: unknown label %r; expected one of %s"
                         % (example.guid, example.label, expected)) from None


def convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer):
    """Converts one InputExample into one InputFeatures (the original's L377, same outputs).

    Args:
      ex_index: int, position in the set; the first 5 examples are logged, as in the original.
      example: InputExample or PaddingInputExample.
      label_list: list of str, or None for a regression task.
      max_seq_length: int, length of every output list.
      tokenizer: a `vocab.tokenization.FullTokenizer` (anything with `tokenize` and
        `convert_tokens_to_ids`).
    Returns:
      InputFeatures. Layout `[CLS] A [SEP] (B [SEP])`, zero-padded. A `text_b` that is empty or
      tokenizes to nothing gives a single-sequence encoding of up to max_seq_length - 2 tokens.
    """
    if isinstance(example, PaddingInputExample):
        zeros = [0] * max_seq_length
        return InputFeatures(input_ids=list(zeros), input_mask=list(zeros), segment_ids=list(zeros),
                             label_id=0 if label_list is not None else 0.0, is_real_example=False)

    label_id = _label_id(example, label_list)
    tokens_a, tokens_b = _tokenize(example, tokenizer)
    return _features(example, label_id, tokens_a, tokens_b, max_seq_length, tokenizer,
                     log=ex_index < 5)


def convert_example_windows(ex_index, example, label_list, max_seq_length, tokenizer, doc_stride):
    """The InputFeatures of each window of one example (`windows.window_pairs`), all with the
    example's label; one window, equal to `convert_single_example`'s, when the example fits."""
    label_id = _label_id(example, label_list)
    tokens_a, tokens_b = _tokenize(example, tokenizer)
    # The first window of the first 5 examples is logged, as the original logs their features.
    return [_features(example, label_id, piece_a, piece_b, max_seq_length, tokenizer,
                      log=ex_index < 5 and i == 0)
            for i, (piece_a, piece_b) in enumerate(
                windows.window_pairs(tokens_a, tokens_b, max_seq_length, doc_stride))]


def _tokenize(example, tokenizer):
    """(word-pieces of text_a, of text_b or None), as the original."""
    tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
    return tokenizer.tokenize(example.text_a), tokens_b


def _features(example, label_id, tokens_a, tokens_b, max_seq_length, tokenizer, log):
    """InputFeatures of `[CLS] A [SEP] (B [SEP])`, truncated as the original; logged with `log`."""
    tokens, segment_ids = packing.pack_pair(tokens_a, tokens_b, max_seq_length)
    input_ids, input_mask, segment_ids = packing.pad_inputs(
        tokenizer.convert_tokens_to_ids(tokens), segment_ids, max_seq_length)

    if log:
        logging.info("*** Example ***")
        logging.info("guid: %s", example.guid)
        logging.info("tokens: %s", " ".join(tokens))
        logging.info("input_ids: %s", " ".join(map(str, input_ids)))
        logging.info("input_mask: %s", " ".join(map(str, input_mask)))
        logging.info("segment_ids: %s", " ".join(map(str, segment_ids)))
        logging.info("label: %s (id = %s)", example.label, label_id)

    return InputFeatures(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
                         label_id=label_id, is_real_example=True)


def convert_examples_to_features(examples, label_list, max_seq_length, tokenizer):
    """list of InputFeatures for `examples` (see convert_single_example)."""
    return [convert_single_example(i, example, label_list, max_seq_length, tokenizer)
            for i, example in enumerate(examples)]


def features_to_tf_example(feature):
    """tf.train.Example of one InputFeatures, with the original's feature names and dtypes.

    `label_ids` is int64, float32 when `label_id` is a float (regression), or int64 × num_labels
    for a multi-label feature.
    """
    label_feature = float_feature if isinstance(feature.label_id, float) else int_feature
    label_ids = feature.label_id if isinstance(feature.label_id, list) else [feature.label_id]
    return tf.train.Example(features=tf.train.Features(feature=collections.OrderedDict([
        ("input_ids", int_feature(feature.input_ids)),
        ("input_mask", int_feature(feature.input_mask)),
        ("segment_ids", int_feature(feature.segment_ids)),
        ("label_ids", label_feature(label_ids)),
        ("is_real_example", int_feature([int(feature.is_real_example)])),
    ])))


def tf_examples(examples, label_list, max_seq_length, tokenizer, doc_stride=None,
                window_counts=None):
    """Yields the `tf.train.Example` of each example: the original
    `file_based_convert_examples_to_features`'s records, in order, to write with
    `bert_runner.tfrecords.write_records` (compare parsed values: protobuf map order varies per
    process).

    With `doc_stride` (an int), an example longer than max_seq_length gives the records of its
    windows, consecutive, and the number of each example's windows is appended to the list
    `window_counts` as the records are yielded.
    """
    for ex_index, example in enumerate(examples):
        if ex_index % 10000 == 0:
            logging.info("Writing example %d of %d", ex_index, len(examples))
        if doc_stride is None:
            yield features_to_tf_example(
                convert_single_example(ex_index, example, label_list, max_seq_length, tokenizer))
            continue
        window_features = convert_example_windows(
            ex_index, example, label_list, max_seq_length, tokenizer, doc_stride)
        window_counts.append(len(window_features))
        for feature in window_features:
            yield features_to_tf_example(feature)


def name_to_features(max_seq_length, is_regression=False, num_multi_labels=None):
    """The `tf.io.parse_single_example` spec of the classifier TFRecords.

    Returns:
      dict name -> FixedLenFeature: input_ids, input_mask, segment_ids [max_seq_length] int64;
      label_ids [] int64 (float32 if is_regression; [num_multi_labels] int64 for a multi-label
      task); is_real_example [] int64.
    """
    if num_multi_labels is not None:
        label_ids = tf.io.FixedLenFeature([num_multi_labels], tf.int64)
    else:
        label_ids = tf.io.FixedLenFeature([], tf.float32 if is_regression else tf.int64)
    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "label_ids": label_ids,
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }
