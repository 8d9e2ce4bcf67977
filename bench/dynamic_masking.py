r"""Throughput of run_pretraining's dynamic masking (--input_format=text) against the record path
(create_pretraining_data's masked records), same text, same shapes, one process: the input
pipelines alone, then training steps of a small model fed by each.

    python -m bench.dynamic_masking                 # Persuasion, seq 128, batch 32, both tables
    python -m bench.dynamic_masking --whole_word    # --do_whole_word_mask for both
    python -m bench.dynamic_masking --batches=50 --repeats=2 --train_steps=2   # smoke run

Both are the datasets `run_pretraining.py` trains on (`PretrainingTask.input_dataset`): the record
path reads, shuffles and parses the TFRecords (`inputs.tfrecord_dataset`, records made once here
with --dupe_factor=1, not timed); the text path masks pairs in tf.data (`dynamic_masking`, its
pairs made before timing, as a run makes them at start-up; that start-up is printed).

Input: each round pulls --batches batches from each dataset, in turns. Training: a
`BertPretrainer` of --num_layers x --hidden_size (vocab 30522) under the run's `Trainer`
(`driver.build_trainer`, the original optimizer), one per input, each with one iterator for the
whole run; each round times --train_steps steps of each (the Trainer's loop function, ending
with the loss read back), in turns. The first round (tracing) is not timed. The tables have the
medians over --repeats rounds and the ratios text / records, from the medians and paired
(median of the per-round ratios, the steadier figure under background load).
"""
import os
import statistics
import tempfile
import time

from absl import flags

from bench import harness

flags.DEFINE_string("novel", "persuasion.txt", "Novel of data/austen/ used as the corpus.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
flags.DEFINE_integer("batch_size", 32, "Sequences per batch.")
flags.DEFINE_integer("batches", 200, "Batches per timed round.")
flags.DEFINE_integer("repeats", 5, "Timed rounds (medians).")
flags.DEFINE_bool("whole_word", False, "--do_whole_word_mask for both.")
flags.DEFINE_integer("train_steps", 10, "Training steps per timed round (0: input only).")
flags.DEFINE_integer("num_layers", 2, "Layers of the trained model.")
flags.DEFINE_integer("hidden_size", 128, "Hidden size of the trained model (64 per head).")
FLAGS = flags.FLAGS
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(ROOT, "vocab", "uncased_L-12_H-768_A-12", "vocab.txt")


def _rate(dataset, batches):
    iterator = iter(dataset)
    next(iterator)  # start-up (threads, first shuffle buffer) is not timed
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches * FLAGS.batch_size / (time.perf_counter() - start)


def _rounds(runs):
    """{name: [examples/s per round]}: each of `runs` (name -> () -> examples/s) called in turns."""
    return harness.time_rounds(runs, FLAGS.repeats, measure=lambda run: run())


def _table(title, rates):
    """Prints the table of `rates`; returns its figures."""
    print("\n| %s | examples/s (median of %d) |" % (title, FLAGS.repeats))
    print("|---|---|")
    for name, values in rates.items():
        print("| %s | %.0f |" % (name, statistics.median(values)))
    ratio, paired = harness.ratios(rates[TEXT], rates[RECORDS])
    print("\ntext / records: %.2fx (paired: %.2fx)" % (ratio, paired))
    return [{"table": title, "input": name, "examples_per_s": statistics.median(values),
             "rounds": values, "text_over_records": ratio, "paired": paired}
            for name, values in rates.items()]


def _trainers(tasks, folder):
    """{name: run()} training a small BertPretrainer from each task's dataset."""
    import tensorflow as tf

    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from modeling import BertConfig

    config = BertConfig(vocab_size=30522, hidden_size=FLAGS.hidden_size,
                        num_hidden_layers=FLAGS.num_layers,
                        num_attention_heads=max(1, FLAGS.hidden_size // 64),
                        intermediate_size=4 * FLAGS.hidden_size)
    runs = {}
    for name, task in tasks.items():
        run = RunConfig(os.path.join(folder, "train-%d" % len(runs)),
                        train_batch_size=FLAGS.batch_size, learning_rate=1e-4)
        trainer = driver.build_trainer(task, run, config, tf.distribute.get_strategy(), 10000, 100)
        iterator = iter(task.input_dataset(task.existing_records("train"), FLAGS.batch_size,
                                           is_training=True, seed=1, drop_remainder=True,
                                           repeat=True))
        steps = tf.constant(FLAGS.train_steps)

        def train(trainer=trainer, iterator=iterator):
            start = time.perf_counter()
            float(trainer._train_loop(iterator, steps)["loss"])
            return FLAGS.train_steps * FLAGS.batch_size / (time.perf_counter() - start)

        train()  # traces the step
        runs[name] = train
    return runs


RECORDS, TEXT = "records", "text (dynamic masking)"


def main(_):
    from bert_tasks.pretraining.data import corpus, dynamic_masking, pipeline
    from bert_tasks.pretraining.task import PretrainingTask

    print(harness.describe_machine(None, packages=("tensorflow", "keras")))
    folder = tempfile.mkdtemp(prefix="bench-dynamic-masking-")
    text = os.path.join(folder, "corpus.txt")
    with open(os.path.join(ROOT, "data", "austen", FLAGS.novel), encoding="utf-8") as f:
        with open(text, "w", encoding="utf-8") as out:
            out.write(corpus.gutenberg_to_corpus(f.read()))
    records = os.path.join(folder, "records.tfrecord")
    seq, pred = FLAGS.max_seq_length, FLAGS.max_predictions_per_seq
    pipeline.write_records(pipeline.Options(text, records, VOCAB, max_seq_length=seq,
                                            max_predictions_per_seq=pred, dupe_factor=1,
                                            do_whole_word_mask=FLAGS.whole_word))

    class Config:  # what settle reads of the model config
        vocab_size, type_vocab_size = 30522, 2

    record_task = PretrainingTask(seq, pred, None, records).settle({}, None, Config)
    text_task = PretrainingTask(seq, pred, None, text, dynamic_input=dynamic_masking.DynamicInput(
        dynamic_masking.MaskingOptions(vocab_file=VOCAB, do_whole_word_mask=FLAGS.whole_word),
        seq, pred))
    start = time.perf_counter()
    text_task = text_task.settle({}, None, Config)
    tasks = {RECORDS: record_task, TEXT: text_task}
    kwargs = dict(is_training=True, seed=1, drop_remainder=True, repeat=True)
    datasets = {name: task.input_dataset(task.existing_records("train"), FLAGS.batch_size,
                                         **kwargs) for name, task in tasks.items()}
    print("text start-up (read and tokenize %s, %d passes of pairs): %.1f s" % (
        FLAGS.novel, dynamic_masking.DynamicInput.PAIRING_PASSES, time.perf_counter() - start))
    shape = "seq %d, batch %d%s" % (seq, FLAGS.batch_size,
                                   ", whole words" if FLAGS.whole_word else "")
    figures = _table("input (%s)" % shape, _rounds({
        name: (lambda d=d: _rate(d, FLAGS.batches)) for name, d in datasets.items()}))
    if FLAGS.train_steps:
        figures += _table("training %d x %d (%s)" % (FLAGS.num_layers, FLAGS.hidden_size, shape),
                          _rounds(_trainers(tasks, folder)))
    harness.write_results("dynamic_masking", figures, packages=("tensorflow", "keras"))


if __name__ == "__main__":
    harness.run(main)
