r"""Input throughput of run_pretraining's dynamic masking (--input_format=text) against the record
path (create_pretraining_data's masked records), same text, same shapes, one process.

    python bench/dynamic_masking.py                 # Persuasion, seq 128, batch 32
    python bench/dynamic_masking.py --batches=50 --repeats=2     # smoke run

Both are the datasets `run_pretraining.py` trains on (`PretrainingTask.input_dataset`): the record
path reads, shuffles and parses the TFRecords (`inputs.tfrecord_dataset`, records made once here
with --dupe_factor=1, not timed); the text path masks pairs in tf.data (`dynamic_masking`, its
pairs made before timing, as a run makes them at start-up). Each round pulls --batches batches
from each, in turns; the table has the medians and the ratio text / records.
"""
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

flags.DEFINE_string("novel", "persuasion.txt", "Novel of data/austen/ used as the corpus.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
flags.DEFINE_integer("batch_size", 32, "Sequences per batch.")
flags.DEFINE_integer("batches", 200, "Batches per timed round.")
flags.DEFINE_integer("repeats", 5, "Timed rounds (medians).")
flags.DEFINE_bool("whole_word", False, "--do_whole_word_mask for both.")
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


def main(_):
    from bert_tasks.pretraining.data import corpus, dynamic_masking, pipeline
    from bert_tasks.pretraining.task import PretrainingTask

    folder = tempfile.mkdtemp(prefix="bench-dynamic-masking-")
    text = os.path.join(folder, "corpus.txt")
    with open(os.path.join(ROOT, "data", "austen", FLAGS.novel), encoding="utf-8") as f:
        with open(text, "w", encoding="utf-8") as out:
            out.write(corpus.gutenberg_to_corpus(f.read()))
    records = os.path.join(folder, "records.tfrecord")
    seq, pred = FLAGS.max_seq_length, FLAGS.max_predictions_per_seq
    pipeline.run(pipeline.Options(text, records, VOCAB, max_seq_length=seq,
                                  max_predictions_per_seq=pred, dupe_factor=1,
                                  do_whole_word_mask=FLAGS.whole_word))

    class Config:  # what existing_records reads of the model config
        vocab_size, type_vocab_size = 30522, 2

    record_task = PretrainingTask(seq, pred, None, records)
    record_task.existing_records("train", Config)
    text_task = PretrainingTask(seq, pred, None, text)
    text_task.dynamic_input = dynamic_masking.DynamicInput(dynamic_masking.MaskingOptions(
        vocab_file=VOCAB, do_whole_word_mask=FLAGS.whole_word), seq, pred)
    text_task.existing_records("train", Config)
    kwargs = dict(is_training=True, seed=1, drop_remainder=True, repeat=True)
    datasets = {"records": record_task.input_dataset([records], FLAGS.batch_size, **kwargs),
                "text (dynamic masking)": text_task.input_dataset([text], FLAGS.batch_size,
                                                                  **kwargs)}
    rates = {name: [] for name in datasets}
    for _ in range(FLAGS.repeats):
        for name, dataset in datasets.items():
            rates[name].append(_rate(dataset, FLAGS.batches))
    print("\n| input (seq %d, batch %d%s) | examples/s (median of %d) |" % (
        seq, FLAGS.batch_size, ", whole words" if FLAGS.whole_word else "", FLAGS.repeats))
    print("|---|---|")
    for name, values in rates.items():
        print("| %s | %.0f |" % (name, statistics.median(values)))
    ratio = statistics.median(rates["text (dynamic masking)"]) / statistics.median(rates["records"])
    print("\ntext / records: %.2fx" % ratio)


if __name__ == "__main__":
    app.run(main)
