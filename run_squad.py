"""Fine-tune BERT on SQuAD v1.1 / v2.0 and predict answers: the original `run_squad.py`, with
the official EM/F1 scores built in (`--do_eval`), on one device, many GPUs or many workers.

Outputs in output_dir: train.tf_record and checkpoints (training); eval.tf_record,
predictions.json, nbest_predictions.json, null_odds.json (v2.0) and eval_results.json (scores)
for prediction.
"""
import os
import sys

from absl import app, flags, logging

from bert_runner import flags as run_flags

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "vocab_file", "output_dir", "init_checkpoint", "do_lower_case")

flags.DEFINE_string("train_file", None, "SQuAD json for training. E.g., train-v1.1.json")
flags.DEFINE_string(
    "predict_file", None,
    "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
flags.DEFINE_integer(
    "max_seq_length", 384,
    "The maximum total input sequence length after WordPiece tokenization. Sequences longer than "
    "this will be truncated, and sequences shorter than this will be padded.")
flags.DEFINE_integer(
    "doc_stride", 128,
    "When splitting up a long document into chunks, how much stride to take between chunks.")
flags.DEFINE_integer(
    "max_query_length", 64,
    "The maximum number of tokens for the question. Questions longer than this will be truncated "
    "to this length.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_predict", False, "Whether to run eval on the dev set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predictions.")
run_flags.define_finetuning_flags()
flags.DEFINE_integer(
    "n_best_size", 20,
    "The total number of n-best predictions to generate in the nbest_predictions.json output file.")
flags.DEFINE_integer(
    "max_answer_length", 30,
    "The maximum length of an answer that can be generated. This is needed because the start and "
    "end predictions are not conditioned on one another.")
flags.DEFINE_bool(
    "verbose_logging", False,
    "If true, all of the warnings related to data processing will be printed. A number of warnings "
    "are expected for a normal SQuAD evaluation.")
flags.DEFINE_bool(
    "version_2_with_negative", False,
    "If true, the SQuAD examples contain some that do not have an answer.")
flags.DEFINE_float(
    "null_score_diff_threshold", 0.0,
    "If null_score - best_non_null is greater than the threshold predict null.")
flags.DEFINE_bool(
    "do_eval", None,
    "After --do_predict, score predictions.json with the official SQuAD EM/F1 (v2.0: also the "
    "HasAns/NoAns splits and best null thresholds, with null_odds.json) into "
    "output_dir/eval_results.json and the log. Default: score when predict_file has answers.")
run_flags.define_tpu_flags()
run_flags.define_run_flags()


def check_flags():
    """The original `validate_flags_or_throw`'s checks of the flags alone (no file is read)."""
    if not FLAGS.do_train and not FLAGS.do_predict:
        raise ValueError("At least one of `do_train` or `do_predict` must be True.")
    if FLAGS.do_train and not FLAGS.train_file:
        raise ValueError("If `do_train` is True, then `train_file` must be specified.")
    if FLAGS.do_predict and not FLAGS.predict_file:
        raise ValueError("If `do_predict` is True, then `predict_file` must be specified.")
    if FLAGS.do_predict and FLAGS.distribution_strategy == "multi_worker_mirrored":
        # Each worker would only see its own share of the predictions.
        raise ValueError("--do_predict runs on one worker: run it without "
                         "--distribution_strategy=multi_worker_mirrored")


def _log_features(title, summary):
    logging.info("***** Features for %s *****", title)
    logging.info("  Num orig examples = %d", summary.num_examples)
    logging.info("  Num split examples = %d", summary.num_features)


def main(_):
    from bert_tasks.squad import evaluate, examples as sq_examples, io_utils

    check_flags()
    # The SQuAD files are read before TensorFlow is loaded, so bad input fails in a second.
    if FLAGS.do_train:
        train_examples = sq_examples.read_squad_examples(
            FLAGS.train_file, is_training=True,
            version_2_with_negative=FLAGS.version_2_with_negative)
    if FLAGS.do_predict:
        gold_data = io_utils.read_json(FLAGS.predict_file)
        eval_examples = sq_examples.examples_from_data(
            gold_data, is_training=False, version_2_with_negative=FLAGS.version_2_with_negative,
            source=FLAGS.predict_file)
        scoring = evaluate.should_score(FLAGS.do_eval, gold_data, FLAGS.predict_file)

    from bert_runner import driver, startup
    from bert_runner.run_config import RunConfig
    from bert_tasks.squad import features as sq_features, task as sq_task

    run = RunConfig.from_flags()
    config = startup.load_config(run.bert_config_file, FLAGS.max_seq_length)
    sq_features.check_window_settings(FLAGS.max_seq_length, FLAGS.doc_stride,
                                      FLAGS.max_query_length)
    tokenizer = startup.load_tokenizer(run.vocab_file, run.do_lower_case, run.init_checkpoint,
                                       config, run.bert_config_file)
    task = sq_task.SquadTask(FLAGS.max_seq_length, sq_task.PostprocessOptions(
        FLAGS.n_best_size, FLAGS.max_answer_length, run.do_lower_case,
        FLAGS.version_2_with_negative, FLAGS.null_score_diff_threshold, FLAGS.verbose_logging))
    strategy = driver.prepare(task, run, config)
    window_args = dict(tokenizer=tokenizer, max_seq_length=FLAGS.max_seq_length,
                       doc_stride=FLAGS.doc_stride, max_query_length=FLAGS.max_query_length)

    train_split, predict_split = None, None
    num_train_steps, num_warmup_steps = 0, 0
    if run.do_train:
        num_train_steps, num_warmup_steps = run.training_steps(len(train_examples), "questions")
        sq_examples.shuffle_examples(train_examples)
        summary = sq_features.write_features(
            train_examples, filename=os.path.join(run.output_dir, "train.tf_record"),
            is_training=True, **window_args)
        _log_features("training", summary)
        del train_examples
        train_split = driver.Split([summary.filename], summary.num_features, run.train_batch_size)
    if run.do_predict:
        summary = sq_features.write_features(
            eval_examples, filename=os.path.join(run.output_dir, "eval.tf_record"),
            is_training=False, **window_args)
        _log_features("predictions", summary)
        task.prediction_set = (eval_examples, summary.windows)
        predict_split = driver.Split([summary.filename], summary.num_features,
                                     run.predict_batch_size)
    result = driver.run_task(task, run, config, train_split, num_train_steps, num_warmup_steps,
                             predict_split=predict_split, strategy=strategy)
    if run.do_predict and scoring:
        metrics = evaluate.score_predictions(gold_data, result.predictions,
                                             FLAGS.version_2_with_negative, FLAGS.predict_file)
        logging.info("***** SQuAD scores (official evaluation) *****")
        for key, value in metrics.items():
            logging.info("  %s = %s", key, value)
        evaluate.write_metrics(os.path.join(run.output_dir, "eval_results.json"), metrics)


def run(argv):
    """`main`, with bad SQuAD input reported as one line naming the file and JSON path."""
    from bert_tasks.squad.io_utils import SquadFormatError

    try:
        main(argv)
    except SquadFormatError as e:
        sys.exit("Error: %s" % e)


if __name__ == "__main__":
    flags.mark_flag_as_required("vocab_file")
    flags.mark_flag_as_required("bert_config_file")
    flags.mark_flag_as_required("output_dir")
    app.run(run)
