"""Benchmark: word-pieces/s of the faithful tokenizer, our fast path and Hugging Face `tokenizers`.

All three tokenize the same non-empty lines (default: the six Austen novels) in one process. The
repetitions are interleaved (faithful, the fast paths, peer, then again) so that load
from other processes hits every contender alike; medians follow one warm-up round. Also
counts the lines on which each disagrees with the faithful path.

  python -m bench.tokenization                       # data/austen/*.txt, 5 repetitions
  python -m bench.tokenization --input=my.txt --repeats=3 --max_lines=10000

Contenders:
  faithful        vocab.tokenization.FullTokenizer.tokenize, line by line (the original's code).
  fast (graph)    FastBertTokenizer.tokenize on batches of --batch_size lines: tf.string in,
                  int32 ragged ids out (what tf.data / a SavedModel runs).
  fast (batch)    FastBertTokenizer.tokenize_batch: list[str] in, list[list[str]] out.
  fast (ids)      FastBertTokenizer.tokenize_batch_ids: list[str] in, flat int32 ids + row
                  splits out (what create_pretraining_data.py uses).
  peer            tokenizers.BertWordPieceTokenizer (BertNormalizer + BertPreTokenizer +
                  WordPiece, same vocab, lowercase, strip accents), encode_batch.
"""
import glob
import os
import statistics

from absl import flags

import vocab
from bench import harness

FLAGS = flags.FLAGS
flags.DEFINE_string("input", "data/austen/*.txt", "Glob (comma-separated globs) of text files.")
flags.DEFINE_string("vocab_file", vocab.bundled_vocab_file(), "WordPiece vocab file.")
flags.DEFINE_integer("repeats", 5, "Timed repetitions per contender (after one warm-up).")
flags.DEFINE_integer("batch_size", 16384, "Lines per batch for the fast paths.")
flags.DEFINE_integer("max_lines", 0, "Use only the first N lines (0: all).")


def read_lines(pattern):
    paths = sorted(p for g in pattern.split(",") for p in glob.glob(g))
    if not paths:
        raise SystemExit("no file matches --input=%s" % pattern)
    lines = []
    for path in paths:
        with open(path, "rb") as f:
            # The original reads with GFile: '\r' is dropped, lines end at '\n'.
            text = f.read().replace(b"\r", b"").decode("utf-8", "ignore")
        lines.extend(line for line in text.split("\n") if line.strip())
    return paths, lines


PACKAGES = ("tensorflow", "tensorflow-text", "tokenizers")


def main(argv):
    del argv
    import tensorflow as tf
    from tokenizers import BertWordPieceTokenizer

    from vocab import fast_tokenizer
    from vocab import tokenization

    paths, lines = read_lines(FLAGS.input)
    if FLAGS.max_lines:
        lines = lines[:FLAGS.max_lines]
    print("input: %d files, %d non-empty lines, %d characters"
          % (len(paths), len(lines), sum(map(len, lines))))
    print(harness.describe_machine(None, PACKAGES))

    faithful = tokenization.FullTokenizer(FLAGS.vocab_file, do_lower_case=True)
    fast = fast_tokenizer.FastBertTokenizer(FLAGS.vocab_file, do_lower_case=True)
    peer = BertWordPieceTokenizer(FLAGS.vocab_file, lowercase=True, strip_accents=True,
                                  clean_text=True, handle_chinese_chars=True)
    batches = [lines[i:i + FLAGS.batch_size] for i in range(0, len(lines), FLAGS.batch_size)]

    def run_faithful():
        return [faithful.tokenize(line) for line in lines]

    def run_fast_graph():
        return [fast.tokenize(tf.constant(batch)) for batch in batches]

    def run_fast_batch():
        return fast.tokenize_batch(lines, batch_size=FLAGS.batch_size)

    def run_fast_ids():
        return fast.tokenize_batch_ids(lines, batch_size=FLAGS.batch_size)

    def run_peer():
        return peer.encode_batch(lines, add_special_tokens=False)

    times = harness.time_rounds({
        "faithful": run_faithful, "fast (graph)": run_fast_graph, "fast (batch)": run_fast_batch,
        "fast (ids)": run_fast_ids, "peer (HF tokenizers)": run_peer}, FLAGS.repeats, warmup=1)

    want = run_faithful()
    want_ids = [faithful.convert_tokens_to_ids(t) for t in want]
    pieces = sum(map(len, want))
    disagree = {
        "faithful": 0,
        "fast (graph)": sum(a != b for a, b in zip(
            [ids for r in run_fast_graph() for ids in r.to_list()], want_ids)),
        "fast (batch)": sum(a != b for a, b in zip(run_fast_batch(), want)),
        "fast (ids)": _disagreeing_rows(*run_fast_ids(), want_ids),
        "peer (HF tokenizers)": sum(e.tokens != t for e, t in zip(run_peer(), want)),
    }
    print("%d word-pieces per pass; medians of %d repetitions after a warm-up"
          % (pieces, FLAGS.repeats))
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    print("%-22s %9s %14s %12s %10s %14s" % ("contender", "median s", "word-pieces/s",
                                            "x faithful", "x peer", "lines differ"))
    for name, median in medians.items():
        print("%-22s %9.3f %14.0f %12.1f %10.2f %14d" % (
            name, median, pieces / median, medians["faithful"] / median,
            medians["peer (HF tokenizers)"] / median, disagree[name]))
    print("load avg at end: %s" % " ".join("%.2f" % x for x in os.getloadavg()))
    harness.write_results("tokenization", [
        {"contender": name, "median_s": median, "word_pieces_per_s": pieces / median,
         "vs_faithful": medians["faithful"] / median,
         "vs_peer": medians["peer (HF tokenizers)"] / median, "lines_differ": disagree[name],
         "lines": len(lines), "seconds": times[name]}
        for name, median in medians.items()], packages=PACKAGES)


def _disagreeing_rows(ids, row_splits, want_ids):
    """Rows of flat `ids` (split at `row_splits`) that differ from the lists `want_ids`."""
    ids, row_splits = ids.tolist(), row_splits.tolist()
    return sum(ids[a:b] != want for a, b, want in zip(row_splits, row_splits[1:], want_ids))


if __name__ == "__main__":
    harness.run(main, TF_CPP_MIN_LOG_LEVEL="3")
