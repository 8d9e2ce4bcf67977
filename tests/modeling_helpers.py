"""Helpers shared by the modeling tests: the tiny fixture model and its batch."""
import numpy as np

from conftest import FIXTURES

TINY = FIXTURES / "modeling" / "tiny"
TINY_TRAIN = FIXTURES / "modeling" / "tiny_train"


def tiny_config():
    from modeling import BertConfig

    return BertConfig.from_json_file(TINY / "bert_config.json")


def tiny_expected():
    return dict(np.load(TINY / "expected.npz"))


def tiny_pretrainer():
    """The fixture's pretraining model with the original checkpoint loaded (strict)."""
    from modeling import BertPretrainer
    from modeling import checkpoint as checkpoints

    model = BertPretrainer(tiny_config())
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt")
    return model


def encoder_inputs(expected):
    return {
        "input_ids": expected["input_ids"],
        "input_mask": expected["input_mask"],
        "token_type_ids": expected["segment_ids"],
    }


def pretraining_features(expected):
    keys = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions")
    return {k: expected[k] for k in keys}


def save_like_the_trainer(model, directory, step=1):
    """Writes `model` to `directory/ckpt-<step>` with the Trainer's own checkpoint manager."""
    import tensorflow as tf

    from modeling.optimization import create_optimizer
    from bert_runner.trainer import Trainer

    trainer = Trainer(tf.distribute.get_strategy(), model, create_optimizer("adamw", 1e-4, 10, 1),
                      loss_fn=None, output_dir=str(directory), global_batch_size=1)
    trainer.checkpoint_manager().save(checkpoint_number=step)
    return str(directory)


# The converted exports' tests (LiteRT, ONNX): a 3-label head on the tiny encoder, and texts of
# mixed lengths (one cut to their max_seq_length of 16), accents, CJK, empty ones and pairs.
EXPORT_LABELS = ["contradiction", "entailment", "neutral"]
EXPORT_PAIRS = [("The dog runs fast.", "a big cat"), ("the cat sleeps", ""),
                ("the old dog walked to the river in the rain", "they see a big bird on the hill")]


def export_classifier(head_scale=1.0):
    """The tiny encoder with a fixed random 3-label head (large weights: every token counts;
    `head_scale` multiplies them)."""
    from modeling import BertClassifier
    from modeling import checkpoint as checkpoints

    model = BertClassifier(tiny_config(), len(EXPORT_LABELS))
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    rng = np.random.default_rng(7)
    model.classifier.output_weights.assign(
        rng.normal(0.0, head_scale, (3, 32)).astype(np.float32))
    model.classifier.output_bias.assign(rng.normal(0.0, 0.1, (3,)).astype(np.float32))
    return model
