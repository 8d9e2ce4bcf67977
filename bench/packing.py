r"""Training in three layouts: the padded grid, the real tokens' rows, and packed rows; the share
of padding in each, and the throughput in sequences and real tokens per second.

    python -m bench.packing                                    # pre-training, 128 and 512 tokens
    python -m bench.packing --task=classifier --seq_lengths=128             # fine-tuning
    python -m bench.packing --seq_lengths=128 --steps=2 --repeats=1      # smoke run

--task=pretraining: for each --seq_lengths S, create_pretraining_data's pipeline makes records
from data/austen (the six novels, --dupe_factor=1, max_predictions_per_seq = 0.15 S) twice: the
original's (one pair a row) and packed (`--max_sequences_per_row`,
`bert_tasks.pretraining.data.packing`); run_pretraining.py's training step trains on them.
--task=classifier: run_classifier's records of a "which novel?" task (sentences of 8 to 40 words
from Pride and Prejudice and Emma, `demo_data.which_novel`), unpacked and packed as
`run_classifier.py --max_sequences_per_row` packs them (`bert_runner.packing.RecordPacker`);
run_classifier's training step trains on them.
Each step runs on --tokens_per_batch / S rows (`Trainer`, the original optimizer, float32), in
three layouts, one after another in each round:
  grid      unpacked records, every position computed (pre-training's default, and what a TPU
            or --jit_compile runs unpacked);
  real rows unpacked records, the encoder on the real tokens' rows only (fine-tuning's CPU
            default; not under XLA, whose shapes must be static);
  packed    packed records on the grid (static shapes: what a TPU or --jit_compile runs).
A timed call trains on --steps batches spread evenly over each records file (each call starts
from the first of them again), so every layout sees its own records' real mix of lengths: the
table prints the timed batches' real tokens per sequence, to set beside the file's. (A file's
first batches alone are no sample of it: the previous version, which timed them, measured
packed pairs of 127 word-pieces at 512 tokens, its real tokens/s over its pairs/s, where the
file's pairs average 88.) Each row's time is the Trainer's own wall
time of --steps steps (after a first untimed call that traces); the table shows medians over
--repeats rounds, and each layout's sequences/s and real tokens/s against the grid's.
"""
import glob
import os
import statistics
import tempfile

from absl import flags, logging

from bench import harness

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIGS = {
    "mini": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    "small": dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048),
    "tiny": dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=64),  # tests/test_bench.py's smoke run
}
LAYOUTS = ("grid", "real rows", "packed")

flags.DEFINE_enum("task", "pretraining", ["pretraining", "classifier"], "What trains.")
flags.DEFINE_list("seq_lengths", ["128", "512"], "Record lengths (max_seq_length) to compare.")
flags.DEFINE_string("input", "data/austen/*.txt", "--task=pretraining: glob of the texts "
                    "(relative: to the project root) its records are made from.")
flags.DEFINE_enum("config", "mini", sorted(CONFIGS), "Encoder shape (the fixture vocabulary).")
flags.DEFINE_integer("max_sequences_per_row", 4, "Sequences a packed row may hold.")
flags.DEFINE_integer("classifier_sentences", 2000,
                     "--task=classifier: sentences of each of the two novels.")
flags.DEFINE_integer("tokens_per_batch", 4096, "Rows a step = this / the sequence length.")
flags.DEFINE_integer("steps", 16, "Training steps per timed call, each on its own batch of "
                     "records, the batches spread evenly over the file.")
flags.DEFINE_integer("repeats", 3, "Timed rounds; the table shows medians.")
flags.DEFINE_integer("num_threads", os.cpu_count(), "TensorFlow intra-op and inter-op threads.")
FLAGS = flags.FLAGS


VOCAB = os.path.join(ROOT, "vocab", "uncased_L-12_H-768_A-12", "vocab.txt")


def make_task(seq_length, workdir):
    """The classifier task at `seq_length` (None for pre-training) and the records' paths
    {"unpacked": .., "packed": ..}."""
    paths = {name: os.path.join(workdir, f"{name}_{seq_length}.tfrecord")
             for name in ("unpacked", "packed")}
    if FLAGS.task == "classifier":
        return make_classifier(seq_length, workdir, paths), paths
    from bert_tasks.pretraining.data import pipeline

    options = dict(input_file=",".join(sorted(glob.glob(os.path.join(ROOT, FLAGS.input)))),
                   vocab_file=VOCAB, max_seq_length=seq_length, dupe_factor=1,
                   max_predictions_per_seq=round(0.15 * seq_length))
    for name, per_row in (("unpacked", 1), ("packed", FLAGS.max_sequences_per_row)):
        pipeline.write_records(pipeline.Options(
            output_file=paths[name], max_sequences_per_row=per_row, **options))
    return None, paths  # a pre-training task for each file: `layout_runner`


def make_classifier(seq_length, workdir, paths):
    """run_classifier's SST-2-layout task of "which novel?" sentences, its training records
    written to `paths` unpacked and packed."""
    from bert_runner import packing, tfrecords
    from demo_data.which_novel import novel_task_tsvs
    from bert_tasks.classifier.task import ClassifierTask
    from vocab.tokenization import FullTokenizer

    data_dir = os.path.join(workdir, "which_novel")
    os.makedirs(data_dir, exist_ok=True)
    files, _ = novel_task_tsvs((FLAGS.classifier_sentences, 0, 0))
    with open(os.path.join(data_dir, "train.tsv"), "w", encoding="utf-8") as f:
        f.write(files["train.tsv"])
    task = ClassifierTask("sst-2", seq_length, data_dir)
    tokenizer = FullTokenizer(VOCAB, do_lower_case=True)
    examples = task.read_examples("train")
    tfrecords.write_records(paths["unpacked"],
                            task.records(examples, "train", tokenizer, None).records)
    packer = packing.RecordPacker(task.feature_spec(True), seq_length, FLAGS.max_sequences_per_row)
    tfrecords.write_records(paths["packed"],
                            packer.pack(task.records(examples, "train", tokenizer, None).records))
    return task


def padding_share(path, seq_length):
    """(rows, sequences, real tokens, padding share) of a records file."""
    import numpy as np
    import tensorflow as tf

    rows = pairs = tokens = 0
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        features = tf.train.Example.FromString(record).features.feature
        tokens += int(np.sum(features["input_mask"].int64_list.value))
        starts = features["sequence_starts"].int64_list.value if "sequence_starts" in features else [0]
        pairs += 1 + sum(1 for s in starts[1:] if s)
        rows += 1
    return rows, pairs, tokens, 1.0 - tokens / (rows * seq_length)


def layout_runner(task, layout, path, seq_length, vocab_size, workdir):
    """`run() -> (seconds, sequences, real tokens)` of --steps training steps in `layout`."""
    import numpy as np
    import tensorflow as tf

    from modeling import BertConfig, EncoderModes, families
    from modeling.optimization import create_optimizer
    from bert_runner.trainer import Trainer

    packed = {"sequences_per_row": FLAGS.max_sequences_per_row} if layout == "packed" else {}
    if task is None:
        from bert_tasks.pretraining.task import PretrainingTask

        task = PretrainingTask(seq_length, round(0.15 * seq_length), input_file=path).settle(
            {}, None, BertConfig(vocab_size=vocab_size))
        packed = {}  # it reads its records' packing itself
    rows = FLAGS.tokens_per_batch // seq_length
    # The batches a timed call trains on, spread evenly over the file: its first batches alone
    # (one novel's opening chapters) hold pairs of another mix of lengths than the whole file.
    every = list(task.input_dataset([path], rows, is_training=False, drop_remainder=True,
                                    **packed).as_numpy_iterator())
    picks = np.linspace(0, len(every) - 1, FLAGS.steps).round().astype(int)
    batches = [every[i] for i in picks]  # a file of fewer batches repeats some
    # Pre-training computes the grid unless told (`skip_padding`); fine-tuning skips padding
    # unless its shapes must be static (`static_shapes`, as under XLA).
    config = BertConfig(vocab_size=vocab_size, max_position_embeddings=512,
                        **CONFIGS[FLAGS.config])
    modes = EncoderModes(static_shapes=layout != "real rows")
    model = (families.build_model("pretrainer", config, skip_padding=layout == "real rows",
                                  modes=modes)
             if FLAGS.task == "pretraining" else task.build_model(config, modes=modes))
    trainer = Trainer(tf.distribute.get_strategy(), model,
                      create_optimizer("adamw", 1e-4, 10000, 100), task.loss,
                      tempfile.mkdtemp(dir=workdir), global_batch_size=rows,
                      steps_per_loop=FLAGS.steps, save_checkpoints_steps=10 ** 9)
    stacked = {k: np.stack([b[k] for b in batches]) for k in batches[0]}
    pairs = sum(int(np.sum(task_pairs(b))) for b in batches)
    tokens = sum(int(np.sum(b["input_mask"])) for b in batches)

    def dataset_fn(context):
        return tf.data.Dataset.from_tensor_slices(stacked).repeat()

    def run():
        trainer.train(dataset_fn, trainer.step + FLAGS.steps, checkpoint_iterator=False)
        return trainer.history[-1].seconds, pairs, tokens

    run.tokens_per_sequence = tokens / pairs
    return run


def task_pairs(batch):
    """Sequences in each row of a batch: 1, or a packed row's filled slots."""
    import numpy as np

    from bert_runner.packing import filled_slots

    if "sequence_starts" not in batch:
        return np.ones(len(batch["input_ids"]))
    return np.asarray(filled_slots(batch["sequence_starts"])).sum(axis=1)


def main(_):
    import tensorflow as tf

    logging.set_verbosity(logging.WARNING)
    tf.config.threading.set_intra_op_parallelism_threads(FLAGS.num_threads)
    tf.config.threading.set_inter_op_parallelism_threads(FLAGS.num_threads)
    print(harness.describe_machine(FLAGS.num_threads, packages=("tensorflow", "keras")))
    print(f"{FLAGS.task}: BERT-{FLAGS.config.capitalize()} {CONFIGS[FLAGS.config]}, float32, "
          f"{FLAGS.tokens_per_batch} token slots a step, packed rows of up to "
          f"{FLAGS.max_sequences_per_row} sequences")
    vocab_size = sum(1 for _ in open(VOCAB, encoding="utf-8"))
    figures = []
    with tempfile.TemporaryDirectory() as workdir:
        for seq_length in map(int, FLAGS.seq_lengths):
            task, paths = make_task(seq_length, workdir)
            print(f"\nmax_seq_length {seq_length} ({FLAGS.tokens_per_batch // seq_length} rows a "
                  "step):")
            for name, path in paths.items():
                rows, pairs, tokens, share = padding_share(path, seq_length)
                print(f"  {name:9s} records: {rows:6d} rows, {pairs:6d} sequences, "
                      f"{tokens / pairs:6.1f} tokens each, padding {100 * share:5.1f}%")
            runners = {layout: layout_runner(task, layout, paths["packed" if layout == "packed"
                                                                  else "unpacked"],
                                             seq_length, vocab_size, workdir)
                       for layout in LAYOUTS}
            for run in runners.values():
                run()  # traces
            timed = harness.time_rounds(runners, FLAGS.repeats, measure=lambda run: run())
            rates = {layout: (statistics.median(p / s for s, p, _ in values),
                              statistics.median(t / s for s, _, t in values))
                     for layout, values in timed.items()}
            print(f"  {'layout':9s} {'seqs/s':>9s} {'tokens/s':>10s} {'vs grid':>8s} "
                  f"{'timed tokens each':>18s}")
            for layout, (pairs, tokens) in rates.items():
                print(f"  {layout:9s} {pairs:9.1f} {tokens:10.0f} "
                      f"{pairs / rates['grid'][0]:7.2f}x {runners[layout].tokens_per_sequence:18.1f}")
                figures.append({"task": FLAGS.task, "max_seq_length": seq_length,
                                "layout": layout, "seqs_per_s": pairs, "tokens_per_s": tokens,
                                "vs_grid": pairs / rates["grid"][0],
                                "tokens_per_sequence": runners[layout].tokens_per_sequence})
    harness.write_results("packing", figures, FLAGS.num_threads, ("tensorflow", "keras"))


if __name__ == "__main__":
    harness.run(main)
