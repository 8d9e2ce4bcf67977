"""Forward pass, heads and losses against the original release's outputs (tiny fixture)."""
import numpy as np
import pytest

from modeling import BertModel, classification_loss, masked_lm_loss
from modeling_helpers import (
    encoder_inputs, pretraining_features, tiny_config, tiny_expected, tiny_pretrainer)

ATOL = 1e-5


@pytest.fixture(scope="module")
def run():
    expected = tiny_expected()
    model = tiny_pretrainer()
    encoder = model.encoder(encoder_inputs(expected))
    heads = model(pretraining_features(expected))
    return expected, model, encoder, heads


def close(actual, expected):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=0, atol=ATOL)


def test_embedding_output(run):
    expected, _, encoder, _ = run
    close(encoder["embedding_output"], expected["embedding_output"])


def test_every_encoder_layer(run):
    expected, _, encoder, _ = run
    assert len(encoder["all_encoder_layers"]) == 2
    for i, layer in enumerate(encoder["all_encoder_layers"]):
        close(layer, expected["all_encoder_layers"][i])


def test_sequence_and_pooled_output(run):
    expected, _, encoder, _ = run
    close(encoder["sequence_output"], expected["sequence_output"])
    close(encoder["pooled_output"], expected["pooled_output"])


def test_masked_lm_log_probs_and_losses(run):
    expected, _, _, heads = run
    loss, per_example, log_probs = masked_lm_loss(
        heads["masked_lm_logits"], expected["masked_lm_ids"], expected["masked_lm_weights"])
    close(log_probs, expected["masked_lm_log_probs"])
    close(per_example, expected["masked_lm_example_loss"])
    close(loss, expected["masked_lm_loss"])


def test_next_sentence_log_probs_and_losses(run):
    expected, _, _, heads = run
    loss, per_example, log_probs = classification_loss(
        heads["next_sentence_logits"], expected["next_sentence_labels"])
    close(log_probs, expected["next_sentence_log_probs"])
    close(per_example, expected["next_sentence_example_loss"])
    close(loss, expected["next_sentence_loss"])
    mlm, _, _ = masked_lm_loss(
        heads["masked_lm_logits"], expected["masked_lm_ids"], expected["masked_lm_weights"])
    close(mlm + loss, expected["total_loss"])


def test_masked_lm_loss_denominator_has_the_epsilon():
    logits = np.zeros((1, 2, 4), "float32")
    loss, _, _ = masked_lm_loss(logits, np.zeros((1, 2), "int32"), np.array([[1.0, 0.0]], "float32"))
    np.testing.assert_allclose(float(loss), np.log(4) / (1 + 1e-5), rtol=1e-7)


def test_optional_inputs_default_as_the_original(run):
    expected, model, _, _ = run
    ids = expected["input_ids"]
    implicit = model.encoder({"input_ids": ids})
    explicit = model.encoder({"input_ids": ids, "input_mask": np.ones_like(ids),
                           "token_type_ids": np.zeros_like(ids)})
    np.testing.assert_array_equal(np.asarray(implicit["sequence_output"]),
                                  np.asarray(explicit["sequence_output"]))


def test_only_keys_are_masked_and_padding_rows_are_computed(run):
    expected, _, encoder, _ = run
    padded_row = np.asarray(encoder["sequence_output"])[2, 8:]  # row 2 has 8 real tokens
    assert np.all(np.abs(padded_row) > 0)
    # Changing a padded token must not change any real position's output.
    _, model, _, _ = run
    ids = expected["input_ids"].copy()
    ids[2, 12] = 7
    changed = model.encoder({**encoder_inputs(expected), "input_ids": ids})["sequence_output"]
    np.testing.assert_allclose(np.asarray(changed)[2, :8], np.asarray(encoder["sequence_output"])[2, :8],
                               atol=1e-6)


def test_token_type_gather_equals_the_original_one_hot_matmul(run):
    expected, model, _, _ = run
    table = np.asarray(model.encoder.embeddings.token_type_embeddings)
    one_hot = np.eye(table.shape[0], dtype="float32")[expected["segment_ids"]]
    gathered = np.asarray(model.encoder.embeddings.token_type_embeddings)[expected["segment_ids"]]
    np.testing.assert_array_equal(one_hot @ table, gathered)


def test_one_hot_word_embeddings_give_the_same_outputs(run):
    expected, model, encoder, _ = run
    one_hot_model = BertModel(tiny_config(), use_one_hot_embeddings=True)
    one_hot_model.set_weights(model.encoder.get_weights())
    out = one_hot_model(encoder_inputs(expected))
    np.testing.assert_allclose(np.asarray(out["sequence_output"]),
                               np.asarray(encoder["sequence_output"]), atol=1e-6)


def test_dropout_only_when_training(run):
    expected, model, _, _ = run
    inputs = encoder_inputs(expected)
    a = np.asarray(model.encoder(inputs, training=False)["sequence_output"])
    b = np.asarray(model.encoder(inputs, training=False)["sequence_output"])
    c = np.asarray(model.encoder(inputs, training=True)["sequence_output"])
    np.testing.assert_array_equal(a, b)
    assert np.max(np.abs(a - c)) > 1e-3


def test_sequence_longer_than_positions_is_refused():
    model = BertModel(tiny_config())
    with pytest.raises(ValueError, match="exceeds max_position_embeddings 64"):
        model({"input_ids": np.zeros((1, 65), "int32")})
