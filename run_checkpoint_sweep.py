"""The paper's Figure 2 (Appendix C.1) as a command: fine-tune and evaluate the checkpoints of
one or more pre-training runs on a run_classifier task, and write the table (CSV) and the figure
(PNG: the metric against pre-training steps, one line per run and objective), accuracy beside
the dev set's majority baseline.

    python run_checkpoint_sweep.py --pretraining_dirs=pt_mlm,pt_ltr --checkpoint_every=1000 \\
      --task_name=MNLI --data_dir=$GLUE_DIR/MNLI --vocab_file=vocab.txt \\
      --output_dir=/tmp/figure2

Each pre-training dir is a run_pretraining.py output_dir (its ckpt-<step> checkpoints and the
bert_config.json that records its objective). run_pretraining.py keeps only the last
--keep_checkpoint_max (default 5) of the checkpoints it saves every --save_checkpoints_steps, so
pre-train with enough kept for the sweep, e.g. --save_checkpoints_steps=1000
--keep_checkpoint_max=100 for 100k steps (docs/run_pretraining.md, "Figure 2"). The figure
needs matplotlib (requirements-plot.txt); the CSV is written without it. Logic:
`experiments.figure2`.
"""
from absl import flags

from bert_runner import cli, flags as run_flags
from bert_runner.flag_ranges import PAIR, at_least, ranged, seed

FLAGS = flags.FLAGS

flags.DEFINE_list("pretraining_dirs", None,
                  "Comma-separated run_pretraining.py output_dirs, one line of the figure each.")
ranged(flags.DEFINE_integer("checkpoint_every", None,
                            "Fine-tune the checkpoints whose step is a multiple of this (default: "
                            "every checkpoint in each dir)."), at_least(1))
flags.DEFINE_list("checkpoint_steps", None,
                  "Comma-separated steps to fine-tune instead, e.g. 0,1000,2000 (0: the same "
                  "model from random weights, without a checkpoint).")
flags.DEFINE_string("metric", "eval_accuracy", "The eval_results.txt value tabulated and drawn "
                    "(eval_accuracy beside the dev set's majority baseline).")
run_flags.define_bert_flags("vocab_file", "output_dir", "do_lower_case")
flags.DEFINE_string("data_dir", None, "The task's data dir, as run_classifier.py's.")
flags.DEFINE_string("task_name", None, "A run_classifier.py task, e.g. MNLI or sst-2.")
ranged(flags.DEFINE_integer("max_seq_length", 128, "As run_classifier.py's."), at_least(3, PAIR))
ranged(flags.DEFINE_integer("train_batch_size", 32, "Total batch size for fine-tuning."),
       at_least(1))
ranged(flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval."), at_least(1))
run_flags.define_finetuning_flags()
ranged(flags.DEFINE_integer("random_seed", 12345, "Seed of every fine-tuning (initialisation, "
                            "dropout, data order): the checkpoints are compared at the same seed."),
       seed())


def main(_):
    from bert_runner.run_config import RunConfig
    from experiments import figure2

    rows, _ = figure2.run_sweep(
        FLAGS.pretraining_dirs, FLAGS.task_name, FLAGS.data_dir, FLAGS.max_seq_length,
        RunConfig.from_flags(), FLAGS.checkpoint_every, figure2.parse_steps(FLAGS.checkpoint_steps),
        FLAGS.metric)
    print(figure2.csv_text(rows), end="")


if __name__ == "__main__":
    for name in ("pretraining_dirs", "task_name", "data_dir", "vocab_file", "output_dir"):
        flags.mark_flag_as_required(name)
    cli.run_script(main)
