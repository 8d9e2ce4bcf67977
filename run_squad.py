"""Fine-tune BERT on SQuAD v1.1 / v2.0 and predict answers: the original `run_squad.py`, with
the official EM/F1 scores built in (`--do_eval`), on one device, many GPUs or many workers.

Outputs in output_dir: train.tf_record and checkpoints (training); eval.tf_record,
predictions.json, nbest_predictions.json, null_odds.json (v2.0) and eval_results.json (scores)
for prediction.
"""

from absl import flags

from bert_runner import cli, flags as run_flags
from bert_runner.flag_ranges import TRAINING, ModeRule, at_least, mode, ranged
from bert_tasks.squad import flags as squad_flags

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "vocab_file", "output_dir", "init_checkpoint", "do_lower_case")

flags.DEFINE_string("train_file", None, "SQuAD json for training. E.g., train-v1.1.json")
flags.DEFINE_string(
    "predict_file", None,
    "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json")
squad_flags.define_window_flags()
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_predict", False, "Whether to run eval on the dev set.")
ranged(flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training."),
       at_least(1).when(*TRAINING))
ranged(flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predictions."),
       at_least(1).when("do_predict"))
run_flags.define_finetuning_flags()
squad_flags.define_answer_flags()
flags.DEFINE_bool(
    "verbose_logging", False,
    "If true, all of the warnings related to data processing will be printed. A number of warnings "
    "are expected for a normal SQuAD evaluation.")
flags.DEFINE_bool(
    "version_2_with_negative", False,
    "If true, the SQuAD examples contain some that do not have an answer.")
flags.DEFINE_float(
    "null_score_diff_threshold", None,
    "If null_score - best_non_null is greater than the threshold predict null. Default: the "
    "model's: 0.0 (the original BERT's), -2.75 for ELECTRA's head (the original ELECTRA's "
    "qa_na_threshold, on its answerable logit).")
flags.DEFINE_bool(
    "do_eval", None,
    "After --do_predict, score predictions.json with the official SQuAD EM/F1 (v2.0: also the "
    "HasAns/NoAns splits and best null thresholds, with null_odds.json) into "
    "output_dir/eval_results.json and the log. Default: score when predict_file has answers.")
run_flags.define_tpu_flags()
run_flags.define_run_flags()
mode(ModeRule(("null_score_diff_threshold",), ("version_2_with_negative",), bool,
              "with --version_2_with_negative", "v1.1 answers every question"))


def main(_):
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.squad.task import PostprocessOptions, SquadTask

    if FLAGS.do_predict and FLAGS.distribution_strategy == "multi_worker_mirrored":
        # Each worker would only see its own share of the predictions.
        raise ValueError("--do_predict runs on one worker: run it without "
                         "--distribution_strategy=multi_worker_mirrored")
    options = PostprocessOptions(
        FLAGS.n_best_size, FLAGS.max_answer_length, FLAGS.do_lower_case,
        FLAGS.version_2_with_negative, FLAGS.null_score_diff_threshold, FLAGS.verbose_logging)
    task = SquadTask(FLAGS.max_seq_length, options, FLAGS.train_file, FLAGS.predict_file,
                     FLAGS.doc_stride, FLAGS.max_query_length, FLAGS.do_eval)
    driver.run_command(task, RunConfig.from_flags())


if __name__ == "__main__":
    run_flags.require_model_files("vocab_file", "bert_config_file")
    flags.mark_flag_as_required("output_dir")
    cli.run_script(main)
