"""Benchmark: a vocab learned from the Austen novels vs a random subset of bert-base-uncased.

`build_vocab.py`'s vocab should split the text it was learned from (and text like it) into fewer
word-pieces, with fewer `[UNK]`, than a vocab of the same size that knows nothing of the text.
The baseline is a random subset of bert-base-uncased's vocab of the same size that keeps the
same reserved block ([PAD], [unused*], [UNK] [CLS] [SEP] [MASK]), the same single characters
(those of bert-base-uncased that the learned vocab has, alone and after ##), and a uniform random
sample of bert-base-uncased's other tokens (`bert_tasks.pretraining.vocab_building.quality.random_subset`); the full
bert-base-uncased vocab (30,522 tokens) is printed for reference.

  python -m bench.vocab_quality               # vocab size 5000, 5 subset seeds
  python -m bench.vocab_quality --peer        # also tensorflow-text's bert_vocab_from_dataset

Two settings: in-sample (learned from the six novels, measured on them) and held-out (learned
from five, measured on --held_out). Figures are `FullTokenizer`'s over the whole text (uncased),
and the learned vocab's are checked against `FastBertTokenizer` run over the text.

--peer also learns with `tensorflow_text.tools.wordpiece_vocab.bert_vocab_from_dataset` (its own
BasicTokenizer, bisection search), the same size and reserved tokens, in this process: time
ratio and figures.
"""
import glob
import os
import statistics
import tempfile
import time

from absl import flags
from absl import logging

import vocab
from bench import harness
from bert_tasks.pretraining.data.reading import iter_line_blocks
from vocab import tokenization
from bert_tasks.pretraining.vocab_building import building, layout, learner, quality, words

FLAGS = flags.FLAGS
flags.DEFINE_string("input", "data/austen/*.txt", "Glob of the text files (the novels).")
flags.DEFINE_string("held_out", "persuasion.txt", "File name among --input measured held-out.")
flags.DEFINE_integer("vocab_size", 5000, "Size of the learned vocab and of the random subsets.")
flags.DEFINE_integer("num_unused", layout.ORIGINAL_NUM_UNUSED, "[unusedN] slots of both.")
flags.DEFINE_integer("min_count", 10, "build_vocab.py --min_count.")
flags.DEFINE_integer("seeds", 5, "Random subsets drawn (seeds 1..N): mean and range printed.")
flags.DEFINE_bool("peer", False, "Also run tensorflow-text's bert_vocab_from_dataset.")


def _row(name, size, figs):
    return "%-46s %6d %10.3f%% %14.3f" % (name, size, 100 * figs.unk_rate, figs.pieces_per_word)


def _figures(setting, name, size, figs_list, **extra):
    """A JSON line's figures of a row: the mean over `figs_list` (one per seed, or one)."""
    return {"setting": setting, "vocab": name, "size": size, "seeds": len(figs_list),
            "unk_rate": statistics.mean(f.unk_rate for f in figs_list),
            "pieces_per_word": statistics.mean(f.pieces_per_word for f in figs_list), **extra}


def _subset_row(name, figs_list):
    """Mean over the seeds, and the range."""
    unk = [100 * f.unk_rate for f in figs_list]
    ppw = [f.pieces_per_word for f in figs_list]
    return "%-46s %6d %10.3f%% %14.3f   (%d seeds: [UNK] %.3f-%.3f%%, pieces %.3f-%.3f)" % (
        name, FLAGS.vocab_size, statistics.mean(unk), statistics.mean(ppw), len(figs_list),
        min(unk), max(unk), min(ppw), max(ppw))


def _fast_check(vocab_file, files, figs):
    """FastBertTokenizer over the text gives the pieces and [UNK]s of `figs` (else exits)."""
    from vocab.fast_tokenizer import FastBertTokenizer
    fast = FastBertTokenizer(vocab_file, do_lower_case=True)
    lines = [line for block in iter_line_blocks(files) for line in block]
    ids, _ = fast.tokenize_batch_ids(lines)
    got = (len(ids), int((ids == fast.unk_id).sum()))
    if got != (figs.pieces, figs.unknown):
        raise SystemExit("FastBertTokenizer gives %d pieces, %d [UNK]; the word counts %d, %d"
                         % (got + (figs.pieces, figs.unknown)))


def _learn(files, output_file):
    opts = building.Options(input_file=",".join(files), output_file=output_file,
                            vocab_size=FLAGS.vocab_size, num_unused=FLAGS.num_unused,
                            min_count=FLAGS.min_count)
    start = time.monotonic()
    stats = building.build_vocab(opts)
    return stats, time.monotonic() - start


def _peer(files, reserved, output_file):
    """tensorflow-text's bert_vocab_from_dataset on the same lines; (seconds, size)."""
    import tensorflow as tf
    from tensorflow_text.tools.wordpiece_vocab.bert_vocab_from_dataset import (
        bert_vocab_from_dataset)
    lines = [line for block in iter_line_blocks(files) for line in block]
    start = time.monotonic()
    dataset = tf.data.Dataset.from_tensor_slices(lines).batch(1024)
    tokens = bert_vocab_from_dataset(dataset, FLAGS.vocab_size, reserved,
                                     bert_tokenizer_params=dict(lower_case=True),
                                     learn_params=dict(lower_thresh=FLAGS.min_count))
    seconds = time.monotonic() - start
    with open(output_file, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in tokens))
    return seconds, len(tokens)


def _setting(title, train_files, test_files, bert, workdir):
    """Prints the table of one setting; returns its figures."""
    print("\n== %s: learned from %s; measured on %s" % (
        title, ", ".join(map(os.path.basename, train_files)),
        ", ".join(map(os.path.basename, test_files))))
    vocab_file = os.path.join(workdir, title + ".txt")
    stats, seconds = _learn(train_files, vocab_file)
    learned = tokenization.read_vocab_lines(vocab_file)
    counter = words.WordCounter(do_lower_case=True)
    test_counts = {}
    for block in iter_line_blocks(test_files):
        for word, count in counter.count("\n".join(block)).items():
            test_counts[word] = test_counts.get(word, 0) + count
    learned_figs = quality.figures(set(learned), test_counts)
    _fast_check(vocab_file, test_files, learned_figs)

    reserved = learned[:stats.num_reserved]
    characters = {t for t in learned[stats.num_reserved:] if learner.is_character_token(t)}
    seeds = range(1, FLAGS.seeds + 1)
    fair = [quality.random_subset(bert, reserved, characters, len(learned), s) for s in seeds]
    plain = [quality.random_subset(bert, reserved, None, len(learned), s) for s in seeds]
    num_chars = sum(map(learner.is_character_token, fair[0]))
    print("%d words, %d distinct. Subsets: %d reserved + %d characters (the learned vocab's, "
          "alone and after ##) + %d random tokens; 'any tokens': %d reserved + %d random"
          % (learned_figs.words, len(test_counts), len(reserved), num_chars,
             len(learned) - len(reserved) - num_chars, len(reserved),
             len(learned) - len(reserved)))
    print("%-46s %6s %11s %14s" % ("vocab", "size", "[UNK]/word", "pieces/word"))
    print(_row("learned (build_vocab.py, %.1fs)" % seconds, len(learned), learned_figs))
    fair_figs = [quality.figures(set(s), test_counts) for s in fair]
    plain_figs = [quality.figures(set(s), test_counts) for s in plain]
    bert_figs = quality.figures(set(bert), test_counts)
    print(_subset_row("random subset of bert-base-uncased", fair_figs))
    print(_subset_row("random subset, any tokens", plain_figs))
    print(_row("bert-base-uncased, all (reference)", len(bert), bert_figs))
    figures = [
        _figures(title, "learned (build_vocab.py)", len(learned), [learned_figs], seconds=seconds),
        _figures(title, "random subset of bert-base-uncased", FLAGS.vocab_size, fair_figs),
        _figures(title, "random subset, any tokens", FLAGS.vocab_size, plain_figs),
        _figures(title, "bert-base-uncased, all (reference)", len(bert), [bert_figs])]
    print("pieces per word, learned / random subset: %.3f" % (
        learned_figs.pieces_per_word / statistics.mean(f.pieces_per_word for f in fair_figs)))
    if FLAGS.peer:
        peer_file = os.path.join(workdir, title + ".peer.txt")
        peer_seconds, peer_size = _peer(train_files, reserved, peer_file)
        peer_figs = quality.figures(set(tokenization.read_vocab_lines(peer_file)), test_counts)
        print(_row("peer: bert_vocab_from_dataset (%.1fs)" % peer_seconds, peer_size, peer_figs))
        print("build_vocab.py is %.1fx faster than the peer (%d learner calls)"
              % (peer_seconds / seconds, stats.learn.calls))
        figures.append(_figures(title, "peer: bert_vocab_from_dataset", peer_size, [peer_figs],
                                seconds=peer_seconds))
    return figures


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    files = sorted(glob.glob(FLAGS.input))
    held_out = [f for f in files if os.path.basename(f) == FLAGS.held_out]
    if not held_out or len(files) < 2:
        raise SystemExit("--input=%s must match several files, --held_out=%s among them"
                         % (FLAGS.input, FLAGS.held_out))
    bert = tokenization.read_vocab_lines(vocab.bundled_vocab_file())
    import tensorflow  # noqa: F401  Both contenders use it: imported before either is timed.
    with tempfile.TemporaryDirectory() as workdir:
        figures = _setting("in-sample", files, files, bert, workdir)
        figures += _setting("held-out", [f for f in files if f not in held_out], held_out, bert,
                            workdir)
    harness.write_results("vocab_quality", figures, packages=("tensorflow", "tensorflow-text"))


if __name__ == "__main__":
    harness.run(main, TF_CPP_MIN_LOG_LEVEL="3")
