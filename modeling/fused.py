"""The encoder's elementwise chains between its matmuls, with explicit dropout seeds, each as one
fused kernel forward and one backward on the TensorFlow backend: the GELU, the attention's
probability dropout, dropout + residual sum + LayerNorm, and the moves of the real-token rows
(`modeling.token_rows`). The attention's scale, mask and softmax are oneDNN's (`_tf_attention`).

Dropout takes an explicit `seed` (an int `[2]` tensor drawn from the layer's Keras
`SeedGenerator`, as `keras.layers.Dropout` draws it): with the same seed a recomputed forward
pass (activation recomputation) draws the same mask. `seed=None` means no dropout.
An element is kept where a 32-bit hash of its flat index and the seed is at least
`rate * 2**32` (`keep_mask`): counter-based like TensorFlow's Philox, but a few integer
operations that XLA fuses into the kernel that applies the mask, and that the backward pass
recomputes instead of keeping the mask. On a CPU this made the attention's softmax and dropout
2.3x faster than TensorFlow's Philox draw, where and multiply (`[32, 12, 128, 128]`: 11 ms
against 26 ms). The reference `keras.ops` path computes the same hash: the same masks on every
backend and with `fused_kernels(False)`.

Run op by op by TensorFlow, each of these chains is one pass over its tensor per op (~10 for the
GELU, ~8 for dropout + residual + LayerNorm), and in bfloat16 each op converts every element to
float32 and back. On the TensorFlow backend each chain is therefore an XLA-compiled forward and
an XLA-compiled backward joined by `tf.custom_gradient`, computed in float32 whatever the input
dtype. Measured on a 2-core Xeon: GELU 3-4x, dropout + residual + LayerNorm on `[3072, 384]`
forward 2.2x (fp32) and 2.7x (bf16). The matmuls stay outside XLA, with TensorFlow's oneDNN
kernels: XLA:CPU's dot does not use the CPU's bfloat16 matrix units. Other backends, and
`fused_kernels(False)`, use the `keras.ops` reference (float32 results agree to rounding).
"""
import contextlib
import functools
import math

import keras
from keras import ops

from modeling import activations

# The original adds (1 - mask) * -10000 to the attention scores, not -inf: fully padded rows
# still produce a (uniform) softmax rather than NaN.
MASK_ADDER = -10000.0

_state = {"enabled": True}


@contextlib.contextmanager
def fused_kernels(enabled):
    """Within the block, use (True) or bypass (False) the fused TensorFlow kernels; for tests
    and benchmarks. Takes effect when a function is traced (or, eagerly, called)."""
    previous = _state["enabled"]
    _state["enabled"] = enabled
    try:
        yield
    finally:
        _state["enabled"] = previous


def _use_tf_kernels():
    return _state["enabled"] and keras.backend.backend() == "tensorflow"


def group_seed(seed, index):
    """The seed of row group `index` of a call that computes its rows in groups (group 0 keeps
    `seed`), so the groups' dropout masks are drawn independently."""
    if seed is None or not index:
        return seed
    return seed + ops.convert_to_tensor([index, 0], seed.dtype)


# lowbias32 (C. Wellons' hash prospector): a full-avalanche 32-bit mix.
_MIX = (0x7FEB352D, 0x846CA68B)
_GOLDEN = 0x9E3779B9


def _u32(value):
    return ops.convert_to_tensor(value, "uint32")


def _mix(x):
    """lowbias32 of uint32 `x`, elementwise."""
    x = ops.bitwise_xor(x, ops.right_shift(x, _u32(16)))
    x = ops.multiply(x, _u32(_MIX[0]))
    x = ops.bitwise_xor(x, ops.right_shift(x, _u32(15)))
    x = ops.multiply(x, _u32(_MIX[1]))
    return ops.bitwise_xor(x, ops.right_shift(x, _u32(16)))


def keep_mask(shape, rate, seed):
    """bool `shape`: which elements dropout at `rate` keeps, for the int `[2]` `seed`.

    Element `i` (row-major flat index) is kept where `mix(mix(i + k0) ^ k1) >= rate * 2**32`,
    `k0`, `k1` the mixed seed words: a different seed gives an unrelated mask.
    """
    seed = ops.cast(seed, "uint32")
    k0 = _mix(ops.multiply(seed[0], _u32(_GOLDEN)) + _mix(seed[1]))
    k1 = _mix(k0 + _u32(_GOLDEN))
    size = 1
    for dim in shape:
        size = size * dim
    index = ops.reshape(ops.cast(ops.arange(size, dtype="int32"), "uint32"), shape)
    bits = _mix(ops.bitwise_xor(_mix(index + k0), k1))
    return ops.greater_equal(bits, _u32(min(int(round(rate * 2.0 ** 32)), 2 ** 32 - 1)))


def _reference_dropout(x, rate, seed, scale):
    return ops.where(keep_mask(ops.shape(x), rate, seed), x * ops.cast(scale, x.dtype),
                     ops.zeros_like(x))


def take_rows(x, index, valid):
    """`x[index]` along the first axis, with zeros for the rows where the bool `valid` is
    False (`[M]` each); one XLA kernel on TensorFlow (a third faster than a gather and a
    select)."""
    if _use_tf_kernels():
        return _move_kernels()[0](x, index, valid)
    return _reference_take_rows(x, index, valid)


def rows_to_heads(rows, index, valid, num_heads, bias=None):
    """Rows `[M, H]` plus `bias` (`[H]`, or None) onto the attention's grid `[B, N, S, D]` (`N`
    heads of `D = H / N`): position `(b, s)` holds row `index[b, s]`, or zeros where
    `valid[b, s]` is False. One XLA kernel on TensorFlow (the gather, bias, select and
    transpose in one pass)."""
    bias = _bias_or_zeros(bias, rows)
    if _use_tf_kernels():
        return _move_kernels()[1](rows, index, valid, num_heads, bias)
    return _reference_rows_to_heads(rows, index, valid, num_heads, bias)


def heads_to_rows(heads, index, valid, column_sum=False):
    """The attention's `[B, N, S, D]` back to rows `[M, N * D]`: row `i` is grid position
    `index[i]` (flat, `b * S + s`), or zeros where `valid[i]` is False. With `column_sum`, also
    the float32 sum of the rows (`[N * D]`: a bias gradient). One XLA kernel on TensorFlow."""
    if _use_tf_kernels():
        return _move_kernels()[2 + column_sum](heads, index, valid)
    rows = _reference_heads_to_rows(heads, index, valid)
    return (rows, _column_sum(rows)) if column_sum else rows


def _reference_take_rows(x, index, valid):
    valid = ops.reshape(valid, (-1,) + (1,) * (len(x.shape) - 1))
    return ops.where(valid, ops.take(x, index, axis=0), ops.zeros((), x.dtype))


def _reference_rows_to_heads(rows, index, valid, num_heads, bias):
    batch, seq = ops.shape(index)[0], ops.shape(index)[1]
    grid = _reference_take_rows(rows + bias, ops.reshape(index, (-1,)), ops.reshape(valid, (-1,)))
    grid = ops.reshape(grid, (batch, seq, num_heads, rows.shape[-1] // num_heads))
    return ops.transpose(grid, (0, 2, 1, 3))


def _column_sum(rows):
    return ops.sum(ops.cast(rows, "float32"), axis=0)


def _reference_heads_to_rows(heads, index, valid):
    batch, seq = ops.shape(heads)[0], ops.shape(heads)[2]
    width = heads.shape[1] * heads.shape[3]
    flat = ops.reshape(ops.transpose(heads, (0, 2, 1, 3)), (batch * seq, width))
    return _reference_take_rows(flat, index, valid)


def attention_mask_adder(input_mask):
    """Turns an int `[B, S]` key mask into the float32 additive bias `[B, 1, 1, S]`.

    Only keys are masked: padded query rows are computed normally, as in the original.
    """
    mask = ops.cast(input_mask, "float32")
    return (1.0 - mask[:, None, None, :]) * MASK_ADDER


def attention(q, k, v, input_mask, rate=0.0, seed=None):
    """`dropout(softmax(q k^T / sqrt(D) + mask bias)) v`, the softmax in float32.

    The scores are scaled as the original scales them (after the matmul). On TensorFlow the
    scale and the mask are added inside the scores' matmul (oneDNN post-ops), the softmax is
    oneDNN's and the dropout one XLA kernel; see `_tf_attention`.

    Args:
        q: `[B, N, Sq, D]` queries; k, v: `[B, N, S, D]` keys and values; all in the compute
            dtype.
        input_mask: int `[B, S]`, 1 for real tokens (keys at 0 get -10000 added).
        rate, seed: dropout on the probabilities (see the module docstring).
    Returns:
        `[B, N, Sq, D]` context in the compute dtype.
    """
    scale = 1.0 / math.sqrt(q.shape[-1])
    if seed is None:
        rate = 0.0
    if _use_tf_kernels():
        return _tf_attention(q, k, v, input_mask, scale, float(rate), seed)
    adder = attention_mask_adder(input_mask)
    scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))
    return ops.matmul(_reference_softmax_dropout(scores, adder, scale, rate, seed), v)


def _reference_softmax_dropout(scores, adder, scale, rate, seed):
    """`dropout(softmax(scores * scale + adder))` with the `1 / (1 - rate)`, in the dtype of
    `scores`, the softmax in float32."""
    probs = ops.softmax(ops.cast(scores, "float32") * scale + adder, axis=-1)
    dropped = _reference_dropout(probs, rate, seed, 1.0 / (1.0 - rate)) if rate else probs
    return ops.cast(dropped, scores.dtype)


def dropout_add_layer_norm(h, residual, gamma, beta, epsilon, rate=0.0, seed=None, bias=None):
    """LayerNorm(dropout(h + bias) + residual) over the last axis, statistics in float32 (Keras'
    formula, the original's: `z * inv + (beta - mean * inv)`, `inv = gamma / sqrt(var + eps)`).
    One XLA kernel each way on TensorFlow (2x TensorFlow's op-by-op LayerNorm on a CPU).

    Args:
        h: `[..., H]` a sub-layer's output; residual: `[..., H]` its input (same dtype as h).
        gamma, beta: float32 `[H]`.
        bias: `[H]` the bias of the dense layer that made `h` (added here, in the dtype of `h`,
            as that layer adds it), or None.
        rate, seed: dropout on `h` (see the module docstring).
    Returns:
        `[..., H]` in the dtype of `h`.
    """
    if seed is None:
        rate = 0.0
    if _use_tf_kernels():
        return _tf_dropout_add_layer_norm(h, _bias_or_zeros(bias, h), residual,
                                          ops.cast(gamma, "float32"), ops.cast(beta, "float32"),
                                          float(epsilon), float(rate), seed)
    if bias is not None:
        h = h + ops.cast(bias, h.dtype)
    return _reference_dropout_add_layer_norm(h, residual, gamma, beta, epsilon, rate, seed)[0]


def _reference_dropout_add_layer_norm(h, residual, gamma, beta, epsilon, rate, seed):
    """(the normalised output in the dtype of `h`, the float32 sum it normalises)."""
    if rate:
        h = _reference_dropout(h, rate, seed, 1.0 / (1.0 - rate))
    z = ops.cast(h + residual, "float32")
    return ops.cast(ops.layer_normalization(z, gamma, beta, epsilon=epsilon), h.dtype), z


def gelu(x, approximate, bias=None):
    """The GELU of `x + bias` (the bias of the dense layer before it, `[I]`, or None), the
    original's tanh approximation (`approximate=True`) or the exact erf form; the sum in the
    dtype of `x` as a dense layer adds it, the GELU in float32, returned in the dtype of `x`.
    Fused on TensorFlow: in bfloat16 the bias add alone is a third of a matmul's time."""
    if _use_tf_kernels():
        return _tf_gelu(x, bool(approximate), _bias_or_zeros(bias, x))
    if bias is not None:
        x = x + ops.cast(bias, x.dtype)
    return (activations.gelu if approximate else activations.gelu_exact)(x)


def _bias_or_zeros(bias, x):
    return ops.zeros((x.shape[-1],), x.dtype) if bias is None else ops.cast(bias, x.dtype)


# ---- TensorFlow kernels ------------------------------------------------------------------------
# Built lazily (this module must import without TensorFlow) and cached per static argument.


def _tf():
    import tensorflow as tf

    return tf


@functools.lru_cache(maxsize=None)
def _gelu_kernels(approximate):
    tf = _tf()

    def cdf_and_derivative(x):
        """Φ(x) and Φ'(x) of the chosen GELU, y = x Φ(x)."""
        if approximate:
            c = math.sqrt(2.0 / math.pi)
            t = tf.tanh(c * (x + 0.044715 * (x * tf.square(x))))
            return 0.5 * (1.0 + t), 0.5 * (1.0 - tf.square(t)) * c * (1.0 + 3 * 0.044715 * tf.square(x))
        cdf = 0.5 * (1.0 + tf.math.erf(x * (1.0 / math.sqrt(2.0))))
        return cdf, tf.exp(-0.5 * tf.square(x)) * (1.0 / math.sqrt(2.0 * math.pi))

    reference = activations.gelu if approximate else activations.gelu_exact

    @tf.function(jit_compile=True, autograph=False)
    def forward(x, bias):
        return tf.cast(reference(tf.cast(x + bias, tf.float32)), x.dtype)

    @tf.function(jit_compile=True, autograph=False)
    def backward(x, bias, upstream):
        xf = tf.cast(x + bias, tf.float32)
        cdf, d_cdf = cdf_and_derivative(xf)
        dx = tf.cast(tf.cast(upstream, tf.float32) * (cdf + xf * d_cdf), x.dtype)
        return dx, _bias_gradient(dx, bias)

    return forward, backward


@functools.lru_cache(maxsize=None)
def _move_kernels():
    function = functools.partial(_tf().function, jit_compile=True, autograph=False)
    def heads_to_rows_and_sum(heads, index, valid):
        rows = _reference_heads_to_rows(heads, index, valid)
        return rows, _column_sum(rows)

    return (function(_reference_take_rows), function(_reference_rows_to_heads),
            function(_reference_heads_to_rows), function(heads_to_rows_and_sum))


def _bias_gradient(d_sum, bias):
    """The gradient of a bias broadcast over `d_sum`'s leading axes, summed in float32; in the
    backward kernels (TensorFlow's own column sum is 2x slower than the rest of the kernel)."""
    outer = tuple(range(len(d_sum.shape) - 1))
    return ops.cast(ops.sum(ops.cast(d_sum, "float32"), axis=outer), bias.dtype)


def _tf_gelu(x, approximate, bias):
    tf = _tf()
    forward, backward = _gelu_kernels(approximate)

    @tf.custom_gradient
    def fn(x, bias):
        def grad(dy):
            return backward(x, bias, dy)

        return forward(x, bias), grad

    return fn(x, bias)


@functools.lru_cache(maxsize=None)
def _attention_kernels(scale, rate):
    tf = _tf()

    @tf.function(jit_compile=True, autograph=False)
    def dropout(probs, seed):
        """In float32, so that bfloat16 probabilities get the exact `1 / (1 - rate)`."""
        kept = _reference_dropout(tf.cast(probs, tf.float32), rate, seed, 1.0 / (1.0 - rate))
        return tf.cast(kept, probs.dtype)

    @tf.function(jit_compile=True, autograph=False)
    def backward(dy, probs, seed):
        """The scores' gradient from the dropped probabilities' (`dy`)."""
        dp = tf.cast(dy, tf.float32)
        if rate:
            dp = _reference_dropout(dp, rate, seed, 1.0 / (1.0 - rate))
        probs = tf.cast(probs, tf.float32)
        ds = probs * (dp - tf.reduce_sum(dp * probs, axis=-1, keepdims=True)) * scale
        return tf.cast(ds, dy.dtype)

    return dropout, backward


def _tf_attention(q, k, v, input_mask, scale, rate, seed):
    """`attention` on TensorFlow, its gradient written out.

    XLA:CPU cannot fuse a reduction with what reads its result, so a softmax compiled by XLA is
    five passes over the scores (scale and mask, max, exp, sum, divide); oneDNN adds the scale
    and the mask inside the scores' matmul (TensorFlow's graph rewriter fuses the multiply and
    add that follow it) and runs the softmax in one pass over each row (docs/performance.md has
    the measurements; `bench/fused_kernels.py` times it). The softmax takes the scores in
    the compute dtype and computes in float32 inside; in bfloat16 the probabilities (and so the
    backward pass's copy) are rounded to bfloat16, as the matmul that reads them needs them,
    and the mask's -10000 to -9984 (a probability of 0 all the same).
    The rewriter fuses only what it knows to be rank 4, which the output of an XLA kernel (the
    heads come from one) is not until `ensure_shape` says so; and the mask bias is made inside
    the function with the custom gradient: made outside, its float32 add was left out.
    """
    tf = _tf()
    dropout, backward = _attention_kernels(scale, rate)
    if seed is None:
        seed = tf.zeros([2], tf.int64)

    @tf.custom_gradient
    def fn(q, k, v):
        scores = (tf.linalg.matmul(tf.ensure_shape(q, q.shape), tf.ensure_shape(k, k.shape),
                                   transpose_b=True) * tf.cast(scale, q.dtype)
                  + tf.cast(attention_mask_adder(input_mask), q.dtype))
        probs = tf.nn.softmax(scores, axis=-1)
        dropped = dropout(probs, seed) if rate else probs

        def grad(d_context):
            d_scores = backward(tf.linalg.matmul(d_context, v, transpose_b=True), probs, seed)
            return (tf.linalg.matmul(d_scores, k),
                    tf.linalg.matmul(d_scores, q, transpose_a=True),
                    tf.linalg.matmul(dropped, d_context, transpose_a=True))

        return tf.linalg.matmul(dropped, v), grad

    return fn(q, k, v)


@functools.lru_cache(maxsize=None)
def _layer_norm_kernels(epsilon, rate):
    tf = _tf()

    @tf.function(jit_compile=True, autograph=False)
    def forward(h, bias, residual, gamma, beta, seed):
        return _reference_dropout_add_layer_norm(h + bias, residual, gamma, beta, epsilon, rate,
                                                 seed)

    @tf.function(jit_compile=True, autograph=False)
    def backward(dy, z, gamma, bias, seed):
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
        d_h = _reference_dropout(d_sum, rate, seed, 1.0 / (1.0 - rate)) if rate else d_sum
        return d_h, _bias_gradient(d_h, bias), d_sum, d_gamma, d_beta

    return forward, backward


def _tf_dropout_add_layer_norm(h, bias, residual, gamma, beta, epsilon, rate, seed):
    tf = _tf()
    forward, backward = _layer_norm_kernels(epsilon, rate)
    if seed is None:
        seed = tf.zeros([2], tf.int64)

    @tf.custom_gradient
    def fn(h, bias, residual, gamma, beta):
        y, z = forward(h, bias, residual, gamma, beta, seed)

        def grad(dy):
            return backward(dy, z, gamma, bias, seed)

        return y, grad

    return fn(h, bias, residual, gamma, beta)
