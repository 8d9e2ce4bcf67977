"""Scaled dot-product attention over the heads: the original `attention_layer` after its query,
key and value projections (which the encoder block makes, `modeling.layers.transformer_layer`)."""
import functools
import math

import keras
from keras import ops

from modeling.layers.kernels import flash, xla
from modeling.layers.kernels.dropout import dropout, grid_positions, seed_words

# The original adds (1 - mask) * -10000 to the attention scores, not -inf: fully padded rows
# still produce a (uniform) softmax rather than NaN.
MASK_ADDER = -10000.0


def mask_bias(input_mask, causal=False, sequence_ids=None):
    """Turns an int `[B, S]` key mask into the float32 additive bias: `[B, 1, 1, S]`, or with
    `causal` or `sequence_ids` `[B, 1, S, S]`. With `causal`, query i also gets -10000 on every
    key after i (a left-to-right model: position i sees positions 0..i only,
    `BertConfig.causal`); with `sequence_ids` (int `[B, S]`, packed rows: which sequence each
    position holds, 1, 2, ..., 0 on padding), on every key of another sequence.

    Only keys are masked: padded query rows are computed normally, as in the original. The
    queries are the S positions of the grid in order (a causal or packed encoder computes every
    row at once: `BertModel`).
    """
    mask = ops.cast(input_mask, "float32")[:, None, None, :]
    if causal:
        positions = ops.arange(ops.shape(input_mask)[1])
        mask = mask * ops.cast(positions[None, :] <= positions[:, None], "float32")[None, None]
    if sequence_ids is not None:
        mask = mask * ops.cast(ops.equal(sequence_ids[:, :, None], sequence_ids[:, None, :]),
                               "float32")[:, None]
    return (1.0 - mask) * MASK_ADDER


def attention(q, k, v, input_mask, dropout_rate=0.0, seed=None, *, fast, causal=False,
              sequence_ids=None, query_positions=None, fused=False):
    """`dropout(softmax(q k^T / sqrt(D) + mask bias)) v`, the softmax in float32.

    The scores are scaled as the original scales them, after the matmul.

    Args:
        q: `[B, N, Sq, D]` queries; k, v: `[B, N, S, D]` keys and values; all in the compute
            dtype.
        input_mask: int `[B, S]`, 1 for real tokens (keys at 0 get -10000 added). An integer
            tensor, so that Keras' mixed-precision input casting cannot round it.
        dropout_rate, seed: dropout on the probabilities (`modeling.layers.kernels.dropout`); seed
            None: no dropout.
        query_positions: int `[B, Sq]`, each query's position on the grid of the batch's
            `B * S` tokens (`b * S + s`), or None: the first `Sq` positions of each sequence. The
            dropout mask of a query's probabilities `[N, S]` is drawn for its position
            (`modeling.layers.kernels.keep_mask`'s `rows`), so a query draws the same mask with any
            other queries beside it.
        fast: `fast_attention` (`modeling.layers.kernels.use_fast`); else `keras.ops` op by op.
        causal: query i attends to keys 0..i only (`mask_bias`); q and k then have the same
            positions, `Sq == S`.
        sequence_ids: int `[B, S]` of packed rows: a query attends to its own sequence's keys
            only (`mask_bias`); `Sq == S`.
        fused: without `sequence_ids`, one fused operation: without dropout (its rate 0, or
            not training) `fused_attention`; with it, under JAX on a GPU, the Pallas kernel
            `modeling.layers.kernels.flash` (the same dropout masks), for keys in whole blocks
            (else the reference).
    Returns:
        `[B, N, Sq, D]` context in the compute dtype.
    """
    scale = 1.0 / math.sqrt(q.shape[-1])
    if seed is None:
        dropout_rate = 0.0
    if fused and sequence_ids is None:
        if not dropout_rate:
            return fused_attention(q, k, v, input_mask, scale, causal)
        if _flash_kernel_runs(q, k):
            if query_positions is None:
                query_positions = grid_positions(ops.shape(k)[0],
                                                 ops.shape(k)[2])[:, :ops.shape(q)[2]]
            return flash_attention(q, k, v, input_mask, scale, dropout_rate,
                                   ops.stack(seed_words(seed)), query_positions, causal)
    rows = _query_rows(q, k, query_positions) if dropout_rate else None
    if fast:
        return fast_attention(q, k, v, input_mask, scale, float(dropout_rate), seed, causal,
                              sequence_ids, rows)
    scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))
    probs = ops.softmax(ops.cast(scores, "float32") * scale
                        + mask_bias(input_mask, causal, sequence_ids), axis=-1)
    probs = dropout(probs, dropout_rate, seed, rows)
    return ops.matmul(ops.cast(probs, q.dtype), v)


def fused_attention(q, k, v, input_mask, scale, causal=False):
    """`attention` without dropout as one fused operation of the backend: under JAX
    `jax.nn.dot_product_attention`, cuDNN's flash attention on a GPU in bfloat16 or float16 (its
    softmax in float32, the probabilities never in memory), else XLA's; elsewhere
    `keras.ops.dot_product_attention`.

    The mask is taken as each sequence's key length, `Σ input_mask` (cuDNN's padding mask):
    right-padded masks (ones, then zeros), as every record and script feature has. Masked keys
    get a probability of 0, as the reference's -10000 gives them; a sequence without any real
    token (a padding example) attends to its first key alone where the reference spreads its
    probabilities evenly (finite either way; such rows are weighted 0).
    `q`, `k`, `v`: `[B, N, Sq, D]`, `[B, N, S, D]` (the backend's layout is `[B, S, N, D]`: the
    transposes meet the ones that made the heads, which XLA removes). Returns `[B, N, Sq, D]`.
    """
    lengths = ops.maximum(ops.sum(ops.cast(input_mask, "int32"), axis=1), 1)
    q, k, v = (ops.transpose(t, (0, 2, 1, 3)) for t in (q, k, v))
    if keras.backend.backend() == "jax":
        import jax

        cudnn = _on_jax_gpu() and keras.backend.standardize_dtype(q.dtype) in ("bfloat16",
                                                                               "float16")
        context = jax.nn.dot_product_attention(
            q, k, v, scale=scale, is_causal=causal, key_value_seq_lengths=lengths,
            implementation="cudnn" if cudnn else "xla")
    else:
        mask = ops.arange(ops.shape(k)[1])[None, :] < lengths[:, None]
        context = ops.dot_product_attention(q, k, v, mask=mask[:, None, None, :], scale=scale,
                                            is_causal=causal)
    return ops.transpose(context, (0, 2, 1, 3))


def flash_attention(q, k, v, input_mask, scale, rate, seeds, rows, causal=False,
                    interpret=False):
    """`flash.flash_attention` (the same arguments); under a data-parallel
    `keras.distribution`, each device's kernel on its part of the batch (`jax.shard_map`: XLA's
    partitioner cannot split a Pallas kernel), where the batch divides by the devices."""
    import jax
    from jax.sharding import PartitionSpec

    def kernel(q, k, v, input_mask, seeds, rows):
        return flash.flash_attention(q, k, v, input_mask, scale, rate, seeds, rows, causal,
                                     interpret)

    distribution = keras.distribution.distribution()
    if (not isinstance(distribution, keras.distribution.DataParallel)
            or q.shape[0] % distribution.device_mesh.devices.size):
        return kernel(q, k, v, input_mask, seeds, rows)
    batch = PartitionSpec(distribution.batch_dim_name)
    return jax.shard_map(kernel, mesh=distribution.device_mesh.backend_mesh,
                         in_specs=(batch, batch, batch, batch, PartitionSpec(), batch),
                         out_specs=batch, check_vma=False)(q, k, v, input_mask, seeds, rows)


def fused_attention_pays(compute_dtype):
    """Whether `EncoderModes(fused_attention=True)` trains faster here, `compute_dtype`'s run
    being the same: under JAX on a GPU in bfloat16 or float16 (cuDNN's flash attention, and the
    Pallas kernel drawing the reference's dropout masks: `bench/accelerators.py` measures it,
    docs/accelerators.md keeps its figures). Elsewhere the fused mode changes nothing or is
    untested (float32 on a GPU)."""
    return (keras.backend.standardize_dtype(compute_dtype) in ("bfloat16", "float16")
            and _on_jax_gpu())


def _on_jax_gpu():
    """Whether Keras runs on JAX and JAX's first device is a GPU."""
    if keras.backend.backend() != "jax":
        return False
    import jax

    return jax.devices()[0].platform == "gpu"


def _flash_kernel_runs(q, k):
    """Whether `flash.flash_attention` takes these queries and keys here: under JAX on a GPU
    (its Triton kernels), keys in whole blocks."""
    return _on_jax_gpu() and flash.supported(q, k)


def _query_rows(q, k, query_positions):
    """`keep_mask`'s `rows` of the probabilities `[B, N, Sq, S]`: `[B, 1, Sq, 1]`, each
    query's grid position."""
    if query_positions is None:
        query_positions = grid_positions(ops.shape(k)[0], ops.shape(k)[2])[:, :ops.shape(q)[2]]
    return ops.cast(query_positions, "int32")[:, None, :, None]


def fast_attention(q, k, v, input_mask, scale, rate, seed, causal=False, sequence_ids=None,
                   rows=None):
    """`attention` on TensorFlow: oneDNN's matmul, scale, mask and softmax, the dropout one XLA
    kernel, the gradient written out.

    XLA:CPU cannot fuse a reduction with what reads its result, so a softmax compiled by XLA is
    five passes over the scores (scale and mask, max, exp, sum, divide); oneDNN adds the scale
    and the mask inside the scores' matmul (TensorFlow's graph rewriter fuses the multiply and
    add that follow it) and runs the softmax in one pass over each row (docs/performance.md has
    the measurements). The softmax takes the scores in the compute dtype and computes in
    float32 inside; in bfloat16 the probabilities (and so the backward pass's copy) are rounded
    to bfloat16, as the matmul that reads them needs them, and the mask's -10000 to -9984 (a
    probability of 0 all the same).
    The rewriter fuses only what it knows to be rank 4, which the output of an XLA kernel (the
    heads come from one) is not until `ensure_shape` says so; and the mask bias is made inside
    the function with the custom gradient: made outside, its float32 add was left out.
    `rows`: the dropout's (`attention`'s `_query_rows`).
    """
    tf = xla.tf()
    dropout_kernel, backward = _attention_kernels(scale, rate)
    if seed is None:
        seed = tf.zeros([2], tf.int64)

    @xla.custom_gradient
    def fn(q, k, v):
        scores = (tf.linalg.matmul(tf.ensure_shape(q, q.shape), tf.ensure_shape(k, k.shape),
                                   transpose_b=True) * tf.cast(scale, q.dtype)
                  + tf.cast(mask_bias(input_mask, causal, sequence_ids), q.dtype))
        probs = tf.nn.softmax(scores, axis=-1)
        dropped = dropout_kernel(probs, seed, rows) if rate else probs

        def grad(d_context):
            d_scores = backward(tf.linalg.matmul(d_context, v, transpose_b=True), probs, seed,
                                rows)
            return (tf.linalg.matmul(d_scores, k),
                    tf.linalg.matmul(d_scores, q, transpose_a=True),
                    tf.linalg.matmul(dropped, d_context, transpose_a=True))

        return tf.linalg.matmul(dropped, v), grad

    return fn(q, k, v)


@functools.lru_cache(maxsize=None)
def _attention_kernels(scale, rate):
    tf = xla.tf()

    @xla.compiled
    def dropout_kernel(probs, seed, rows):
        """In float32, so that bfloat16 probabilities get the exact `1 / (1 - rate)`."""
        return tf.cast(dropout(tf.cast(probs, tf.float32), rate, seed, rows), probs.dtype)

    @xla.compiled
    def backward(dy, probs, seed, rows):
        """The scores' gradient from the dropped probabilities' (`dy`)."""
        dp = dropout(tf.cast(dy, tf.float32), rate, seed, rows)
        probs = tf.cast(probs, tf.float32)
        ds = probs * (dp - tf.reduce_sum(dp * probs, axis=-1, keepdims=True)) * scale
        return tf.cast(ds, dy.dtype)

    return dropout_kernel, backward
