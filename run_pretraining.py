"""Pre-train BERT (masked LM + next sentence prediction) from TFRecords: the original
`run_pretraining.py`, on one device, many GPUs, many workers or a TPU, resumable.

The first record of each input file is checked against the flags and bert_config.json before
anything else (`bert_tasks.pretraining.data.validation`); records without next_sentence_labels (made with
`create_pretraining_data.py --next_sentence_prediction=false`) train the masked LM alone.
"""
import sys

from absl import app, flags, logging

from bert_runner import flags as run_flags

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "output_dir", "init_checkpoint")

flags.DEFINE_string("input_file", None, "Input TF example files (can be a glob or comma separated).")
flags.DEFINE_integer(
    "max_seq_length", 128,
    "The maximum total input sequence length after WordPiece tokenization. Sequences longer than "
    "this will be truncated, and sequences shorter than this will be padded. Must match data generation.")
flags.DEFINE_integer(
    "max_predictions_per_seq", 20,
    "Maximum number of masked LM predictions per sequence. Must match data generation.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
flags.DEFINE_integer("iterations_per_loop", 1000, "How many steps to make in each estimator call.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval steps.")
flags.DEFINE_bool(
    "next_sentence_prediction", None,
    "Train (and evaluate) the next sentence prediction head. Default: when the records have "
    "next_sentence_labels. False: the masked LM alone (the paper's 'No NSP' ablation; make its "
    "data with create_pretraining_data.py --next_sentence_prediction=false).")
run_flags.define_tpu_flags()
run_flags.define_run_flags()


def run():
    """Runs what the flags ask for and returns the `Trainer` (its `.model` holds the weights)."""
    from bert_tasks.pretraining.task import PretrainingTask
    from bert_tasks.pretraining.data.reading import expand_input_files
    from bert_tasks.pretraining.data.validation import check_records
    from bert_runner import driver, startup
    from bert_runner.run_config import RunConfig

    run = RunConfig.from_flags()
    if not run.do_train and not run.do_eval:
        raise ValueError("At least one of `do_train` or `do_eval` must be True.")
    config = startup.load_config(run.bert_config_file, FLAGS.max_seq_length)
    files = expand_input_files(FLAGS.input_file)
    logging.info("*** Input Files *** %d files: %s", len(files), ", ".join(files[:10]))
    records = check_records(files, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
                            config.vocab_size, config.type_vocab_size,
                            next_sentence=FLAGS.next_sentence_prediction)
    next_sentence = records.next_sentence and FLAGS.next_sentence_prediction is not False
    if records.next_sentence and not next_sentence:
        logging.warning("--next_sentence_prediction=false on records with next_sentence_labels: "
                        "the labels are ignored, but half the pairs still have a random B. The "
                        "paper's 'No NSP' data: create_pretraining_data.py "
                        "--next_sentence_prediction=false")
    logging.info("Next sentence prediction: %s", "on" if next_sentence else "off (masked LM only)")
    task = PretrainingTask(FLAGS.max_seq_length, FLAGS.max_predictions_per_seq, next_sentence)
    strategy = driver.prepare(task, run, config)
    # The records are read as a stream: their number is not counted.
    train = driver.Split(files, None, run.train_batch_size) if run.do_train else None
    evaluation = (driver.Split(files, None, run.eval_batch_size, repeat=True,
                               max_batches=FLAGS.max_eval_steps) if run.do_eval else None)
    return driver.run_task(task, run, config, train, FLAGS.num_train_steps,
                           FLAGS.num_warmup_steps, eval_split=evaluation, strategy=strategy).trainer


def main(_):
    from bert_tasks.pretraining.data.reading import InputError

    try:
        run()
    except InputError as e:
        logging.error("%s", e)
        sys.exit(2)


if __name__ == "__main__":
    flags.mark_flag_as_required("input_file")
    flags.mark_flag_as_required("bert_config_file")
    flags.mark_flag_as_required("output_dir")
    app.run(main)
