"""Benchmark: create_pretraining_data on real text (the bundled Jane Austen novels).

In one process, on the same corpus and flags, after a warm-up, median of --repeats runs each
(the configurations take turns), wall and CPU seconds (this process and its workers):

* peer: a straight pure-Python port of the original create_pretraining_data.py (string tokens,
  the faithful `FullTokenizer`, `tf.train.Example` protos; `original_port` below);
* ours, the original's ordering, with the faithful tokenizer and with the fast tokenizer;
* ours, chunked (--chunk_size_mb), 1 worker and 2 workers.

One-time start-up is left out of every configuration alike: TensorFlow's import and the tokenizer's
graph (built in the warm-up) and the 2 worker processes (one `WorkerPool`, started before the
warm-up and used by every 2-worker run). A 2-worker run that starts and stops its own pool, as the
command line does, is timed once at the end to show that cost.

Prints instances/s, seconds per MB of input and the ratios, and checks that the port and ours write
the same records. The corpus is built with `bert_tasks.pretraining.data.corpus.gutenberg_to_corpus`.

    python -m bench.create_pretraining_data --dupe_factor=1 --repeats=3
    python -m bench.create_pretraining_data --memory     # peak memory of command-line runs
"""
import collections
import glob
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from absl import flags
from absl import logging


# No TensorFlow import at module level: worker processes are spawned, and spawning re-imports the
# main module. The functions below import it.
from bert_tasks.pretraining.data import pipeline
from bert_tasks.pretraining.data import processing
from bert_tasks.pretraining.data.corpus import gutenberg_to_corpus
import vocab
from bench import harness
from vocab import tokenization

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB_FILE = vocab.bundled_vocab_file()

flags.DEFINE_string("input", "data/austen/*.txt", "Glob of the Gutenberg texts (relative: to "
                    "the project root) that make the corpus.")
flags.DEFINE_integer("dupe_factor", 1, "dupe_factor of every run.")
flags.DEFINE_integer("repeats", 3, "Timed repetitions per configuration (after one warm-up).")
flags.DEFINE_float("chunk_size_mb", 0.25, "Chunk size of the chunked runs (0.25: 16 chunks).")
flags.DEFINE_boolean("skip_port", False, "Skip the (slow) straight port.")
flags.DEFINE_boolean("memory", False,
                     "Instead of timing, report the peak memory of command-line runs (Linux).")
FLAGS = flags.FLAGS


# ---------------------------------------------------------------- the peer: a straight port
Instance = collections.namedtuple("Instance", "tokens segment_ids masked_lm_positions "
                                              "masked_lm_labels is_random_next")


def original_port(input_file, output_file, dupe_factor, max_seq_length=128,
                  max_predictions_per_seq=20, masked_lm_prob=0.15, short_seq_prob=0.1, seed=12345):
    """The original main(), line for line in Python 3 (per-WordPiece masking). Returns count."""
    import tensorflow as tf
    tokenizer = tokenization.FullTokenizer(VOCAB_FILE, do_lower_case=True)
    rng = random.Random(seed)
    all_documents = [[]]
    with tf.io.gfile.GFile(input_file, "r") as reader:
        for line in reader:
            line = tokenization.convert_to_unicode(line).strip()
            if not line:
                all_documents.append([])
            tokens = tokenizer.tokenize(line)
            if tokens:
                all_documents[-1].append(tokens)
    all_documents = [x for x in all_documents if x]
    rng.shuffle(all_documents)
    vocab_words = list(tokenizer.vocab.keys())
    instances = []
    for _ in range(dupe_factor):
        for document_index in range(len(all_documents)):
            instances.extend(_port_document(all_documents, document_index, max_seq_length,
                                            short_seq_prob, masked_lm_prob,
                                            max_predictions_per_seq, vocab_words, rng))
    rng.shuffle(instances)
    with tf.io.TFRecordWriter(output_file) as writer:
        for instance in instances:
            input_ids = tokenizer.convert_tokens_to_ids(instance.tokens)
            input_mask = [1] * len(input_ids)
            segment_ids = list(instance.segment_ids)
            while len(input_ids) < max_seq_length:
                input_ids.append(0)
                input_mask.append(0)
                segment_ids.append(0)
            positions = list(instance.masked_lm_positions)
            ids = tokenizer.convert_tokens_to_ids(instance.masked_lm_labels)
            weights = [1.0] * len(ids)
            while len(positions) < max_predictions_per_seq:
                positions.append(0)
                ids.append(0)
                weights.append(0.0)
            ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))  # noqa: E731
            features = collections.OrderedDict([
                ("input_ids", ints(input_ids)), ("input_mask", ints(input_mask)),
                ("segment_ids", ints(segment_ids)), ("masked_lm_positions", ints(positions)),
                ("masked_lm_ids", ints(ids)),
                ("masked_lm_weights",
                 tf.train.Feature(float_list=tf.train.FloatList(value=weights))),
                ("next_sentence_labels", ints([1 if instance.is_random_next else 0]))])
            writer.write(tf.train.Example(
                features=tf.train.Features(feature=features)).SerializeToString())
    return len(instances)


def _port_document(all_documents, document_index, max_seq_length, short_seq_prob,
                   masked_lm_prob, max_predictions_per_seq, vocab_words, rng):
    document = all_documents[document_index]
    max_num_tokens = max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
    instances, current_chunk, current_length, i = [], [], 0, 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a = []
                for j in range(a_end):
                    tokens_a.extend(current_chunk[j])
                tokens_b = []
                if len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    target_b_length = target_seq_length - len(tokens_a)
                    for _ in range(10):
                        random_document_index = rng.randint(0, len(all_documents) - 1)
                        if random_document_index != document_index:
                            break
                    random_document = all_documents[random_document_index]
                    random_start = rng.randint(0, len(random_document) - 1)
                    for j in range(random_start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    i -= len(current_chunk) - a_end
                else:
                    is_random_next = False
                    for j in range(a_end, len(current_chunk)):
                        tokens_b.extend(current_chunk[j])
                while len(tokens_a) + len(tokens_b) > max_num_tokens:
                    trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
                    if rng.random() < 0.5:
                        del trunc[0]
                    else:
                        trunc.pop()
                tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
                segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                tokens, positions, labels = _port_mask(
                    tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng)
                instances.append(Instance(tokens, segment_ids, positions, labels, is_random_next))
            current_chunk, current_length = [], 0
        i += 1
    return instances


def _port_mask(tokens, masked_lm_prob, max_predictions_per_seq, vocab_words, rng):
    cand_indexes = [[i] for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
    rng.shuffle(cand_indexes)
    output_tokens = list(tokens)
    num_to_predict = min(max_predictions_per_seq,
                         max(1, int(round(len(tokens) * masked_lm_prob))))
    masked_lms, covered = [], set()
    for index_set in cand_indexes:
        if len(masked_lms) >= num_to_predict:
            break
        if len(masked_lms) + len(index_set) > num_to_predict:
            continue
        if any(index in covered for index in index_set):
            continue
        for index in index_set:
            covered.add(index)
            if rng.random() < 0.8:
                masked_token = "[MASK]"
            elif rng.random() < 0.5:
                masked_token = tokens[index]
            else:
                masked_token = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output_tokens[index] = masked_token
            masked_lms.append((index, tokens[index]))
    masked_lms.sort()
    return output_tokens, [p for p, _ in masked_lms], [label for _, label in masked_lms]


# ---------------------------------------------------------------- measurement
def _parsed(path):
    """TFRecord file -> dict feature name -> numpy array [records, length]."""
    import tensorflow as tf
    from bert_tasks.pretraining.data.features import name_to_features
    records = tf.data.TFRecordDataset(path).batch(1 << 20)
    return {k: v.numpy() for k, v in tf.io.parse_example(
        next(iter(records)), name_to_features(128, 20)).items()}


def _cpu_seconds():
    """User + system CPU seconds of this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed(fn):
    """(wall s, CPU s of this process and its finished children, CPU s of pool workers) of one
    call returning stats.

    Pool workers outlive the call, so their CPU time comes from the stats they return.
    """
    start, start_cpu = time.perf_counter(), _cpu_seconds()
    stats = fn()
    return time.perf_counter() - start, _cpu_seconds() - start_cpu, stats.worker_cpu_seconds


def main(_):
    logging.set_verbosity(logging.WARNING)  # the runs' progress lines would drown the figures
    workdir = tempfile.mkdtemp(prefix="bench_cpd_")
    corpus = os.path.join(workdir, "austen.txt")
    with open(corpus, "w", encoding="utf-8") as out:
        for path in sorted(glob.glob(os.path.join(ROOT, FLAGS.input))):
            with open(path, encoding="utf-8") as f:
                out.write(gutenberg_to_corpus(f.read()))
    if FLAGS.memory:
        _memory(workdir, corpus)
        return
    with processing.WorkerPool(2) as pool:
        _bench(pool, workdir, corpus)


# Command-line runs whose peak memory `--memory` reports: (dupe_factor, chunk_size_mb, workers).
MEMORY_RUNS = [(1, 0, 1), (5, 0, 1), (5, 0.25, 2), (5, 1, 2), (10, 1, 2)]


def _memory(workdir, corpus):
    """Peak resident memory of command-line runs: the main process and the largest worker.

    Polls /proc (Linux) every 20 ms: VmHWM of the script and of each of its child processes.
    """
    print("corpus: %s (%.2f MB); peak resident memory of create_pretraining_data.py"
          % (corpus, os.path.getsize(corpus) / 1e6))
    figures = []
    for dupe_factor, chunk_size_mb, num_workers in MEMORY_RUNS:
        process = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "create_pretraining_data.py"),
             "--input_file=" + corpus, "--output_file=" + os.path.join(workdir, "memory.tfrecord"),
             "--vocab_file=" + VOCAB_FILE, "--dupe_factor=%d" % dupe_factor,
             "--chunk_size_mb=%g" % chunk_size_mb, "--num_workers=%d" % num_workers],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        main_mb, workers_mb = 0.0, {}
        while process.poll() is None:
            main_mb = max(main_mb, _peak_mb(process.pid) or 0.0)
            for pid in _workers(process.pid):
                workers_mb[pid] = max(workers_mb.get(pid, 0.0), _peak_mb(pid) or 0.0)
            time.sleep(0.02)
        print("  dupe_factor=%-2d chunk_size_mb=%-4g num_workers=%d: main %4.0f MB, workers %s"
              % (dupe_factor, chunk_size_mb, num_workers, main_mb,
                 " ".join("%.0f MB" % mb for mb in sorted(workers_mb.values())) or "-"))
        figures.append({"dupe_factor": dupe_factor, "chunk_size_mb": chunk_size_mb,
                        "num_workers": num_workers, "main_peak_mb": main_mb,
                        "workers_peak_mb": sorted(workers_mb.values())})
    harness.write_results("create_pretraining_data", figures, packages=("tensorflow",))


def _peak_mb(pid):
    """VmHWM of a process in MB, or None once it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM"))
    except (OSError, StopIteration):
        return None


def _workers(pid):
    """Pids of the worker processes of `pid` (spawned children; not the resource tracker)."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            children = [int(child) for child in f.read().split()]
    except OSError:
        return []
    workers = []
    for child in children:
        try:
            with open("/proc/%d/cmdline" % child, "rb") as f:
                if b"spawn_main" in f.read():
                    workers.append(child)
        except OSError:
            pass
    return workers


def _bench(pool, workdir, corpus):
    megabytes = os.path.getsize(corpus) / 1e6

    def options(name, **overrides):
        return pipeline.Options(input_file=corpus, output_file=os.path.join(workdir, name),
                                vocab_file=VOCAB_FILE, dupe_factor=FLAGS.dupe_factor, **overrides)

    def ours(name, **overrides):
        opts = options(name, **overrides)
        return lambda: pipeline.write_records(opts, pool=pool if opts.num_workers > 1 else None)

    configs = []
    if not FLAGS.skip_port:
        configs.append(("straight port of the original (faithful tokenizer)",
                        lambda: processing.ChunkStats(num_instances=original_port(
                            corpus, os.path.join(workdir, "port.tfrecord"), FLAGS.dupe_factor))))
    configs += [
        ("ours, original order, faithful tokenizer",
         ours("faithful.tfrecord", tokenizer="faithful")),
        ("ours, original order, fast tokenizer", ours("fast.tfrecord")),
        ("ours, chunked, 1 worker", ours("chunked1.tfrecord", chunk_size_mb=FLAGS.chunk_size_mb)),
        ("ours, chunked, 2 workers",
         ours("chunked2.tfrecord", chunk_size_mb=FLAGS.chunk_size_mb, num_workers=2)),
    ]
    print("corpus: %s (%.2f MB, %s, one sentence per line), dupe_factor=%d, "
          "max_seq_length=128, chunk_size_mb=%g" % (corpus, megabytes, FLAGS.input,
                                                    FLAGS.dupe_factor, FLAGS.chunk_size_mb))
    print(harness.describe_machine(None, ("tensorflow",)))
    # One warm-up each (graph building, caches, file cache), then the configurations take turns
    # so that a change in machine load hits them alike.
    instances = [fn().num_instances for _, fn in configs]
    runs = list(harness.time_rounds(dict(configs), FLAGS.repeats, measure=_timed).values())
    results, figures = {}, []
    for (label, _), count, timings in zip(configs, instances, runs):
        median = statistics.median(wall for wall, _, _ in timings)
        cpu = statistics.median(main + workers for _, main, workers in timings)
        results[label] = median
        figures.append({"configuration": label, "instances": count, "wall_s": median,
                        "instances_per_s": count / median, "s_per_mb": median / megabytes,
                        "cpu_s": cpu, "rounds": timings})
        print("%-52s %7d instances  %6.2f s (runs %s)  %8.0f instances/s  %6.3f s/MB  "
              "%6.2f CPU s" % (label, count, median, " ".join("%.2f" % t[0] for t in timings),
                               count / median, median / megabytes, cpu))

    two = runs[-1]  # the last configuration: 2 workers
    print("2 workers, CPU per record: main process %.1f us (tokenizing, receiving, writing), "
          "workers %.1f us" % tuple(1e6 * statistics.median(t[k] for t in two) / instances[-1]
                                    for k in (1, 2)))
    if not FLAGS.skip_port:
        port, fast = (_parsed(os.path.join(workdir, n)) for n in ("port.tfrecord", "fast.tfrecord"))
        same = all(np.array_equal(port[k], fast[k]) for k in port)
        print("port and ours (original order) write the same records: %s" % same)
    labels = list(results)
    fast = results["ours, original order, fast tokenizer"]
    for peer in labels[:2]:
        if peer != "ours, original order, fast tokenizer":
            print("speed-up of ours (fast tokenizer, 1 process) over %s: %.2fx"
                  % (peer, results[peer] / fast))
    print("speed-up of 2 workers over 1 worker (chunked): %.2fx" % (
        results["ours, chunked, 1 worker"] / results["ours, chunked, 2 workers"]))
    print("speed-up of 2 workers (chunked) over the fastest single process (original order): "
          "%.2fx" % (fast / results["ours, chunked, 2 workers"]))
    cold = options("chunked2_cold.tfrecord", chunk_size_mb=FLAGS.chunk_size_mb, num_workers=2)
    wall, _, _ = _timed(lambda: pipeline.write_records(cold))
    print("2 workers, the run starting and stopping its own pool (as the command line): %.2f s "
          "(%.2f s more than with the pool already running)"
          % (wall, wall - results["ours, chunked, 2 workers"]))
    print("(one-time start-up of a command-line run, in no figure above: importing TensorFlow and "
          "building the tokenizer's graph, a few seconds)")
    figures.append({"configuration": "ours, chunked, 2 workers, own pool", "wall_s": wall})
    harness.write_results("create_pretraining_data", figures, packages=("tensorflow",))


if __name__ == "__main__":
    harness.run(main)
