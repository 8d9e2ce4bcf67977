"""SWAG CSV files -> SwagExamples, columns found by header name, bad rows named by file and line.

The SWAG release (rowanz/swagaf, `data/{train,val,test}.csv`) has the header

    [<unnamed index>,]video-id,fold-ind,startphrase,sent1,sent2,gold-source,
        ending0,ending1,ending2,ending3[,label]

Some releases start with an unnamed pandas index column, some do not; `test.csv` has no `label`
column. Only `sent1`, `sent2`, `ending0`..`ending3` (and `label` for labelled splits) are read;
the other columns may be missing or in any order. Fields are standard CSV (quoted when they hold a
comma), read with the `csv` module through `tf.io.gfile`, so `data_dir` may be a `gs://` path.
A field may be of any length (csv's default limit of 131072 characters is lifted).
"""
import csv
import dataclasses
import io
from typing import List, Optional, Tuple

import tensorflow as tf

from bert_tasks.input_files import check_is_file  # also lifts csv's 128 KB field limit

NUM_CHOICES = 4
ENDING_COLUMNS = tuple("ending%d" % i for i in range(NUM_CHOICES))
TEXT_COLUMNS = ("sent1", "sent2") + ENDING_COLUMNS
LABEL_COLUMN = "label"

# Split -> file name under data_dir, as in the SWAG release.
SPLIT_FILES = {"train": "train.csv", "dev": "val.csv", "test": "test.csv"}


@dataclasses.dataclass(frozen=True)
class SwagExample:
    """One SWAG question: a context and four candidate endings.

    Attributes:
      guid: str, "<split>-<0-based data row>", e.g. "dev-0".
      context: str, `sent1`, the first sentence.
      start_ending: str, `sent2`, the start of the second sentence that every ending continues.
      endings: tuple of NUM_CHOICES str, `ending0`..`ending3`.
      label: int in [0, NUM_CHOICES), or None for an unlabelled (test) file.
      line: int, 1-based line of the file where the row starts (for messages).
    """
    guid: str
    context: str
    start_ending: str
    endings: Tuple[str, ...]
    label: Optional[int]
    line: int


def _decode(path, data):
    """The file's text; invalid UTF-8 raises ValueError naming the file and line."""
    try:
        # utf-8-sig: a spreadsheet's byte-order mark must not become part of the first header name.
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line_number = data.count(b"\n", 0, e.start) + 1
        raise ValueError("%s:%d: not valid UTF-8 (%s)" % (path, line_number, e)) from None


def _rows(path, text):
    """Yields (line number where the row starts, list of fields); blank lines are skipped.

    A quoted field may span lines, so the start line is the reader's line count before the row.
    """
    reader = csv.reader(io.StringIO(text, newline=""))
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise ValueError("%s:%d: bad CSV (%s)" % (path, reader.line_num, e)) from None
        if row:
            yield start, row


def _column_index(path, header, require_label):
    """{column name: index} of the columns read; raises ValueError naming what is missing."""
    names = [name.strip() for name in header]
    duplicates = sorted({name for name in names if name and names.count(name) > 1})
    if duplicates:
        raise ValueError("%s:1: header repeats column(s) %s" % (path, ", ".join(duplicates)))
    wanted = TEXT_COLUMNS + ((LABEL_COLUMN,) if require_label or LABEL_COLUMN in names else ())
    missing = [name for name in wanted if name not in names]
    if missing:
        raise ValueError("%s:1: header lacks column(s) %s; expected the SWAG header (%s%s), found "
                         "%s" % (path, ", ".join(missing), ",".join(TEXT_COLUMNS),
                                 ",label" if require_label else "", ",".join(header)))
    return {name: names.index(name) for name in wanted}


def _label(path, line, text):
    try:
        label = int(text)
    except ValueError:
        label = None
    if label is None or not 0 <= label < NUM_CHOICES:
        raise ValueError("%s:%d: label %r is not one of 0..%d"
                         % (path, line, text, NUM_CHOICES - 1))
    return label


def parse_swag_csv(path, text, split, require_label):
    """SwagExamples of the CSV `text` (the contents of `path`, named in messages).

    Args:
      path: str, the file name used in error messages.
      text: str, the whole file.
      split: str, guid prefix ("train", "dev", "test").
      require_label: bool; True: a `label` column must exist. Without it a `label` column is still
        read when present (so a labelled file can be predicted).
    Returns:
      list of SwagExample, in file order.
    Raises:
      ValueError "<path>:<line>: ..." for a header without the needed columns, a row whose field
      count differs from the header's, an empty ending, or a label outside 0..3.
    """
    rows = _rows(path, text)
    try:
        _, header = next(rows)
    except StopIteration:
        raise ValueError("%s: empty file; expected a SWAG CSV with a header line" % path) from None
    columns = _column_index(path, header, require_label)
    examples = []
    for line, row in rows:
        if len(row) != len(header):
            raise ValueError("%s:%d: %d fields, but the header has %d"
                             % (path, line, len(row), len(header)))
        endings = tuple(row[columns[name]] for name in ENDING_COLUMNS)
        for name, ending in zip(ENDING_COLUMNS, endings):
            if not ending.strip():
                raise ValueError("%s:%d: %s is empty" % (path, line, name))
        label = _label(path, line, row[columns[LABEL_COLUMN]]) if LABEL_COLUMN in columns else None
        examples.append(SwagExample(
            guid="%s-%d" % (split, len(examples)), context=row[columns["sent1"]],
            start_ending=row[columns["sent2"]], endings=endings, label=label, line=line))
    return examples


def read_swag_examples(path, split, require_label) -> List[SwagExample]:
    """SwagExamples of the SWAG CSV file `path` (see `parse_swag_csv`); IsADirectoryError when it
    is a directory."""
    check_is_file(path)
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    return parse_swag_csv(path, _decode(path, data), split, require_label)
