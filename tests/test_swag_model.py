"""BertMultipleChoice: shapes, the score is the encoder's pooled output dotted with one vector,
get_config round trip, bf16, and its TF1 checkpoint names (loads the tiny original checkpoint)."""
import keras
import numpy as np
import pytest

from modeling import BertClassifier
from modeling.checkpoint import original as original_layout
from modeling import checkpoint as checkpoints
from modeling.bert.multiple_choice import BertMultipleChoice
from modeling_helpers import TINY, tiny_config, tiny_expected


def choice_features(batch=2, num_choices=4, seq=8, seed=0):
    rng = np.random.default_rng(seed)
    shape = (batch, num_choices, seq)
    mask = np.ones(shape, np.int32)
    mask[..., seq - 2:] = 0
    return {"input_ids": rng.integers(5, 99, shape).astype(np.int32), "input_mask": mask,
            "segment_ids": (np.arange(seq) >= seq // 2).astype(np.int32) * mask}


@pytest.fixture(scope="module")
def model():
    model = BertMultipleChoice(tiny_config())
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    return model


def test_scores_are_the_pooled_output_dotted_with_one_vector(model):
    features = choice_features()
    logits = model(features)["logits"]
    assert logits.shape == (2, 4) and logits.dtype == "float32"
    # Each choice is scored on its own: the same sequence through the bare encoder.
    flat = {k: v.reshape(8, 8) for k, v in features.items()}
    pooled = model.encoder({"input_ids": flat["input_ids"],
                              "input_mask": flat["input_mask"],
                              "token_type_ids": flat["segment_ids"]})["pooled_output"]
    vector = np.asarray(model.scorer.output_weights)
    assert vector.shape == (1, 32)
    np.testing.assert_allclose(np.asarray(logits).reshape(-1), np.asarray(pooled) @ vector[0],
                               rtol=1e-5, atol=1e-6)
    # Reordering the choices reorders the scores.
    order = [2, 0, 3, 1]
    permuted = model({k: v[:, order] for k, v in features.items()})["logits"]
    np.testing.assert_allclose(permuted, np.asarray(logits)[:, order], rtol=1e-5, atol=1e-6)


def test_the_vector_is_the_only_new_parameter(model):
    classifier = BertClassifier(tiny_config(), 1)
    encoder = {v.path for v in classifier.encoder.variables}
    new = [v for v in model.trainable_variables if v.path not in encoder]
    assert [(v.path, tuple(v.shape)) for v in new] == [("swag/output_weights", (1, 32))]


def test_tf1_names_and_round_trip(tmp_path, model):
    names = original_layout.variable_map(model)
    assert list(names)[-1] == "cls/swag/output_weights"
    # The encoder came from the original checkpoint.
    expected = tiny_expected()
    sequence = model.encoder({"input_ids": expected["input_ids"],
                              "input_mask": expected["input_mask"],
                              "token_type_ids": expected["segment_ids"]})["sequence_output"]
    np.testing.assert_allclose(sequence, expected["sequence_output"], atol=1e-5)
    prefix = original_layout.save_tf1_checkpoint(model, tmp_path / "bert_model.ckpt")
    again = BertMultipleChoice(tiny_config())
    checkpoints.load_checkpoint(again, prefix)  # strict: every name present
    features = choice_features(seed=1)
    np.testing.assert_array_equal(again(features)["logits"], model(features)["logits"])


def test_get_config_round_trip(model):
    config = model.get_config()
    assert config["num_choices"] == 4
    rebuilt = BertMultipleChoice.from_config(config)
    rebuilt.set_weights(model.get_weights())
    features = choice_features(seed=2)
    np.testing.assert_array_equal(rebuilt(features)["logits"], model(features)["logits"])
    # Two choices in batches of four: the eight sequences of eight tokens the other tests run,
    # so no kernels to compile for this model alone.
    two = BertMultipleChoice(tiny_config(), num_choices=2)
    assert two(choice_features(batch=4, num_choices=2))["logits"].shape == (4, 2)


@pytest.mark.large
def test_bf16(model):
    mixed = BertMultipleChoice(tiny_config(), dtype="mixed_bfloat16")
    mixed.set_weights(model.get_weights())
    assert mixed.scorer.compute_dtype == "bfloat16"
    assert mixed.scorer.output_weights.dtype == "float32"
    features = choice_features(seed=3)
    logits = mixed(features)["logits"]
    assert logits.dtype == "float32"
    # Scores are about 0.1 here; bf16 keeps them within 1e-3.
    np.testing.assert_allclose(logits, model(features)["logits"], atol=5e-3)


def test_dropout_only_in_training(model):
    features = choice_features(seed=4)
    keras.utils.set_random_seed(1)
    a = np.asarray(model(features, training=True)["logits"])
    b = np.asarray(model(features, training=True)["logits"])
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(model(features)["logits"], model(features)["logits"])
