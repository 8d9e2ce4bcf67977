"""Where the encoder's per-token rows live: on the padded `[B, S]` grid, or only the real tokens.

A batch padded to `[B, S]` holds `N` real tokens (`input_mask` 1). Every sub-layer of an encoder
block except the attention works on each token's row alone (dense layers, GELU, dropout, residual
sums, LayerNorm), so it can run on the real rows as one `[R, H]` block instead of all `B * S`:
the same values for those rows, and `(B * S - N) / (B * S)` less work (a quarter to a half of a
fine-tuning run's arithmetic at `max_seq_length=128` on sentence-length text). The attention puts
the rows back on the grid for its scores and context: there, padded positions read any real row;
as keys they get the original's −10000 and a probability of exactly 0 (the exponential
underflows), and no query on a padded position is ever read back.

`GridRows` is the original's layout (every position computed, padded rows included); `RealRows`
the real-token one, which needs a backend with data-dependent shapes (TensorFlow; `supported()`).
Both split the rows into each sequence's first row (`[CLS]`, all a pooler reads) and the others,
so a block can compute the two groups apart.
"""
import keras
from keras import ops

# The real-row block is padded with filler rows to a multiple of this: a run meets a few distinct
# shapes rather than one per batch (each new shape costs the XLA-compiled GELU a compilation and
# oneDNN new matmul kernels); at most ROW_BUCKET - 1 rows of waste per batch.
ROW_BUCKET = 256


def supported():
    """Whether the backend runs `RealRows` (data-dependent shapes inside compiled functions)."""
    return keras.backend.backend() == "tensorflow"


class GridRows:
    """Rows on the padded grid: `[B, S, H]`, every position (the original's layout)."""

    def __init__(self, input_mask):
        self.input_mask = input_mask

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


class RealRows:
    """The real tokens' rows as one `[R, H]` block: the `B` first rows (`[CLS]`, kept even in a
    fully padded sequence), then the other real rows in order, then filler rows (copies of row
    0, never read back) up to a multiple of `ROW_BUCKET`.

    Args:
        input_mask: int `[B, S]`, 1 for real tokens.
    """

    def __init__(self, input_mask):
        self.input_mask = input_mask
        shape = ops.shape(input_mask)
        self.batch, self.seq = shape[0], shape[1]
        positions = ops.arange(self.batch * self.seq, dtype="int32")
        is_first = ops.equal(positions % self.seq, 0)
        is_other = ops.logical_and(ops.reshape(ops.not_equal(input_mask, 0), (-1,)),
                                   ops.logical_not(is_first))
        others = ops.cast(ops.where(is_other)[0], "int32")
        count = self.batch + ops.shape(others)[0]
        # Grid position of each row.
        self.index = ops.concatenate([
            ops.arange(self.batch, dtype="int32") * self.seq, others,
            ops.zeros(((-count) % ROW_BUCKET,), "int32")])
        # Row of each grid position (0 for padded ones: any real row will do).
        other_rank = ops.cumsum(ops.cast(is_other, "int32")) - 1
        self.inverse = ops.where(is_first, positions // self.seq,
                                 ops.where(is_other, self.batch + other_rank, 0))

    def _flat(self, grid):
        return ops.reshape(grid, (self.batch * self.seq,) + tuple(grid.shape[2:]))

    def _grid(self, flat):
        return ops.reshape(flat, (self.batch, self.seq) + tuple(flat.shape[1:]))

    def rows(self, grid):
        return ops.take(self._flat(grid), self.index, axis=0)

    def split(self, rows):
        return rows[:self.batch], rows[self.batch:]

    def join(self, first, others):
        return ops.concatenate([first, others], axis=0)

    def first_vectors(self, first):
        return first

    def to_grid(self, rows, group=None):
        if group == 0:
            return ops.expand_dims(rows, 1)
        inverse = self.inverse if group is None else ops.maximum(self.inverse - self.batch, 0)
        return self._grid(ops.take(rows, inverse, axis=0))

    def from_grid(self, grid, group=None):
        if group == 0:
            return grid[:, 0]
        index = self.index if group is None else self.index[self.batch:]
        return ops.take(self._flat(grid), index, axis=0)
