"""`modeling.fused`: the fused GELU against its `keras.ops` reference (values and gradients, float32
and bfloat16), and dropout with explicit seeds."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import fused


def _value_and_grad(fn, x, upstream):
    x = tf.convert_to_tensor(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
        total = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
    return y, tape.gradient(total, x)


@pytest.mark.parametrize("approximate", [True, False])
def test_gelu_matches_the_reference(approximate):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 8)).astype("float32") * 3
    upstream = rng.normal(size=x.shape).astype("float32")
    results = []
    for enabled in (True, False):
        with fused.fused_kernels(enabled):
            results.append(_value_and_grad(lambda x: fused.gelu(x, approximate), x, upstream))
    (y, dx), (want_y, want_dx) = results
    np.testing.assert_allclose(np.asarray(y), np.asarray(want_y), atol=2e-6)
    np.testing.assert_allclose(np.asarray(dx), np.asarray(want_dx), atol=2e-6)


def test_gelu_in_bfloat16_is_the_float32_result_rounded_once():
    x = tf.cast(tf.random.stateless_normal([4, 64], seed=[1, 2]) * 3, tf.bfloat16)
    got = fused.gelu(x, approximate=True)
    assert got.dtype == tf.bfloat16
    want = tf.cast(fused.gelu(tf.cast(x, tf.float32), approximate=True), tf.bfloat16)
    np.testing.assert_array_equal(np.asarray(tf.cast(got, tf.float32)),
                                  np.asarray(tf.cast(want, tf.float32)))


def test_dropout_with_a_drawn_seed_is_keras_dropout():
    """Same seed, same mask as `keras.random.dropout`, every time it is drawn again."""
    x = tf.random.stateless_normal([16, 32], seed=[3, 4])
    seed = keras.random.SeedGenerator(7).next()
    got = fused.dropout(x, 0.25, seed)
    want = keras.random.dropout(x, 0.25, seed=fused.DrawnSeed(seed))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(fused.dropout(x, 0.25, seed)), np.asarray(got))
    assert 0.15 < np.mean(np.asarray(got) == 0) < 0.35
    assert fused.dropout(x, 0.25, None) is x
