"""The one reader of a JSON object file: a config, a run's record, a Hugging Face directory's
files. A file that is missing reads as None (`read_json_object`), or is refused naming it where it
must be there (`read_required_json_object`: a config file); one that is there but not a JSON
object is refused naming it (`JsonFileError`), whoever reads it.

Local paths are read with `open` (the scripts' flag checks read before TensorFlow is imported);
a URL (`gs://`) through `tf.io.gfile`.
"""
import json
import os


class JsonFileError(ValueError):
    """A file that is not a JSON object: `path`, and `reason` ("not valid JSON (...)", "not a
    JSON object"); its message is "<path>: <reason>", and a reader may word its own."""

    def __init__(self, path, reason):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def read_json_object(path):
    """The JSON object (a dict) in the file `path`, or None when there is no such file.

    Raises:
      JsonFileError naming `path`: it is not valid UTF-8 JSON, or not an object.
    """
    try:
        data = _read_bytes(path)
    except FileNotFoundError:
        return None
    try:
        value = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as error:
        raise JsonFileError(path, f"not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise JsonFileError(path, "not a JSON object")
    return value


def read_required_json_object(path, what):
    """The JSON object (a dict) in the file `path`, which must be there; `what` ("BERT config
    file") names it in the errors.

    Raises:
      IsADirectoryError, FileNotFoundError: `path` is a directory, or no file.
      JsonFileError naming `path`: it is not valid UTF-8 JSON, or not an object.
    """
    value = read_json_object(path)
    if value is None:
        if os.path.isdir(path):
            raise IsADirectoryError(f"{what} {path}: is a directory, expected a file")
        raise FileNotFoundError(f"Cannot read {what} {path}: there is no such file")
    return value


def _read_bytes(path):
    """The bytes of the file `path`; FileNotFoundError when there is none."""
    path = str(path)
    if "://" not in path:
        if not os.path.isfile(path):
            raise FileNotFoundError(path)
        with open(path, "rb") as f:
            return f.read()
    import tensorflow as tf  # an object store's file (gs://): TensorFlow reads it

    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(path)
    with tf.io.gfile.GFile(path, "rb") as f:
        return f.read()
