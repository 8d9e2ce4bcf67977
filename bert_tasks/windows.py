"""Sliding windows over a text's word-pieces, shared by the tasks that window long inputs
(run_squad's contexts, run_classifier's --long_documents) and by their raw-text exports, so that
`--doc_stride` means the same everywhere and the graph computes the Python windows exactly.

    window_spans(10, 4, 3)   # [DocSpan(0, 4), DocSpan(3, 4), DocSpan(6, 4)]: the last ends at 10
"""
import collections

import tensorflow as tf

DocSpan = collections.namedtuple("DocSpan", ["start", "length"])


def window_spans(num_pieces, max_tokens_for_doc, doc_stride):
    """The original run_squad's sliding windows of `num_pieces` word-pieces, each at most
    `max_tokens_for_doc` long and `doc_stride` after the last: stop once a window reaches the end
    (an empty text has none). Returns a list of `DocSpan`."""
    spans = []
    start = 0
    while start < num_pieces:
        length = min(num_pieces - start, max_tokens_for_doc)
        spans.append(DocSpan(start, length))
        if start + length == num_pieces:
            break
        start += min(length, doc_stride)
    return spans


def window_spans_graph(num_pieces, room, doc_stride, empty_has_window=True):
    """`window_spans` of a batch, in the graph (the raw-text exports' windows).

    Args:
      num_pieces: int32 [N], the word-pieces of each text.
      room: int32 [N], the most pieces a window holds (>= 1).
      doc_stride: int, pieces between the starts of consecutive windows.
      empty_has_window: a text of no pieces gets one empty window (run_classifier's) or none
        (run_squad's).
    Returns:
      (row int32 [W], start int32 [W], length int32 [W]): the text, first piece and length of
      each window; the windows of a text are consecutive, in order.
    """
    step = tf.minimum(room, doc_stride)
    count = 1 + (tf.maximum(num_pieces - room, 0) + step - 1) // step
    if not empty_has_window:
        count = tf.where(num_pieces > 0, count, 0)
    row = tf.repeat(tf.range(tf.shape(num_pieces)[0]), count)
    start = tf.ragged.range(count).flat_values * tf.gather(step, row)
    length = tf.minimum(tf.gather(num_pieces, row) - start, tf.gather(room, row))
    return row, start, length
