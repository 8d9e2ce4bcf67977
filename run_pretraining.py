"""Pre-train BERT (masked LM + next sentence prediction) from TFRecords: the original
`run_pretraining.py`, on one device, many GPUs, many workers or a TPU, resumable."""
import os

from absl import app, flags, logging

from runner import flags as run_flags

FLAGS = flags.FLAGS

flags.DEFINE_string(
    "bert_config_file", None,
    "The config json file corresponding to the pre-trained BERT model. "
    "This specifies the model architecture.")
flags.DEFINE_string("input_file", None, "Input TF example files (can be a glob or comma separated).")
flags.DEFINE_string(
    "output_dir", None, "The output directory where the model checkpoints will be written.")
flags.DEFINE_string(
    "init_checkpoint", None, "Initial checkpoint (usually from a pre-trained BERT model).")
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
    import keras
    import tensorflow as tf

    from modeling import BertPretrainer, tf1_checkpoint
    from modeling.optimization import create_optimizer
    from pretraining_data.features import name_to_features
    from runner import checkpoints, distribution, inputs, pretraining, results, startup
    from runner.trainer import Trainer

    if not FLAGS.do_train and not FLAGS.do_eval:
        raise ValueError("At least one of `do_train` or `do_eval` must be True.")
    config = startup.load_config(FLAGS.bert_config_file, FLAGS.max_seq_length)
    files = inputs.expand_input_files(FLAGS.input_file)
    logging.info("*** Input Files *** %d files: %s", len(files), ", ".join(files[:10]))
    tf.io.gfile.makedirs(FLAGS.output_dir)
    distribution.set_determinism(FLAGS.random_seed, FLAGS.deterministic)
    strategy = distribution.get_strategy(
        FLAGS.distribution_strategy, FLAGS.use_tpu, FLAGS.tpu_name, FLAGS.tpu_zone, FLAGS.gcp_project)
    distribution.set_precision(FLAGS.mixed_precision)
    features_spec = name_to_features(FLAGS.max_seq_length, FLAGS.max_predictions_per_seq)

    with strategy.scope():
        model = BertPretrainer(config)
        optimizer = create_optimizer(
            FLAGS.optimizer, FLAGS.learning_rate, FLAGS.num_train_steps, FLAGS.num_warmup_steps)
        if FLAGS.mixed_precision == "fp16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    trainer = Trainer(
        strategy, model, optimizer, pretraining.pretraining_loss, FLAGS.output_dir,
        global_batch_size=FLAGS.train_batch_size,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        steps_per_loop=FLAGS.iterations_per_loop,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max,
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        jit_compile=FLAGS.jit_compile,
        flops_per_example=pretraining.training_flops_per_example(
            config, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq),
        peak_tflops=FLAGS.peak_tflops)

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
        init = None
        if FLAGS.init_checkpoint:
            init = lambda: checkpoints.initialize_from_checkpoint(model, FLAGS.init_checkpoint)
        trainer.train(dataset_fn(True, FLAGS.train_batch_size), FLAGS.num_train_steps, init_fn=init,
                      checkpoint_iterator=FLAGS.distribution_strategy != "multi_worker_mirrored")
        if FLAGS.save_tf1_checkpoint and trainer.chief:
            prefix = tf1_checkpoint.save_tf1_checkpoint(
                model, os.path.join(FLAGS.output_dir, "bert_model.ckpt"),
                extra_tensors={"global_step": tf.constant(trainer.step, tf.int64)})
            config.to_json_file(os.path.join(FLAGS.output_dir, "bert_config.json"))
            logging.info("Wrote original-layout checkpoint %s", prefix)
    elif FLAGS.init_checkpoint or tf.train.latest_checkpoint(FLAGS.output_dir):
        manager = trainer.checkpoint_manager()
        if manager.latest_checkpoint:
            manager.checkpoint.restore(manager.latest_checkpoint).expect_partial()
        else:
            checkpoints.initialize_from_checkpoint(model, FLAGS.init_checkpoint)

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
