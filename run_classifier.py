"""Fine-tune BERT on a GLUE or XNLI sentence (pair) classification task: the original
`run_classifier.py` (same flags, TFRecords and output files), on one device, many GPUs or a TPU,
resumable, with `--seeds` to run several seeds and summarise their spread."""
import os

from absl import app, flags, logging

from bert_runner import flags as run_flags

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

def _write_split(processor, tokenizer, examples, name, batch_size):
    """Writes `output_dir/<name>.tf_record`, as the original; pads eval/predict sets on TPU.

    Returns (the examples written, TPU padding included; their `bert_runner.driver.Split`).
    """
    from bert_tasks.classifier import features
    from bert_runner.driver import Split

    num_actual = len(examples)
    if FLAGS.use_tpu and name != "train":
        # TPUs need every batch full; the padding rows carry is_real_example=0.
        examples = features.pad_to_batch_multiple(examples, batch_size)
    path = os.path.join(FLAGS.output_dir, f"{name}.tf_record")
    features.file_based_convert_examples_to_features(
        examples, processor.get_labels(), FLAGS.max_seq_length, tokenizer, path)
    return examples, Split([path], num_actual, batch_size, num_padding=len(examples) - num_actual)


def _read_splits(processor):
    """{split name: (examples, batch size)} for every split the do_* flags need.

    All are read before any is converted, so bad dev or test input fails in seconds, not after
    the train set's conversion or the fine-tuning.
    """
    wanted = [
        (FLAGS.do_train, "train", processor.get_train_examples, FLAGS.train_batch_size),
        (FLAGS.do_eval, "eval", processor.get_dev_examples, FLAGS.eval_batch_size),
        (FLAGS.do_predict, "predict", processor.get_test_examples, FLAGS.predict_batch_size),
    ]
    return {name: (read(FLAGS.data_dir), batch_size)
            for needed, name, read, batch_size in wanted if needed}


def main(_):
    from bert_tasks.classifier import processors
    from bert_tasks.classifier.task import ClassifierTask
    from bert_runner import distribution, driver, results, seeds, startup
    from bert_runner.run_config import RunConfig

    run = RunConfig.from_flags()
    processor = processors.get_processor(FLAGS.task_name)
    if not run.do_train and not run.do_eval and not run.do_predict:
        raise ValueError("At least one of `do_train`, `do_eval` or `do_predict' must be True.")
    config = startup.load_config(run.bert_config_file, FLAGS.max_seq_length)
    tokenizer = startup.load_tokenizer(
        run.vocab_file, run.do_lower_case, run.init_checkpoint, config, run.bert_config_file)
    task = ClassifierTask(processor, FLAGS.task_name, FLAGS.max_seq_length)
    strategy = driver.prepare(task, run, config)
    examples = _read_splits(processor)
    num_train_steps, num_warmup_steps = (
        run.training_steps(len(examples["train"][0])) if run.do_train else (0, 0))
    splits = {}
    for name, (split_examples, batch_size) in examples.items():
        written, splits[name] = _write_split(processor, tokenizer, split_examples, name, batch_size)
        if name == "predict":
            task.predict_examples = written

    def run_seed(seed_run):
        return driver.run_task(
            task, seed_run, config, splits.get("train"), num_train_steps, num_warmup_steps,
            eval_split=splits.get("eval"), predict_split=splits.get("predict"),
            strategy=strategy).eval_results

    if not FLAGS.seeds:
        run_seed(run)
        return
    results_by_seed = {}
    for seed in map(int, FLAGS.seeds):
        logging.info("***** Seed %d *****", seed)
        results_by_seed[seed] = run_seed(run.with_seed(seed, seeds.seed_dir(run.output_dir, seed)))
    if run.do_eval and distribution.is_chief(strategy):
        summary = seeds.summarize_seeds(results_by_seed)
        logging.info("***** Eval results over seeds %s *****\n%s", ",".join(FLAGS.seeds), summary)
        results.write_text_atomic(os.path.join(run.output_dir, "eval_results_seeds.txt"), summary)


if __name__ == "__main__":
    for name in ("data_dir", "task_name", "vocab_file", "bert_config_file", "output_dir"):
        flags.mark_flag_as_required(name)
    app.run(main)
