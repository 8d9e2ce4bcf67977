"""LayerNorm of a sub-layer's output plus its input (the post-LN residual), with the dense bias
and the dropout before it, as one kernel each way on TensorFlow.

Run op by op, bias, dropout, residual sum and LayerNorm are about eight passes over `[rows, H]`,
each converting bfloat16 to float32 and back under mixed precision. The fast forward kernel
makes one XLA pass and also returns the float32 sum it normalised, which the backward kernel
(LayerNorm's gradient written out, the dropout mask hashed again, the bias gradient) reads
instead of the inputs.
"""
import functools

from keras import ops

from modeling.layers.kernels import xla
from modeling.layers.kernels.dropout import dropout


def dropout_add_layer_norm(h, residual, gamma, beta, *, epsilon, rate=0.0, seed=None, rows=None,
                           bias=None, fast):
    """`LayerNorm(dropout(h + bias) + residual)` over the last axis, statistics in float32
    (Keras' formula, the original's: `z * inv + (beta - mean * inv)`, `inv = gamma /
    sqrt(var + eps)`).

    Args:
        h: `[..., H]` a sub-layer's output; residual: `[..., H]` its input (same dtype as h).
        gamma, beta: `[H]` the LayerNorm's scale and offset.
        epsilon: LayerNorm's variance epsilon.
        rate, seed: dropout on `h + bias` (`modeling.layers.kernels.dropout`); None: no dropout.
        rows: int `[..., 1]`, the number of each row of `h` its dropout mask is drawn for
            (`modeling.layers.kernels.keep_mask`), or None: the flat index of each element.
        bias: `[H]` the bias of the dense layer that made `h` (added in the dtype of `h`, as that
            layer adds it), or None.
        fast: the TensorFlow kernels (`modeling.layers.kernels.use_fast`); else the `keras.ops`
            reference.
    Returns:
        `[..., H]` in the dtype of `h`.
    """
    if seed is None:
        rate, rows = 0.0, None
    if fast:
        return _fast_dropout_add_layer_norm(
            h, xla.bias_or_zeros(bias, h), residual, ops.cast(gamma, "float32"),
            ops.cast(beta, "float32"), float(epsilon), float(rate), seed, rows)
    if bias is not None:
        h = h + ops.cast(bias, h.dtype)
    return _normalised_sum(h, residual, gamma, beta, epsilon, rate, seed, rows)[0]


def _normalised_sum(h, residual, gamma, beta, epsilon, rate, seed, rows):
    """(the normalised output in the dtype of `h`, the float32 sum it normalises)."""
    z = ops.cast(dropout(h, rate, seed, rows) + residual, "float32")
    return ops.cast(ops.layer_normalization(z, gamma, beta, epsilon=epsilon), h.dtype), z


@functools.lru_cache(maxsize=None)
def _kernels(epsilon, rate):
    @xla.compiled
    def forward(h, bias, residual, gamma, beta, seed, rows):
        return _normalised_sum(h + bias, residual, gamma, beta, epsilon, rate, seed, rows)

    @xla.compiled
    def backward(dy, z, gamma, bias, seed, rows):
        mean, variance = ops.moments(z, axes=[-1], keepdims=True)
        inv = ops.rsqrt(variance + epsilon)
        normalised = (z - mean) * inv
        dy32 = ops.cast(dy, "float32")
        outer = tuple(range(len(z.shape) - 1))
        d_gamma = ops.sum(dy32 * normalised, axis=outer)
        d_beta = ops.sum(dy32, axis=outer)
        d_norm = dy32 * gamma
        dz = inv * (d_norm - ops.mean(d_norm, axis=-1, keepdims=True)
                    - normalised * ops.mean(d_norm * normalised, axis=-1, keepdims=True))
        d_sum = ops.cast(dz, dy.dtype)
        d_h = dropout(d_sum, rate, seed, rows)
        return d_h, xla.bias_gradient(d_h, bias), d_sum, d_gamma, d_beta

    return forward, backward


def _fast_dropout_add_layer_norm(h, bias, residual, gamma, beta, epsilon, rate, seed, rows):
    tf = xla.tf()
    forward, backward = _kernels(epsilon, rate)
    if seed is None:
        seed = tf.zeros([2], tf.int64)

    @xla.custom_gradient
    def fn(h, bias, residual, gamma, beta):
        y, z = forward(h, bias, residual, gamma, beta, seed, rows)

        def grad(dy):
            return backward(dy, z, gamma, bias, seed, rows)

        return y, grad

    return fn(h, bias, residual, gamma, beta)
