"""Reading GLUE TSV files the way the original does, and writing outputs atomically.

Both go through `tf.io.gfile`, so `data_dir` and `output_dir` may be `gs://` paths, as in the
original.
"""
import contextlib
import csv
import os
import uuid

import tensorflow as tf


def read_tsv_lines(path):
    """Reads a tab-separated file exactly as the original `_read_tsv` sees it.

    The original reads through `tf.gfile.GFile(path, "r")`, which under TF 2.x deletes every `\\r`
    (not only line ends), splits lines on `\\n` only, and parses them with
    `csv.reader(delimiter="\\t", quotechar=None)`, so quote characters are literal text.

    Args:
      path: str, the file.
    Returns:
      list of (line_number, row): line_number is 1-based, row is a list of str fields. An empty
      line gives an empty row.
    Raises:
      ValueError: a line is not valid UTF-8 (the message names the file and line).
    """
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read().replace(b"\r", b"")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line_number = data.count(b"\n", 0, e.start) + 1
        raise ValueError("%s:%d: not valid UTF-8 (%s)" % (path, line_number, e)) from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return list(enumerate(csv.reader(lines, delimiter="\t", quotechar=None), start=1))


@contextlib.contextmanager
def atomic_output(path):
    """Yields a temporary path beside `path`; renames it to `path` only if the block succeeds.

    Readers of `path` therefore never see a half-written file, and a failed run leaves any previous
    `path` untouched. The temporary file is removed on failure.
    """
    directory = os.path.dirname(path)
    if directory:
        tf.io.gfile.makedirs(directory)
    tmp_path = "%s.tmp-%s" % (path, uuid.uuid4().hex)
    try:
        yield tmp_path
        tf.io.gfile.rename(tmp_path, path, overwrite=True)
    finally:
        if tf.io.gfile.exists(tmp_path):
            tf.io.gfile.remove(tmp_path)


def write_text_atomic(path, text):
    """Writes the str `text` (UTF-8) to `path` through a temporary name."""
    with atomic_output(path) as tmp_path:
        with tf.io.gfile.GFile(tmp_path, "w") as f:
            f.write(text)
