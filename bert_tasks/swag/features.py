"""SwagExamples -> multiple-choice features and TFRecords (paper section 4.4).

Each example becomes NUM_CHOICES sequences, one per ending:

    [CLS] sent1 [SEP] sent2 ending_i [SEP]        segment ids 0 ... 0 1 ... 1, zero-padded

`sent2 + " " + ending_i` is tokenized as the concatenation of the word-pieces of `sent2` and of
`ending_i` (identical: the tokenizer splits on whitespace before anything else), so `sent2` is
tokenized once per example. Each choice is packed by `vocab.packing.pack_pair`, the classifier's
layout: truncated on its own to max_seq_length - 3 word-pieces with the original run_classifier's
pair truncation (pop from the end of the longer of the two, from the second on ties).

Layout: a record holds `input_ids`, `input_mask`, `segment_ids` as NUM_CHOICES * S int64 values,
choice-major (choice i at [i * S, (i + 1) * S)); `name_to_features` declares them with shape
[NUM_CHOICES, S], so decoded batches are [B, 4, S]. `label_ids` is the index of the true ending
(0 for unlabelled test examples) and `is_real_example` is 0 on padding examples, as in the
classifier's records.
"""
import collections
import dataclasses
from typing import List

import tensorflow as tf
from absl import logging

from bert_runner.tfrecords import int_feature
from bert_tasks.swag.examples import NUM_CHOICES
from vocab.packing import pack_pair, pad_inputs


@dataclasses.dataclass
class MultipleChoiceFeatures:
    """The features of one example.

    Attributes:
      input_ids, input_mask, segment_ids: NUM_CHOICES lists of max_seq_length ints, one per ending.
      label_id: int, the true ending (0 when the example has no label).
      is_real_example: bool, False for a padding example (all zeros).
    """
    input_ids: List[List[int]]
    input_mask: List[List[int]]
    segment_ids: List[List[int]]
    label_id: int
    is_real_example: bool = True


def _pack_choice(context, second, max_seq_length, tokenizer):
    """(tokens, input_ids, input_mask, segment_ids) of one choice, zero-padded."""
    tokens, segment_ids = pack_pair(context, second, max_seq_length)
    return (tokens,) + pad_inputs(tokenizer.convert_tokens_to_ids(tokens), segment_ids,
                                  max_seq_length)


def padding_features(max_seq_length):
    """The all-zero features of a padding example (TPU eval/predict batches must be full)."""
    def zeros():
        return [[0] * max_seq_length for _ in range(NUM_CHOICES)]

    return MultipleChoiceFeatures(zeros(), zeros(), zeros(), label_id=0, is_real_example=False)


def convert_example(ex_index, example, max_seq_length, tokenizer):
    """MultipleChoiceFeatures of one SwagExample (layout in the module docstring).

    Args:
      ex_index: int, position in the set; the first 5 examples are logged, like the classifier's.
      example: bert_tasks.swag.examples.SwagExample.
      max_seq_length: int S >= 3, length of every sequence.
      tokenizer: anything with `tokenize` and `convert_tokens_to_ids` (`vocab.tokenization
        .FullTokenizer`).
    """
    context = tokenizer.tokenize(example.context)
    start_ending = tokenizer.tokenize(example.start_ending)
    choices = [_pack_choice(context, start_ending + tokenizer.tokenize(ending), max_seq_length,
                            tokenizer)
               for ending in example.endings]
    tokens, input_ids, input_mask, segment_ids = (list(field) for field in zip(*choices))
    label_id = 0 if example.label is None else example.label
    if ex_index < 5:
        logging.info("*** Example ***")
        logging.info("guid: %s", example.guid)
        for i in range(NUM_CHOICES):
            logging.info("choice %d tokens: %s", i, " ".join(tokens[i]))
        logging.info("label: %s", example.label)
    return MultipleChoiceFeatures(input_ids, input_mask, segment_ids, label_id)


def _flat(rows):
    return [value for row in rows for value in row]


def features_to_tf_example(feature):
    """tf.train.Example of one MultipleChoiceFeatures, the sequences flattened choice-major."""
    return tf.train.Example(features=tf.train.Features(feature=collections.OrderedDict([
        ("input_ids", int_feature(_flat(feature.input_ids))),
        ("input_mask", int_feature(_flat(feature.input_mask))),
        ("segment_ids", int_feature(_flat(feature.segment_ids))),
        ("label_ids", int_feature([feature.label_id])),
        ("is_real_example", int_feature([int(feature.is_real_example)])),
    ])))


def tf_examples(examples, max_seq_length, tokenizer):
    """Yields the `tf.train.Example` of each SwagExample of the list `examples`, in order.

    Raises:
      ValueError: max_seq_length < 3 (no room for [CLS] A [SEP] B [SEP]).
    """
    if max_seq_length < 3:
        raise ValueError("max_seq_length %d leaves no room for [CLS] A [SEP] B [SEP]"
                         % max_seq_length)
    for ex_index, example in enumerate(examples):
        if ex_index % 10000 == 0:
            logging.info("Writing example %d of %d", ex_index, len(examples))
        yield features_to_tf_example(convert_example(ex_index, example, max_seq_length, tokenizer))


def name_to_features(max_seq_length):
    """The `tf.io.parse_single_example` spec of the SWAG TFRecords.

    Returns:
      dict name -> FixedLenFeature: input_ids, input_mask, segment_ids [NUM_CHOICES, S] int64;
      label_ids [] int64; is_real_example [] int64.
    """
    shape = [NUM_CHOICES, max_seq_length]
    return {
        "input_ids": tf.io.FixedLenFeature(shape, tf.int64),
        "input_mask": tf.io.FixedLenFeature(shape, tf.int64),
        "segment_ids": tf.io.FixedLenFeature(shape, tf.int64),
        "label_ids": tf.io.FixedLenFeature([], tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }
