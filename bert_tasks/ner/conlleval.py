"""CoNLL's shared-task scorer `conlleval` (conlleval.pl, version 2004-01-26) in Python.

Entity ("chunk") precision, recall and F1, overall and per type, with the Perl script's chunk
logic rule for rule, so the figures and the printed report are the same as running

    perl conlleval.pl < predictions.txt

on a file with the gold tag and the predicted tag as its last two columns:

* a tag is split at its first hyphen into a prefix and a type (`B-ORG` -> `B`, `ORG`; `O` -> `O`,
  ""); a chunk starts at `B`, at `I` after `O` (so IOB1, where chunks start with `I-`, and IOB2
  score alike, and so does an `I-` a tagger wrongly puts after `O`), at any tag whose type
  differs from the previous tag's, and at the IOE/bracket tags `E`, `[`, `]` as in the Perl;
* a predicted chunk is correct when it starts and ends where a gold chunk does, with its type;
* an empty line, or a line whose first column is the boundary `-X-`, is a sentence boundary: it
  ends every chunk and is not counted as a token. `-DOCSTART-` lines are ordinary tokens (tag O);
* precision = 100 * correct / found guessed, recall = 100 * correct / found gold, F1 their
  harmonic mean; 0 where a denominator is 0.

    counts = count_sequences(gold_sentences, predicted_sentences)   # lists of tag lists
    counts = count_lines(open("predictions.txt"), source="predictions.txt")
    metrics(counts)["overall"]["f1"]; print(report(counts), end="")

Command line (the Perl script's `-d` option):

    python -m bert_tasks.ner.conlleval [-d DELIMITER] [FILE]    # FILE or stdin
"""
import argparse
import collections
import dataclasses
import sys

# (previous prefix, prefix) pairs at which the Perl script ends / starts a chunk.
_END_PAIRS = frozenset([("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"),
                        ("E", "E"), ("E", "I"), ("E", "O")])
_START_PAIRS = frozenset([("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"),
                          ("E", "E"), ("E", "I"), ("O", "E")])

BOUNDARY = "-X-"


def split_tag(tag):
    """(prefix, type) as the Perl's /^([^-]*)-(.*)$/: `I-ORG` -> ("I", "ORG"), `O` -> ("O", "").

    A type the Perl reads as false ("0") becomes "", as there.
    """
    prefix, hyphen, chunk_type = tag.partition("-")
    if not hyphen:
        return tag, ""
    return prefix, "" if chunk_type == "0" else chunk_type


def _end_of_chunk(prev_tag, tag, prev_type, chunk_type):
    return ((prev_tag, tag) in _END_PAIRS
            or (prev_tag not in ("O", ".") and prev_type != chunk_type)
            or prev_tag in ("[", "]"))


def _start_of_chunk(prev_tag, tag, prev_type, chunk_type):
    return ((prev_tag, tag) in _START_PAIRS
            or (tag not in ("O", ".") and prev_type != chunk_type)
            or tag in ("[", "]"))


@dataclasses.dataclass
class ChunkCounts:
    """The Perl script's counters.

    Attributes:
      tokens: int, tokens scored (boundaries excluded).
      correct_tags: int, tokens whose predicted tag equals the gold tag.
      found_correct, found_guessed, correct_chunks: int, gold chunks, predicted chunks and
        predicted chunks that match a gold chunk exactly.
      found_correct_by_type, found_guessed_by_type, correct_chunks_by_type: Counter type -> int.
    """
    tokens: int = 0
    correct_tags: int = 0
    found_correct: int = 0
    found_guessed: int = 0
    correct_chunks: int = 0
    found_correct_by_type: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)
    found_guessed_by_type: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)
    correct_chunks_by_type: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)


def count_tokens(tokens):
    """Runs the Perl script's main loop.

    Args:
      tokens: iterable of (gold tag, predicted tag), or None for a sentence boundary.
    Returns:
      ChunkCounts.
    """
    counts = ChunkCounts()
    in_correct = False
    last_correct, last_correct_type = "O", ""
    last_guessed, last_guessed_type = "O", ""
    for token in tokens:
        if token is None:
            (correct, correct_type), (guessed, guessed_type) = ("O", ""), ("O", "")
        else:
            (correct, correct_type), (guessed, guessed_type) = map(split_tag, token)
        correct_ends = _end_of_chunk(last_correct, correct, last_correct_type, correct_type)
        guessed_ends = _end_of_chunk(last_guessed, guessed, last_guessed_type, guessed_type)
        if in_correct:
            if correct_ends and guessed_ends and last_guessed_type == last_correct_type:
                in_correct = False
                counts.correct_chunks += 1
                counts.correct_chunks_by_type[last_correct_type] += 1
            elif correct_ends != guessed_ends or guessed_type != correct_type:
                in_correct = False
        correct_starts = _start_of_chunk(last_correct, correct, last_correct_type, correct_type)
        guessed_starts = _start_of_chunk(last_guessed, guessed, last_guessed_type, guessed_type)
        if correct_starts and guessed_starts and guessed_type == correct_type:
            in_correct = True
        if correct_starts:
            counts.found_correct += 1
            counts.found_correct_by_type[correct_type] += 1
        if guessed_starts:
            counts.found_guessed += 1
            counts.found_guessed_by_type[guessed_type] += 1
        if token is not None:
            if correct == guessed and guessed_type == correct_type:
                counts.correct_tags += 1
            counts.tokens += 1
        last_correct, last_correct_type = correct, correct_type
        last_guessed, last_guessed_type = guessed, guessed_type
    if in_correct:
        counts.correct_chunks += 1
        counts.correct_chunks_by_type[last_correct_type] += 1
    return counts


def count_sequences(gold_sentences, predicted_sentences):
    """ChunkCounts of sentences given as tag lists, with a boundary after each sentence.

    Raises:
      ValueError: the two lists differ in length, or a sentence's two tag lists do.
    """
    if len(gold_sentences) != len(predicted_sentences):
        raise ValueError("%d gold sentences but %d predicted"
                         % (len(gold_sentences), len(predicted_sentences)))

    def tokens():
        for i, (gold, predicted) in enumerate(zip(gold_sentences, predicted_sentences)):
            if len(gold) != len(predicted):
                raise ValueError("sentence %d: %d gold tags but %d predicted"
                                 % (i, len(gold), len(predicted)))
            yield from zip(gold, predicted)
            yield None

    return count_tokens(tokens())


def _line_tokens(lines, delimiter, source):
    """The Perl's line parsing: yields (gold, predicted) from the last two columns, or None."""
    num_features = None
    for line_number, line in enumerate(lines, 1):
        features = line[:-1].split(delimiter) if line.endswith("\n") else line.split(delimiter)
        while features and features[-1] == "":  # Perl's split drops trailing empty fields
            features.pop()
        if num_features is None:
            num_features = len(features) or None
        elif features and len(features) != num_features:
            raise ValueError("%s:%d: unexpected number of features: %d (%d)"
                             % (source, line_number, len(features), num_features))
        if not features or features[0] == BOUNDARY:
            yield None
        elif len(features) < 2:
            raise ValueError("%s:%d: unexpected number of features in line %r"
                             % (source, line_number, line.rstrip("\n")))
        else:
            yield features[-2], features[-1]


def count_lines(lines, delimiter=" ", source="<input>"):
    """ChunkCounts of conlleval input: the last two `delimiter`-separated columns of each line are
    the gold and the predicted tag.

    Args:
      lines: iterable of str (with or without their newline).
      delimiter: the column separator; the Perl's default is one space (not any whitespace).
      source: name of the input in error messages.
    Raises:
      ValueError: a line whose column count differs from the first line's (or below 2), naming
        source:line.
    """
    return count_tokens(_line_tokens(lines, delimiter, source))


def _prf(correct, guessed, gold):
    precision = 100.0 * correct / guessed if guessed else 0.0
    recall = 100.0 * correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def chunk_types(counts):
    """The types in the Perl's report order (sorted; its de-duplication repeats the empty type)."""
    types = []
    last = None
    names = list(counts.found_correct_by_type) + list(counts.found_guessed_by_type)
    for chunk_type in sorted(names):
        if not last or last != chunk_type:
            types.append(chunk_type)
        last = chunk_type
    return types


def metrics(counts):
    """Percentages as conlleval computes them.

    Returns:
      {"overall": {"precision", "recall", "f1", "accuracy"}, "by_type": {type: {"precision",
      "recall", "f1", "found_guessed", "found_correct"}}}; the values are float percentages
      (0 where undefined), counts int.
    """
    overall = _prf(counts.correct_chunks, counts.found_guessed, counts.found_correct)
    overall["accuracy"] = 100.0 * counts.correct_tags / counts.tokens if counts.tokens else 0.0
    by_type = {}
    for chunk_type in chunk_types(counts):
        by_type[chunk_type] = dict(
            _prf(counts.correct_chunks_by_type[chunk_type],
                 counts.found_guessed_by_type[chunk_type],
                 counts.found_correct_by_type[chunk_type]),
            found_guessed=counts.found_guessed_by_type[chunk_type],
            found_correct=counts.found_correct_by_type[chunk_type])
    return {"overall": overall, "by_type": by_type}


def report(counts):
    """The text conlleval prints, character for character."""
    scores = metrics(counts)
    overall = scores["overall"]
    lines = ["processed %d tokens with %d phrases; found: %d phrases; correct: %d.\n"
             % (counts.tokens, counts.found_correct, counts.found_guessed, counts.correct_chunks)]
    if counts.tokens > 0:
        lines.append("accuracy: %6.2f%%; precision: %6.2f%%; recall: %6.2f%%; FB1: %6.2f\n"
                     % (overall["accuracy"], overall["precision"], overall["recall"],
                        overall["f1"]))
    for chunk_type in chunk_types(counts):
        s = scores["by_type"][chunk_type]
        lines.append("%17s: precision: %6.2f%%; recall: %6.2f%%; FB1: %6.2f  %d\n"
                     % (chunk_type, s["precision"], s["recall"], s["f1"], s["found_guessed"]))
    return "".join(lines)


def main(argv=None):
    # argparse, not absl flags: these are the Perl script's options.
    parser = argparse.ArgumentParser(
        prog="python -m bert_tasks.ner.conlleval",
        description="CoNLL conlleval: entity precision/recall/F1 of the last two columns "
                    "(gold, predicted).")
    parser.add_argument("file", nargs="?", help="Input file (default: stdin).")
    parser.add_argument("-d", dest="delimiter", default=" ",
                        help="Column separator (default: one space).")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.file:
            with open(args.file, encoding="utf-8") as f:
                counts = count_lines(f, args.delimiter, args.file)
        else:
            counts = count_lines(sys.stdin, args.delimiter, "<stdin>")
    except ValueError as e:
        print("conlleval: %s" % e, file=sys.stderr)
        return 1
    sys.stdout.write(report(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
