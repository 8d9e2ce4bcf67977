"""The paper's fine-tuning protocol on SQuAD as one command: run_squad at each learning rate (and
epochs, batch size, restart) of a grid, the best dev F1 chosen (v2.0: at its best no-answer
threshold), and the chosen model's predictions (`experiments.squad_grid`).

    python run_squad_grid.py --train_file=$SQUAD_DIR/train-v1.1.json \\
      --predict_file=$SQUAD_DIR/dev-v1.1.json --vocab_file=$BERT_BASE_DIR/vocab.txt \\
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \\
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --output_dir=/tmp/squad_grid

Killed and started again, it continues from the finished settings; `--print_commands` and
`--select_only` spread the grid over machines (docs/run_glue.md).
"""
import os
import time

from absl import flags, logging

from bert_runner import cli, flags as run_flags
from bert_tasks.squad import flags as squad_flags
from experiments import protocol

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "vocab_file", "output_dir", "init_checkpoint",
                            "do_lower_case")
flags.DEFINE_string("train_file", None, "SQuAD json for training, e.g. train-v1.1.json.")
flags.DEFINE_string(
    "predict_file", None,
    "The SQuAD dev json with its answers, e.g. dev-v1.1.json: each setting is scored on it.")
flags.DEFINE_bool("version_2_with_negative", False,
                  "SQuAD 2.0: the data has questions without an answer; the choice is on the F1 "
                  "at the best no-answer threshold.")
squad_flags.define_window_flags()
squad_flags.define_answer_flags()
# The original README's SQuAD v1.1 run (2 epochs) at the paper's GLUE learning rates.
protocol.define_protocol_flags(learning_rates=["5e-5", "4e-5", "3e-5", "2e-5"], epochs=["2"],
                               batch_sizes=["32"])


def main(_):
    from bert_runner.run_config import RunConfig
    from experiments import squad_grid

    started = time.perf_counter()
    files = squad_grid.SquadFiles(**{name: FLAGS[name].value for name in (
        "train_file", "predict_file", "version_2_with_negative", "max_seq_length", "doc_stride",
        "max_query_length", "n_best_size", "max_answer_length")})
    run = RunConfig.from_flags()
    grid = protocol.grid_of_flags(FLAGS)
    if FLAGS.print_commands:
        for setting in protocol.grid([squad_grid.TASK], **grid):
            print(squad_grid.command(setting, run, files))
        return
    choice, text = squad_grid.run_squad_grid(files, run, select_only=FLAGS.select_only, **grid)
    print(text)
    logging.info("run_squad_grid.py done in %.1f s", time.perf_counter() - started)
    protocol.check_not_diverged(
        [choice], lambda task: os.path.join(FLAGS.output_dir, squad_grid.PREDICTIONS, ""))


if __name__ == "__main__":
    for name in ("train_file", "predict_file", "output_dir"):
        flags.mark_flag_as_required(name)
    # As run_classifier.py's: a Hugging Face directory or a released ELECTRA folder as
    # --init_checkpoint holds its config (and vocabulary).
    run_flags.require_model_files("vocab_file", "bert_config_file")
    cli.run_script(main)
