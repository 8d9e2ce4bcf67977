"""Files beside checkpoints, always written to a temporary name and renamed, through
`tf.io.gfile` (a `gs://` output_dir behaves as a local one)."""
import contextlib
import os
import uuid

import tensorflow as tf


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
