"""`--init_checkpoint`: original TF1 checkpoints and this project's own, into any task model."""
import tensorflow as tf
from absl import logging

from modeling import tf1_checkpoint


def initialize_from_checkpoint(model, init_checkpoint):
    """Loads what matches from `init_checkpoint` into `model`; heads it lacks stay newly initialised.

    Original-layout checkpoints (`bert_model.ckpt`) are matched by original variable name and
    logged as the original does. This project's checkpoints (`ckpt-<step>` in an output_dir)
    are matched by object path, so a pre-training run's encoder (`model.bert`) loads into a
    classifier or span labeler.
    """
    if tf1_checkpoint.is_tf1_checkpoint(init_checkpoint):
        return tf1_checkpoint.load_tf1_checkpoint(model, init_checkpoint, strict=False)
    prefix = tf1_checkpoint.resolve_checkpoint_prefix(init_checkpoint)
    status = tf.train.Checkpoint(model=model).restore(prefix).expect_partial()
    logging.info("Initialised from this project's checkpoint %s (matched by object path)", prefix)
    return status
