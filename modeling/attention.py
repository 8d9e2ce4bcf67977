"""Multi-head self-attention as the original `attention_layer` (scope `attention/self`)."""
import math

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
    Returns:
        float `[B, S, H]`: the concatenated heads' context (before the output dense).
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

    def call(self, x, input_mask, seed=None):
        q = self._split_heads(self.query(x))
        k = self._split_heads(self.key(x))
        v = self._split_heads(self.value(x))
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))
        # Softmax and the mask in float32 under mixed precision, scale, mask and dropout fused.
        probs = fused.attention_probs(
            scores, input_mask, 1.0 / math.sqrt(self.head_size), self.dropout_rate, seed)
        context = ops.transpose(ops.matmul(probs, v), (0, 2, 1, 3))  # [B, S, N, D]
        batch, seq = ops.shape(context)[0], ops.shape(context)[1]
        return ops.reshape(context, (batch, seq, self.num_heads * self.head_size))

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            head_size=self.head_size,
            initializer_range=self.initializer_range,
            dropout_rate=self.dropout_rate,
        )
        return config
