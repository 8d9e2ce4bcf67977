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
    from modeling import BertPretrainer, tf1_checkpoint

    model = BertPretrainer(tiny_config())
    tf1_checkpoint.load_tf1_checkpoint(model, TINY / "bert_model.ckpt")
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
