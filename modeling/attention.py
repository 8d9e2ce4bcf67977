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

    def dropout_seed(self, training):
        """Draws the seed of this call's dropout mask (advancing the layer's generator, as a
        `keras.layers.Dropout` call does); None when there is no dropout."""
        if not training or not self.dropout_rate:
            return None
        return self.dropout.seed_generator.next()

    def _project(self, x, dense, layout, group=None):
        """`dense(x)` as the attention's heads `[B, N, S_q, D]`: the matmul here, the bias in the
        kernel that moves the rows to the heads (`token_rows._to_heads` says why)."""
        kernel = ops.cast(dense.kernel, self.compute_dtype)
        return layout.to_heads(ops.matmul(x, kernel), self.num_heads, group, bias=dense.bias)

    def call(self, x, layout, seed=None, split=False):
        # The three projections stay apart: one matmul with their kernels side by side made a
        # CPU training step 2.5% slower (its split and transposes cost more than it saved).
        k = self._project(x, self.key, layout)  # [B, N, S, D]
        v = self._project(x, self.value, layout)
        groups = layout.split(x) if split else [x]
        contexts = []
        for i, rows in enumerate(groups):
            group = i if split else None
            q = self._project(rows, self.query, layout, group)
            context = fused.attention(q, k, v, layout.input_mask, self.dropout_rate,
                                      fused.group_seed(seed, i))
            contexts.append(layout.from_heads(context, group))
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
