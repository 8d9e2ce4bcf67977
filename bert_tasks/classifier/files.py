"""Reading GLUE TSV files the way the original does.

Files are read through `tf.io.gfile`, so `data_dir` may be a `gs://` path, as in the original.
"""
import codecs
import csv

import tensorflow as tf

from bert_tasks.input_files import check_is_file  # also lifts csv's 128 KB field limit


def read_tsv_lines(path):
    """Reads a tab-separated file exactly as the original `_read_tsv` sees it.

    The original reads through `tf.gfile.GFile(path, "r")`, which under TF 2.x deletes every `\\r`
    (not only line ends), splits lines on `\\n` only, and parses them with
    `csv.reader(delimiter="\\t", quotechar=None)`, so quote characters are literal text.

    Args:
      path: str, the file.
    Returns:
      list of (line_number, row): line_number is 1-based, row is a list of str fields. An empty
      line gives an empty row. Fields may be of any length (csv's default limit of 131072
      characters is lifted).
    Raises:
      ValueError: a line is not valid UTF-8 (the message names the file and line).
      IsADirectoryError: `path` is a directory.
    """
    check_is_file(path)
    with tf.io.gfile.GFile(path, "rb") as f:
        # A byte-order mark (spreadsheets write one) is not part of the first field.
        data = f.read().replace(b"\r", b"").removeprefix(codecs.BOM_UTF8)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line_number = data.count(b"\n", 0, e.start) + 1
        raise ValueError("%s:%d: not valid UTF-8 (%s)" % (path, line_number, e)) from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return list(enumerate(csv.reader(lines, delimiter="\t", quotechar=None), start=1))
