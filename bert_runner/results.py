"""Output files shared by the scripts, always written to a temporary name and renamed.

Paths go through `tf.io.gfile`, so `output_dir` may be a `gs://` path, as in the original.
"""
import contextlib
import json
import numbers
import os
import uuid

import tensorflow as tf
from absl import logging

from modeling.checkpoint.files import write_text_atomic
from bert_runner.runs.record import read_run_file


def file_error_reason(error):
    """What went wrong in a file-system error, without its path (the caller names the flag's):
    an OSError's strerror, or the end of TensorFlow's "<path>; <what>" message."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    text = getattr(error, "message", None) or str(error)
    return (text.strip().splitlines() or [""])[0].rsplit("; ", 1)[-1]


def check_writable_dir(directory, flag):
    """Creates `directory` if needed and writes (then removes) a file in it, so that an output
    location that cannot be written is refused before any work, naming `--flag`.

    Raises:
      ValueError: the directory cannot be created or written (read-only, a file in the way, no
        permission), with the file system's reason.
    """
    probe = os.path.join(directory, ".write-check-%s" % uuid.uuid4().hex)
    try:
        tf.io.gfile.makedirs(directory)
        with tf.io.gfile.GFile(probe, "w") as f:
            f.write("")
        tf.io.gfile.remove(probe)
    except (OSError, tf.errors.OpError) as e:
        reason = file_error_reason(e)
        raise ValueError(f"--{flag}={directory}: cannot write there ({reason}); choose a "
                         "directory this user can write") from e


# Beside eval_results.txt: the same metrics as JSON numbers with the baseline text of each that
# has one, for programs (the demo, the experiments) instead of the log.
EVAL_REPORT = "eval_report.json"
# The same of the starting model, before any training step (`Task.compare_with_start`).
START_REPORT = "eval_start.json"


def write_eval_report(output_dir, metrics, baselines, name=EVAL_REPORT):
    """output_dir/eval_report.json: `{"metrics": {name: number}, "baselines": {name: text}}`;
    an integer metric (global_step) is written as one, as eval_results.txt writes it."""
    record = {"metrics": {key: _json_number(key, value) for key, value in sorted(metrics.items())},
              "baselines": dict(sorted(baselines.items()))}
    write_text_atomic(os.path.join(output_dir, name), json.dumps(record, indent=2) + "\n")


# Metrics that count (steps): integers even when the caller made every metric a float.
_COUNTS = ("global_step",)


def _json_number(key, value):
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    value = float(value)
    return int(value) if key in _COUNTS and value.is_integer() else value


def write_eval_results(path, results):
    """Writes `eval_results.txt` as the original: one "%s = %s" line per key, keys sorted.

    Args:
      path: str, output file.
      results: dict str -> value. Values are written with `str()`, so pass numpy scalars
        (np.float32 losses, np.int64 global_step) to get the original's exact text.
    """
    logging.info("***** Eval results *****")
    lines = []
    for key in sorted(results):
        logging.info("  %s = %s", key, results[key])
        lines.append("%s = %s\n" % (key, results[key]))
    write_text_atomic(path, "".join(lines))


def read_eval_report(output_dir):
    """The eval_report.json the driver wrote in `output_dir` (`write_eval_report`:
    `{"metrics": {name: number}, "baselines": {name: text}}`), or None before any evaluation."""
    return read_run_file(os.path.join(output_dir, EVAL_REPORT))


def missing_dirs(output_dir):
    """The folders `output_dir` needs created, itself first, up to the first that exists; none on
    an object store (`gs://`), where folders are only names' prefixes."""
    if "://" in output_dir:
        return []
    missing = []
    # The real path: `link/../out` is the folder the link's target's parent holds, which
    # abspath, reading `..` as text, would take for another one.
    path = os.path.realpath(output_dir)
    while not os.path.lexists(path) and path != os.path.dirname(path):
        missing.append(path)
        path = os.path.dirname(path)
    return missing


@contextlib.contextmanager
def dirs_removed_if_failed(made):
    """When the block fails, removes the folders in `made` (created by this run, deepest first)
    that are empty by then; a folder another run has written to since keeps its files."""
    try:
        yield
    except BaseException:
        for path in made:
            try:
                os.rmdir(path)
            except OSError:
                break
        raise
