"""Answers from the raw-text SQuAD SavedModel's outputs (`raw_text.SquadExport`: the windows'
prediction outputs and the word-pieces they cover), by run_squad's own post-processing: what
predict.py prints for a `--format=squad` export. Host-side Python on the outputs' NumPy arrays.

The windows' outputs are start and end logits or a span model's declared ones (ELECTRA's beams);
`postprocess.result_type` tells which result they make, and `compute_predictions` applies that
result's rule (n-best or beams), as run_squad's `task.raw_results` and predictions.json do."""
import dataclasses
import math

import numpy as np

from bert_tasks.squad import examples as sq_examples, features as sq_features, postprocess
from bert_tasks.squad.task import PostprocessOptions


class _Pieces:
    """A stand-in tokenizer whose `tokenize` gives the graph's word-pieces of the question."""

    def __init__(self, pieces):
        self._pieces = pieces

    def tokenize(self, _):
        return self._pieces


@dataclasses.dataclass
class Answer:
    """One question's answer, as run_squad predicts it.

    Attributes:
      text: str, run_squad's prediction ("" for no answer in v2.0; "empty" when v1.1 finds no
        span at all, as the original).
      start, end: int, `context[start:end]` holds the answer (characters); -1, -1 for no answer.
        Words of the answer are joined by single spaces in `text`, as run_squad's.
      probability: float, the answer's share of the n-best (run_squad's nbest probability); for
        a no-answer of beams (v2.0 ELECTRA: its n-best has no "" entry) the sigmoid of its null
        odds, the answerable classifier's probability of no answer.
      score: float, its start logit + end logit (start + end log-probabilities for beams; the
        null odds for a no-answer of beams).
      nbest: list of dicts (text, probability, start_logit, end_logit): nbest_predictions.json's.
    """
    text: str
    start: int
    end: int
    probability: float
    score: float
    nbest: list


def answers(questions, contexts, outputs, metadata):
    """The answers of `SquadExport`'s outputs (numpy) for `questions` and `contexts` (lists of
    str), with the export's metadata (export.json): list of `Answer`."""
    options = postprocess_options(metadata)
    result_type = postprocess.result_type(outputs)
    fields = result_type._fields[1:]  # after unique_id: the outputs of that name, per window
    found, windows, results = [], [], []
    unique_id = sq_features.FIRST_UNIQUE_ID
    for i, (question, context) in enumerate(zip(questions, contexts)):
        doc_tokens, char_to_word = sq_examples.split_context(context)
        piece_word = outputs["piece_word"][i]
        piece_word = piece_word[piece_word >= 0].tolist()
        pieces = [p.decode("utf-8") for p in outputs["context_pieces"][i][:len(piece_word)]]
        query = [p.decode("utf-8") for p in outputs["question_pieces"][i] if p]
        word_to_piece = np.searchsorted(piece_word, np.arange(len(doc_tokens))).tolist()
        example = sq_examples.SquadExample(str(i), question, doc_tokens)
        example_windows = sq_features.make_windows(
            example, i, unique_id,
            sq_features.TokenizedContext(doc_tokens, pieces, piece_word, word_to_piece),
            _Pieces(query), metadata["max_seq_length"], metadata["doc_stride"],
            metadata["max_query_length"], is_training=False)
        count = int(outputs["window_count"][i])
        if len(example_windows.doc_spans) != count:
            raise ValueError("the SQuAD export's windows (%d) are not run_squad's (%d) for "
                             "question %d: an export of another version?"
                             % (count, len(example_windows.doc_spans), i))
        results += [result_type(unique_id + k, *(outputs[name][i, k] for name in fields))
                    for k in range(count)]
        unique_id += count
        found.append((example, char_to_word))
        windows.append(example_windows)
    spans = {}
    predicted = postprocess.compute_predictions(
        [example for example, _ in found], windows, results, options.n_best_size,
        options.max_answer_length, options.do_lower_case, options.version_2_with_negative,
        options.null_score_diff_threshold, spans=spans)
    return [_answer(example, char_to_word, context, predicted, spans[example.qas_id])
            for (example, char_to_word), context in zip(found, contexts)]


def postprocess_options(metadata):
    """The export's `PostprocessOptions` (export.json)."""
    return PostprocessOptions(**{field.name: metadata[field.name]
                                 for field in dataclasses.fields(PostprocessOptions)
                                 if field.name in metadata})


def _answer(example, char_to_word, context, predicted, span):
    text = predicted.predictions[example.qas_id]
    nbest = predicted.nbest[example.qas_id]
    entry = next((e for e in nbest if e["text"] == text), None)
    if entry is None:
        # No answer by the beam rule, whose n-best holds no "" entry: the null odds decided it
        # (the answerable logit, the log-odds of no answer), so they are its score.
        odds = predicted.null_odds[example.qas_id]
        # exp of a non-positive number: no overflow at any threshold.
        sigmoid = (1.0 / (1.0 + math.exp(-odds)) if odds >= 0
                   else math.exp(odds) / (1.0 + math.exp(odds)))
        return Answer(text, -1, -1, sigmoid, odds, nbest)
    start = end = -1
    if span is not None:
        first, _, begin, finish = span
        start, end = _context_offsets(example.doc_tokens, char_to_word, context, first, begin,
                                      finish)
    return Answer(text, start, end, entry["probability"],
                  entry["start_logit"] + entry["end_logit"], nbest)


def _context_offsets(doc_tokens, char_to_word, context, first_word, begin, finish):
    """Characters of `context` of `" ".join(doc_tokens[first_word:])[begin:finish]`."""
    word_start = [0] * len(doc_tokens)
    for c in range(len(context) - 1, -1, -1):  # each word's first character
        w = char_to_word[c]
        if w >= 0 and (c == 0 or char_to_word[c - 1] != w):
            word_start[w] = c

    def locate(offset):
        word = first_word
        while offset > len(doc_tokens[word]):  # past this word and its joining space
            offset -= len(doc_tokens[word]) + 1
            word += 1
        return word_start[word] + offset

    return locate(begin), locate(finish - 1) + 1
