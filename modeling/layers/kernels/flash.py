"""The attention with its hashed dropout as one fused kernel forward and two backward (JAX's Pallas,
Triton on GPUs): the scores and probabilities stay in the kernel, and each element's dropout mask
is the one `dropout.keep_mask` draws for it, so the run is the reference's
(`modeling.layers.attention.attention`) to float rounding.

FlashAttention-2's scheme (Dao, 2023): a program per block of queries runs over the keys in blocks
with a running maximum and sum (the softmax's), keeping `logsumexp` per query for the backward
pass, which computes each element's probability again from it. Dropout enters where the
probabilities meet the values: `O = D(P) V`, `dV = D(P)ᵀ dO`, `dP = D(dO Vᵀ)`, and the softmax's
`Σ_j dP_j P_j` is `dO · O` (as without dropout), computed once per query before.

Layout: ours, `[B, N, S, D]`, the heads' axis before the sequence's. The key mask is the
reference's additive -10000 on keys whose `input_mask` is 0 (and, causal, on later keys), so a
sequence without any real token gets the reference's even spread.
"""
import functools

import numpy as np

_BLOCK = 64  # queries and keys per block


def supported(q, k):
    """Whether the kernel takes queries `[B, N, Sq, D]` and keys `[B, N, S, D]`: keys in whole
    blocks (queries are padded to them), a head width the matrix units take."""
    return k.shape[2] % _BLOCK == 0 and q.shape[-1] % 16 == 0 and q.shape[-1] <= 256


def flash_attention(q, k, v, input_mask, scale, rate, seed_words, rows, causal=False,
                    interpret=False):
    """`dropout(softmax(q kᵀ · scale + mask bias)) v` in one kernel (module docstring).

    Args:
        q: `[B, N, Sq, D]`; k, v: `[B, N, S, D]`; one float dtype.
        input_mask: int `[B, S]`, 1 for real keys.
        scale: the scores' scale; rate: the dropout rate (0: none).
        seed_words: uint32 `[2]`, `dropout.seed_words` of the dropout's seed (anything at
            rate 0).
        rows: int `[B, Sq]`, each query's grid position (`keep_mask`'s `rows`).
        causal: query i attends to keys 0..i (`Sq == S`).
        interpret: run the kernels in Pallas' interpreter (CPU tests).
    Returns: `[B, N, Sq, D]` in `q`'s dtype.
    """
    import jax.numpy as jnp

    bias = (1.0 - input_mask.astype(jnp.float32)) * -10000.0
    # Queries padded to whole blocks: a padded query's output is dropped, so its gradient is 0
    # and it adds nothing to the keys' and values' gradients.
    queries = q.shape[2]
    padding = -queries % _BLOCK
    if padding:
        q = jnp.pad(q, ((0, 0), (0, 0), (0, padding), (0, 0)))
        rows = jnp.pad(rows, ((0, 0), (0, padding)))
    out = _attention(float(scale), float(rate), bool(causal), bool(interpret))(
        q, k, v, bias, jnp.asarray(seed_words, jnp.uint32), rows.astype(jnp.int32))
    return out[:, :, :queries]


@functools.lru_cache(maxsize=None)
def _attention(scale, rate, causal, interpret):
    """The custom-gradient function of these settings: `(q, k, v, bias, seed_words, rows)`."""
    import jax

    @jax.custom_vjp
    def attention(q, k, v, bias, seed_words, rows):
        return _forward(q, k, v, bias, seed_words, rows, scale, rate, causal, interpret)[0]

    def forward(q, k, v, bias, seed_words, rows):
        out, lse = _forward(q, k, v, bias, seed_words, rows, scale, rate, causal, interpret)
        return out, (q, k, v, bias, seed_words, rows, out, lse)

    def backward(residuals, d_out):
        q, k, v, bias, seed_words, rows, out, lse = residuals
        grads = _backward(q, k, v, bias, seed_words, rows, out, lse, d_out, scale, rate, causal,
                          interpret)
        return (*grads, None, None, None)

    attention.defvjp(forward, backward)
    return attention


def _mix(x):
    """`dropout._mix` (lowbias32) on uint32 arrays inside a kernel."""
    import jax.numpy as jnp

    from modeling.layers.kernels.dropout import _MIX

    x = x ^ (x >> 16)
    x = x * jnp.uint32(_MIX[0])
    x = x ^ (x >> 15)
    x = x * jnp.uint32(_MIX[1])
    return x ^ (x >> 16)


def _dot(a, b, trans_a=False, trans_b=False):
    """The float32 product of two 2-D blocks, either transposed first (`pl.dot`'s meaning;
    Pallas dropped `pl.dot` in JAX 0.11)."""
    import jax.numpy as jnp
    from jax import lax

    contract = (((0 if trans_a else 1,), (1 if trans_b else 0,)), ((), ()))
    return lax.dot_general(a, b, contract, preferred_element_type=jnp.float32)


def _scores(q, k, bias_block, query_index, key_index, scale, causal):
    """The block's float32 scores `q kᵀ · scale + bias`, the product rounded to the inputs'
    dtype first (the reference's matmul gives it in the compute dtype)."""
    import jax.numpy as jnp

    bias = bias_block[None, :]
    if causal:  # the reference's bias: -10000 once on a key masked either way
        bias = jnp.where(key_index[None, :] > query_index[:, None], -10000.0, bias)
    return _dot(q, k, trans_b=True).astype(q.dtype).astype(jnp.float32) * scale + bias


def _keep(seed_ref, row_block, head, heads, keys, key_index, rate):
    """`keep_mask` of the block: element (query, key) of head `head` has index
    `row · heads · keys + head · keys + key`."""
    import jax.numpy as jnp

    k0, k1 = seed_ref[0], seed_ref[1]
    index = (row_block.astype(jnp.uint32)[:, None] * jnp.uint32(heads * keys)
             + (head * keys).astype(jnp.uint32) + key_index.astype(jnp.uint32)[None, :] + k0)
    bits = _mix(_mix(index) ^ k1)
    return bits >= jnp.uint32(min(int(round(rate * 2.0 ** 32)), 2 ** 32 - 1))


def _forward_kernel(q_ref, k_ref, v_ref, bias_ref, seed_ref, rows_ref, o_ref, lse_ref, *, scale,
                    rate, causal, heads):
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl

    block_q, keys = q_ref.shape[0], k_ref.shape[0]
    head, start_q = pl.program_id(1), pl.program_id(2)
    q = q_ref[...]
    query_index = start_q * block_q + jnp.arange(block_q)
    row_block = rows_ref[...]

    def body(start_k, carry):
        acc, m_prev, l_prev = carry
        key_slice = pl.ds(start_k * _BLOCK, _BLOCK)
        key_index = start_k * _BLOCK + jnp.arange(_BLOCK)
        s = _scores(q, k_ref[key_slice, :], bias_ref[key_slice], query_index, key_index, scale,
                    causal)
        m_next = jnp.maximum(m_prev, jnp.max(s, axis=-1))
        correction = jnp.exp(m_prev - m_next)
        p = jnp.exp(s - m_next[:, None])
        l_next = l_prev * correction + jnp.sum(p, axis=-1)
        if rate:
            keep = _keep(seed_ref, row_block, head, heads, keys, key_index, rate)
            p = jnp.where(keep, p * (1.0 / (1.0 - rate)), 0.0)
        v = v_ref[key_slice, :]
        acc = acc * correction[:, None] + _dot(p.astype(v.dtype), v)
        return acc, m_next, l_next

    init = (jnp.zeros(q.shape, jnp.float32), jnp.full((block_q,), -jnp.inf, jnp.float32),
            jnp.zeros((block_q,), jnp.float32))
    acc, m, l = lax.fori_loop(0, keys // _BLOCK, body, init)
    o_ref[...] = (acc / l[:, None]).astype(o_ref.dtype)
    lse_ref[...] = m + jnp.log(l)


def _forward(q, k, v, bias, seed_words, rows, scale, rate, causal, interpret):
    import jax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    batch, heads, queries, width = q.shape
    keys = k.shape[2]
    kernel = functools.partial(_forward_kernel, scale=scale, rate=rate, causal=causal,
                               heads=heads)
    query_block = pl.BlockSpec((None, None, _BLOCK, width), lambda b, n, i: (b, n, i, 0))
    whole_keys = pl.BlockSpec((None, None, keys, width), lambda b, n, i: (b, n, 0, 0))
    return pl.pallas_call(
        kernel,
        grid=(batch, heads, queries // _BLOCK),
        in_specs=[query_block, whole_keys, whole_keys,
                  pl.BlockSpec((None, keys), lambda b, n, i: (b, 0)),
                  pl.BlockSpec((2,), lambda b, n, i: (0,)),
                  pl.BlockSpec((None, _BLOCK), lambda b, n, i: (b, i))],
        out_specs=[query_block,
                   pl.BlockSpec((None, None, _BLOCK), lambda b, n, i: (b, n, i))],
        out_shape=[jax.ShapeDtypeStruct(q.shape, q.dtype),
                   jax.ShapeDtypeStruct((batch, heads, queries), np.float32)],
        compiler_params=plgpu.CompilerParams(num_warps=4, num_stages=2),
        interpret=interpret, name="flash_attention_forward",
    )(q, k, v, bias, seed_words, rows)


def _key_grads_kernel(q_ref, k_ref, v_ref, bias_ref, seed_ref, rows_ref, do_ref, lse_ref,
                      delta_ref, dk_ref, dv_ref, *, scale, rate, causal, heads):
    """dK, dV of a block of keys, over every block of queries."""
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl

    queries, keys = q_ref.shape[0], bias_ref.shape[0]
    head, start_k = pl.program_id(1), pl.program_id(2)
    key_slice = pl.ds(start_k * _BLOCK, _BLOCK)
    key_index = start_k * _BLOCK + jnp.arange(_BLOCK)
    k, v, bias_block = k_ref[...], v_ref[...], bias_ref[key_slice]

    def body(start_q, carry):
        dk, dv = carry
        query_slice = pl.ds(start_q * _BLOCK, _BLOCK)
        query_index = start_q * _BLOCK + jnp.arange(_BLOCK)
        q, do = q_ref[query_slice, :], do_ref[query_slice, :]
        s = _scores(q, k, bias_block, query_index, key_index, scale, causal)
        p = jnp.exp(s - lse_ref[query_slice][:, None])
        dp = _dot(do, v, trans_b=True)
        if rate:
            keep = _keep(seed_ref, rows_ref[query_slice], head, heads, keys, key_index, rate)
            inverse = 1.0 / (1.0 - rate)
            dropped = jnp.where(keep, p * inverse, 0.0)
            dp = jnp.where(keep, dp * inverse, 0.0)
        else:
            dropped = p
        dv = dv + _dot(dropped.astype(do.dtype), do, trans_a=True)
        ds = p * (dp - delta_ref[query_slice][:, None]) * scale
        dk = dk + _dot(ds.astype(q.dtype), q, trans_a=True)
        return dk, dv

    zeros = jnp.zeros(k.shape, jnp.float32)
    dk, dv = lax.fori_loop(0, queries // _BLOCK, body, (zeros, zeros))
    dk_ref[...] = dk.astype(dk_ref.dtype)
    dv_ref[...] = dv.astype(dv_ref.dtype)


def _query_grads_kernel(q_ref, k_ref, v_ref, bias_ref, seed_ref, rows_ref, do_ref, lse_ref,
                        delta_ref, dq_ref, *, scale, rate, causal, heads):
    """dQ of a block of queries, over every block of keys."""
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl

    block_q, keys = q_ref.shape[0], k_ref.shape[0]
    head, start_q = pl.program_id(1), pl.program_id(2)
    query_index = start_q * block_q + jnp.arange(block_q)
    q, do, row_block = q_ref[...], do_ref[...], rows_ref[...]
    lse, delta = lse_ref[...], delta_ref[...]

    def body(start_k, dq):
        key_slice = pl.ds(start_k * _BLOCK, _BLOCK)
        key_index = start_k * _BLOCK + jnp.arange(_BLOCK)
        k = k_ref[key_slice, :]
        s = _scores(q, k, bias_ref[key_slice], query_index, key_index, scale, causal)
        p = jnp.exp(s - lse[:, None])
        dp = _dot(do, v_ref[key_slice, :], trans_b=True)
        if rate:
            keep = _keep(seed_ref, row_block, head, heads, keys, key_index, rate)
            dp = jnp.where(keep, dp * (1.0 / (1.0 - rate)), 0.0)
        ds = p * (dp - delta[:, None]) * scale
        return dq + _dot(ds.astype(k.dtype), k)

    dq = lax.fori_loop(0, keys // _BLOCK, body, jnp.zeros(q.shape, jnp.float32))
    dq_ref[...] = dq.astype(dq_ref.dtype)


def _backward(q, k, v, bias, seed_words, rows, out, lse, d_out, scale, rate, causal, interpret):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    batch, heads, queries, width = q.shape
    keys = k.shape[2]
    delta = jnp.sum(out.astype(jnp.float32) * d_out.astype(jnp.float32), axis=-1)
    settings = dict(scale=scale, rate=rate, causal=causal, heads=heads)
    inputs = (q, k, v, bias, seed_words, rows, d_out, lse, delta)
    block = pl.BlockSpec((None, None, _BLOCK, width), lambda b, n, i: (b, n, i, 0))
    whole_q = pl.BlockSpec((None, None, queries, width), lambda b, n, i: (b, n, 0, 0))
    whole_k = pl.BlockSpec((None, None, keys, width), lambda b, n, i: (b, n, 0, 0))
    bias_spec = pl.BlockSpec((None, keys), lambda b, n, i: (b, 0))
    seed_spec = pl.BlockSpec((2,), lambda b, n, i: (0,))
    per_query_whole = pl.BlockSpec((None, None, queries), lambda b, n, i: (b, n, 0))
    per_query_block = pl.BlockSpec((None, None, _BLOCK), lambda b, n, i: (b, n, i))
    params = plgpu.CompilerParams(num_warps=4, num_stages=2)
    dk, dv = pl.pallas_call(
        functools.partial(_key_grads_kernel, **settings),
        grid=(batch, heads, keys // _BLOCK),
        in_specs=[whole_q, block, block, bias_spec, seed_spec,
                  pl.BlockSpec((None, queries), lambda b, n, i: (b, 0)), whole_q,
                  per_query_whole, per_query_whole],
        out_specs=[block, block],
        out_shape=[jax.ShapeDtypeStruct(k.shape, k.dtype), jax.ShapeDtypeStruct(v.shape, v.dtype)],
        compiler_params=params, interpret=interpret, name="flash_attention_key_grads",
    )(*inputs)
    dq = pl.pallas_call(
        functools.partial(_query_grads_kernel, **settings),
        grid=(batch, heads, queries // _BLOCK),
        in_specs=[block, whole_k, whole_k, bias_spec, seed_spec,
                  pl.BlockSpec((None, _BLOCK), lambda b, n, i: (b, i)), block,
                  per_query_block, per_query_block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=params, interpret=interpret, name="flash_attention_query_grads",
    )(*inputs)
    return dq, dk, dv
