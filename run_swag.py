"""Fine-tune BERT on SWAG (multiple choice, paper section 4.4): four `[CLS] sent1 [SEP] sent2
ending_i [SEP]` sequences per example, one score vector on the pooled output, softmax over the
four. The paper's settings are the defaults (learning rate 2e-5, batch 16, 3 epochs, 128 tokens);
flags, output files and checkpoints in the style of the original run_classifier.py."""
from absl import flags

from bert_runner import cli, flags as run_flags
from bert_runner.flag_ranges import PAIR, at_least, ranged

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "vocab_file", "output_dir", "init_checkpoint",
                            "do_lower_case")
flags.DEFINE_string(
    "data_dir", None,
    "The input data dir. Should contain the SWAG .csv files: train.csv (--do_train), val.csv "
    "(--do_eval), test.csv (--do_predict).")
ranged(flags.DEFINE_integer(
    "max_seq_length", 128,
    "The maximum total input sequence length after WordPiece tokenization, per choice. Sequences "
    "longer than this will be truncated, and sequences shorter than this will be padded."),
    at_least(3, PAIR))
# The paper's SWAG batch size and learning rate (section 4.4); a batch holds examples of four
# sequences each.
run_flags.define_split_flags(
    train_batch_size=16, dev="the dev set (val.csv)", test="the test set (test.csv)")
run_flags.define_finetuning_flags(learning_rate=2e-5)
run_flags.define_tpu_flags()
run_flags.define_run_flags()
run_flags.define_seeds_flag()


def main(_):
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.swag.task import SwagTask

    driver.run_command(SwagTask(FLAGS.max_seq_length, FLAGS.data_dir), RunConfig.from_flags(),
               seeds=run_flags.seeds_of(FLAGS))


if __name__ == "__main__":
    for name in ("data_dir", "output_dir"):
        flags.mark_flag_as_required(name)
    run_flags.require_model_files("vocab_file", "bert_config_file")
    cli.run_script(main)
