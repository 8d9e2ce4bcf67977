"""Output layers attached to the encoder, each holding the original's variables.

| head                | original scope          | variables                                   |
|---------------------|-------------------------|---------------------------------------------|
| MaskedLMHead        | cls/predictions         | transform/dense, transform/LayerNorm, output_bias |
| NextSentenceHead    | cls/seq_relationship    | output_weights [2, H], output_bias [2]      |
| ClassificationHead  | (top level)             | output_weights [L, H], output_bias [L]      |
| SpanHead            | cls/squad               | output_weights [2, H], output_bias [2]      |

`output_weights` are stored `[out, in]` (transposed relative to a Dense kernel), as the original.
"""
import keras
from keras import ops

from modeling.layers.activations import get_activation
from modeling.layers.embeddings import LAYER_NORM_EPSILON
from modeling.layers.hashed_dropout import HashedDropout
from modeling.layers.initializers import truncated_normal


def gather_positions(sequence_output, positions):
    """`[B, S, H]`, int `[B, P]` → `[B, P, H]`: the vectors at the masked positions.

    Taken from the vectors in float32 and cast back (the same values): the gradient is then a
    float32 scatter-add, where a bfloat16 one is a slow atomic loop on GPUs."""
    rows = ops.take_along_axis(ops.cast(sequence_output, "float32"),
                               ops.expand_dims(positions, -1), axis=1)
    return ops.cast(rows, sequence_output.dtype)


class _TransposedDense(keras.layers.Layer):
    """`x @ output_weights^T + output_bias` with weights stored `[units, in]`, as the original.

    Subclasses add their own constructor arguments to `get_config`.
    """

    def __init__(self, units, input_size, stddev, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.input_size = input_size
        self.stddev = stddev

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights",
            shape=(self.units, self.input_size),
            initializer=truncated_normal(self.stddev),
        )
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.units,), initializer="zeros"
        )
        self.built = True

    def call(self, x):
        return ops.matmul(x, ops.transpose(self.output_weights)) + self.output_bias


class MaskedLMHead(keras.layers.Layer):
    """Masked-LM logits: gather, dense with the config's activation, LayerNorm, tied decoder.

    `hidden_size` is the transform's width, the embedding table's; `input_size` the encoder's
    when it differs (ELECTRA's generator: `generator_predictions`, its encoder narrower or wider
    than the shared tables).

    Call args:
        sequence_output: float `[B, S, input_size]`; positions: int `[B, P]`;
        embedding_table: the encoder's word embeddings `[V, hidden_size]` (the decoder is tied
        to it).
    Returns:
        float32 logits `[B, P, V]`.
    """

    def __init__(self, vocab_size, hidden_size, hidden_act="gelu", initializer_range=0.02,
                 input_size=None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.input_size = input_size or hidden_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.transform = keras.layers.Dense(
            hidden_size,
            activation=get_activation(hidden_act),
            kernel_initializer=truncated_normal(initializer_range),
            dtype=self.dtype_policy,
            name="transform_dense",
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype="float32", name="transform_LayerNorm"
        )

    def build(self, input_shape=None):
        self.transform.build((None, None, self.input_size))
        self.layer_norm.build((None, None, self.hidden_size))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(self.vocab_size,), initializer="zeros"
        )
        self.built = True

    def call(self, sequence_output, positions, embedding_table):
        x = self.layer_norm(self.transform(gather_positions(sequence_output, positions)))
        x = ops.cast(x, self.compute_dtype)
        table = ops.cast(embedding_table, self.compute_dtype)
        logits = ops.matmul(x, ops.transpose(table))
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            hidden_act=self.hidden_act,
            initializer_range=self.initializer_range,
            input_size=self.input_size,
        )
        return config


class NextSentenceHead(_TransposedDense):
    """Next-sentence logits `[B, 2]` from the pooled output; label 0 = IsNext, 1 = random."""

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(2, hidden_size, initializer_range, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.input_size, initializer_range=self.stddev)
        return config


class ClassificationHead(_TransposedDense):
    """`run_classifier.create_model`'s layer: dropout(0.1) on the pooled output, then logits.

    The initializer stddev is 0.02 whatever the config says (hard-coded in the original).
    """

    def __init__(self, num_labels, hidden_size, dropout_rate=0.1, **kwargs):
        super().__init__(num_labels, hidden_size, 0.02, **kwargs)
        self.dropout_rate = dropout_rate
        self.dropout = HashedDropout(dropout_rate, dtype=self.dtype_policy)

    def call(self, pooled_output, training=False):
        return super().call(self.dropout(pooled_output, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(num_labels=self.units, hidden_size=self.input_size, dropout_rate=self.dropout_rate)
        return config


class SpanHead(_TransposedDense):
    """SQuAD start/end logits: float `[B, S, H]` → two float `[B, S]` (stddev 0.02, as the original)."""

    def __init__(self, hidden_size, **kwargs):
        super().__init__(2, hidden_size, 0.02, **kwargs)

    def call(self, sequence_output):
        logits = super().call(sequence_output)
        return logits[..., 0], logits[..., 1]

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.input_size)
        return config
