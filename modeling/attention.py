"""Multi-head self-attention as the original `attention_layer` (scope `attention/self`)."""
import keras
from keras import ops

from modeling import fused
from modeling.initializers import truncated_normal


class BertSelfAttention(keras.layers.Layer):
    """Scaled dot-product attention with separate `query`, `key`, `value` dense layers.

    Call args:
        x: the rows of the batch in `layout`: float `[B, S, H]` on the grid, `[R, H]` as real rows.
        layout: `modeling.token_rows.GridRows` or `RealRows`, built from the int `[B, S]`
            input mask (1 for real tokens). The mask stays an integer tensor so Keras'
            mixed-precision input casting cannot round it (−10000 → −9984 in bf16).
        seed: the attention-probability dropout's seed (`dropout_seed()`), None for no dropout.
        split: compute the queries of the layout's two row groups apart (each sequence's first
            row, the others; keys and values are still every row), for a caller that may use
            only the first.
    Returns:
        The concatenated heads' context (before the output dense), as rows of `layout` like
        `x`; with `split`, a pair: the groups' rows.
    """

    def __init__(
        self, num_heads, head_size, initializer_range=0.02, dropout_rate=0.1, **kwargs
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.head_size = head_size
        self.initializer_range = initializer_range
        self.dropout_rate = dropout_rate
        width = num_heads * head_size
        init = truncated_normal(initializer_range)
        policy = self.dtype_policy
        self.query = keras.layers.Dense(width, kernel_initializer=init, dtype=policy, name="query")
        self.key = keras.layers.Dense(width, kernel_initializer=init, dtype=policy, name="key")
        self.value = keras.layers.Dense(width, kernel_initializer=init, dtype=policy, name="value")
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=policy)

    def build(self, input_shape):
        for dense in (self.query, self.key, self.value):
            dense.build(input_shape)
        self.built = True

    def _split_heads(self, x):
        batch, seq = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (batch, seq, self.num_heads, self.head_size))
        return ops.transpose(x, (0, 2, 1, 3))  # [B, N, S, D]

    def dropout_seed(self, training):
        """Draws the seed of this call's dropout mask (advancing the layer's generator, as a
        `keras.layers.Dropout` call does); None when there is no dropout."""
        if not training or not self.dropout_rate:
            return None
        return self.dropout.seed_generator.next()

    def call(self, x, layout, seed=None, split=False):
        k_t = ops.transpose(self._split_heads(layout.to_grid(self.key(x))), (0, 1, 3, 2))
        v = self._split_heads(layout.to_grid(self.value(x)))  # [B, N, S, D]
        groups = layout.split(x) if split else [x]
        contexts = []
        for i, rows in enumerate(groups):
            group = i if split else None
            q = self._split_heads(layout.to_grid(self.query(rows), group))
            context = fused.attention(q, k_t, v, layout.input_mask, self.dropout_rate,
                                      fused.group_seed(seed, i))
            context = ops.transpose(context, (0, 2, 1, 3))  # [B, S_q, N, D]
            batch, seq = ops.shape(context)[0], ops.shape(context)[1]
            context = ops.reshape(context, (batch, seq, self.num_heads * self.head_size))
            contexts.append(layout.from_grid(context, group))
        return tuple(contexts) if split else contexts[0]

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            head_size=self.head_size,
            initializer_range=self.initializer_range,
            dropout_rate=self.dropout_rate,
        )
        return config
