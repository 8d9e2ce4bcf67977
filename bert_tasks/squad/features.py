"""SQuAD examples -> windowed model features, as the original `convert_examples_to_features` (L309).

Each example is tokenized once into an `ExampleWindows`: its query word-pieces, its context
word-pieces with the piece -> word map, the sliding windows (`doc_stride`) and, for every piece,
the window in which it has maximum context. Features are then generated window by window, so
nothing but the current example is in memory:

    windows = tuple(iter_windows(examples, tokenizer, max_seq_length=384, doc_stride=128,
                                 max_query_length=64, is_training=False))
    records = window_records(windows, examples, tokenizer, max_seq_length=384, is_training=False)
    bert_runner.tfrecords.write_records("eval.tf_record", records)
    windows           # all that `postprocess.write_predictions` needs

Training, which needs no windows afterwards, streams its records with `tf_examples`.

The TFRecord layout is the original FeatureWriter's; `name_to_features` is the original
`input_fn` spec (records decode with `bert_runner.inputs.decode_record`).
"""
import dataclasses
from typing import List, Optional

import tensorflow as tf

from bert_runner.tfrecords import int_feature
# run_classifier's --long_documents slides the same windows (`--doc_stride` means one thing).
from bert_tasks.windows import DocSpan, window_spans

FIRST_UNIQUE_ID = 1000000000


@dataclasses.dataclass
class InputFeatures:
    """One window of one example, with the original's fields.

    `tokens`, `input_ids`, `input_mask`, `segment_ids` have length max_seq_length once padded
    (`tokens` is not padded). `token_to_orig_map` / `token_is_max_context` are keyed by
    positions in `tokens` that hold context pieces. Training labels are positions in `tokens`
    ((0, 0) when the answer is not inside the window or the question is impossible); they are None
    for prediction.
    """
    unique_id: int
    example_index: int
    doc_span_index: int
    tokens: List[str]
    token_to_orig_map: dict
    token_is_max_context: dict
    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: bool = False


@dataclasses.dataclass
class ExampleWindows:
    """One example after tokenization and windowing.

    Feature k of the example has unique id `first_unique_id + k` and the layout
    `[CLS] query [SEP] doc_pieces[span.start : span.start + span.length] [SEP]`.

    Attributes:
      example_index: int, position of the example in the input list.
      first_unique_id: int.
      query_tokens: list of str, the (truncated) question word-pieces.
      doc_pieces: list of str, every context word-piece (the original `all_doc_tokens`).
      piece_to_word: list of int, doc_pieces[i] comes from example.doc_tokens[piece_to_word[i]].
        Both lists are shared with the other questions on the same paragraph: do not modify.
      doc_spans: list of DocSpan over doc_pieces.
      max_context_span: list of int, for each piece the index of the span that gives it maximum
        context (the original `_check_is_max_context`, computed once per piece).
      tok_start_position, tok_end_position: int answer span in doc_pieces (training), -1 for an
        impossible question, None for prediction.
    """
    example_index: int
    first_unique_id: int
    query_tokens: List[str]
    doc_pieces: List[str]
    piece_to_word: List[int]
    doc_spans: List[DocSpan]
    max_context_span: List[int]
    tok_start_position: Optional[int] = None
    tok_end_position: Optional[int] = None

    @property
    def doc_offset(self):
        """Position in `tokens` of a window's first context piece: after [CLS] query [SEP]."""
        return len(self.query_tokens) + 2

    def piece_index(self, span_index, position):
        """Index into doc_pieces of `tokens[position]` of window `span_index`, or None if that
        position is not a context piece (query, [CLS]/[SEP], padding, out of range)."""
        span = self.doc_spans[span_index]
        i = position - self.doc_offset
        if 0 <= i < span.length:
            return span.start + i
        return None

    def is_max_context(self, span_index, position):
        """The original `token_is_max_context.get(position, False)` of window `span_index`."""
        piece = self.piece_index(span_index, position)
        return piece is not None and self.max_context_span[piece] == span_index


def check_window_settings(max_seq_length, doc_stride, max_query_length):
    """Raises ValueError for settings the original would loop forever on."""
    if max_seq_length <= max_query_length + 3:
        raise ValueError("The max_seq_length (%d) must be greater than max_query_length (%d) + 3"
                         % (max_seq_length, max_query_length))
    if doc_stride < 1:
        raise ValueError("doc_stride must be at least 1, got %d" % doc_stride)


def _max_context_spans(num_pieces, doc_spans):
    """For each piece, the span where min(left, right) context + 0.01 * length is highest.

    The strictly greater score wins, so ties go to the earlier span, as in the original.
    """
    best_span = [-1] * num_pieces
    best_score = [None] * num_pieces
    for span_index, span in enumerate(doc_spans):
        end = span.start + span.length - 1
        for position in range(span.start, end + 1):
            score = min(position - span.start, end - position) + 0.01 * span.length
            if best_score[position] is None or score > best_score[position]:
                best_score[position] = score
                best_span[position] = span_index
    return best_span


def _improve_answer_span(doc_pieces, start, end, tokenizer, orig_answer_text):
    """The first sub-span (start ascending, end descending) whose pieces spell the tokenized
    answer, e.g. "1895" inside "(1895-1943),"; the span is unchanged if there is none."""
    tok_answer_text = " ".join(tokenizer.tokenize(orig_answer_text))
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if " ".join(doc_pieces[new_start:new_end + 1]) == tok_answer_text:
                return new_start, new_end
    return start, end


@dataclasses.dataclass
class TokenizedContext:
    """A context's word-pieces, shared by all the questions on it.

    Attributes:
      doc_tokens: list of str, the whitespace-split words it was made from.
      pieces: list of str, every word-piece (the original `all_doc_tokens`).
      piece_to_word: list of int, pieces[i] comes from doc_tokens[piece_to_word[i]].
      word_to_piece: list of int, index of each word's first piece (a word that tokenizes to
        nothing points at the next word's first piece).
    """
    doc_tokens: List[str]
    pieces: List[str]
    piece_to_word: List[int]
    word_to_piece: List[int]


def tokenize_context(doc_tokens, tokenizer):
    """Word-pieces each word separately, as the original. Returns TokenizedContext."""
    pieces = []
    piece_to_word = []
    word_to_piece = []
    for i, word in enumerate(doc_tokens):
        word_to_piece.append(len(pieces))
        for piece in tokenizer.tokenize(word):
            piece_to_word.append(i)
            pieces.append(piece)
    return TokenizedContext(doc_tokens, pieces, piece_to_word, word_to_piece)


def make_windows(example, example_index, first_unique_id, context, tokenizer, max_seq_length,
                 doc_stride, max_query_length, is_training):
    """Tokenizes one SquadExample's question and cuts its context into windows.

    Args:
      context: `tokenize_context(example.doc_tokens, tokenizer)`, computed once for all the
        questions on a paragraph (the original re-tokenized it for each question).
    Returns:
      ExampleWindows.
    """
    query_tokens = tokenizer.tokenize(example.question_text)[:max_query_length]
    doc_pieces = context.pieces

    tok_start = tok_end = None
    if is_training and example.is_impossible:
        tok_start = tok_end = -1
    elif is_training:
        tok_start = context.word_to_piece[example.start_position]
        if example.end_position < len(example.doc_tokens) - 1:
            tok_end = context.word_to_piece[example.end_position + 1] - 1
        else:
            tok_end = len(doc_pieces) - 1
        tok_start, tok_end = _improve_answer_span(doc_pieces, tok_start, tok_end, tokenizer,
                                                  example.orig_answer_text)

    max_tokens_for_doc = max_seq_length - len(query_tokens) - 3  # [CLS], [SEP], [SEP]
    doc_spans = window_spans(len(doc_pieces), max_tokens_for_doc, doc_stride)
    return ExampleWindows(
        example_index=example_index, first_unique_id=first_unique_id,
        query_tokens=query_tokens, doc_pieces=doc_pieces, piece_to_word=context.piece_to_word,
        doc_spans=doc_spans, max_context_span=_max_context_spans(len(doc_pieces), doc_spans),
        tok_start_position=tok_start, tok_end_position=tok_end)


def iter_windows(examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training):
    """Yields one ExampleWindows per example, numbering features from FIRST_UNIQUE_ID.

    Consecutive questions on the same paragraph (the same `doc_tokens` list, as
    `read_squad_examples` makes them) share one tokenization of the context: identical output,
    less time and memory.
    """
    check_window_settings(max_seq_length, doc_stride, max_query_length)
    unique_id = FIRST_UNIQUE_ID
    context = None
    for example_index, example in enumerate(examples):
        if context is None or context.doc_tokens is not example.doc_tokens:
            context = tokenize_context(example.doc_tokens, tokenizer)
        windows = make_windows(example, example_index, unique_id, context, tokenizer,
                               max_seq_length, doc_stride, max_query_length, is_training)
        unique_id += len(windows.doc_spans)
        yield windows


def window_features(windows, example, tokenizer, max_seq_length, is_training):
    """Yields the InputFeatures of one example's windows, exactly as the original builds them."""
    doc_offset = windows.doc_offset
    for span_index, span in enumerate(windows.doc_spans):
        tokens = ["[CLS]"] + windows.query_tokens + ["[SEP]"]
        tokens += windows.doc_pieces[span.start:span.start + span.length] + ["[SEP]"]
        token_to_orig_map = {}
        token_is_max_context = {}
        for i in range(span.length):
            piece = span.start + i
            token_to_orig_map[doc_offset + i] = windows.piece_to_word[piece]
            token_is_max_context[doc_offset + i] = windows.max_context_span[piece] == span_index
        segment_ids = [0] * doc_offset + [1] * (span.length + 1)
        input_ids = tokenizer.convert_tokens_to_ids(tokens)
        input_mask = [1] * len(input_ids)
        padding = [0] * (max_seq_length - len(input_ids))

        start_position = end_position = None
        if is_training and example.is_impossible:
            start_position = end_position = 0
        elif is_training:
            doc_end = span.start + span.length - 1
            if windows.tok_start_position >= span.start and windows.tok_end_position <= doc_end:
                start_position = windows.tok_start_position - span.start + doc_offset
                end_position = windows.tok_end_position - span.start + doc_offset
            else:
                # The original's comment says such windows are thrown out; they are kept, with the
                # answer pointing at [CLS].
                start_position = end_position = 0

        yield InputFeatures(
            unique_id=windows.first_unique_id + span_index,
            example_index=windows.example_index, doc_span_index=span_index, tokens=tokens,
            token_to_orig_map=token_to_orig_map, token_is_max_context=token_is_max_context,
            input_ids=input_ids + padding, input_mask=input_mask + padding,
            segment_ids=segment_ids + padding, start_position=start_position,
            end_position=end_position, is_impossible=example.is_impossible)


def convert_examples_to_features(examples, tokenizer, max_seq_length, doc_stride,
                                 max_query_length, is_training):
    """Yields every InputFeatures of `examples`, in the original's order (a generator version of
    the original, which called `output_fn(feature)` instead)."""
    for windows in iter_windows(examples, tokenizer, max_seq_length, doc_stride,
                                max_query_length, is_training):
        yield from window_features(windows, examples[windows.example_index], tokenizer,
                                   max_seq_length, is_training)


def feature_to_example(feature, is_training):
    """InputFeatures -> tf.train.Example with the original FeatureWriter's int64 fields."""
    values = {
        "unique_ids": [feature.unique_id],
        "input_ids": feature.input_ids,
        "input_mask": feature.input_mask,
        "segment_ids": feature.segment_ids,
    }
    if is_training:
        values["start_positions"] = [feature.start_position]
        values["end_positions"] = [feature.end_position]
        values["is_impossible"] = [int(feature.is_impossible)]
    return tf.train.Example(features=tf.train.Features(
        feature={name: int_feature(v) for name, v in values.items()}))


def tf_examples(examples, tokenizer, max_seq_length, doc_stride, max_query_length, is_training):
    """Yields the `tf.train.Example` of every feature of `examples`: the original FeatureWriter's
    records, in its order, one example's features in memory at a time.

    Args:
      examples: list of SquadExample (for training, already shuffled with `shuffle_examples`).
      tokenizer: a `vocab.tokenization.FullTokenizer`.
      max_seq_length, doc_stride, max_query_length: int, the original flags.
      is_training: bool; adds start_positions, end_positions and is_impossible.
    """
    for windows in iter_windows(examples, tokenizer, max_seq_length, doc_stride,
                                max_query_length, is_training):
        yield from window_records([windows], examples, tokenizer, max_seq_length, is_training)


def window_records(windows, examples, tokenizer, max_seq_length, is_training):
    """Yields the `tf.train.Example` of every window of `windows` (`iter_windows`' ExampleWindows
    of `examples`), in order: `tf_examples`' records of windows already made."""
    for example_windows in windows:
        for feature in window_features(example_windows, examples[example_windows.example_index],
                                       tokenizer, max_seq_length, is_training):
            yield feature_to_example(feature, is_training)


def name_to_features(seq_length, is_training, training_features=()):
    """The original input_fn's parsing spec; training reads the positions, and of the records'
    other int features (is_impossible) those in `training_features`, which a model's loss
    reads (ELECTRA's answerability)."""
    spec = {
        "unique_ids": tf.io.FixedLenFeature([], tf.int64),
        "input_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([seq_length], tf.int64),
    }
    if is_training:
        spec["start_positions"] = tf.io.FixedLenFeature([], tf.int64)
        spec["end_positions"] = tf.io.FixedLenFeature([], tf.int64)
        for name in training_features:
            spec[name] = tf.io.FixedLenFeature([], tf.int64)
    return spec

