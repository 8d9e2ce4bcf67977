"""The GELU of a dense layer's output plus its bias, as one kernel each way on TensorFlow.

Run op by op, the tanh GELU is about ten passes over its `[rows, intermediate_size]` input, and
under bfloat16 each op converts every element to float32 and back. The dense layer's bias is
added here rather than by the layer: TensorFlow would fuse it into the matmul as an oneDNN
kernel that does not use the CPU's bfloat16 matrix units, and a separate add is one more pass.
The fast kernel adds the bias and computes the GELU in float32 in one XLA pass, and its
backward pass (the derivative written out, with the bias gradient) in another.
"""
import functools
import math

from keras import ops

from modeling.layers import activations
from modeling.layers.kernels import xla


def gelu(x, *, approximate, bias=None, fast):
    """`GELU(x + bias)`: the original's tanh approximation (`approximate=True`) or the exact erf
    form.

    Args:
        x: `[..., I]` a dense layer's matmul, in the compute dtype.
        bias: `[I]` that layer's bias (added in the dtype of `x`, as the layer adds it), or None.
        fast: the TensorFlow kernel (`modeling.layers.kernels.use_fast`); else the `keras.ops`
        reference.
    Returns:
        `[..., I]` in the dtype of `x`, the GELU computed in float32 (the fast kernel) or in the
        dtype of `x` (the reference).
    """
    if fast:
        return _fast_gelu(x, xla.bias_or_zeros(bias, x), bool(approximate))
    if bias is not None:
        x = x + ops.cast(bias, x.dtype)
    return _function(approximate)(x)


def _function(approximate):
    return activations.gelu if approximate else activations.gelu_exact


@functools.lru_cache(maxsize=None)
def _kernels(approximate):
    tf = xla.tf()

    def cdf_and_derivative(x):
        """Φ(x) and Φ'(x) of the chosen GELU, y = x Φ(x)."""
        if approximate:
            c = math.sqrt(2.0 / math.pi)
            t = tf.tanh(c * (x + 0.044715 * (x * tf.square(x))))
            return 0.5 * (1.0 + t), 0.5 * (1.0 - tf.square(t)) * c * (1.0 + 3 * 0.044715 * tf.square(x))
        cdf = 0.5 * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0))))
        return cdf, tf.exp(-0.5 * tf.square(x)) * (1.0 / math.sqrt(2.0 * math.pi))

    @xla.compiled
    def forward(x, bias):
        return tf.cast(_function(approximate)(tf.cast(x + bias, tf.float32)), x.dtype)

    @xla.compiled
    def backward(x, bias, upstream):
        xf = tf.cast(x + bias, tf.float32)
        cdf, d_cdf = cdf_and_derivative(xf)
        dx = tf.cast(tf.cast(upstream, tf.float32) * (cdf + xf * d_cdf), x.dtype)
        return dx, xla.bias_gradient(dx, bias)

    return forward, backward


def _fast_gelu(x, bias, approximate):
    forward, backward = _kernels(approximate)

    @xla.custom_gradient
    def fn(x, bias):
        def grad(upstream):
            return backward(x, bias, upstream)

        return forward(x, bias), grad

    return fn(x, bias)
