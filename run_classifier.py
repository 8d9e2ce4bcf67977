"""Fine-tune BERT on a GLUE or XNLI sentence (pair) classification task: the original
`run_classifier.py` (same flags, TFRecords and output files), on one device, many GPUs or a TPU,
resumable, with `--seeds` to run several seeds and summarise their spread."""
import collections
import os

from absl import app, flags, logging

from runner import flags as run_flags

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
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
flags.DEFINE_bool(
    "do_predict", False, "Whether to run the model in inference mode on the test set.")
flags.DEFINE_integer("train_batch_size", 32, "Total batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
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

# A split's examples (TPU padding included), its TFRecord file and its number of real examples.
Split = collections.namedtuple("Split", ["examples", "path", "num_actual"])


def _write_split(processor, tokenizer, examples, name, batch_size):
    """Writes `output_dir/<name>.tf_record`, as the original; pads eval/predict sets on TPU."""
    from glue import features

    num_actual = len(examples)
    if FLAGS.use_tpu and name != "train":
        # TPUs need every batch full; the padding rows carry is_real_example=0.
        examples = features.pad_to_batch_multiple(examples, batch_size)
    path = os.path.join(FLAGS.output_dir, f"{name}.tf_record")
    features.file_based_convert_examples_to_features(
        examples, processor.get_labels(), FLAGS.max_seq_length, tokenizer, path)
    return Split(examples, path, num_actual)


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


def _training_steps(examples):
    """(num_train_steps, num_warmup_steps), computed as the original; (0, 0) without training."""
    if "train" not in examples:
        return 0, 0
    num_examples = len(examples["train"][0])
    num_train_steps = int(num_examples / FLAGS.train_batch_size * FLAGS.num_train_epochs)
    if num_train_steps <= 0:
        raise ValueError(
            f"{num_examples} training examples at --train_batch_size={FLAGS.train_batch_size} "
            f"for --num_train_epochs={FLAGS.num_train_epochs} make 0 training steps")
    return num_train_steps, int(num_train_steps * FLAGS.warmup_proportion)


def _dataset_fn(split, spec, global_batch_size, is_training, seed):
    from runner import inputs

    def dataset_fn(context):
        # Evaluation and prediction read every record on every worker, unsharded, so the chief's
        # local results cover the whole set, in file order.
        return inputs.tfrecord_dataset(
            [split.path], spec, context.get_per_replica_batch_size(global_batch_size),
            is_training=is_training, input_context=context if is_training else None, seed=seed,
            drop_remainder=is_training or FLAGS.use_tpu)

    return dataset_fn


def _log_split(title, split, batch_size):
    logging.info("***** Running %s *****", title)
    logging.info("  Num examples = %d (%d actual, %d padding)", len(split.examples),
                 split.num_actual, len(split.examples) - split.num_actual)
    logging.info("  Batch size = %d", batch_size)


def run_seed(strategy, config, processor, splits, steps, seed, run_dir):
    """Fine-tunes (resuming from `run_dir`), evaluates and predicts with one seed.

    `steps` is (num_train_steps, num_warmup_steps) from `_training_steps`.

    Writes to `run_dir`: checkpoints `ckpt-<step>`, `eval_results.txt`, `test_results.tsv` and
    the GLUE submission file. Returns the eval_results dict, or None without --do_eval.
    """
    import keras

    from glue import features, outputs, training
    from modeling import BertClassifier
    from runner import distribution, from_flags, pretraining, results

    keras.backend.clear_session()  # a fresh Keras state (names, seed generator) per seed
    distribution.set_determinism(seed, FLAGS.deterministic)
    distribution.set_precision(FLAGS.mixed_precision)
    num_train_steps, num_warmup_steps = steps
    trainer = from_flags.trainer_from_flags(
        strategy, lambda: BertClassifier(config, processor.num_labels),
        training.make_loss_fn(processor.is_regression), run_dir, num_train_steps, num_warmup_steps,
        # The encoder's FLOPs: training_flops_per_example without masked-LM positions.
        flops_per_example=pretraining.training_flops_per_example(config, FLAGS.max_seq_length, 0))
    spec = features.name_to_features(FLAGS.max_seq_length, processor.is_regression)

    if FLAGS.do_train:
        logging.info("***** Running training *****")
        logging.info("  Num examples = %d", splits["train"].num_actual)
        logging.info("  Batch size = %d", FLAGS.train_batch_size)
        logging.info("  Num steps = %d", num_train_steps)
        from_flags.train_from_flags(
            trainer, _dataset_fn(splits["train"], spec, FLAGS.train_batch_size, True, seed),
            num_train_steps, config)
    else:
        trainer.restore(FLAGS.init_checkpoint)

    output_step = training.make_output_step(processor.is_regression)
    eval_results = None
    if FLAGS.do_eval:
        split = splits["eval"]
        _log_split("evaluation", split, FLAGS.eval_batch_size)
        dev = training.collect_outputs(trainer.predict(
            _dataset_fn(split, spec, FLAGS.eval_batch_size, False, seed), output_step))
        eval_results = training.eval_results(
            dev, FLAGS.task_name, processor.is_regression, trainer.step)
        if trainer.chief:
            results.write_eval_results(os.path.join(run_dir, "eval_results.txt"), eval_results)
    if FLAGS.do_predict:
        split = splits["predict"]
        _log_split("prediction", split, FLAGS.predict_batch_size)
        test = training.collect_outputs(trainer.predict(
            _dataset_fn(split, spec, FLAGS.predict_batch_size, False, seed), output_step))
        if trainer.chief:
            outputs.write_test_results(
                os.path.join(run_dir, "test_results.tsv"), test["outputs"], split.num_actual)
            if processor.submission_name:
                path = outputs.write_glue_submission(
                    run_dir, processor, split.examples,
                    outputs.predicted_values(test["outputs"], processor.is_regression))
                logging.info("Wrote GLUE submission file %s", path)
    return eval_results


def main(_):
    import tensorflow as tf

    from glue import processors, training
    from runner import distribution, results, startup

    processor = processors.get_processor(FLAGS.task_name)
    if not FLAGS.do_train and not FLAGS.do_eval and not FLAGS.do_predict:
        raise ValueError("At least one of `do_train`, `do_eval` or `do_predict' must be True.")
    config = startup.load_config(FLAGS.bert_config_file, FLAGS.max_seq_length)
    tokenizer = startup.load_tokenizer(
        FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.init_checkpoint, config,
        FLAGS.bert_config_file)
    tf.io.gfile.makedirs(FLAGS.output_dir)
    examples = _read_splits(processor)
    steps = _training_steps(examples)
    splits = {name: _write_split(processor, tokenizer, split_examples, name, batch_size)
              for name, (split_examples, batch_size) in examples.items()}
    strategy = distribution.get_strategy(
        FLAGS.distribution_strategy, FLAGS.use_tpu, FLAGS.tpu_name, FLAGS.tpu_zone,
        FLAGS.gcp_project)

    if not FLAGS.seeds:
        run_seed(strategy, config, processor, splits, steps, FLAGS.random_seed, FLAGS.output_dir)
        return
    results_by_seed = {}
    for seed in map(int, FLAGS.seeds):
        logging.info("***** Seed %d *****", seed)
        run_dir = training.seed_dir(FLAGS.output_dir, seed)
        results_by_seed[seed] = run_seed(strategy, config, processor, splits, steps, seed, run_dir)
    if FLAGS.do_eval and distribution.is_chief(strategy):
        summary = training.summarize_seeds(results_by_seed)
        logging.info("***** Eval results over seeds %s *****\n%s", ",".join(FLAGS.seeds), summary)
        results.write_text_atomic(os.path.join(FLAGS.output_dir, "eval_results_seeds.txt"), summary)


if __name__ == "__main__":
    for name in ("data_dir", "task_name", "vocab_file", "bert_config_file", "output_dir"):
        flags.mark_flag_as_required(name)
    app.run(main)
