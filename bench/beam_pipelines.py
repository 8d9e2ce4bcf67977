r"""create_pretraining_data.py on Apache Beam's DirectRunner against the local --num_workers path,
on this machine: same input, same flags, the command lines users run, in turns, one run.

    python -m bench.beam_pipelines                    # needs apache-beam (requirements-beam.txt)
    /tmp/beamvenv/bin/python -m bench.beam_pipelines --dupe_factor=1 --repeats=1   # smoke run

Input: --input, by default the six bundled Austen novels, one corpus file each
(`corpus.gutenberg_to_corpus`; 3.9 MB), so the runner has one shard per file; the bert-base
uncased vocab; --dupe_factor and --chunk_size_mb as given (the local path needs chunks for more
than one worker).
Contenders, each with --workers worker processes:
  local   create_pretraining_data.py --num_workers=W (one output file)
  beam    create_pretraining_data.py --runner=DirectRunner --beam_pipeline_options=
          "--direct_num_workers=W --direct_running_mode=multi_processing" (one shard per file)
Each round runs both, in turns, each into a fresh folder; the time is the command's wall time,
start-up included (Python, TensorFlow, the tokenizer's graph; Beam's workers for beam), which is
what a user waits for. Records are counted in the outputs. The table has the medians over
--repeats rounds, records/s per worker, and the ratio beam / local (from the medians, and
paired: the median of the per-round ratios).
"""
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import flags

from bench import harness

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

flags.DEFINE_string("input", "data/austen/*.txt", "Glob of the Gutenberg texts (relative: to "
                    "the project root), one corpus file each.")
flags.DEFINE_integer("workers", 2, "Worker processes of each contender.")
flags.DEFINE_integer("dupe_factor", 2, "create_pretraining_data.py --dupe_factor.")
flags.DEFINE_float("chunk_size_mb", 0.25, "create_pretraining_data.py --chunk_size_mb.")
flags.DEFINE_integer("repeats", 2, "Rounds (medians).")
FLAGS = flags.FLAGS
VOCAB = os.path.join(ROOT, "vocab", "uncased_L-12_H-768_A-12", "vocab.txt")


def _corpus(folder):
    """One corpus file per --input file; returns their glob."""
    from bert_tasks.pretraining.data import corpus
    for path in sorted(glob.glob(os.path.join(ROOT, FLAGS.input))):
        with open(path, encoding="utf-8") as f:
            text = corpus.gutenberg_to_corpus(f.read())
        with open(os.path.join(folder, os.path.basename(path)), "w", encoding="utf-8") as out:
            out.write(text)
    return os.path.join(folder, "*.txt")


def _run(name, extra, pattern, folder, round_):
    """Runs one contender into a fresh folder; returns (seconds, output files)."""
    out = os.path.join(folder, "%s-%d" % (name, round_))
    os.makedirs(out)
    command = [sys.executable, os.path.join(ROOT, "create_pretraining_data.py"),
               "--input_file=" + pattern, "--output_file=" + os.path.join(out, "wiki.tfrecord"),
               "--vocab_file=" + VOCAB, "--dupe_factor=%d" % FLAGS.dupe_factor,
               "--chunk_size_mb=%g" % FLAGS.chunk_size_mb, *extra]
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode:
        sys.exit("%s failed (%d):\n%s" % (" ".join(command), result.returncode,
                                           result.stderr[-3000:]))
    return seconds, [os.path.join(out, f) for f in sorted(os.listdir(out))]


def _count(files):
    import tensorflow as tf
    return int(tf.data.TFRecordDataset(files).reduce(0, lambda n, _: n + 1))


def main(_):
    try:
        import apache_beam  # noqa: F401
    except ImportError:
        sys.exit("apache-beam is not installed: pip install -r requirements-beam.txt")
    print(harness.describe_machine(None, packages=("tensorflow", "apache-beam")))
    # The corpus and each contender's records: gone when the figures are out.
    with tempfile.TemporaryDirectory(prefix="bench-beam-") as folder:
        pattern = _corpus(folder)
        w = FLAGS.workers
        contenders = {
            "local --num_workers=%d" % w: ["--num_workers=%d" % w],
            "beam DirectRunner, %d workers" % w: [
                "--runner=DirectRunner", "--beam_pipeline_options=--direct_num_workers=%d "
                "--direct_running_mode=multi_processing" % w],
        }
        seconds = {name: [] for name in contenders}
        records = {}
        for round_ in range(FLAGS.repeats):
            for k, (name, extra) in enumerate(contenders.items()):
                s, files = _run("c%d" % k, extra, pattern, folder, round_)
                seconds[name].append(s)
                records[name] = (_count(files), len(files))
        texts = [os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".txt")]
        corpus_mb = sum(map(os.path.getsize, texts)) / 1e6
    print("\ncorpus: %d files, %.1f MB; --dupe_factor=%d --chunk_size_mb=%g; %d rounds" % (
        len(texts), corpus_mb, FLAGS.dupe_factor, FLAGS.chunk_size_mb, FLAGS.repeats))
    print("\n| contender | output files | records | wall s (median) | records/s | "
          "records/s per worker |")
    print("|---|---|---|---|---|---|")
    figures = []
    for name, values in seconds.items():
        count, num_files = records[name]
        t = statistics.median(values)
        print("| %s | %d | %d | %.1f | %.0f | %.0f |" % (
            name, num_files, count, t, count / t, count / t / w))
        figures.append({"contender": name, "output_files": num_files, "records": count,
                        "wall_s": t, "records_per_s": count / t, "seconds": values})
    ratio, paired = harness.ratios(*seconds.values())
    print("\nbeam / local records/s: %.2fx (paired: %.2fx)" % (ratio, paired))
    for figure in figures:
        figure.update(beam_over_local=ratio, paired=paired)
    harness.write_results("beam_pipelines", figures, packages=("tensorflow", "apache-beam"))


if __name__ == "__main__":
    harness.run(main)
