"""JSON input for the SQuAD package, with errors that name the file and the JSON path or line.

JSON values are checked with `field`/`check_type`, whose errors name the JSON path, e.g.
`dev.json: data[3].paragraphs[0].qas[2].answers[0].answer_start: missing`.

Local paths use plain Python; paths with a scheme (`gs://...`) go through `tf.io.gfile`, which is
imported only then, so `python -m bert_tasks.squad.evaluate` starts without loading TensorFlow. Outputs are
written with `bert_runner.results` (atomic, through `tf.io.gfile`).
"""
import json

from bert_tasks.input_files import check_is_file


class SquadFormatError(ValueError):
    """Bad SQuAD-style input; the message names the file and the JSON path or line."""


_TYPE_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer",
               bool: "true or false", (int, float): "a number"}


def _json_type_name(value):
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "integer",
            float: "number", type(None): "null"}.get(type(value), type(value).__name__)


def check_type(value, kind, path, source):
    """Returns `value` if it is of JSON type `kind` (dict, list, str, int, bool or (int, float)).

    Raises:
      SquadFormatError: "<source>: <path>: expected <kind>, got <type>".
    """
    # JSON true/false parse to bool, a subclass of int; they are not numbers here.
    ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
    if not ok:
        raise SquadFormatError("%s: %s: expected %s, got %s"
                               % (source, path, _TYPE_NAMES[kind], _json_type_name(value)))
    return value


def field(obj, key, kind, path, source):
    """`obj[key]` checked to be of JSON type `kind`; `path` is the JSON path of `obj`.

    Raises:
      SquadFormatError: "<source>: <path>.<key>: missing" or a type mismatch.
    """
    child = "%s.%s" % (path, key) if path else key
    if key not in obj:
        raise SquadFormatError("%s: %s: missing" % (source, child))
    return check_type(obj[key], kind, child, source)


def _is_remote(path):
    return "://" in path


def _gfile():
    import tensorflow as tf  # Heavy; only remote paths need it.
    return tf.io.gfile


def read_json(path):
    """Parses the JSON file `path`.

    Raises:
      SquadFormatError: the file cannot be read or is not valid JSON (message: file, line, column).
      IsADirectoryError: `path` is a directory.
    """
    check_is_file(path)
    try:
        if _is_remote(path):
            with _gfile().GFile(path, "rb") as f:
                data = f.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except (OSError, IOError) as e:  # tf.errors.NotFoundError is an OSError too.
        raise SquadFormatError("%s: cannot read: %s" % (path, e)) from None
    try:
        # utf-8-sig: an editor's byte-order mark is not JSON, but is no reason to refuse the file.
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise SquadFormatError("%s: not valid UTF-8 (%s)" % (path, e)) from None
    except json.JSONDecodeError as e:
        raise SquadFormatError("%s: line %d column %d: invalid JSON: %s"
                               % (path, e.lineno, e.colno, e.msg)) from None
