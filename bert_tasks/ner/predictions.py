"""Predicted tags back onto the words, and the predictions file in CoNLL format.

The file repeats the input: every line gets the predicted tag as one more column (separated by
single spaces, as conlleval reads them), blank lines between sentences, `-DOCSTART-` lines with
the prediction O. The gold and predicted tags are then its last two columns, so

    perl conlleval.pl < predictions.txt      # or: python -m bert_tasks.ner.conlleval predictions.txt

scores it; `write_predictions` returns those same counts.
"""
from bert_tasks.ner import conlleval
from bert_tasks.ner.tags import OUTSIDE, in_scheme
from modeling.checkpoint.files import write_text_atomic


def sentence_tags(windows, predicted_ids, sentences, label_list):
    """The predicted tag of every word.

    Args:
      windows: list of `bert_tasks.ner.features.Window` covering every word of `sentences` once.
      predicted_ids: sequence of int arrays [max_seq_length], the predicted label id at each
        position of each window (same order as `windows`).
      sentences: list of `bert_tasks.ner.conll.Sentence`.
      label_list: list of str.
    Returns:
      list (per sentence) of lists of str (per word).
    """
    if len(windows) != len(predicted_ids):
        raise ValueError("%d windows but %d predictions" % (len(windows), len(predicted_ids)))
    tags = [[None] * len(sentence.words) for sentence in sentences]
    for window, ids in zip(windows, predicted_ids):
        row = tags[window.sentence_index]
        for k, position in enumerate(window.label_positions):
            row[window.word_start + k] = label_list[int(ids[position])]
    return tags


def prediction_lines(documents, predicted_tags, scheme="IOB2"):
    """Yields the predictions file's lines (with "\\n").

    Args:
      documents: list of `bert_tasks.ner.conll.Document`.
      predicted_tags: list per sentence (in file order) of predicted tags, in any scheme.
      scheme: the file's, "IOB1" or "IOB2": they are written in it
        (`bert_tasks.ner.tags.in_scheme`), so that conlleval's token accuracy compares like with
        like; the chunks are the same.
    """
    sentence_index = 0
    for document in documents:
        if document.docstart_columns is not None:
            yield " ".join(document.docstart_columns + [OUTSIDE]) + "\n"
            yield "\n"
        for sentence in document.sentences:
            predicted = in_scheme(predicted_tags[sentence_index], scheme)
            for columns, tag in zip(sentence.columns, predicted):
                yield " ".join(columns + [tag]) + "\n"
            yield "\n"
            sentence_index += 1


def write_predictions(path, documents, predicted_tags, scheme="IOB2"):
    """Writes the predictions file (atomically, see `prediction_lines`) and returns its
    `bert_tasks.ner.conlleval.ChunkCounts`."""
    lines = list(prediction_lines(documents, predicted_tags, scheme))
    write_text_atomic(path, "".join(lines))
    return conlleval.count_lines(lines, source=path)
