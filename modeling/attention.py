"""Multi-head self-attention as the original `attention_layer` (scope `attention/self`)."""
import keras
from keras import ops

from modeling import fused
from modeling.initializers import truncated_normal


class BertSelfAttention(keras.layers.Layer):
    """Scaled dot-product attention with separate `query`, `key`, `value` dense layers.

    Call args:
        x: float `[B, S, H]`.
        input_mask: int `[B, S]`, 1 for real tokens. It stays an integer tensor so Keras'
            mixed-precision input casting cannot round the float32 mask (−10000 → −9984 in bf16).
        seed: the attention-probability dropout's seed (`dropout_seed()`), None for no dropout.
        query_groups: optional list of `[B, S_i, H]` slices of `x` whose rows are the queries
            (keys and values are still every row of `x`), for computing some rows apart.
    Returns:
        float `[B, S, H]`: the concatenated heads' context (before the output dense); with
        `query_groups`, a list of `[B, S_i, H]`, one per group.
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

    def call(self, x, input_mask, seed=None, query_groups=None):
        k_t = ops.transpose(self._split_heads(self.key(x)), (0, 1, 3, 2))  # [B, N, D, S]
        v = self._split_heads(self.value(x))
        groups = [x] if query_groups is None else query_groups
        contexts = []
        for i, rows in enumerate(groups):
            context = fused.attention(self._split_heads(self.query(rows)), k_t, v, input_mask,
                                      self.dropout_rate, fused.group_seed(seed, i))
            context = ops.transpose(context, (0, 2, 1, 3))  # [B, S_i, N, D]
            batch, seq = ops.shape(context)[0], ops.shape(context)[1]
            contexts.append(ops.reshape(context, (batch, seq, self.num_heads * self.head_size)))
        return contexts[0] if query_groups is None else contexts

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            head_size=self.head_size,
            initializer_range=self.initializer_range,
            dropout_rate=self.dropout_rate,
        )
        return config
