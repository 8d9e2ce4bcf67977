r"""Sequences per second that ONE CPU core turns from TFRecords into host batches, as
run_pretraining.py's input pipeline gives them to the JAX trainer: how many cores keep an
accelerator fed (an H200 trains BERT-Base at about 4,400 sequences/s at 128 tokens).

    python -m bench.input_pipeline                     # 128 and 512 tokens, every input
    python -m bench.input_pipeline --seq_lengths=128 --inputs=records --batches=200
    python -m bench.input_pipeline --seq_lengths=128 --batch_sizes=8 --batches=2 --repeats=1 \
        --input=data/austen/persuasion.txt             # smoke run

Records: create_pretraining_data's pipeline (`pipeline.write_records`) makes them first, in a
temporary folder, from --input (the Austen novels, one sentence a line), at each of
--seq_lengths with max_predictions_per_seq = 5/32 of it (the original README's 20 at 128, 80 at
512), in 4 files (a run's many shards: the pipeline interleaves 4 of them), one set per input:

  records          masked records, read as `--input_format=records` reads them (the default);
  dynamic_masking  records made with --mask_token_prob=0 --random_token_prob=0, masked anew in
                   tf.data for every batch, as `--input_format=unmasked_records` masks them;
  packed_rows      masked records of up to 3 pairs a row (--max_sequences_per_row=3).

The dataset is run_pretraining's own: `PretrainingTask` settled on the records, its training
split (`splits.existing_split`) and `driver._dataset_fn`, read as the JAX trainer reads it
(`JaxTrainer._input_iterator`: tf.data's autotuning thread off, `without_autotuning_thread`)
with every feature of every batch made a numpy array (`jax_trainer._arrays`). The records are
read again and again (training's repeat); after --warmup_batches, --repeats rounds of
--batches batches are timed; the table has the median round.

One core: each row is measured in a process of its own whose threads are all pinned to one CPU
(`os.sched_setaffinity`) before TensorFlow first runs: every thread (tf.data's, TensorFlow's
pools, the Python thread converting to numpy) shares that CPU, and TensorFlow sizes its pools
by the CPUs the process may run on (one tf_Compute thread instead of one per core), as a
training run sizes them by its machine's. The process's CPU seconds over the wall seconds of the
timed rounds ("CPU use", about 1.0) show that it used that one core, and all of it; below 1,
other processes had the CPU part of the time, and the sequences per CPU second of the process
(its CPU seconds, median round) are the steadier figure.
Sequences are pairs: a packed row counts its filled slots (`packing.filled_slots`); rows/s is
beside. "Cores for 4,400 seq/s" is ceil(--target_seq_per_s / the rate), the exact share of one
core in brackets: 4,400/s is an H200's BERT-Base rate at 128 tokens; it trains fewer sequences a
second at 512, so there the figure overstates the cores it needs.
"""
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app, flags, logging

from bench import harness

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(ROOT, "vocab", "uncased_L-12_H-768_A-12", "vocab.txt")
PACKAGES = ("tensorflow", "keras", "numpy")
# create_pretraining_data's options of each input's records.
INPUTS = {"records": {}, "dynamic_masking": {"mask_token_prob": 0.0, "random_token_prob": 0.0},
          "packed_rows": {"max_sequences_per_row": 3}}
SHARDS = 4

flags.DEFINE_string("input", "data/austen/*.txt", "Glob of the Gutenberg texts (relative: to "
                    "the project root) the records are made from.")
flags.DEFINE_integer("dupe_factor", 1, "create_pretraining_data's --dupe_factor.")
flags.DEFINE_list("seq_lengths", ["128", "512"], "Sequence lengths (max_seq_length).")
flags.DEFINE_list("batch_sizes", ["128", "32"], "Rows a batch at each of --seq_lengths.")
flags.DEFINE_list("inputs", list(INPUTS), "Inputs measured: " + ", ".join(INPUTS) + ".")
flags.DEFINE_integer("warmup_batches", 10, "Batches read before the timing.")
flags.DEFINE_integer("batches", 500, "Batches a timed round.")
flags.DEFINE_integer("repeats", 3, "Timed rounds (the median is shown).")
flags.DEFINE_integer("cpu", None, "The CPU measured on (default: the last this process may use).")
flags.DEFINE_integer("target_seq_per_s", 4400, "The accelerator's sequences/s to feed.")
flags.DEFINE_string("measure", None, "Internal: the JSON of one row, measured in this process.")
FLAGS = flags.FLAGS


def make_records(folder, seq_len):
    """{input: comma-separated files} of --inputs' records at `seq_len`; prints their counts."""
    import glob

    from bert_tasks.pretraining.data import corpus, pipeline

    text = os.path.join(folder, "corpus.txt")
    if not os.path.exists(text):
        with open(text, "w", encoding="utf-8") as out:
            for path in sorted(glob.glob(os.path.join(ROOT, FLAGS.input))):
                with open(path, encoding="utf-8") as f:
                    out.write(corpus.gutenberg_to_corpus(f.read()))
    made = {}
    for name in FLAGS.inputs:
        files = ",".join(os.path.join(folder, f"{name}_{seq_len}-{shard}.tfrecord")
                         for shard in range(SHARDS))
        stats = pipeline.write_records(pipeline.Options(
            text, files, VOCAB, max_seq_length=seq_len, max_predictions_per_seq=seq_len * 5 // 32,
            dupe_factor=FLAGS.dupe_factor, **INPUTS[name]))
        rows = stats.num_rows or stats.num_instances
        print(f"  {name} at {seq_len}: {stats.num_instances} pairs in {rows} rows, "
              f"{sum(os.path.getsize(p) for p in files.split(',')) / 2 ** 20:.1f} MB")
        made[name] = files
    return made


def measure(row):
    """Times `row` (its seq_len, input, files, batch_size, cpu) in this process, every thread of
    it pinned to its CPU first (threads started later inherit it); returns its figures."""
    for thread in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(thread), {row["cpu"]})
    import numpy as np
    import tensorflow as tf

    from bert_runner import driver, packing, splits
    from bert_runner.run_config import RunConfig
    from bert_runner.trainer import without_autotuning_thread
    from bert_tasks.pretraining.data import dynamic_masking
    from bert_tasks.pretraining.task import PretrainingTask
    from modeling import BertConfig

    seq_len, batch_size = row["seq_len"], row["batch_size"]
    predictions = seq_len * 5 // 32
    dynamic = None
    if row["input"] == "dynamic_masking":
        dynamic = dynamic_masking.DynamicInput(dynamic_masking.MaskingOptions(
            input_format="unmasked_records", vocab_file=VOCAB).dynamic(), seq_len, predictions)
    # run_pretraining.py's task (--next_sentence_prediction left out: as the records say)...
    task = PretrainingTask(seq_len, predictions, None, row["files"], dynamic_input=dynamic)
    task = task.settle({}, None, BertConfig(vocab_size=30522))
    run = RunConfig("", train_batch_size=batch_size)  # no output_dir: nothing is written
    split = splits.existing_split(task, "train", task.existing_records("train"), run)
    # ... its training dataset, read as JaxTrainer._input_iterator and _arrays read it.
    iterator = iter(without_autotuning_thread(driver._dataset_fn(task, split, run, True))(
        tf.distribute.InputContext()))

    def read(count):
        """Reads `count` batches, every feature made a numpy array ([batch, seq_len] and
        [batch, predictions] int32, ...); returns their sequence_starts ([batch, 3] int32; None
        unpacked), whose pairs are counted once the clock has stopped."""
        starts = []
        for _ in range(count):
            arrays = {name: value.numpy() for name, value in next(iterator).items()}
            starts.append(arrays.get("sequence_starts"))
        return starts

    read(FLAGS.warmup_batches)
    seconds, cpu_seconds, starts = [], [], []
    for _ in range(FLAGS.repeats):
        wall, process = time.perf_counter(), time.process_time()
        starts += read(FLAGS.batches)
        seconds.append(time.perf_counter() - wall)
        cpu_seconds.append(time.process_time() - process)
    pairs_per_row = 1.0 if starts[0] is None else float(np.mean(
        [np.sum(packing.filled_slots(s)) / batch_size for s in starts]))
    sequences = FLAGS.batches * batch_size * pairs_per_row  # a round's
    rate = sequences / statistics.median(seconds)
    return {"seq_len": seq_len, "input": row["input"], "batch_size": batch_size,
            "batches": FLAGS.batches, "repeats": FLAGS.repeats, "seq_per_s_per_core": rate,
            "rows_per_s": rate / pairs_per_row, "pairs_per_row": pairs_per_row,
            "seq_per_cpu_s": sequences / statistics.median(cpu_seconds),
            "round_seconds": seconds, "cpu_use": sum(cpu_seconds) / sum(seconds),
            "target_seq_per_s": FLAGS.target_seq_per_s,
            "core_share_for_target": FLAGS.target_seq_per_s / rate,
            "cores_for_target": math.ceil(FLAGS.target_seq_per_s / rate),
            "cpu": {key: value for key, value in harness.cpu_identity().items() if key != "flags"},
            "cpus_allowed": len(os.sched_getaffinity(0))}


def measured(row):
    """`measure(row)` in a process of its own (`--measure`): TensorFlow sizes its thread pools
    when it first runs, after the pinning."""
    result = subprocess.run(
        [sys.executable, "-m", "bench.input_pipeline", f"--measure={json.dumps(row)}",
         *(f"--{name}={FLAGS[name].value}" for name in (
             "warmup_batches", "batches", "repeats", "target_seq_per_s"))],
        cwd=ROOT, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"measuring {row['input']} at {row['seq_len']} failed:\n"
                           f"{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(_):
    if FLAGS.measure:
        print(json.dumps(measure(json.loads(FLAGS.measure))))
        return
    if len(FLAGS.batch_sizes) != len(FLAGS.seq_lengths):
        raise app.UsageError("--batch_sizes needs one batch size for each --seq_lengths")
    unknown = set(FLAGS.inputs) - set(INPUTS)
    if unknown:
        raise app.UsageError(f"--inputs: unknown {', '.join(sorted(unknown))}")
    logging.set_verbosity(logging.WARNING)
    core = sorted(os.sched_getaffinity(0))[-1] if FLAGS.cpu is None else FLAGS.cpu
    print(harness.describe_machine(None, PACKAGES))
    print(f"each row in a process of its own pinned to CPU {core}; {FLAGS.warmup_batches} "
          f"batches of warm-up, {FLAGS.repeats} rounds of {FLAGS.batches} batches")
    figures = []
    with tempfile.TemporaryDirectory(prefix="bench-input-pipeline-") as folder:
        for seq_len, batch_size in zip(map(int, FLAGS.seq_lengths), map(int, FLAGS.batch_sizes)):
            print(f"records at {seq_len} ({FLAGS.input}, dupe_factor {FLAGS.dupe_factor}):")
            for name, files in make_records(folder, seq_len).items():
                figures.append(measured({"seq_len": seq_len, "input": name, "files": files,
                                         "batch_size": batch_size, "cpu": core}))
    target = f"{FLAGS.target_seq_per_s:,}"
    print(f"\n| seq_len | input | batch | seq/s per core | rows/s | pairs/row | CPU use "
          f"| seq per CPU s | cores for {target} seq/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for f in figures:
        print(f"| {f['seq_len']} | {f['input']} | {f['batch_size']} | "
              f"{f['seq_per_s_per_core']:,.0f} | {f['rows_per_s']:,.0f} | "
              f"{f['pairs_per_row']:.2f} | {f['cpu_use']:.2f} | {f['seq_per_cpu_s']:,.0f} | "
              f"{f['cores_for_target']} "
              f"({f['core_share_for_target']:.3f}) |")
    harness.write_results("input_pipeline", figures, packages=PACKAGES)


if __name__ == "__main__":
    harness.run(main)
