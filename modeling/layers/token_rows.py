"""Where the encoder's per-token rows live: on the padded `[B, S]` grid, or only the real tokens.

A batch padded to `[B, S]` holds `N` real tokens (`input_mask` 1). Every sub-layer of an encoder
block except the attention works on each token's row alone (dense layers, GELU, dropout, residual
sums, LayerNorm), so it can run on the real rows as one `[R, H]` block instead of all `B * S`:
the same values for those rows, and `(B * S - N) / (B * S)` less work (a quarter to a half of a
fine-tuning run's arithmetic at `max_seq_length=128` on sentence-length text). The attention puts
the rows back on the grid for its scores and context: there, padded positions hold zeros; as
keys they get the original's −10000 and a probability of exactly 0 (the exponential
underflows), and no query on a padded position is ever read back. `sequence_output` (and every
layer's output) holds zeros at padded positions in this layout.

`GridRows` is the original's layout (every position computed, padded rows included); `RealRows`
the real-token one, which needs a backend with data-dependent shapes (TensorFlow; `supported()`).
Both split the rows into each sequence's first row (`[CLS]`, all a pooler reads) and the others,
so a block can compute the two groups apart. Both number every row by its token's position on
the grid (`positions`, `query_positions`), which dropout draws its masks for
(`modeling.layers.kernels.keep_mask`): a token gets the same masks in either layout and either
group.
"""
import keras
from keras import ops

from modeling.layers.kernels import grid_positions, heads_to_rows, rows_to_heads, take_rows
from modeling.layers.kernels.xla import custom_gradient

# The real-row block is padded with filler rows to a multiple of this: a run meets a few distinct
# shapes rather than one per batch (each new shape costs the XLA-compiled GELU a compilation and
# oneDNN new matmul kernels); at most ROW_BUCKET - 1 rows of waste per batch.
ROW_BUCKET = 256
# With `small_blocks` (served requests: `BertModel.small_row_blocks`), a block below ROW_BUCKET
# rows is padded to a multiple of SMALL_BLOCK_ROWS instead: one served sentence of 24
# word-pieces computes 24 rows, not 256 (nor the 32 of a power of two: a third more matmul work,
# which at a request's few rows is most of its time). At most ROW_BUCKET / SMALL_BLOCK_ROWS
# shapes below ROW_BUCKET, each compiled once per process. Fine-tuning keeps the coarse buckets,
# where a few more distinct shapes each cost compilations on small evaluation batches.
SMALL_BLOCK_ROWS = 8


def padded_rows(count, small_blocks=False):
    """The block's rows for `count` real ones (int32 scalar): the next multiple of ROW_BUCKET;
    with `small_blocks`, below that the next multiple of SMALL_BLOCK_ROWS."""
    rows = (count + ROW_BUCKET - 1) // ROW_BUCKET * ROW_BUCKET
    if not small_blocks:
        return rows
    return ops.where(count < ROW_BUCKET,
                     (count + SMALL_BLOCK_ROWS - 1) // SMALL_BLOCK_ROWS * SMALL_BLOCK_ROWS, rows)


def supported():
    """Whether the backend runs `RealRows` (data-dependent shapes inside compiled functions)."""
    return keras.backend.backend() == "tensorflow"


class GridRows:
    """Rows on the padded grid: `[B, S, H]`, every position (the original's layout).

    `sequence_ids`: int `[B, S]` for packed rows (several sequences in one row, each attending
    to itself only: `modeling.layers.attention.mask_bias`), else None.
    """

    def __init__(self, input_mask, sequence_ids=None):
        self.input_mask = input_mask
        self.sequence_ids = sequence_ids
        shape = ops.shape(input_mask)
        self.batch, self.seq = shape[0], shape[1]

    def positions(self, group=None):
        """The grid position (`b * S + s`) of each row (all, or group 0/1 of `split`): int
        `[B, S_q]`."""
        positions = grid_positions(self.batch, self.seq)
        return positions if group is None else self.split(positions)[group]

    def query_positions(self, group=None):
        """The grid position of each query `to_heads` makes of the rows (all, or group 0/1 of
        `split`): int `[B, S_q]`."""
        return self.positions(group)

    def rows(self, grid):
        """`[B, S, ...]` on the grid -> this layout's rows."""
        return grid

    def split(self, rows):
        """The rows as (first rows `[B, 1, H]`, the others `[B, S - 1, H]`)."""
        return rows[:, :1], rows[:, 1:]

    def join(self, first, others):
        return ops.concatenate([first, others], axis=1)

    def first_vectors(self, first):
        """The first group's rows as `[B, H]`."""
        return first[:, 0]

    def to_grid(self, rows, group=None):
        """Rows (all, or group 0/1 of `split`) -> `[B, S_q, ...]` for the attention."""
        del group
        return rows

    def from_grid(self, grid, group=None):
        """The attention's `[B, S_q, ...]` output -> rows (all, or group 0/1 of `split`)."""
        del group
        return grid

    def to_heads(self, rows, num_heads, group=None, bias=None):
        """Rows (all, or group 0/1 of `split`), `H` wide, plus `bias` (`[H]` or None) -> the
        attention's `[B, N, S_q, D]`."""
        # The bias stays a separate add here: on the grid, `RealRows`' kernel (every position
        # kept) made a training step slower.
        return _split_heads(self.to_grid(_plus(rows, bias), group), num_heads)

    def from_heads(self, heads, group=None):
        """The attention's `[B, N, S_q, D]` -> rows (all, or group 0/1 of `split`)."""
        return self.from_grid(_join_heads(heads), group)


def _to_heads(rows, num_heads, bias, moves, fast):
    """Rows `[M, H]` plus `bias` (`[H]` or None) onto the attention's heads by
    `kernels.rows_to_heads`, with `moves = (row index [M], row valid, grid index [B, S], grid
    valid)`; the gradient is the move back, with the bias gradient summed in the same kernel.
    The bias is added here rather than by the dense layer: with it, TensorFlow fuses matmul and
    bias into an oneDNN kernel that does not use the CPU's bfloat16 matrix units."""
    index, valid, inverse, grid_valid = moves

    @custom_gradient
    def fn(rows, bias):
        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            d_rows, d_bias = heads_to_rows(upstream, index, valid, column_sum=True, fast=fast)
            return d_rows, ops.cast(d_bias, bias.dtype)

        return rows_to_heads(rows, inverse, grid_valid, num_heads, bias, fast=fast), grad

    bias = ops.zeros((rows.shape[-1],), rows.dtype) if bias is None else bias
    return fn(rows, ops.cast(bias, rows.dtype))


def _plus(rows, bias):
    return rows if bias is None else ops.add(rows, ops.cast(bias, rows.dtype))


def _split_heads(grid, num_heads):
    """`[B, S, H]` -> `[B, N, S, H / N]`."""
    batch, seq = ops.shape(grid)[0], ops.shape(grid)[1]
    grid = ops.reshape(grid, (batch, seq, num_heads, grid.shape[-1] // num_heads))
    return ops.transpose(grid, (0, 2, 1, 3))


def _join_heads(heads):
    """`[B, N, S, D]` -> `[B, S, N * D]`."""
    batch, seq = ops.shape(heads)[0], ops.shape(heads)[2]
    return ops.reshape(ops.transpose(heads, (0, 2, 1, 3)), (batch, seq, heads.shape[1] * heads.shape[3]))


def _moved(x, move, move_back):
    """`move(x)`, a gather of rows (zeros where it reads nothing) whose transpose is
    `move_back`: each row it reads lands in one place, and `move_back` reads it from there.
    The gradient is then `move_back` of the upstream gradient, a gather like the forward pass,
    instead of the scatter-add (a segment sum, slower on a CPU) that differentiating a
    gather gives in general."""
    @custom_gradient
    def fn(x):
        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            return move_back(upstream)

        return move(x), grad

    return fn(x)


class RealRows:
    """The real tokens' rows as one `[R, H]` block: the `B` first rows (`[CLS]`, kept even in a
    fully padded sequence), then the other real rows in order, then zero filler rows up to
    `padded_rows`.

    Moving rows onto the grid and back gives zeros at padded positions and in filler rows (no
    row is read twice), so each move's gradient is the move back (`_moved`).

    Args:
        input_mask: int `[B, S]`, 1 for real tokens.
        fast: the moves as TensorFlow kernels (`modeling.layers.kernels.use_fast`), else
            `keras.ops`.
        small_blocks: `padded_rows`' small buckets (serving).
    """

    # Packed rows need the grid: their attention mask is per pair of positions.
    sequence_ids = None

    def __init__(self, input_mask, *, fast, small_blocks=False):
        self.input_mask = input_mask
        self.fast = fast
        shape = ops.shape(input_mask)
        self.batch, self.seq = shape[0], shape[1]
        positions = ops.arange(self.batch * self.seq, dtype="int32")
        is_first = ops.equal(positions % self.seq, 0)
        is_other = ops.logical_and(ops.reshape(ops.not_equal(input_mask, 0), (-1,)),
                                   ops.logical_not(is_first))
        others = ops.cast(ops.where(is_other)[0], "int32")
        count = self.batch + ops.shape(others)[0]
        filler = padded_rows(count, small_blocks) - count
        # Grid position of each row (0 for filler rows), and which rows are real.
        self.index = ops.concatenate([
            ops.arange(self.batch, dtype="int32") * self.seq, others,
            ops.zeros((filler,), "int32")])
        self.row_valid = ops.arange(count + filler, dtype="int32") < count
        # Row of each grid position (0 for padded ones), and which positions are real.
        other_rank = ops.cumsum(ops.cast(is_other, "int32")) - 1
        self.inverse = ops.where(is_first, positions // self.seq,
                                 ops.where(is_other, self.batch + other_rank, 0))
        self.grid_valid = ops.logical_or(is_first, is_other)
        # The same for the rows after the first ones (group 1 of `split`).
        self._other_moves = (self.index[self.batch:], self.row_valid[self.batch:],
                             ops.maximum(self.inverse - self.batch, 0), is_other)

    def _flat(self, grid):
        return ops.reshape(grid, (self.batch * self.seq,) + tuple(grid.shape[2:]))

    def _grid(self, flat):
        return ops.reshape(flat, (self.batch, self.seq) + tuple(flat.shape[1:]))

    def _moves(self, group):
        """(row index, row valid, grid index, grid valid), flat, of all rows or group 1."""
        if group is None:
            return self.index, self.row_valid, self.inverse, self.grid_valid
        return self._other_moves

    def _head_moves(self, group):
        """`_moves` with the grid's two as `[B, S]`, for the moves to and from the heads."""
        index, valid, inverse, grid_valid = self._moves(group)
        return index, valid, self._grid(inverse), self._grid(grid_valid)

    def positions(self, group=None):
        """The grid position (`b * S + s`) of each row (all, or group 0/1 of `split`): int
        `[R]` (filler rows: 0; no value of theirs is read)."""
        return self.index if group is None else self.split(self.index)[group]

    def query_positions(self, group=None):
        """The grid position of each query `to_heads` makes of the rows (all, or group 0/1 of
        `split`): int `[B, S_q]`: the whole grid (group 1's first queries are zeros, never read
        back), or the first position for group 0."""
        positions = grid_positions(self.batch, self.seq)
        return positions[:, :1] if group == 0 else positions

    def rows(self, grid):
        return self.from_grid(grid)

    def split(self, rows):
        return rows[:self.batch], rows[self.batch:]

    def join(self, first, others):
        return ops.concatenate([first, others], axis=0)

    def first_vectors(self, first):
        return first

    def to_grid(self, rows, group=None):
        if group == 0:
            return ops.expand_dims(rows, 1)
        index, valid, inverse, grid_valid = self._moves(group)
        return self._grid(_moved(rows, lambda x: take_rows(x, inverse, grid_valid, fast=self.fast),
                                 lambda d: take_rows(d, index, valid, fast=self.fast)))

    def from_grid(self, grid, group=None):
        if group == 0:
            return grid[:, 0]
        index, valid, inverse, grid_valid = self._moves(group)
        return _moved(self._flat(grid), lambda x: take_rows(x, index, valid, fast=self.fast),
                      lambda d: take_rows(d, inverse, grid_valid, fast=self.fast))

    def to_heads(self, rows, num_heads, group=None, bias=None):
        if group == 0:
            return _split_heads(ops.expand_dims(_plus(rows, bias), 1), num_heads)
        return _to_heads(rows, num_heads, bias, self._head_moves(group), self.fast)

    def from_heads(self, heads, group=None):
        if group == 0:
            return _join_heads(heads)[:, 0]
        index, valid, inverse, grid_valid = self._head_moves(group)
        num_heads = heads.shape[1]
        return _moved(heads, lambda x: heads_to_rows(x, index, valid, fast=self.fast),
                      lambda d: rows_to_heads(d, inverse, grid_valid, num_heads, fast=self.fast))
