"""Pre-train BERT (masked LM + next sentence prediction) from TFRecords: the original
`run_pretraining.py`, on one device, many GPUs, many workers or a TPU, resumable."""
import os

from absl import app, flags, logging

from runner import flags as run_flags

FLAGS = flags.FLAGS

run_flags.define_bert_flags("bert_config_file", "output_dir", "init_checkpoint")

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
run_flags.define_tpu_flags()
run_flags.define_run_flags()


def run():
    """Runs what the flags ask for and returns the `Trainer` (its `.model` holds the weights)."""
    import tensorflow as tf

    from modeling import BertPretrainer
    from pretraining_data.features import name_to_features
    from pretraining_data.reading import expand_input_files
    from runner import from_flags, inputs, pretraining, results, startup

    if not FLAGS.do_train and not FLAGS.do_eval:
        raise ValueError("At least one of `do_train` or `do_eval` must be True.")
    config = startup.load_config(FLAGS.bert_config_file, FLAGS.max_seq_length)
    files = expand_input_files(FLAGS.input_file)
    logging.info("*** Input Files *** %d files: %s", len(files), ", ".join(files[:10]))
    tf.io.gfile.makedirs(FLAGS.output_dir)
    strategy = from_flags.strategy_from_flags()
    features_spec = name_to_features(FLAGS.max_seq_length, FLAGS.max_predictions_per_seq)

    trainer = from_flags.trainer_from_flags(
        strategy, lambda: BertPretrainer(config), pretraining.pretraining_loss, FLAGS.output_dir,
        FLAGS.num_train_steps, FLAGS.num_warmup_steps,
        flops_per_example=pretraining.training_flops_per_example(
            config, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq))

    def dataset_fn(is_training, global_batch):
        def fn(context):
            return inputs.tfrecord_dataset(
                files, features_spec, context.get_per_replica_batch_size(global_batch),
                is_training=is_training, input_context=context, seed=FLAGS.random_seed,
                repeat=True)
        return fn

    if FLAGS.do_train:
        logging.info("***** Running training ***** batch size %d, %d steps",
                     FLAGS.train_batch_size, FLAGS.num_train_steps)
        from_flags.train_from_flags(
            trainer, dataset_fn(True, FLAGS.train_batch_size), FLAGS.num_train_steps, config)
    else:
        trainer.restore(FLAGS.init_checkpoint)

    if FLAGS.do_eval:
        logging.info("***** Running evaluation ***** batch size %d, %d steps",
                     FLAGS.eval_batch_size, FLAGS.max_eval_steps)
        sums = trainer.evaluate(dataset_fn(False, FLAGS.eval_batch_size),
                                pretraining.pretraining_eval_sums, FLAGS.max_eval_steps)
        metrics = pretraining.eval_metrics(sums, trainer.step)
        if trainer.chief:
            results.write_eval_results(os.path.join(FLAGS.output_dir, "eval_results.txt"), metrics)
    return trainer


def main(_):
    run()


if __name__ == "__main__":
    flags.mark_flag_as_required("input_file")
    flags.mark_flag_as_required("bert_config_file")
    flags.mark_flag_as_required("output_dir")
    app.run(main)
