"""What every training script does with the shared flags of `runner.flags`: one place, so the
scripts differ only in their task (model, loss, data)."""
import os

import keras
import tensorflow as tf
from absl import flags, logging

from modeling import tf1_checkpoint
from modeling.optimization import create_optimizer
from runner import checkpoints, distribution
from runner.trainer import Trainer

FLAGS = flags.FLAGS


def strategy_from_flags():
    """Seeds, determinism, the `tf.distribute` strategy and the dtype policy, from the flags."""
    distribution.set_determinism(FLAGS.random_seed, FLAGS.deterministic)
    strategy = distribution.get_strategy(
        FLAGS.distribution_strategy, FLAGS.use_tpu, FLAGS.tpu_name, FLAGS.tpu_zone, FLAGS.gcp_project)
    distribution.set_precision(FLAGS.mixed_precision)
    return strategy


def trainer_from_flags(strategy, build_model, loss_fn, output_dir, num_train_steps,
                       num_warmup_steps, flops_per_example=None):
    """Builds the model (`build_model()`) and the original optimizer under `strategy`, and the Trainer.

    Without training the optimizer only holds the step counter for the checkpoint layout, so a
    `num_train_steps` of 0 is accepted.
    """
    with strategy.scope():
        model = build_model()
        optimizer = create_optimizer(
            FLAGS.optimizer, FLAGS.learning_rate, max(num_train_steps, 1), num_warmup_steps)
        if FLAGS.mixed_precision == "fp16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return Trainer(
        strategy, model, optimizer, loss_fn, output_dir,
        global_batch_size=FLAGS.train_batch_size,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        steps_per_loop=FLAGS.iterations_per_loop,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max,
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        jit_compile=FLAGS.jit_compile,
        flops_per_example=flops_per_example,
        peak_tflops=FLAGS.peak_tflops)


def train_from_flags(trainer, dataset_fn, num_train_steps, config):
    """Trains (resuming, else starting from `--init_checkpoint`), then writes the original-layout
    checkpoint if `--save_tf1_checkpoint`."""
    init = None
    if FLAGS.init_checkpoint:
        init = lambda: checkpoints.initialize_from_checkpoint(trainer.model, FLAGS.init_checkpoint)
    trainer.train(dataset_fn, num_train_steps, init_fn=init,
                  checkpoint_iterator=FLAGS.distribution_strategy != "multi_worker_mirrored")
    if FLAGS.save_tf1_checkpoint and trainer.chief:
        prefix = tf1_checkpoint.save_tf1_checkpoint(
            trainer.model, os.path.join(trainer.output_dir, "bert_model.ckpt"),
            extra_tensors={"global_step": tf.constant(trainer.step, tf.int64)})
        config.to_json_file(os.path.join(trainer.output_dir, "bert_config.json"))
        logging.info("Wrote original-layout checkpoint %s", prefix)
