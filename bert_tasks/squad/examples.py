"""Reading SQuAD v1.1 / v2.0 JSON into examples, as the original `read_squad_examples` (L227).

The context is split into `doc_tokens` on a whitespace set of its own: only " ", "\\t", "\\r",
"\\n" and U+202F. NBSP and other `Zs` spaces are *not* whitespace here (the tokenizer treats them
as whitespace), so a training answer such as "42\\u00a0km" cannot be recovered and the question
is skipped with the original's "Could not find answer" warning.

Differences from the original, all on bad input:
* Structural problems (a missing or mistyped field) raise `SquadFormatError` naming the file and
  the JSON path, e.g. `data[3].paragraphs[0].qas[2].answers[0].answer_start: missing`, instead of
  a bare KeyError/TypeError.
* A training answer whose `answer_start`..`answer_start+len(text)` lies outside the context, or
  whose text is empty, is skipped with a warning (the original raised IndexError, or silently used
  a wrong span through Python's negative indexing).
* Every skipped question is recorded in `ReadResult.skipped`; one warning counts them and names
  the file and the first few question ids (the original logged one warning per question).
"""
import dataclasses
import random
from typing import List, Optional

from absl import logging

from bert_tasks.squad.io_utils import SquadFormatError, check_type, field, read_json
from vocab.tokenization import whitespace_tokenize

# main() pre-shuffles the training examples with random.Random(12345).
TRAIN_SHUFFLE_SEED = 12345

# The original's `is_whitespace` in read_squad_examples: note U+202F but no NBSP.
_CONTEXT_WHITESPACE = frozenset(" \t\r\n\u202f")


@dataclasses.dataclass
class SquadExample:
    """One question with its (whitespace-split) context.

    Attributes:
      qas_id: str, the question id.
      question_text: str.
      doc_tokens: list of str, the context split on `_CONTEXT_WHITESPACE` (shared by all the
        questions of a paragraph).
      orig_answer_text: str (training), "" for impossible questions, None for prediction.
      start_position, end_position: int index into `doc_tokens` of the answer's first/last word
        (training), -1 for impossible questions, None for prediction.
      is_impossible: bool; only ever True when training on v2.0 data.
    """
    qas_id: str
    question_text: str
    doc_tokens: List[str]
    orig_answer_text: Optional[str] = None
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    is_impossible: bool = False


@dataclasses.dataclass
class SkippedQuestion:
    """A training question dropped because its answer could not be located in the context."""
    path: str      # JSON path of the question, e.g. "data[2].paragraphs[0].qas[1]"
    qas_id: str
    message: str   # the logged warning


@dataclasses.dataclass
class ReadResult:
    """What `parse_squad_examples` returns: the kept examples and the skipped questions."""
    examples: List[SquadExample]
    skipped: List[SkippedQuestion]


def split_context(paragraph_text):
    """Splits a context into words as the original does.

    Returns:
      (doc_tokens, char_to_word_offset): doc_tokens is the list of maximal runs of
      non-whitespace characters; char_to_word_offset[c] is the index of the word character c
      belongs to, whitespace mapping to the previous word (-1 before the first word).
    """
    doc_tokens = []
    char_to_word_offset = []
    prev_is_whitespace = True
    for c in paragraph_text:
        if c in _CONTEXT_WHITESPACE:
            prev_is_whitespace = True
        else:
            if prev_is_whitespace:
                doc_tokens.append(c)
            else:
                doc_tokens[-1] += c
            prev_is_whitespace = False
        char_to_word_offset.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word_offset


def _locate_answer(qa, qa_path, doc_tokens, char_to_word_offset, context_length, source):
    """(answer_text, start_word, end_word, None) for a training answer, or (..., warning) to skip.

    The original keeps an answer only when its whitespace-normalised text is a substring of the
    words its characters fall in.
    """
    answers = field(qa, "answers", list, qa_path, source)
    if len(answers) != 1:
        raise SquadFormatError(
            "%s: %s.answers: For training, each question should have exactly 1 answer (got %d)."
            % (source, qa_path, len(answers)))
    answer_path = qa_path + ".answers[0]"
    answer = check_type(answers[0], dict, answer_path, source)
    text = field(answer, "text", str, answer_path, source)
    offset = field(answer, "answer_start", int, answer_path, source)
    if not text or offset < 0 or offset + len(text) > context_length:
        return text, None, None, (
            "Answer %r at answer_start %d does not fit in the context (%d characters)"
            % (text, offset, context_length))
    start = char_to_word_offset[offset]
    end = char_to_word_offset[offset + len(text) - 1]
    actual_text = " ".join(doc_tokens[start:end + 1])
    cleaned_answer_text = " ".join(whitespace_tokenize(text))
    if actual_text.find(cleaned_answer_text) == -1:
        return text, None, None, ("Could not find answer: '%s' vs. '%s'"
                                  % (actual_text, cleaned_answer_text))
    return text, start, end, None


def parse_squad_examples(input_data, is_training, version_2_with_negative=False,
                         source="<json>"):
    """Builds examples from a parsed SQuAD JSON object, in file order.

    Args:
      input_data: the parsed JSON document ({"data": [...], ...}).
      is_training: bool; True reads answers and answer positions.
      version_2_with_negative: bool; when training, read each question's `is_impossible`.
      source: str naming the input in error messages (the file name).
    Returns:
      ReadResult.
    Raises:
      SquadFormatError: a missing or mistyped field (the message names `source` and JSON path),
        or a possible training question without exactly one answer.
    """
    check_type(input_data, dict, "(top level)", source)
    data = field(input_data, "data", list, "", source)
    examples = []
    skipped = []
    for i, entry in enumerate(data):
        entry_path = "data[%d]" % i
        check_type(entry, dict, entry_path, source)
        for j, paragraph in enumerate(field(entry, "paragraphs", list, entry_path, source)):
            paragraph_path = "%s.paragraphs[%d]" % (entry_path, j)
            check_type(paragraph, dict, paragraph_path, source)
            context = field(paragraph, "context", str, paragraph_path, source)
            doc_tokens, char_to_word_offset = split_context(context)
            for k, qa in enumerate(field(paragraph, "qas", list, paragraph_path, source)):
                qa_path = "%s.qas[%d]" % (paragraph_path, k)
                check_type(qa, dict, qa_path, source)
                example = SquadExample(
                    qas_id=field(qa, "id", str, qa_path, source),
                    question_text=field(qa, "question", str, qa_path, source),
                    doc_tokens=doc_tokens)
                if is_training:
                    if version_2_with_negative:
                        example.is_impossible = field(qa, "is_impossible", bool, qa_path, source)
                    if example.is_impossible:
                        example.orig_answer_text = ""
                        example.start_position = example.end_position = -1
                    else:
                        text, start, end, warning = _locate_answer(
                            qa, qa_path, doc_tokens, char_to_word_offset, len(context), source)
                        if warning is not None:
                            skipped.append(SkippedQuestion(qa_path, example.qas_id, warning))
                            continue
                        example.orig_answer_text = text
                        example.start_position, example.end_position = start, end
                examples.append(example)
    return ReadResult(examples, skipped)


def read_squad_examples(input_file, is_training, version_2_with_negative=False):
    """Reads a SQuAD JSON file into a list of SquadExample (original API plus the v2 switch).

    Raises:
      SquadFormatError: unreadable file, invalid JSON (line and column) or bad structure
        (JSON path).
    """
    return examples_from_data(read_json(input_file), is_training, version_2_with_negative,
                              source=input_file)


def examples_from_data(input_data, is_training, version_2_with_negative=False, source="<json>"):
    """`parse_squad_examples` with logging: the skipped training questions are counted in one
    warning that names the file and the first few question ids (`skipped_warning`); each one's
    reason (the original's per-question "Could not find answer" warning) is logged at INFO.

    Returns:
      list of SquadExample.
    """
    result = parse_squad_examples(input_data, is_training, version_2_with_negative, source)
    for skip in result.skipped:
        logging.info("%s: %s (%s) skipped: %s", source, skip.path, skip.qas_id, skip.message)
    if result.skipped:
        logging.warning("%s", skipped_warning(source, result))
    logging.info("%s: read %d examples", source, len(result.examples))
    return result.examples


SHOWN_SKIPPED_IDS = 5


def skipped_warning(source, result, shown=SHOWN_SKIPPED_IDS):
    """The one warning for `result.skipped` (a ReadResult of `source` with skipped questions)."""
    skipped = result.skipped
    ids = ", ".join(skip.qas_id for skip in skipped[:shown])
    if len(skipped) > shown:
        ids += " and %d more" % (len(skipped) - shown)
    total = len(skipped) + len(result.examples)
    return ("%s: skipped %d of %d training questions whose answer text is not at their "
            "answer_start (the original's \"Could not find answer\"): %s. answer_start is the "
            "answer's character offset in its context; each question's reason is logged at INFO"
            % (source, len(skipped), total, ids))


def shuffle_examples(examples, seed=TRAIN_SHUFFLE_SEED):
    """Shuffles training examples in place as the original main() does before writing features
    (so unique ids follow the shuffled order)."""
    random.Random(seed).shuffle(examples)
