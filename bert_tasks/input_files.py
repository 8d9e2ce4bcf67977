"""What every task's file reader checks first, and the `csv` module's field limit.

A directory where a file is expected (`--data_dir` whose `train.tsv` is a folder, `--train_file`
naming a folder) is refused naming it: TensorFlow's file reader would raise a
`FailedPreconditionError` ("path; Is a directory") from deep inside the reader instead.

    check_is_file(path, "--train_file")   # IsADirectoryError "<path> (--train_file): is a
                                          # directory, expected a file"

`csv` refuses any field longer than 131072 characters by default ("field larger than field
limit"): a valid SWAG or GLUE row with a long passage would be reported as bad CSV. Importing
this module lifts the limit to the largest value the platform's C long holds.
"""
import csv
import os
import sys

IS_A_DIRECTORY = "is a directory, expected a file"


def _isdir(path):
    if "://" in path:
        import tensorflow as tf  # Only remote paths need it (the SQuAD scorer runs without it).
        return tf.io.gfile.isdir(path)
    return os.path.isdir(path)


def check_is_file(path, what=None):
    """Raises IsADirectoryError naming `path` (and `what`, e.g. the flag) when it is a directory.

    A path that does not exist passes: the reader's own error names it.
    """
    if _isdir(path):
        where = "%s (%s)" % (path, what) if what else path
        raise IsADirectoryError("%s: %s" % (where, IS_A_DIRECTORY))


def allow_large_csv_fields():
    """Sets `csv.field_size_limit` to the largest the platform accepts (sys.maxsize overflows a
    32-bit C long, as on Windows); returns the limit set."""
    limit = sys.maxsize
    while True:
        try:
            csv.field_size_limit(limit)
            return limit
        except OverflowError:
            limit //= 2


allow_large_csv_fields()
