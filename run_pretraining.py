"""Pre-train BERT (masked LM + next sentence prediction) from TFRecords: the original
`run_pretraining.py`, on one device, many GPUs, many workers or a TPU, resumable.

The first record of each input file is checked against the flags and bert_config.json before
anything else (`bert_tasks.pretraining.data.validation`); records without next_sentence_labels (made with
`create_pretraining_data.py --next_sentence_prediction=false`) train the masked LM alone.
"""
from absl import flags

from bert_runner import cli, flags as run_flags
from bert_tasks.pretraining.data import dynamic_masking

FLAGS = flags.FLAGS

run_flags.define_bert_flags(
    "bert_config_file", "output_dir", "init_checkpoint", "vocab_file", "do_lower_case")

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
flags.DEFINE_enum(
    "pretraining_objective", "mlm", ["mlm", "ltr"],
    "mlm: the original's masked LM (with next sentence prediction as the records say). ltr: a "
    "left-to-right language model (the paper's 'LTR & No NSP', Table 5; OpenAI GPT's "
    "objective): causal self-attention, every next token predicted, on records of "
    "create_pretraining_data.py --pretraining_objective=ltr. Recorded in "
    "output_dir/bert_config.json, from which every script builds the same model.")
run_flags.define_tpu_flags()
run_flags.define_run_flags()
dynamic_masking.define_flags()


def run():
    """Runs what the flags ask for and returns the `Trainer` (its `.model` holds the weights)."""
    from bert_tasks.pretraining.ltr_task import LtrPretrainingTask
    from bert_tasks.pretraining.task import PretrainingTask
    from bert_runner import driver
    from bert_runner.run_config import RunConfig

    if FLAGS.pretraining_objective == "ltr":
        task = LtrPretrainingTask(FLAGS.max_seq_length, FLAGS.input_file, FLAGS.num_train_steps,
                                  FLAGS.num_warmup_steps, FLAGS.max_eval_steps)
    else:
        task = PretrainingTask(FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
                               FLAGS.next_sentence_prediction, FLAGS.input_file,
                               FLAGS.num_train_steps, FLAGS.num_warmup_steps,
                               FLAGS.max_eval_steps)
    masking = dynamic_masking.MaskingOptions.from_flags(FLAGS)
    if masking is not None:  # --input_format=text|unmasked_records: masks made in tf.data
        task.dynamic_input = dynamic_masking.DynamicInput(
            masking, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq)
    return driver.run(task, RunConfig.from_flags()).trainer


def main(_):
    run()


if __name__ == "__main__":
    flags.mark_flag_as_required("input_file")
    run_flags.require_model_files("bert_config_file")
    flags.mark_flag_as_required("output_dir")
    cli.run(main)
