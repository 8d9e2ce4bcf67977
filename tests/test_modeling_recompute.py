"""Activation recomputation (the encoder mode `EncoderModes.recompute`): with dropout on, the
same losses and the same gradients as storing the activations, step after step (the dropout
streams stay in step), and the recomputation really happens."""
import numpy as np
import pytest
import tensorflow as tf

from modeling import BertModel
from modeling_helpers import encoder_inputs, tiny_config, tiny_expected


def _training_steps(recompute, steps=2):
    """Loss and gradients of `steps` consecutive training calls (dropout 0.1) of the tiny
    encoder, all models starting from the same weights and dropout seeds."""
    config = tiny_config()
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.1
    model = BertModel(config, modes={"recompute": recompute})
    reference = BertModel(config)  # seeded identically: same initial weights for both
    for variable, value in zip(model.variables, reference.variables):
        variable.assign(value)
    inputs = {k: tf.constant(v) for k, v in encoder_inputs(tiny_expected()).items()}

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            loss = tf.reduce_sum(tf.square(out["pooled_output"])) + tf.reduce_mean(
                tf.square(out["sequence_output"]))
        return loss, tape.gradient(loss, model.trainable_variables)

    results = [step() for _ in range(steps)]
    return results, step.get_concrete_function().graph


@pytest.fixture(scope="module")
def runs():
    import keras

    keras.utils.set_random_seed(1)
    stored = _training_steps(recompute=False)
    keras.utils.set_random_seed(1)
    recomputed = _training_steps(recompute=True)
    return stored, recomputed


@pytest.mark.large
def test_same_losses_and_gradients(runs):
    (stored, _), (recomputed, _) = runs
    for (loss, grads), (loss_r, grads_r) in zip(stored, recomputed):
        assert float(loss_r) == pytest.approx(float(loss), rel=1e-6)
        for g, g_r in zip(grads, grads_r):
            np.testing.assert_allclose(np.asarray(tf.convert_to_tensor(g_r)),
                                       np.asarray(tf.convert_to_tensor(g)), atol=1e-6)
    # Dropout was on: the two steps differ.
    assert float(stored[0][0]) != float(stored[1][0])


@pytest.mark.large
def test_the_backward_pass_recomputes(runs):
    """The recomputing graph runs each layer's forward pass a second time, in the gradient."""
    (_, graph), (_, graph_r) = runs

    def count_matmuls(g):
        # The attention's batched matmuls (the softmax runs in a fused kernel defined once).
        ops = [op for f in g._functions.values() for op in f.graph.get_operations()]
        return sum(op.type.startswith("BatchMatMul") for op in ops + g.get_operations())

    assert count_matmuls(graph_r) > count_matmuls(graph)


def test_recompute_is_a_mode_every_layer_gets_and_get_config_keeps():
    from modeling.inference import copy_with, with_bfloat16_weights

    assert not BertModel(tiny_config()).recompute
    model = copy_with(BertModel(tiny_config()), recompute=True)
    assert model.recompute and all(layer.recompute for layer in model.encoder_layers)
    assert BertModel.from_config(model.get_config()).recompute
    assert with_bfloat16_weights(model).recompute  # another precision keeps the modes
