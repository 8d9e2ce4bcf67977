"""Dropout whose mask is a counter-based hash of each element's index and an explicit seed.

The seed is an int `[2]` tensor drawn from a layer's Keras `SeedGenerator` (as
`keras.layers.Dropout` draws one), so a recomputed forward pass (activation recomputation) or a
resumed run draws the same mask again. An element is kept where a 32-bit hash of its flat index
and the seed is at least `rate * 2**32`: counter-based like TensorFlow's Philox, but a few
integer operations that XLA fuses into the kernel that applies the mask, and that a backward
kernel recomputes instead of keeping the mask. The fast kernels and the `keras.ops` reference
compute the same hash, so they draw the same masks, on every backend.
"""
import functools

import numpy as np
from keras import ops

from modeling.kernels import xla

# lowbias32 (C. Wellons' hash prospector): a full-avalanche 32-bit mix.
_MIX = (0x7FEB352D, 0x846CA68B)
_GOLDEN = 0x9E3779B9


def _u32(value):
    """`value` as a uint32 constant: one op when traced (a Python int would become an int32 or
    int64 constant and a cast; the hash is most of a dropout kernel's tracing)."""
    return ops.convert_to_tensor(np.uint32(value))


def _mix(x):
    """lowbias32 of uint32 `x`, elementwise."""
    x = ops.bitwise_xor(x, ops.right_shift(x, 16))
    x = ops.multiply(x, _u32(_MIX[0]))
    x = ops.bitwise_xor(x, ops.right_shift(x, 15))
    x = ops.multiply(x, _u32(_MIX[1]))
    return ops.bitwise_xor(x, ops.right_shift(x, 16))


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


def dropout(x, rate, seed, fast=False):
    """`x` where `keep_mask` keeps it, times `1 / (1 - rate)`, else 0, in the dtype of `x`;
    `x` itself at rate 0 or without a seed. `fast`: one XLA kernel forward and one backward,
    the backward drawing the mask again rather than keeping it (the gradient is the same
    dropout of the upstream gradient); the same values as `keras.ops` op by op."""
    if not rate or seed is None:
        return x
    if fast:
        return _fast_dropout(x, rate, seed)
    scale = ops.cast(1.0 / (1.0 - rate), x.dtype)
    return ops.where(keep_mask(ops.shape(x), rate, seed), x * scale, ops.zeros_like(x))


def _fast_dropout(x, rate, seed):
    kernel = _dropout_kernel(float(rate))

    @xla.custom_gradient
    def fn(x):
        return kernel(x, seed), lambda upstream: kernel(upstream, seed)

    return fn(x)


@functools.lru_cache(maxsize=None)
def _dropout_kernel(rate):
    return xla.compiled(lambda x, seed: dropout(x, rate, seed))


def group_seed(seed, index):
    """The seed of row group `index` of a call that computes its rows in groups (group 0 keeps
    `seed`), so the groups' dropout masks are drawn independently."""
    if seed is None or not index:
        return seed
    return seed + ops.convert_to_tensor([index, 0], seed.dtype)
