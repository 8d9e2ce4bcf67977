"""Reading (query, positive[, hard negatives]) pairs files: JSON lines or TSV.

JSON lines (`.jsonl`, `.json`): one object a line,

    {"query": "...", "positive": "...", "negatives": ["...", ...]}

("anchor" is accepted for "query", as sentence-transformers names it, and "negative" for a single
hard negative; a line with both names of one field is refused). TSV (any other name):
`query<TAB>positive[<TAB>negative ...]`, no header, quote characters literal (as the GLUE
files). Every line of a training file has the same number of hard negatives (the records hold a
fixed number; sentence-transformers' column datasets are the same).

    pairs = read_pairs("train.jsonl")        # [Pair(query, positive, negatives, line)]
"""
import codecs
import csv
import dataclasses
import json
from typing import Tuple

import tensorflow as tf

from bert_tasks.input_files import check_is_file

JSON_SUFFIXES = (".jsonl", ".json")
_QUERY_KEYS = ("query", "anchor")
_NEGATIVES_KEYS = ("negatives", "negative")


@dataclasses.dataclass(frozen=True)
class Pair:
    """One line: a query, its positive passage, hard negatives (possibly none), its line."""
    query: str
    positive: str
    negatives: Tuple[str, ...]
    line: int


def _lines(path):
    """[(line number, text)] of a UTF-8 file (a byte-order mark accepted), blank lines left out."""
    check_is_file(path)
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read().removeprefix(codecs.BOM_UTF8)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line_number = data.count(b"\n", 0, e.start) + 1
        raise ValueError("%s:%d: not valid UTF-8 (%s)" % (path, line_number, e)) from None
    return [(number, line.rstrip("\r")) for number, line in enumerate(text.split("\n"), start=1)
            if line.strip()]


def _json_pair(path, number, line):
    where = "%s:%d" % (path, number)
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError("%s: not a JSON object (%s)" % (where, e)) from None
    if not isinstance(record, dict):
        raise ValueError("%s: not a JSON object" % where)
    for names in (_QUERY_KEYS, _NEGATIVES_KEYS):
        if all(name in record for name in names):
            raise ValueError('%s: the pair has both "%s" and "%s", two names for one field: keep '
                             'one' % (where, *names))
    query = next((record[key] for key in _QUERY_KEYS if key in record), None)
    negatives = record.get("negatives", [record["negative"]] if "negative" in record else [])
    fields = {"query": query, "positive": record.get("positive")}
    for name, value in fields.items():
        if not isinstance(value, str) or not value.strip():
            raise ValueError(
                '%s: the pair has no "%s" text (a line needs "query" (or "anchor") and '
                '"positive", and may have "negatives": a list of texts)' % (where, name))
    if not isinstance(negatives, list) or not all(
            isinstance(n, str) and n.strip() for n in negatives):
        raise ValueError('%s: "negatives" must be a list of non-empty texts' % where)
    return Pair(query, fields["positive"], tuple(negatives), number)


def _tsv_pair(path, number, line):
    fields = next(csv.reader([line], delimiter="\t", quotechar=None))
    if len(fields) < 2 or not all(field.strip() for field in fields):
        raise ValueError(
            "%s:%d: the pair has %d non-empty tab-separated fields; a line is "
            "query<TAB>positive[<TAB>negative ...]" % (
                path, number, sum(bool(field.strip()) for field in fields)))
    return Pair(fields[0], fields[1], tuple(fields[2:]), number)


def read_pairs(path, same_negatives=True):
    """The pairs of `path` (format by its name: module docstring), in file order.

    Args:
      path: str, the file (`tf.io.gfile`: may be remote).
      same_negatives: refuse a line with another number of hard negatives than the first's.
    Raises:
      ValueError naming the file and line: not UTF-8, a malformed line, a missing text, another
        number of negatives; or the file has no pair.
    """
    parse = _json_pair if path.endswith(JSON_SUFFIXES) else _tsv_pair
    pairs = [parse(path, number, line) for number, line in _lines(path)]
    if not pairs:
        raise ValueError("%s: no pairs (a line is a query and its positive passage)" % path)
    if same_negatives:
        count = len(pairs[0].negatives)
        for pair in pairs:
            if len(pair.negatives) != count:
                raise ValueError(
                    "%s:%d: %d hard negatives, but line %d has %d: every training pair needs "
                    "the same number" % (path, pair.line, len(pair.negatives), pairs[0].line,
                                         count))
    return pairs


def read_corpus(path):
    """Extra passages for the retrieval evaluation, one per line (blank lines left out)."""
    return [text.strip() for _, text in _lines(path)]
