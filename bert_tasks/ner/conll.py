"""Reading CoNLL-2003 files: one word per line, the NER tag in the last column.

    EU NNP B-NP B-ORG
    rejects VBZ B-VP O
    ...
    <blank line between sentences>
    -DOCSTART- -X- -X- O      <a new document (CoNLL-2003 has about 15 sentences per document)>

The English files have four columns (word, POS, chunk, NER), the German five; any number from
two up is read, the first column being the word and the last the tag, but every non-blank line of
a file must have the same number. Tags are IOB1 or IOB2 (`bert_tasks.ner.tags`); each sentence's tags are
held in IOB2 (the model learns the scheme its task asks for, `bert_tasks.ner.tags.in_scheme`), and
the input columns are kept as read for the predictions file.
A file without `-DOCSTART-` lines is one document. Errors name the file and line.

    documents = read_conll_file("eng.train")
    documents[0].sentences[0].words, documents[0].sentences[0].tags   # tags in IOB2
"""
import dataclasses
import os
from typing import List, Optional

import tensorflow as tf

from bert_tasks.input_files import check_is_file
from bert_tasks.ner import tags as tag_schemes

DOCSTART = "-DOCSTART-"
# The file names each split goes by in the copies of CoNLL-2003 in circulation, first match wins:
# the original distribution's eng.train / eng.testa / eng.testb, and the train/valid/test names.
SPLIT_FILE_NAMES = {
    "train": ("train.txt", "eng.train"),
    "dev": ("dev.txt", "valid.txt", "eng.testa"),
    "test": ("test.txt", "eng.testb"),
}


@dataclasses.dataclass
class Sentence:
    """One sentence.

    Attributes:
      words: list of str.
      tags: list of str, the IOB2 form of the file's tags (same length).
      columns: list of list of str, every input column of each word, as read.
      line_number: int, the file line of the first word (1-based).
    """
    words: List[str]
    tags: List[str]
    columns: List[List[str]]
    line_number: int


@dataclasses.dataclass
class Document:
    """Consecutive sentences of one document.

    Attributes:
      sentences: list of Sentence.
      docstart_columns: the columns of the `-DOCSTART-` line that opened it, or None (the start of
        a file without one). A document may have no sentences (two `-DOCSTART-` lines in a row).
    """
    sentences: List[Sentence]
    docstart_columns: Optional[List[str]] = None


class ConllFormatError(ValueError):
    """Bad CoNLL input; the message starts with file:line."""


def _decode(raw, path, line_number):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConllFormatError("%s:%d: not valid UTF-8 (%s)" % (path, line_number, e)) from None


def _check_tag(tag, path, line_number):
    if tag_schemes.parse_tag(tag) is None:
        raise ConllFormatError("%s:%d: tag %r is not O, B-<type> or I-<type>"
                               % (path, line_number, tag))


def read_conll_lines(lines, path):
    """list of Document from an iterable of lines (bytes or str); `path` names them in errors.

    Raises:
      ConllFormatError: a line with fewer than 2 columns or another number than the file's first
        line, a bad tag, or no sentence at all.
    """
    documents = [Document([])]
    num_columns = None
    first_line = None
    words, tags, columns = [], [], []
    start_line = None

    def end_sentence():
        if words:
            documents[-1].sentences.append(
                Sentence(list(words), tag_schemes.to_iob2(tags), list(columns), start_line))
            words.clear()
            tags.clear()
            columns.clear()

    for line_number, line in enumerate(lines, 1):
        if isinstance(line, bytes):
            line = _decode(line, path, line_number)
        if line_number == 1:
            # A byte-order mark would make `-DOCSTART-` (or the first word) another word.
            line = line.removeprefix("\ufeff")
        fields = line.split()
        if not fields:
            end_sentence()
            continue
        if num_columns is None:
            num_columns, first_line = len(fields), line_number
            if num_columns < 2:
                raise ConllFormatError("%s:%d: %d column; expected the word, ..., the NER tag"
                                       % (path, line_number, num_columns))
        elif len(fields) != num_columns:
            raise ConllFormatError("%s:%d: %d columns, but line %d has %d"
                                   % (path, line_number, len(fields), first_line, num_columns))
        _check_tag(fields[-1], path, line_number)
        if fields[0] == DOCSTART:
            end_sentence()
            if documents[-1].sentences or documents[-1].docstart_columns is not None:
                documents.append(Document([]))
            documents[-1].docstart_columns = fields
            continue
        if not words:
            start_line = line_number
        words.append(fields[0])
        tags.append(fields[-1])
        columns.append(fields)
    end_sentence()
    if not any(d.sentences for d in documents):
        raise ConllFormatError("%s: no sentences" % path)
    return documents


def read_conll_file(path):
    """list of Document of a CoNLL file (local or `gs://`). See read_conll_lines.

    Raises IsADirectoryError when `path` is a directory."""
    if not tf.io.gfile.exists(path):
        raise ConllFormatError("%s: no such file" % path)
    check_is_file(path)
    with tf.io.gfile.GFile(path, "rb") as f:
        return read_conll_lines(f, path)


def sentences_of(documents):
    """All sentences of `documents`, in order."""
    return [sentence for document in documents for sentence in document.sentences]


def split_file(data_dir, split):
    """The path of `split` ("train", "dev", "test") in `data_dir` (see SPLIT_FILE_NAMES).

    Raises:
      FileNotFoundError: naming the directory and the names looked for.
    """
    for name in SPLIT_FILE_NAMES[split]:
        path = os.path.join(data_dir, name)
        if tf.io.gfile.exists(path):
            return path
    raise FileNotFoundError("%s: no %s file (looked for %s)"
                            % (data_dir, split, ", ".join(SPLIT_FILE_NAMES[split])))
