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
    bits = _mix(ops.bitwise_xor(_mix(_flat_index_plus(shape, k0)), k1))
    return ops.greater_equal(bits, _u32(min(int(round(rate * 2.0 ** 32)), 2 ** 32 - 1)))


def _flat_index_plus(shape, offset):
    """uint32 `shape`: each element's row-major flat index plus the uint32 scalar `offset`,
    summed from `offset` and one `arange` per axis times the axis's stride. In a compiled
    kernel an `arange` of the whole size would be a constant of 4 bytes an element
    (TensorFlow's XLA bridge makes a range a literal, and XLA folds what is computed from
    constants alone), kept in the program and read from memory on every call beside the tensor
    itself: 25 MB for an attention dropout of BERT-Base's `[32, 12, 128, 128]`."""
    index, stride = offset, 1
    for axis in reversed(range(len(shape))):
        term = ops.cast(ops.arange(shape[axis], dtype="int32"), "uint32")
        stride_u32 = _u32(stride) if isinstance(stride, int) else ops.cast(stride, "uint32")
        index = ops.reshape(term * stride_u32, (-1,) + (1,) * (len(shape) - 1 - axis)) + index
        stride = stride * shape[axis]
    return ops.broadcast_to(index, shape)


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
