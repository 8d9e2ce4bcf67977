"""Moves of token rows between the real-row block `[M, H]` and the attention's grid
(`modeling.layers.token_rows`): gathers with zeros where a row reads nothing, one XLA kernel each on
TensorFlow (a gather, a select, and for the heads a bias add and a transpose, in one pass)."""
import functools

from keras import ops

from modeling.layers.kernels import xla


def take_rows(x, index, valid, *, fast):
    """`x[index]` along the first axis, with zeros for the rows where the bool `valid` is False
    (`[M]` each)."""
    if fast:
        return _kernels()[0](x, index, valid)
    return _take_rows(x, index, valid)


def rows_to_heads(rows, index, valid, num_heads, bias=None, *, fast):
    """Rows `[M, H]` plus `bias` (`[H]`, or None) onto the attention's grid `[B, N, S, D]` (`N`
    heads of `D = H / N`): position `(b, s)` holds row `index[b, s]`, or zeros where
    `valid[b, s]` is False."""
    bias = xla.bias_or_zeros(bias, rows)
    if fast:
        return _kernels()[1](rows, index, valid, num_heads, bias)
    return _rows_to_heads(rows, index, valid, num_heads, bias)


def heads_to_rows(heads, index, valid, column_sum=False, *, fast):
    """The attention's `[B, N, S, D]` back to rows `[M, N * D]`: row `i` is grid position
    `index[i]` (flat, `b * S + s`), or zeros where `valid[i]` is False. With `column_sum`, also
    the float32 sum of the rows (`[N * D]`: a bias gradient)."""
    if fast:
        return _kernels()[2 + column_sum](heads, index, valid)
    rows = _heads_to_rows(heads, index, valid)
    return (rows, _column_sum(rows)) if column_sum else rows


def _take_rows(x, index, valid):
    valid = ops.reshape(valid, (-1,) + (1,) * (len(x.shape) - 1))
    return ops.where(valid, ops.take(x, index, axis=0), ops.zeros((), x.dtype))


def _rows_to_heads(rows, index, valid, num_heads, bias):
    batch, seq = ops.shape(index)[0], ops.shape(index)[1]
    grid = _take_rows(rows + bias, ops.reshape(index, (-1,)), ops.reshape(valid, (-1,)))
    grid = ops.reshape(grid, (batch, seq, num_heads, rows.shape[-1] // num_heads))
    return ops.transpose(grid, (0, 2, 1, 3))


def _heads_to_rows(heads, index, valid):
    batch, seq = ops.shape(heads)[0], ops.shape(heads)[2]
    width = heads.shape[1] * heads.shape[3]
    flat = ops.reshape(ops.transpose(heads, (0, 2, 1, 3)), (batch * seq, width))
    return _take_rows(flat, index, valid)


def _column_sum(rows):
    return ops.sum(ops.cast(rows, "float32"), axis=0)


def _heads_to_rows_and_sum(heads, index, valid):
    rows = _heads_to_rows(heads, index, valid)
    return rows, _column_sum(rows)


@functools.lru_cache(maxsize=None)
def _kernels():
    return tuple(xla.compiled(fn) for fn in (_take_rows, _rows_to_heads, _heads_to_rows,
                                              _heads_to_rows_and_sum))
