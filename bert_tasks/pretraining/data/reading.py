"""Input files: glob expansion, line reading with the original's semantics, chunking.

Reading follows the original's `tf.gfile.GFile(path, "r")` loop under TF 2.x (`spec/data.md` §0, §2.2):

* every `\\r` is dropped (`"a\\r\\n"` -> `"a"`, `"x.\\ry."` -> `"x.y."`), lines split on `\\n` only;
* lines are decoded as UTF-8. The original dies with a bare `UnicodeDecodeError` on invalid bytes;
  here `InputError` names the file, line and byte instead (same outcome: the run stops);
* files are one stream of lines: a new file does not start a new document.

Unlike the original, the matches of each glob pattern are sorted: `tf.gfile.Glob` returns directory
order, which differs between machines. Patterns keep their command-line order, and a pattern that
matches nothing is an error (the original silently read nothing).
"""
import codecs

_BLOCK_BYTES = 1 << 20


class InputError(ValueError):
    """Bad input or flags; the message names the file and line or the flag."""


def expand_input_files(input_file):
    """Comma-separated glob patterns -> list of file paths (each pattern's matches sorted).

    Raises:
      InputError: a pattern matches no file.
    """
    import tensorflow as tf  # Deferred (as in the functions below): worker processes skip it.
    files = []
    for pattern in input_file.split(","):
        if not pattern:
            continue  # "a.txt," : the original globbed "" to nothing as well.
        found = sorted(tf.io.gfile.glob(pattern))
        matches = [m for m in found if not tf.io.gfile.isdir(m)]
        if not matches:
            raise InputError("--input_file: %r %s" % (pattern, (
                "is a directory: give the files in it (e.g. '%s/*')" % pattern.rstrip("/")
                if tf.io.gfile.isdir(pattern)
                else "matches only directories" if found else "matches no file")))
        files.extend(matches)
    return files


def describe_files(files, shown=5):
    """'a.txt, b.txt' or 'a.txt, ..., e.txt and 7 more', for messages."""
    text = ", ".join(files[:shown])
    return text + (" and %d more" % (len(files) - shown) if len(files) > shown else "")


def total_bytes(files):
    """Sum of the sizes of `files` in bytes (for progress and ETA)."""
    import tensorflow as tf
    return sum(tf.io.gfile.stat(f).length for f in files)


def iter_line_blocks(files):
    """Yields lists of lines (str, without `\\n`) of the concatenated files, in order.

    Lines come in blocks of a few MB so that callers work on lists, not single lines.

    Raises:
      InputError: a file cannot be read or is not valid UTF-8 (names file, line and byte).
    """
    import tensorflow as tf
    for path in files:
        try:
            with tf.io.gfile.GFile(path, "rb") as reader:
                yield from _file_line_blocks(path, reader)
        except tf.errors.OpError as e:
            raise InputError("cannot read input file %s: %s" % (path, e.message)) from e


def _file_line_blocks(path, reader):
    # An editor's byte-order mark is not text (the tokenizer would drop it; counts would not).
    pending = reader.read(len(codecs.BOM_UTF8)).removeprefix(codecs.BOM_UTF8).replace(b"\r", b"")
    line_number = 0  # lines before the current block
    while True:
        block = reader.read(_BLOCK_BYTES)
        if not block:
            break
        data = pending + block.replace(b"\r", b"")
        cut = data.rfind(b"\n") + 1  # A block ends at a line end, so UTF-8 is never split.
        data, pending = data[:cut], data[cut:]
        if data:
            lines = _decode(path, data, line_number).split("\n")
            lines.pop()  # the empty string after the final "\n"
            line_number += len(lines)
            yield lines
    if pending:
        yield [_decode(path, pending, line_number)]


def _decode(path, data, line_number):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line_start = data.rfind(b"\n", 0, e.start) + 1
        raise InputError(
            "input file %s line %d: invalid UTF-8 byte 0x%02x at column %d (byte offset within the "
            "line, after dropping \\r); input must be UTF-8 text"
            % (path, line_number + data.count(b"\n", 0, e.start) + 1, data[e.start],
               e.start - line_start + 1)) from e


def iter_chunks(line_blocks, chunk_chars):
    """Groups a stream of lines into chunks of whole documents.

    A chunk ends at the first blank line (a document boundary, kept in the chunk) after it holds at
    least `chunk_chars` characters, so chunks depend only on the text, never on timing or workers.
    A document longer than `chunk_chars` makes its chunk that much longer.

    Args:
      line_blocks: iterable of lists of lines (`iter_line_blocks`).
      chunk_chars: int > 0.
    Yields:
      (lines, num_chars): list of str lines and their total character count (newlines counted).
    """
    chunk, chars = [], 0
    for lines in line_blocks:
        for line in lines:
            chunk.append(line)
            chars += len(line) + 1
            if chars >= chunk_chars and not line.strip():
                yield chunk, chars
                chunk, chars = [], 0
    if chunk:
        yield chunk, chars
