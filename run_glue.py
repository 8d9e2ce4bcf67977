"""The paper's GLUE protocol as one command: every task fine-tuned at each learning rate (and
epochs, batch size, restart) of a grid, the best on the dev set chosen per task, its test set
predicted, and the GLUE server's submission files written (`experiments.glue`).

    python run_glue.py --glue_dir=$GLUE_DIR --vocab_file=$BERT_BASE_DIR/vocab.txt \\
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \\
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --output_dir=/tmp/glue_base

Killed and started again, it continues from the finished settings. `--print_commands` prints
each setting as a run_classifier.py command (one per line, for a job array), and the command
again with `--select_only` then chooses among their finished runs, training nothing.
"""
import time

from absl import flags, logging

from bert_runner import cli, flags as run_flags
from bert_runner.flag_ranges import PAIR, at_least, ranged
from experiments import glue, protocol

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "vocab_file", "output_dir", "init_checkpoint",
                            "do_lower_case")
flags.DEFINE_string(
    "glue_dir", None,
    "The GLUE download (download_glue_data.py's layout): one folder per task (CoLA, SST-2, MRPC, "
    "STS-B, QQP, MNLI, QNLI, RTE, WNLI) and diagnostic/ (AX, predicted by the MNLI model).")
flags.DEFINE_list(
    "tasks", list(glue.GLUE),
    "The GLUE tasks to run, lower-case as run_classifier's --task_name. wnli is not fine-tuned: "
    "its submission predicts the training set's majority class, as the paper's did.")
ranged(flags.DEFINE_integer("max_seq_length", 128, "As run_classifier.py's."), at_least(3, PAIR))
ranged(flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval."), at_least(1))
protocol.define_protocol_flags(learning_rates=["5e-5", "4e-5", "3e-5", "2e-5"], epochs=["3"],
                               batch_sizes=["32"])


def main(_):
    from bert_runner.run_config import RunConfig

    started = time.perf_counter()
    tasks = [task.strip().lower() for task in FLAGS.tasks if task.strip()]
    glue.check_tasks(tasks, FLAGS.glue_dir)
    grid = protocol.grid_of_flags(FLAGS)
    run = RunConfig.from_flags()
    if FLAGS.print_commands:
        for setting in glue.grid(tasks, **grid):
            print(glue.command(setting, run, FLAGS.glue_dir, FLAGS.max_seq_length))
        return
    choices, text = glue.run_glue(tasks, FLAGS.glue_dir, FLAGS.max_seq_length, run,
                                  select_only=FLAGS.select_only, **grid)
    print(text)
    logging.info("run_glue.py done in %.1f s", time.perf_counter() - started)
    protocol.check_not_diverged(choices.values(),
                                lambda task: "/".join(glue.submission_names(task)))


if __name__ == "__main__":
    for name in ("glue_dir", "output_dir"):
        flags.mark_flag_as_required(name)
    # As run_classifier.py's: a Hugging Face directory or a released ELECTRA folder as
    # --init_checkpoint holds its config (and vocabulary).
    run_flags.require_model_files("vocab_file", "bert_config_file")
    cli.run_script(main)
