"""Dropout whose mask is a counter-based hash of each element's index and an explicit seed.

The seed is an int `[2]` tensor drawn from a layer's Keras `SeedGenerator` (as
`keras.layers.Dropout` draws one), so a recomputed forward pass (activation recomputation) or a
resumed run draws the same mask again. An element is kept where a 32-bit hash of its index and
the seed is at least `rate * 2**32`: counter-based like TensorFlow's Philox, but a few integer
operations that XLA fuses into the kernel that applies the mask, and that a backward kernel
recomputes instead of keeping the mask. The fast kernels and the `keras.ops` reference compute
the same hash, so they draw the same masks, on every backend.

An element's index is its flat index in the tensor, or, with `rows`, its row's number times the
row's size plus its place in the row: the encoder numbers each token's row by its position on
the padded `[B, S]` grid, so a token draws the same mask whether its row is computed on the grid
(XLA), among the real-token rows only, or in a group of rows (`modeling.layers.token_rows`).
"""
import functools

import numpy as np
from keras import ops

from modeling.layers.kernels import xla

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


def keep_mask(shape, rate, seed, rows=None):
    """bool `shape`: which elements dropout at `rate` keeps, for the int `[2]` `seed`.

    Element `i` is kept where `mix(mix(i + k0) ^ k1) >= rate * 2**32`, `k0`, `k1` the mixed
    seed words (a different seed gives an unrelated mask), `i` its row-major flat index; or,
    with `rows` (int, of the rank of `shape` and broadcastable to it: the number of the row of
    each element, a row being the elements along the axes where `rows` has length 1), `i =
    row * row_size + j`, `j` the element's row-major index in its row. The hidden rows `[..., H]`
    of tokens give `rows` `[..., 1]`, each token's grid position; the attention's probabilities
    `[B, N, Sq, S]` give `[B, 1, Sq, 1]`, each query's.
    """
    return ops.greater_equal(random_bits(shape, seed, rows),
                             _u32(min(int(round(rate * 2.0 ** 32)), 2 ** 32 - 1)))


def random_bits(shape, seed, rows=None):
    """uint32 `shape`: the hash of each element's index (`keep_mask`) and the int `[2]` `seed`,
    uniform over 0..2**32-1: the same bits op by op, under XLA and on every backend."""
    k0, k1 = seed_words(seed)
    return _mix(ops.bitwise_xor(_mix(_index_plus(shape, k0, rows)), k1))


def seed_words(seed):
    """The two uint32 words `(k0, k1)` that the int `[2]` `seed` mixes into every element's
    hash (`keep_mask`)."""
    seed = ops.cast(seed, "uint32")
    k0 = _mix(ops.multiply(seed[0], _u32(_GOLDEN)) + _mix(seed[1]))
    return k0, _mix(k0 + _u32(_GOLDEN))


def _index_plus(shape, offset, rows):
    """uint32 `shape`: each element's index (`keep_mask`) plus the uint32 scalar `offset`,
    summed from `offset`, the rows' first indices and one `arange` per axis of a row times the
    axis's stride. In a compiled kernel an `arange` of the whole size would be a constant of 4
    bytes an element (TensorFlow's XLA bridge makes a range a literal, and XLA folds what is
    computed from constants alone), kept in the program and read from memory on every call
    beside the tensor itself: 25 MB for an attention dropout of BERT-Base's
    `[32, 12, 128, 128]`."""
    row_axes = range(len(shape)) if rows is None else [
        axis for axis, length in enumerate(rows.shape) if length == 1]
    index, stride = offset, 1
    for axis in reversed(row_axes):
        term = ops.cast(ops.arange(shape[axis], dtype="int32"), "uint32")
        index = ops.reshape(term * _u32_of(stride), (-1,) + (1,) * (len(shape) - 1 - axis)) + index
        stride = stride * shape[axis]
    if rows is not None:
        index = ops.cast(rows, "uint32") * _u32_of(stride) + index
    return ops.broadcast_to(index, shape)


def _u32_of(value):
    """A Python int or an integer tensor (a length not known when traced) as uint32."""
    return _u32(value) if isinstance(value, int) else ops.cast(value, "uint32")


def dropout(x, rate, seed, rows=None, fast=False):
    """`x` where `keep_mask` keeps it (with `rows`, see there), times `1 / (1 - rate)`, else 0,
    in the dtype of `x`; `x` itself at rate 0 or without a seed. `fast`: one XLA kernel forward
    and one backward, the backward drawing the mask again rather than keeping it (the gradient
    is the same dropout of the upstream gradient); the same values as `keras.ops` op by op."""
    if not rate or seed is None:
        return x
    if fast:
        return _fast_dropout(x, rate, seed, rows)
    scale = ops.cast(1.0 / (1.0 - rate), x.dtype)
    return ops.where(keep_mask(ops.shape(x), rate, seed, rows), x * scale, ops.zeros_like(x))


def _fast_dropout(x, rate, seed, rows):
    kernel = _dropout_kernel(float(rate))

    @xla.custom_gradient
    def fn(x):
        return kernel(x, seed, rows), lambda upstream: kernel(upstream, seed, rows)

    return fn(x)


@functools.lru_cache(maxsize=None)
def _dropout_kernel(rate):
    return xla.compiled(lambda x, seed, rows: dropout(x, rate, seed, rows))


def grid_positions(batch, seq):
    """int `[batch, seq]`: `b * seq + s`, each token's position on the padded grid, which the
    encoder's dropouts number its rows by (`keep_mask`'s `rows`)."""
    return (ops.arange(batch, dtype="int32")[:, None] * seq
            + ops.arange(seq, dtype="int32")[None, :])
