"""CoNLL sentences -> model windows with document context, and their TFRecords.

As in the BERT paper (section 5.3), each word is WordPiece-tokenized and only its first sub-token
is classified; the other sub-tokens get no label. The paper also uses "the maximal document
context provided by the data": a sentence is not fed alone but inside its document. Here:

* A *window* is `[CLS] left-context scored-words right-context [SEP]`, max_seq_length long
  (zero-padded). The scored words are a whole sentence, or for a sentence longer than
  max_seq_length - 2 sub-tokens consecutive pieces of it, each as long as fits; every word is
  scored in exactly one window.
* The context is the document's sub-tokens on both sides of the scored words (the rest of a long
  sentence first, then the neighbouring sentences), split evenly between left and right, the
  side with less text leaving the rest to the other, until the window is full or the document is
  used up. The edges may cut through a sentence or word: context is never scored.
  `document_context=False` limits the context to the sentence itself (only long sentences get
  any).
* The scored sentence is marked by the label weights alone: `label_weights` is 1.0 at the first
  sub-token of each scored word and 0.0 everywhere else (other sub-tokens, context, [CLS]/[SEP],
  padding), which both masks the loss and says which positions are predicted. `segment_ids` are
  all 0, as for any single-text input the model was pre-trained on; there is no marker token.
* A word that tokenizes to nothing (e.g. only control characters) becomes [UNK], so that it has a
  position; a word of more than max_seq_length - 2 sub-tokens keeps its first ones.

    windows = list(make_windows(documents, tokenizer, max_seq_length=128))
    records = tf_examples(windows, sentences, label_list, tokenizer, 128)  # tf.train.Examples
"""
import dataclasses
from typing import List

import tensorflow as tf
from absl import logging

from bert_runner.tfrecords import float_feature, int_feature
from bert_tasks.ner.tags import in_scheme


@dataclasses.dataclass
class Window:
    """One model input.

    Attributes:
      sentence_index: int, the sentence (in file order over all documents) whose words are scored.
      word_start: int, its first scored word.
      tokens: list of str, `[CLS] ... [SEP]`, at most max_seq_length (not padded).
      label_positions: list of int, position in `tokens` of the first sub-token of each scored
        word: word `word_start + k` is at `label_positions[k]`.
    """
    sentence_index: int
    word_start: int
    tokens: List[str]
    label_positions: List[int]


class WordPieceCache:
    """Word -> its word-pieces, each distinct word tokenized once (CoNLL words repeat a lot).

    Args:
      tokenizer: a `vocab.tokenization.FullTokenizer`.
      max_pieces: int, a longer word keeps its first `max_pieces` pieces.
    """

    def __init__(self, tokenizer, max_pieces):
        self._tokenizer = tokenizer
        self._max_pieces = max_pieces
        self._cache = {}

    def __call__(self, word):
        pieces = self._cache.get(word)
        if pieces is None:
            pieces = self._tokenizer.tokenize(word)[:self._max_pieces] or ["[UNK]"]
            self._cache[word] = pieces
        return pieces


def _context_sizes(room, left_available, right_available):
    """(left, right) context lengths: `room` split evenly, a short side giving its rest away."""
    left = min(left_available, max(room // 2, room - right_available))
    return left, min(right_available, room - left)


def _sentence_chunks(word_offsets, sentence_end, budget):
    """Splits a sentence into runs of words of at most `budget` pieces.

    Args:
      word_offsets: list of int, offset of each word's first piece in the document's pieces.
      sentence_end: int, offset just after the sentence's last piece.
    Yields:
      (first word index, end word index) of each run.
    """
    first = 0
    for i in range(1, len(word_offsets) + 1):
        end_offset = word_offsets[i] if i < len(word_offsets) else sentence_end
        if end_offset - word_offsets[first] > budget:
            yield first, i - 1
            first = i - 1
    yield first, len(word_offsets)


def _document_windows(sentences, first_sentence_index, word_pieces, budget, document_context):
    """The windows of one document's sentences (see the module docstring)."""
    pieces = []
    word_offsets = []  # per sentence: offset of each word's first piece
    bounds = []  # per sentence: (start, end) offsets
    for sentence in sentences:
        start = len(pieces)
        offsets = []
        for word in sentence.words:
            offsets.append(len(pieces))
            pieces.extend(word_pieces(word))
        word_offsets.append(offsets)
        bounds.append((start, len(pieces)))

    for s, (offsets, (sentence_start, sentence_end)) in enumerate(zip(word_offsets, bounds)):
        context_start, context_end = ((0, len(pieces)) if document_context
                                      else (sentence_start, sentence_end))
        for first, end in _sentence_chunks(offsets, sentence_end, budget):
            a = offsets[first]
            b = offsets[end] if end < len(offsets) else sentence_end
            left, right = _context_sizes(budget - (b - a), a - context_start, context_end - b)
            tokens = ["[CLS]"] + pieces[a - left:b + right] + ["[SEP]"]
            positions = [1 + left + offsets[i] - a for i in range(first, end)]
            yield Window(first_sentence_index + s, first, tokens, positions)


def make_windows(documents, tokenizer, max_seq_length, document_context=True):
    """Yields the Windows of all sentences of `documents` (`bert_tasks.ner.conll.Document`s), in order.

    Args:
      tokenizer: a `vocab.tokenization.FullTokenizer`.
      max_seq_length: int, at least 3.
      document_context: bool, fill the window with the document around the sentence (the paper);
        False: the sentence alone.
    """
    if max_seq_length < 3:
        raise ValueError("max_seq_length must be at least 3 ([CLS] word [SEP]), got %d"
                         % max_seq_length)
    budget = max_seq_length - 2
    word_pieces = WordPieceCache(tokenizer, budget)
    sentence_index = 0
    for document in documents:
        yield from _document_windows(document.sentences, sentence_index, word_pieces, budget,
                                     document_context)
        sentence_index += len(document.sentences)


def check_labels(sentences, label_list, path):
    """Raises ValueError naming path:line for a tag (IOB2) that is not in `label_list`."""
    known = set(label_list)
    for sentence in sentences:
        for k, tag in enumerate(sentence.tags):
            if tag not in known:
                raise ValueError("%s:%d: tag %r is not in the label list %s"
                                 % (path, sentence.line_number + k, sentence.columns[k][-1],
                                    ", ".join(label_list)))


@dataclasses.dataclass
class WindowFeatures:
    """The model inputs of one Window, each list max_seq_length long.

    input_ids, input_mask, segment_ids (all 0): int. label_ids: int, the index in the label list
    of the word's tag in the scheme the model learns, at the scored positions; 0 elsewhere.
    label_weights: float, 1.0 at the scored positions, 0.0 elsewhere.
    """
    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]
    label_ids: List[int]
    label_weights: List[float]


def window_features(window, sentence, label_map, tokenizer, max_seq_length, scheme="IOB2"):
    """WindowFeatures of `window`, whose sentence is `sentence`; label_map: tag -> id; the labels
    are the sentence's tags in `scheme` (`bert_tasks.ner.tags.in_scheme`; IOB2: as read)."""
    word_tags = in_scheme(sentence.tags, scheme)
    padding = [0] * (max_seq_length - len(window.tokens))
    input_ids = tokenizer.convert_tokens_to_ids(window.tokens) + padding
    label_ids = [0] * max_seq_length
    label_weights = [0.0] * max_seq_length
    for k, position in enumerate(window.label_positions):
        label_ids[position] = label_map[word_tags[window.word_start + k]]
        label_weights[position] = 1.0
    return WindowFeatures(
        input_ids=input_ids, input_mask=[1] * len(window.tokens) + padding,
        segment_ids=[0] * max_seq_length, label_ids=label_ids, label_weights=label_weights)


def _record(f, window_index):
    """The tf.train.Example of WindowFeatures `f`."""
    return tf.train.Example(features=tf.train.Features(feature={
        "input_ids": int_feature(f.input_ids),
        "input_mask": int_feature(f.input_mask),
        "segment_ids": int_feature(f.segment_ids),
        "label_ids": int_feature(f.label_ids),
        "label_weights": float_feature(f.label_weights),
        "window_index": int_feature([window_index]),
    }))


def tf_examples(windows, sentences, label_list, tokenizer, max_seq_length, scheme="IOB2"):
    """Yields the `tf.train.Example` of each window, in order.

    Each record also holds `window_index` (its position in the file), so predictions can be
    checked to come back in file order.

    Args:
      windows: iterable of Window, over `sentences` (the list their sentence_index refers to).
      label_list: list of str (`bert_tasks.ner.tags.label_list`); run `check_labels` first.
      scheme: "IOB1" or "IOB2", the scheme the labels are in (`window_features`); run_ner.py's
        default is IOB1 (`bert_tasks.ner.tags`).
    """
    label_map = {label: i for i, label in enumerate(label_list)}
    for count, window in enumerate(windows):
        sentence = sentences[window.sentence_index]
        f = window_features(window, sentence, label_map, tokenizer, max_seq_length, scheme)
        if count < 5:
            logging.info("*** Example ***")
            logging.info("tokens: %s", " ".join(window.tokens))
            logging.info("input_ids: %s", " ".join(map(str, f.input_ids)))
            logging.info("labels: %s", " ".join(
                "%s=%s" % (window.tokens[p], label_list[f.label_ids[p]])
                for p in window.label_positions))
        if count % 10000 == 0:
            logging.info("Writing window %d (sentence %d of %d)",
                         count, window.sentence_index, len(sentences))
        yield _record(f, count)


def padding_example(max_seq_length):
    """The all-zero record that fills TPU batches: `window_index` -1, no scored position."""
    zeros = [0] * max_seq_length
    return _record(WindowFeatures(zeros, zeros, zeros, zeros, zeros), -1)


def name_to_features(max_seq_length):
    """The `tf.io.parse_single_example` spec of the NER TFRecords.

    Returns:
      dict name -> FixedLenFeature: input_ids, input_mask, segment_ids, label_ids [S] int64;
      label_weights [S] float32; window_index [] int64 (-1 on padding records).
    """
    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "label_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "label_weights": tf.io.FixedLenFeature([max_seq_length], tf.float32),
        "window_index": tf.io.FixedLenFeature([], tf.int64),
    }
