"""Round-robin TFRecord writing to several files, visible only once complete.

Records go to the output files in turn (record k to file k % n), as the original's writer. Each
file is written under a hidden temporary name in its own directory and renamed to its final name
only after every file was closed successfully; on an exception the temporaries are removed. A run
killed outright (SIGKILL, power loss) therefore leaves at most `.<name>.<pid>.incomplete` files,
never a truncated `<name>` that training would read. The next run writing the same `<name>`
removes them when process `<pid>` no longer runs (local paths only: a pid means nothing on
another machine).
"""
import os
import re
import tempfile

from absl import logging

from bert_tasks.pretraining.data.reading import InputError
from bert_runner.stale_files import process_is_running


def _tf():
    import tensorflow as tf  # Deferred so that importing this package stays light.
    return tf


def temporary_name(path):
    """The hidden name `path` is written under until it is complete."""
    head, tail = os.path.split(path)
    return os.path.join(head, ".%s.%d.incomplete" % (tail, os.getpid()))


def remove_stale_temporaries(output_files):
    """Removes `.<name>.<pid>.incomplete` files of these outputs left by killed runs.

    Only files of the same names, and only when process `<pid>` is not running (a live one may
    be another run writing the same output). Each removal is logged.

    Returns:
      list of the removed paths.
    """
    removed = []
    for path in output_files:
        if "://" in path:
            continue
        head, tail = os.path.split(path)
        pattern = re.compile(r"\.%s\.(\d+)\.incomplete\Z" % re.escape(tail))
        for name in sorted(os.listdir(head or ".")):
            match = pattern.match(name)
            if not match:
                continue
            pid = int(match.group(1))
            if pid == os.getpid() or process_is_running(pid):
                logging.info("leaving %s: process %d, which writes it, is running", name, pid)
                continue
            stale = os.path.join(head, name)
            os.remove(stale)
            removed.append(stale)
            logging.info("removed %s, left by an interrupted run (process %d, no longer running)",
                         stale, pid)
    return removed


def read_files(flag, value, paths):
    """`check_output_files`' `inputs` for the files `paths` that flag `flag=value` reads."""
    return [(flag, value, path) for path in paths]


def _file_identities(path):
    """What tells `path`'s file under any other name: its real path (another spelling such as
    `./a.txt` or `d/../a.txt`, a symbolic link) and, once it exists, its device and inode (a
    hard link). A URL (gs://) only by its spelling."""
    if "://" in path:
        return {path}
    identities = {os.path.realpath(path)}
    try:
        status = os.stat(path)
    except OSError:  # not there (yet): no other name can reach it
        return identities
    return identities | {(status.st_dev, status.st_ino)}


def check_output_files(output_files, inputs=()):
    """Raises InputError before any work if the outputs cannot be written where asked.

    Args:
      output_files: the entries of --output_file.
      inputs: (flag, its value, a file it reads) for every file the run reads: an output that
        is one of them would destroy it (the outputs replace their paths when complete).

    A local directory is tried by creating and removing an empty file in it: permissions alone
    do not tell (root, read-only file systems).
    """
    tf = _tf()
    if len(set(output_files)) != len(output_files):
        raise InputError("--output_file lists the same file twice: %s" % ",".join(output_files))
    read = {}  # identity -> (flag, value, file); each input's identities computed once
    for flag, value, source in inputs:
        for identity in _file_identities(source):
            read.setdefault(identity, (flag, value, source))
    for path in output_files:
        for identity in _file_identities(path) if path and read else ():
            if identity in read:
                flag, value, source = read[identity]
                raise InputError(
                    "--output_file=%s would write over its own input: %s is read from %s=%s%s; "
                    "choose another --output_file" % (
                        ",".join(output_files), path, flag, value,
                        "" if source in (path, value) else " (%s)" % source))
    for path in output_files:
        if not path:
            raise InputError("--output_file has an empty entry: %r" % ",".join(output_files))
        directory = os.path.dirname(path) or "."
        if not tf.io.gfile.isdir(directory):
            raise InputError("--output_file %s: directory %s does not exist" % (path, directory))
        if tf.io.gfile.isdir(path):
            raise InputError("--output_file %s is a directory" % path)
        if "://" not in path:
            try:
                handle, probe = tempfile.mkstemp(prefix="." + os.path.basename(path),
                                                 dir=directory)
                os.close(handle)
                os.remove(probe)
            except OSError as e:
                raise InputError("--output_file %s: cannot write in directory %s: %s"
                                 % (path, directory, e.strerror)) from e


class ShardedRecordWriter(object):
    """Context manager: `write(records)` round-robin; files appear on a clean exit only.

    Args:
      output_files: list of final paths.
    Attributes:
      num_written: records written so far.
    """

    def __init__(self, output_files):
        self.output_files = list(output_files)
        self._temporary = [temporary_name(p) for p in self.output_files]
        self._writers = []
        self.num_written = 0

    def __enter__(self):
        remove_stale_temporaries(self.output_files)
        try:
            for path in self._temporary:
                self._writers.append(_tf().io.TFRecordWriter(path))
        except BaseException:
            self._discard()
            raise
        return self

    def write(self, records):
        """Writes an iterable of serialized records (bytes), continuing the round-robin."""
        writers, count = self._writers, self.num_written
        for record in records:
            writers[count % len(writers)].write(record)
            count += 1
        self.num_written = count

    def __exit__(self, exc_type, exc, traceback):
        if exc_type is not None:
            self._discard()
            return False
        try:
            for writer in self._writers:
                writer.close()
            for temporary, final in zip(self._temporary, self.output_files):
                _tf().io.gfile.rename(temporary, final, overwrite=True)
        except BaseException:
            self._discard()
            raise
        return False

    def _discard(self):
        for writer in self._writers:
            writer.close()
        gfile = _tf().io.gfile
        for path in self._temporary:
            if gfile.exists(path):
                gfile.remove(path)
