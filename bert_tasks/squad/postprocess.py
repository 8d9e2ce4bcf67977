"""Start/end logits -> answer texts, as the original `write_predictions` (L741).

    results = [RawResult(unique_id, start_logits, end_logits), ...]   # one per feature
    write_predictions(examples, summary.windows, results, n_best_size=20, max_answer_length=30,
                      do_lower_case=True, output_prediction_file=..., output_nbest_file=...,
                      output_null_log_odds_file=..., version_2_with_negative=False)

The outputs are byte-identical to the original's for the same logits (Python floats made from
float32, or float32 arrays). The candidate filters, the n-best (which can hold n_best_size + 1
entries in v2), the "empty" nonce prediction of v1, the float64 softmax and the
`json.dumps(indent=4)` files are the original's.

ELECTRA's SQuAD model (`modeling.electra.squad`) gives each window its beams instead
(`BeamResult`: the top starts, the top ends of each, the answerable logit); those are decoded by
the original ELECTRA's rule (`finetune/qa/qa_metrics.py`, `joint_prediction` and
`answerable_classifier`): every start x its ends that passes the same filters is a candidate
scored by its log-probabilities (start + end), the n-best is the best n_best_size distinct texts
(no "" entry), and in v2.0 the null odds are the least answerable logit over the windows alone:
"" is predicted when it exceeds null_score_diff_threshold (the original's evaluation used -2.75,
its `qa_na_threshold`), otherwise the best text.

Fixed, where the original crashes (v2.0 only):
* No non-null candidate survives (e.g. every top-n start lies in the question): the original
  raises AttributeError. We predict "" and record null odds `score_null - 0.0 - 0.0`, i.e. the
  best non-null score is taken as 0.0, the logits the original gives its "empty" nonce entry.
* An example without features (a context that tokenizes to nothing): the original raises
  IndexError. We predict "", with the n-best [("", 0.0, 0.0)] and null odds 1000000.0 (the
  original's initial `score_null`).
"""
import collections
import functools
import json
import math

import numpy as np
from absl import logging

from modeling.checkpoint.files import write_text_atomic
from vocab.tokenization import BasicTokenizer

RawResult = collections.namedtuple("RawResult", ["unique_id", "start_logits", "end_logits"])
RawResult.__doc__ = """Model output for one feature: unique_id int; start_logits, end_logits
[max_seq_length] float sequences (lists of Python floats or float32 numpy arrays)."""

BeamResult = collections.namedtuple("BeamResult", [
    "unique_id", "start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
    "answerable_logit"])
BeamResult.__doc__ = """ELECTRA's model output for one feature: unique_id int; start_top_log_probs
[K] float, start_top_index [K] int (positions in the window); end_top_log_probs [K, K] float,
end_top_index [K, K] int (row i: the ends of start i); answerable_logit float (the log-odds of no
answer in the window)."""


def result_type(outputs):
    """`BeamResult` for prediction outputs (a dict by output name) holding the beams, else
    `RawResult`."""
    return BeamResult if "start_top_index" in outputs else RawResult


Predictions = collections.namedtuple("Predictions", ["predictions", "nbest", "null_odds"])
Predictions.__doc__ = """qas_id -> text; qas_id -> list of n-best dicts; qas_id -> null score
difference (v2.0 only, otherwise empty). All dicts are in example order."""

_PrelimPrediction = collections.namedtuple(
    "PrelimPrediction", ["span_index", "start_index", "end_index", "start_logit", "end_logit"])
# span: (first word, last word, start, end) of a non-null text: the text is
# " ".join(doc_tokens[first:last + 1])[start:end] (what raw-text serving reports as offsets).
_NbestPrediction = collections.namedtuple("NbestPrediction",
                                          ["text", "start_logit", "end_logit", "span"],
                                          defaults=[None])

# The original's initial `score_null` ("large and positive").
_NO_NULL_SCORE = 1000000


def get_best_indexes(logits, n_best_size):
    """Indexes of the n_best_size largest logits; ties keep index order (stable sort).

    Args:
      logits: [seq_length] float sequence, all positions (query and padding included).
    Returns:
      list of int, at most n_best_size.
    """
    order = np.argsort(-np.asarray(logits, dtype=np.float64), kind="stable")
    return [int(i) for i in order[:max(n_best_size, 0)]]


def compute_softmax(scores):
    """Softmax over a list of Python floats, in float64 with `math.exp`, as the original."""
    if not scores:
        return []
    max_score = max(scores)
    exp_scores = [math.exp(score - max_score) for score in scores]
    total_sum = 0.0
    for x in exp_scores:  # Summed left to right, as the original.
        total_sum += x
    return [x / total_sum for x in exp_scores]


def _strip_spaces(text):
    """(text without " ", map from its indexes to indexes in `text`)."""
    ns_chars = []
    ns_to_s_map = {}
    for i, c in enumerate(text):
        if c == " ":
            continue
        ns_to_s_map[len(ns_chars)] = i
        ns_chars.append(c)
    return "".join(ns_chars), ns_to_s_map


def get_final_text(pred_text, orig_text, do_lower_case, verbose_logging=False):
    """Projects a normalized predicted text back onto the original words (original L927).

    E.g. ("steve smith", "Steve Smith's") -> "Steve Smith". When the character alignment fails
    (pred_text not found in the basic-tokenized orig_text, or the tokenizer changed the number of
    non-space characters) the whole `orig_text` is returned.
    """
    start, end = final_text_span(pred_text, orig_text, do_lower_case, verbose_logging)
    return orig_text[start:end]


def final_text_span(pred_text, orig_text, do_lower_case, verbose_logging=False):
    """(start, end): `get_final_text` is `orig_text[start:end]`."""
    whole = 0, len(orig_text)
    tok_text = " ".join(token for word in orig_text.split(" ")
                        for token in _basic_tokens(word, do_lower_case))
    start_position = tok_text.find(pred_text)  # The first occurrence, as the original.
    if start_position == -1:
        if verbose_logging:
            logging.info("Unable to find text: '%s' in '%s'", pred_text, orig_text)
        return whole
    end_position = start_position + len(pred_text) - 1

    orig_ns_text, orig_ns_to_s_map = _strip_spaces(orig_text)
    tok_ns_text, tok_ns_to_s_map = _strip_spaces(tok_text)
    if len(orig_ns_text) != len(tok_ns_text):
        if verbose_logging:
            logging.info("Length not equal after stripping spaces: '%s' vs '%s'",
                         orig_ns_text, tok_ns_text)
        return whole

    tok_s_to_ns_map = {s: ns for ns, s in tok_ns_to_s_map.items()}
    orig_start_position = orig_ns_to_s_map.get(tok_s_to_ns_map.get(start_position))
    orig_end_position = orig_ns_to_s_map.get(tok_s_to_ns_map.get(end_position))
    if orig_start_position is None or orig_end_position is None:
        if verbose_logging:
            logging.info("Couldn't map %s position",
                         "start" if orig_start_position is None else "end")
        return whole
    return orig_start_position, orig_end_position + 1


# Words seen again: each n-best candidate's text spans a few words of the same context, and
# predict.py answers many questions on the same contexts.
@functools.lru_cache(maxsize=1 << 16)
def _basic_tokens(word, do_lower_case):
    """`BasicTokenizer.tokenize(word)` as a tuple. The original tokenizes a whole " "-joined
    text at once; its steps (cleaning, CJK spacing, whitespace split, lower case and accents,
    punctuation split) never act across a " ", so the text's tokens are its words' in order."""
    return tuple(BasicTokenizer(do_lower_case=do_lower_case).tokenize(word))


def _prelim_predictions(windows, span_index, start_logits, end_logits, n_best_size,
                        max_answer_length):
    """The valid (start, end) pairs among one window's top-n starts x top-n ends, in that order.

    A pair is kept when both ends are context pieces of the window, the start has maximum context
    there (the end is not checked, as in the original), end >= start, and it spans at most
    max_answer_length word-pieces.
    """
    prelim = []
    for start_index in get_best_indexes(start_logits, n_best_size):
        if not windows.is_max_context(span_index, start_index):
            continue
        for end_index in get_best_indexes(end_logits, n_best_size):
            if windows.piece_index(span_index, end_index) is None:
                continue
            if end_index < start_index or end_index - start_index + 1 > max_answer_length:
                continue
            prelim.append(_PrelimPrediction(span_index, start_index, end_index,
                                            float(start_logits[start_index]),
                                            float(end_logits[end_index])))
    return prelim


def _beam_predictions(windows, span_index, result, max_answer_length):
    """The valid (start, end) pairs of one window's beams: each top start with each of its top
    ends, in that order, under `_prelim_predictions`'s filters (the original ELECTRA's
    `write_predictions`); scores are the log-probabilities."""
    prelim = []
    for i, start_index in enumerate(result.start_top_index):
        start_index = int(start_index)
        if not windows.is_max_context(span_index, start_index):
            continue
        for j, end_index in enumerate(result.end_top_index[i]):
            end_index = int(end_index)
            if windows.piece_index(span_index, end_index) is None:
                continue
            if end_index < start_index or end_index - start_index + 1 > max_answer_length:
                continue
            prelim.append(_PrelimPrediction(span_index, start_index, end_index,
                                            float(result.start_top_log_probs[i]),
                                            float(result.end_top_log_probs[i][j])))
    return prelim


def _predict_beams(example, windows, result_by_id, n_best_size, max_answer_length,
                   do_lower_case, version_2_with_negative, verbose_logging):
    """`_predict_example` for `BeamResult`s: (nbest, score_null), score_null the least
    answerable logit of the windows (v2.0; else `_NO_NULL_SCORE`)."""
    prelim = []
    score_null = _NO_NULL_SCORE
    for span_index in range(len(windows.doc_spans)):
        result = _result(windows, span_index, result_by_id, example)
        if version_2_with_negative:
            score_null = min(score_null, float(result.answerable_logit))
        prelim += _beam_predictions(windows, span_index, result, max_answer_length)
    prelim.sort(key=lambda x: x.start_logit + x.end_logit, reverse=True)  # Stable, as sorted().
    seen = set()
    nbest = []
    for pred in prelim:
        if len(nbest) >= n_best_size:
            break
        text, span = _span_text(example, windows, pred, do_lower_case, verbose_logging)
        if text in seen:
            continue
        seen.add(text)
        nbest.append(_NbestPrediction(text, pred.start_logit, pred.end_logit, span))
    if not nbest:  # No valid span at all: the original's nonce answer (v1.1 and v2.0).
        nbest.append(_NbestPrediction("empty", 0.0, 0.0))
    return nbest, score_null


def _result(windows, span_index, result_by_id, example):
    unique_id = windows.first_unique_id + span_index
    if unique_id not in result_by_id:
        raise ValueError("no result for unique_id %d (example %r, window %d)"
                         % (unique_id, example.qas_id, span_index))
    return result_by_id[unique_id]


def _span_text(example, windows, pred, do_lower_case, verbose_logging):
    """(text, span) of a non-null prelim prediction: the answer in the original's words, and
    where it lies in them (see `_NbestPrediction`)."""
    piece_start = windows.piece_index(pred.span_index, pred.start_index)
    piece_end = windows.piece_index(pred.span_index, pred.end_index)
    tok_text = " ".join(windows.doc_pieces[piece_start:piece_end + 1])
    # De-tokenize WordPieces that have been split off, then clean whitespace.
    tok_text = tok_text.replace(" ##", "").replace("##", "")
    tok_text = " ".join(tok_text.strip().split())
    orig_start = windows.piece_to_word[piece_start]
    orig_end = windows.piece_to_word[piece_end]
    orig_text = " ".join(example.doc_tokens[orig_start:orig_end + 1])
    start, end = final_text_span(tok_text, orig_text, do_lower_case, verbose_logging)
    return orig_text[start:end], (orig_start, orig_end, start, end)


def _predict_example(example, windows, result_by_id, n_best_size, max_answer_length,
                     do_lower_case, version_2_with_negative, verbose_logging):
    """Returns (nbest list of _NbestPrediction, score_null) for one example."""
    prelim = []
    score_null = _NO_NULL_SCORE
    null_span_index = 0
    null_start_logit = null_end_logit = 0.0
    for span_index in range(len(windows.doc_spans)):
        unique_id = windows.first_unique_id + span_index
        if unique_id not in result_by_id:
            raise ValueError("no result for unique_id %d (example %r, window %d)"
                             % (unique_id, example.qas_id, span_index))
        result = result_by_id[unique_id]
        start_logits = np.asarray(result.start_logits, dtype=np.float64)
        end_logits = np.asarray(result.end_logits, dtype=np.float64)
        if version_2_with_negative:
            feature_null_score = float(start_logits[0]) + float(end_logits[0])
            if feature_null_score < score_null:
                score_null = feature_null_score
                null_span_index = span_index
                null_start_logit = float(start_logits[0])
                null_end_logit = float(end_logits[0])
        prelim += _prelim_predictions(windows, span_index, start_logits, end_logits,
                                      n_best_size, max_answer_length)
    if version_2_with_negative:
        prelim.append(_PrelimPrediction(null_span_index, 0, 0, null_start_logit, null_end_logit))
    prelim.sort(key=lambda x: x.start_logit + x.end_logit, reverse=True)  # Stable, as sorted().

    seen = set()
    nbest = []
    for pred in prelim:
        if len(nbest) >= n_best_size:
            break
        span = None
        if pred.start_index > 0:
            text, span = _span_text(example, windows, pred, do_lower_case, verbose_logging)
            if text in seen:
                continue
        else:
            text = ""
        seen.add(text)
        nbest.append(_NbestPrediction(text, pred.start_logit, pred.end_logit, span))
    # v2: the null answer is always offered, even as entry n_best_size + 1.
    if version_2_with_negative and "" not in seen:
        nbest.append(_NbestPrediction("", null_start_logit, null_end_logit))
    if not nbest:  # No valid span at all (v1 only): the original's nonce answer.
        nbest.append(_NbestPrediction("empty", 0.0, 0.0))
    return nbest, score_null


def compute_predictions(examples, windows, results, n_best_size, max_answer_length,
                        do_lower_case, version_2_with_negative=False,
                        null_score_diff_threshold=0.0, verbose_logging=False, spans=None):
    """Computes the original's predictions, n-best lists and null odds.

    Args:
      examples: list of SquadExample, in the order the features were made.
      windows: list of ExampleWindows, windows[i] for examples[i] (`features.iter_windows`').
      results: iterable of RawResult (or BeamResult), one per feature (any order).
      n_best_size, max_answer_length: int, the original flags.
      do_lower_case: bool, as used for the features.
      version_2_with_negative: bool; v2.0 adds null answers and null odds.
      null_score_diff_threshold: float; v2.0 predicts "" if the null score minus the best
        non-null score exceeds it.
      verbose_logging: bool; log why `get_final_text` fell back to the whole words.
      spans: None, or a dict that receives qas_id -> where the prediction lies in the example's
        words, (first word, last word, start, end) with the prediction
        `" ".join(doc_tokens[first:last + 1])[start:end]`, or None for "" and "empty".
    Returns:
      Predictions.
    """
    if len(windows) != len(examples):
        raise ValueError("%d examples but %d ExampleWindows" % (len(examples), len(windows)))
    result_by_id = {result.unique_id: result for result in results}
    predictions, nbest_json, null_odds = {}, {}, {}
    for example, example_windows in zip(examples, windows):
        beams = _holds_beams(example_windows, result_by_id)
        nbest, score_null = (_predict_beams if beams else _predict_example)(
            example, example_windows, result_by_id, n_best_size, max_answer_length,
            do_lower_case, version_2_with_negative, verbose_logging)
        probs = compute_softmax([entry.start_logit + entry.end_logit for entry in nbest])
        nbest_json[example.qas_id] = [
            {"text": entry.text, "probability": prob, "start_logit": entry.start_logit,
             "end_logit": entry.end_logit} for entry, prob in zip(nbest, probs)]
        if not version_2_with_negative:
            predictions[example.qas_id] = nbest[0].text
            if spans is not None:
                spans[example.qas_id] = nbest[0].span
            continue
        best_non_null = next((entry for entry in nbest if entry.text), None)
        if best_non_null is None:  # The original crashes here; see the module docstring.
            null_odds[example.qas_id] = score_null - 0.0 - 0.0
            predictions[example.qas_id] = ""
            if spans is not None:
                spans[example.qas_id] = None
            continue
        # ELECTRA's answerable classifier scores the null answer alone.
        score_diff = score_null if beams else (
            score_null - best_non_null.start_logit - best_non_null.end_logit)
        null_odds[example.qas_id] = score_diff
        is_null = score_diff > null_score_diff_threshold
        predictions[example.qas_id] = "" if is_null else best_non_null.text
        if spans is not None:
            spans[example.qas_id] = None if is_null else best_non_null.span
    return Predictions(predictions, nbest_json, null_odds)


def _holds_beams(windows, result_by_id):
    """Whether the example's results are `BeamResult`s (its first window's)."""
    first = result_by_id.get(windows.first_unique_id)
    return isinstance(first, BeamResult)


def to_json_text(obj):
    """The original's output format: indent=4, ASCII escapes, trailing newline."""
    return json.dumps(obj, indent=4) + "\n"


def write_predictions(examples, windows, results, n_best_size, max_answer_length, do_lower_case,
                      output_prediction_file, output_nbest_file, output_null_log_odds_file,
                      version_2_with_negative=False, null_score_diff_threshold=0.0,
                      verbose_logging=False):
    """`compute_predictions`, then writes predictions.json, nbest_predictions.json and (v2.0
    only) null_odds.json, each atomically. Returns the Predictions."""
    out = compute_predictions(examples, windows, results, n_best_size, max_answer_length,
                              do_lower_case, version_2_with_negative, null_score_diff_threshold,
                              verbose_logging)
    logging.info("Writing predictions to: %s", output_prediction_file)
    write_text_atomic(output_prediction_file, to_json_text(out.predictions))
    logging.info("Writing nbest to: %s", output_nbest_file)
    write_text_atomic(output_nbest_file, to_json_text(out.nbest))
    if version_2_with_negative:
        write_text_atomic(output_null_log_odds_file, to_json_text(out.null_odds))
    return out
