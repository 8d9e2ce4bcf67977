"""Benchmark: SQuAD windowing time and the memory kept for post-processing, the original's
approach against ours, on the same questions in one process.

The input is synthetic but real English: Austen paragraphs of 120-400 words as contexts, each
with --questions_per_paragraph questions of 10 words drawn from it (no answers: prediction).

  python -m bench.squad_windows                           # 2,000 questions, 384/128/64, 3 repeats
  python -m bench.squad_windows --questions=500 --repeats=5

Time (median of --repeats, after one warm-up round, contenders interleaved):
  original  the context is word-piece tokenized again for every question, as the original
            `convert_examples_to_features` does;
  ours      `bert_tasks.squad.features.iter_windows`: one tokenization per paragraph, shared by its questions.
Memory (tracemalloc, bytes still allocated once windowing is done):
  original  every padded `InputFeatures` (the original keeps them all in `eval_features`);
  ours      one `ExampleWindows` per question (`write_features` keeps these for prediction).
"""
import glob
import random
import statistics
import tracemalloc

from absl import flags

import vocab
from bench import harness
from vocab import tokenization

FLAGS = flags.FLAGS
flags.DEFINE_string("input", "data/austen/*.txt", "Glob of text files (paragraphs: blank lines).")
flags.DEFINE_string("vocab_file", vocab.bundled_vocab_file(), "WordPiece vocab file (uncased).")
flags.DEFINE_integer("questions", 2000, "Number of questions.")
flags.DEFINE_integer("questions_per_paragraph", 5, "Questions sharing one context.")
flags.DEFINE_integer("max_seq_length", 384, "As run_squad.py.")
flags.DEFINE_integer("doc_stride", 128, "As run_squad.py.")
flags.DEFINE_integer("max_query_length", 64, "As run_squad.py.")
flags.DEFINE_integer("repeats", 3, "Timed repetitions per contender (after one warm-up).")


def make_examples(pattern, num_questions, per_paragraph):
    """Prediction examples on Austen paragraphs; questions are 10 words of their context."""
    from bert_tasks.squad import examples as sq_examples  # imports TensorFlow: after `run`

    paragraphs = []
    for path in sorted(glob.glob(pattern)):
        with open(path, encoding="utf-8") as f:
            paragraphs += [p for p in f.read().split("\n\n") if 120 <= len(p.split()) <= 400]
    num_paragraphs = -(-num_questions // per_paragraph)
    if len(paragraphs) < num_paragraphs:
        raise SystemExit("%s has %d paragraphs of 120-400 words; %d needed"
                         % (pattern, len(paragraphs), num_paragraphs))
    rng = random.Random(0)
    data = {"data": [{"paragraphs": [
        {"context": p, "qas": [{"id": "%d_%d" % (i, j), "question": " ".join(rng.sample(p.split(), 10))}
                               for j in range(per_paragraph)]}
        for i, p in enumerate(paragraphs[:num_paragraphs])]}]}
    return sq_examples.parse_squad_examples(data, is_training=False).examples[:num_questions]


def original_windows(examples, tokenizer, max_seq_length, doc_stride, max_query_length):
    """Windows with the context re-tokenized per question, as the original."""
    from bert_tasks.squad import features as sq_features

    unique_id = sq_features.FIRST_UNIQUE_ID
    windows = []
    for index, example in enumerate(examples):
        context = sq_features.tokenize_context(example.doc_tokens, tokenizer)
        windows.append(sq_features.make_windows(
            example, index, unique_id, context, tokenizer, max_seq_length, doc_stride,
            max_query_length, is_training=False))
        unique_id += len(windows[-1].doc_spans)
    return windows


def retained_bytes(fn):
    """Bytes allocated by `fn()` and still alive while its result is held."""
    tracemalloc.start()
    result = fn()
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del result
    return size


def main(argv):
    del argv
    from bert_tasks.squad import features as sq_features

    examples = make_examples(FLAGS.input, FLAGS.questions, FLAGS.questions_per_paragraph)
    tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, do_lower_case=True)
    args = (examples, tokenizer, FLAGS.max_seq_length, FLAGS.doc_stride, FLAGS.max_query_length)
    contenders = {
        "original": lambda: original_windows(*args),
        "ours": lambda: list(sq_features.iter_windows(*args, is_training=False)),
    }
    num_features = sum(len(w.doc_spans) for w in contenders["ours"]())  # Also the warm-up.
    contenders["original"]()
    times = harness.time_rounds(contenders, FLAGS.repeats)
    memory = {
        "original": retained_bytes(
            lambda: list(sq_features.convert_examples_to_features(*args, is_training=False))),
        "ours": retained_bytes(contenders["ours"]),
    }

    print(harness.describe_machine(None, ("tensorflow",)))
    print("%d questions on %d contexts, %d features at max_seq_length=%d, doc_stride=%d, "
          "max_query_length=%d" % (len(examples), len({id(e.doc_tokens) for e in examples}),
                                   num_features, FLAGS.max_seq_length, FLAGS.doc_stride,
                                   FLAGS.max_query_length))
    median = {name: statistics.median(t) for name, t in times.items()}
    print("windowing time, median of %d:" % FLAGS.repeats)
    for name in contenders:
        print("  %-8s %6.2f s  (%.0f questions/s)" % (name, median[name], len(examples) / median[name]))
    print("  ratio    %.1fx faster" % (median["original"] / median["ours"]))
    print("memory kept for post-processing:")
    for name, what in (("original", "all InputFeatures"), ("ours", "ExampleWindows")):
        print("  %-8s %6.1f MB  %5.1f KB per feature  (%s)"
              % (name, memory[name] / 1e6, memory[name] / num_features / 1e3, what))
    print("  ratio    %.1fx less" % (memory["original"] / memory["ours"]))
    harness.write_results("squad_windows", [
        {"contender": name, "questions": len(examples), "features": num_features,
         "median_s": median[name], "questions_per_s": len(examples) / median[name],
         "memory_bytes": memory[name], "seconds": times[name]}
        for name in contenders], packages=("tensorflow",))


if __name__ == "__main__":
    harness.run(main, TF_CPP_MIN_LOG_LEVEL="3")
