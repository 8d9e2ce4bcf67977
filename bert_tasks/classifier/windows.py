"""Long documents for run_classifier (`--long_documents`): overlapping windows of an example that
does not fit `max_seq_length`, and the per-example aggregation of the windows' outputs.

    pieces = window_pairs(tokens_a, tokens_b, max_seq_length, doc_stride)   # [(A piece, B piece)]
    logits = aggregate(window_logits, window_counts, "mean")                # [N, C] from [W, C]

An example that fits is one window, packed exactly as without `--long_documents`, so its record
is the same. The windows slide as run_squad's over its context (the same spans: `doc_stride`
word-pieces between window starts, the last window ending at the text's end).
"""
import numpy as np

# run_squad's sliding windows, shared so that `--doc_stride` means the same in both scripts.
from bert_tasks.windows import window_spans

AGGREGATIONS = ("mean", "max", "first")


def window_pairs(tokens_a, tokens_b, max_seq_length, doc_stride):
    """The (A, B) word-piece pieces of one example, each fitting `max_seq_length` untruncated.

    Args:
      tokens_a: list of word-pieces; tokens_b: list of word-pieces, or None/empty (one text).
      max_seq_length: int, the records' length (room for [CLS] A [SEP] (B [SEP])).
      doc_stride: int >= 1, word-pieces between the starts of consecutive windows.
    Returns:
      list of (piece_a, piece_b), at least one; piece_b is None for a single text. A pair that
      fits is returned whole. Otherwise the longer text (B on ties, as the original's truncation)
      is windowed and the shorter is kept whole in every window where it fits in half the room
      (a question beside a document); longer, it is cut to that half, so the windowed text keeps
      at least half of every window.
    """
    if not tokens_b:
        room = max_seq_length - 2
        if len(tokens_a) <= room:
            return [(tokens_a, None)]
        return [(tokens_a[s.start:s.start + s.length], None)
                for s in window_spans(len(tokens_a), room, doc_stride)]
    room = max_seq_length - 3
    if len(tokens_a) + len(tokens_b) <= room:
        return [(tokens_a, tokens_b)]
    window_b = len(tokens_b) >= len(tokens_a)
    long, short = (tokens_b, tokens_a) if window_b else (tokens_a, tokens_b)
    short = short[:room // 2]
    pieces = [long[s.start:s.start + s.length]
              for s in window_spans(len(long), room - len(short), doc_stride)]
    return [(short, piece) if window_b else (piece, short) for piece in pieces]


def window_starts(window_counts):
    """Row of each example's first window: int `[N]` from the windows per example `[N]`."""
    counts = np.asarray(window_counts, np.int64)
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


def aggregate(values, window_counts, how):
    """Per-example values from per-window values.

    Args:
      values: `[W, ...]` per window, the windows of each example consecutive, in example order
        (rows past `sum(window_counts)`, TPU padding, are ignored).
      window_counts: int `[N]`, each >= 1: the windows of each example.
      how: "mean" (the average of the windows' logits: every window votes), "max" (the largest
        logit of each class over the windows: one window holding the evidence is enough), or
        "first" (the first window's: what truncation to max_seq_length gives).
    Returns:
      `[N, ...]` float32.
    """
    if how not in AGGREGATIONS:
        raise ValueError("window aggregation must be one of %s, got %r"
                         % (", ".join(AGGREGATIONS), how))
    counts = np.asarray(window_counts, np.int64)
    values = np.asarray(values, np.float32)[:int(counts.sum())]
    starts = window_starts(counts)
    if how == "first":
        return values[starts]
    if how == "max":
        return np.maximum.reduceat(values, starts, axis=0)
    sums = np.add.reduceat(values.astype(np.float64), starts, axis=0)
    return (sums / counts.reshape((-1,) + (1,) * (values.ndim - 1))).astype(np.float32)
