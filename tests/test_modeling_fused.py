"""`modeling.fused`: the fused kernels against their `keras.ops` reference (values and gradients,
float32 and bfloat16): GELU, the attention's softmax and dropout, dropout + residual + LayerNorm;
dropout masks from a hash of the seed (the same on both paths)."""
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


@pytest.mark.parametrize("approximate", [True, False])
def test_gelu_with_a_bias_matches_the_reference(approximate):
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(size=(2, 5, 8)) * 3, tf.float32)
    bias = tf.constant(rng.normal(size=(8,)), tf.float32)
    upstream = tf.constant(rng.normal(size=(2, 5, 8)), tf.float32)
    results = []
    for enabled in (True, False):
        with fused.fused_kernels(enabled), tf.GradientTape() as tape:
            tape.watch([x, bias])
            y = fused.gelu(x, approximate, bias=bias)
            total = tf.reduce_sum(y * upstream)
        results.append([y] + tape.gradient(total, [x, bias]))
    for got, want in zip(*results):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)


def test_gelu_in_bfloat16_is_the_float32_result_rounded_once():
    x = tf.cast(tf.random.stateless_normal([4, 64], seed=[1, 2]) * 3, tf.bfloat16)
    got = fused.gelu(x, approximate=True)
    assert got.dtype == tf.bfloat16
    want = tf.cast(fused.gelu(tf.cast(x, tf.float32), approximate=True), tf.bfloat16)
    np.testing.assert_array_equal(np.asarray(tf.cast(got, tf.float32)),
                                  np.asarray(tf.cast(want, tf.float32)))


def test_dropout_mask_is_a_function_of_the_seed_at_the_rate():
    seed = keras.random.SeedGenerator(7).next()
    mask = np.asarray(fused.keep_mask((256, 1024), 0.25, seed))
    assert abs(mask.mean() - 0.75) < 0.005
    np.testing.assert_array_equal(np.asarray(fused.keep_mask((256, 1024), 0.25, seed)), mask)
    # Other seeds (the next draw, another row group) give unrelated masks: they agree where two
    # independent draws would (0.75^2 + 0.25^2), and neighbouring elements are independent too.
    for other in (keras.random.SeedGenerator(7).next() + [0, 1], fused.group_seed(seed, 1)):
        agree = (np.asarray(fused.keep_mask((256, 1024), 0.25, other)) == mask).mean()
        assert abs(agree - 0.625) < 0.005
    assert abs((mask[:, 1:] == mask[:, :-1]).mean() - 0.625) < 0.005
    assert np.asarray(fused.keep_mask((4096,), 0.0, seed)).all()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_dropout_keeps_the_masked_elements_scaled(dtype):
    """The dropout every fused kernel applies (inside XLA) and the reference path runs."""
    x = tf.cast(tf.random.stateless_normal([16, 48], seed=[3, 4]), dtype)
    seed = keras.random.SeedGenerator(11).next()
    got = fused._reference_dropout(x, 0.25, seed, 1.0 / 0.75)
    assert got.dtype == x.dtype
    kept = np.asarray(fused.keep_mask((16, 48), 0.25, seed))
    np.testing.assert_allclose(np.asarray(tf.cast(got, tf.float32)),
                               np.where(kept, np.asarray(tf.cast(x, tf.float32)) / 0.75, 0),
                               rtol=1e-2 if dtype == "bfloat16" else 1e-6)


@pytest.mark.parametrize("rate", [0.0, 0.3])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fused_attention_is_the_reference(dtype, rate):
    """oneDNN's matmul with the scale and mask as post-ops and its softmax, the XLA dropout, and
    the gradient written out: values and the gradients of the queries, keys and values."""
    rng = np.random.default_rng(0)
    q, k, v = (tf.cast(rng.normal(size=[2, 3, 5, 8]), dtype) for _ in range(3))
    mask = tf.constant([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    upstream = tf.constant(rng.normal(size=[2, 3, 5, 8]), tf.float32)
    seed = keras.random.SeedGenerator(3).next() if rate else None

    def value_and_grads(fn):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            y = fn(q, k, v)
            total = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
        return [y] + tape.gradient(total, [q, k, v])

    def fn(q, k, v):
        return fused.attention(q, k, v, mask, rate, seed)

    got = value_and_grads(tf.function(fn))
    with fused.fused_kernels(False):
        want = value_and_grads(fn)
    tolerance = dict(rtol=2e-2, atol=2e-2) if dtype == "bfloat16" else dict(rtol=1e-5, atol=1e-6)
    for name, a, b in zip(("output", "q", "k", "v"), got, want):
        np.testing.assert_allclose(np.asarray(tf.cast(a, tf.float32)),
                                   np.asarray(tf.cast(b, tf.float32)), err_msg=name, **tolerance)


@pytest.mark.parametrize("rate", [0.0, 0.2])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fused_dropout_add_layer_norm_is_the_reference(dtype, rate):
    rng = np.random.default_rng(1)
    h, residual = (tf.cast(rng.normal(size=[3, 7, 16]), dtype) for _ in range(2))
    gamma = tf.constant(rng.normal(size=[16]), tf.float32)
    beta = tf.constant(rng.normal(size=[16]), tf.float32)
    upstream = tf.constant(rng.normal(size=[3, 7, 16]), tf.float32)
    seed = keras.random.SeedGenerator(5).next() if rate else None
    bias = tf.cast(rng.normal(size=[16]), dtype)

    def value_and_grads(fn):
        with tf.GradientTape() as tape:
            tape.watch([h, residual, gamma, beta, bias])
            y = fn(h, residual, gamma, beta)
            total = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
        return [y] + tape.gradient(total, [h, residual, gamma, beta, bias])

    def fn(h, residual, gamma, beta):
        return fused.dropout_add_layer_norm(h, residual, gamma, beta, epsilon=1e-12, rate=rate,
                                            seed=seed, bias=bias)

    got = value_and_grads(tf.function(fn))
    with fused.fused_kernels(False):
        want = value_and_grads(fn)
    tolerance = dict(rtol=2e-2, atol=3e-2) if dtype == "bfloat16" else dict(rtol=1e-5, atol=2e-5)
    for name, a, b in zip(("output", "h", "residual", "gamma", "beta", "bias"), got, want):
        np.testing.assert_allclose(np.asarray(tf.cast(a, tf.float32)),
                                   np.asarray(tf.cast(b, tf.float32)), err_msg=name, **tolerance)
