"""Fine-tune BERT on a GLUE or XNLI sentence (pair) classification task: the original
`run_classifier.py` (same flags, TFRecords and output files), on one device, many GPUs or a TPU,
resumable, with `--seeds` to run several seeds and summarise their spread."""
from absl import flags

from bert_runner import cli, flags as run_flags

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "vocab_file", "output_dir", "init_checkpoint", "do_lower_case")

flags.DEFINE_string(
    "data_dir", None,
    "The input data dir. Should contain the .tsv files (or other data files) for the task.")
flags.DEFINE_string("task_name", None, "The name of the task to train.")
flags.DEFINE_integer(
    "max_seq_length", 128,
    "The maximum total input sequence length after WordPiece tokenization. Sequences longer than "
    "this will be truncated, and sequences shorter than this will be padded.")
run_flags.define_split_flags()
run_flags.define_finetuning_flags()
run_flags.define_tpu_flags()
run_flags.define_run_flags()
flags.DEFINE_list(
    "seeds", None,
    "Comma-separated random seeds, e.g. 1,2,3: fine-tune once per seed (initialisation of the "
    "classifier layer, dropout and data order), each in output_dir/seed_<seed>, and write "
    "output_dir/eval_results_seeds.txt with each eval metric's mean, standard deviation and "
    "per-seed values. Overrides --random_seed.")


def _check_seeds(values):
    if values is None:
        return True
    try:
        seeds = [int(v) for v in values]
    except ValueError:
        raise flags.ValidationError(f"--seeds expects comma-separated integers, got {values}")
    if len(set(seeds)) != len(seeds):
        raise flags.ValidationError(f"--seeds has a repeated seed: {values}")
    return True


flags.register_validator("seeds", _check_seeds)


def main(_):
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.classifier.task import ClassifierTask

    task = ClassifierTask(FLAGS.task_name, FLAGS.max_seq_length, FLAGS.data_dir)
    driver.run(task, RunConfig.from_flags(), seeds=[int(seed) for seed in FLAGS.seeds or ()])


if __name__ == "__main__":
    for name in ("data_dir", "task_name", "vocab_file", "bert_config_file", "output_dir"):
        flags.mark_flag_as_required(name)
    cli.run(main)
