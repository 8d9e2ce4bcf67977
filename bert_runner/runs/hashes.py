"""The content identity of what a run reads: a checkpoint (any layout), a vocabulary, a data file.

A checkpoint is known by its `.index` file, which holds a checksum of every tensor, so the whole
checkpoint is identified without reading its data; a directory holding checkpoints by its newest;
any other directory (a Hugging Face model, a data folder) by its files' names and contents. Runs
record these hashes (`bert_runner.run_identity`) and compare them before reusing what another run
wrote.
"""
import functools
import hashlib
import os

import tensorflow as tf

_CHUNK = 1 << 22


@functools.lru_cache(maxsize=None)
def _file_sha256(path, size, mtime):
    """The hash of a file's content; keyed by its size and mtime too, so that a file written
    again in the same process is hashed again."""
    del size, mtime
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as f:
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                return digest.hexdigest()
            digest.update(chunk)


def file_sha256(path):
    """The hex SHA-256 of the file `path`'s content."""
    stat = tf.io.gfile.stat(path)
    return _file_sha256(path, stat.length, stat.mtime_nsec)


def fingerprint(path):
    """A short content hash of what `path` names as a model or data file, or None when nothing
    is there:

      a TF checkpoint prefix (ours or the original's): its .index file, which holds a checksum
          of every tensor, so the whole checkpoint without reading its data;
      a directory holding checkpoints (an output_dir): its newest checkpoint;
      a SavedModel (a TF Hub encoder): its graph and its variables' .index;
      any other directory (a Hugging Face model, a data folder): its files' names and contents;
      a file: its content.
    """
    if not path:
        return None
    latest = newest_checkpoint(path)
    if latest:
        return fingerprint(latest)
    if tf.io.gfile.exists(os.path.join(path, "saved_model.pb")):
        digest = hashlib.sha256()
        for name in ("saved_model.pb", os.path.join("variables", "variables.index")):
            digest.update(f"{name}\0{file_sha256(os.path.join(path, name))}\0".encode())
        return digest.hexdigest()[:16]
    if tf.io.gfile.isdir(path):
        digest = hashlib.sha256()
        for name in sorted(tf.io.gfile.listdir(path)):
            child = os.path.join(path, name)
            if not tf.io.gfile.isdir(child):
                digest.update(f"{name}\0{file_sha256(child)}\0".encode())
        return digest.hexdigest()[:16]
    if tf.io.gfile.exists(path + ".index"):
        return file_sha256(path + ".index")[:16]
    if tf.io.gfile.exists(path):
        return file_sha256(path)[:16]
    return None


def fingerprint_and_newest(path):
    """(`fingerprint(path)`, `newest_checkpoint(path)`): a directory's newest checkpoint is
    found once, for both."""
    newest = newest_checkpoint(path)
    return fingerprint(newest or path), newest


def newest_checkpoint(directory):
    """The prefix of the newest TensorFlow checkpoint in `directory` (its `checkpoint` file), or
    None: not a directory, or none there."""
    if not directory or not tf.io.gfile.isdir(directory):
        return None
    return tf.train.latest_checkpoint(directory)
