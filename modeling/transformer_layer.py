"""One post-LayerNorm encoder block (scope `bert/encoder/layer_{i}`)."""
import keras
from keras import ops

from modeling import activations, fused
from modeling.activations import get_activation
from modeling.attention import BertSelfAttention
from modeling.embeddings import LAYER_NORM_EPSILON
from modeling.initializers import truncated_normal


class TransformerLayer(keras.layers.Layer):
    """`a = LN(x + drop(dense(attn(x))))`, `y = LN(a + drop(dense(act(dense(a)))))`.

    With `recompute=True`, training keeps only the layer's input for the backward pass and
    computes the layer's activations again there (`keras.remat`): less memory for ~1/3 more
    compute. The dropout seeds are drawn before, outside the recomputed function, so the second
    pass draws the same masks and the gradients are those of the stored-activation layer.

    Call args:
        x: the rows of the batch in `layout`: float `[B, S, H]` on the grid, `[R, H]` as real
            rows (`modeling.token_rows`).
        layout: `GridRows` or `RealRows` of the batch's int `[B, S]` input mask.
        first_row_apart: compute each sequence's first row (`[CLS]`) and the other rows as two
            groups (each row's output depends on every row of `x`, but only on its own row after
            the attention): a caller that uses only the first rows lets graph pruning drop the
            other rows' queries, attention, feed-forward and LayerNorms.
    Returns:
        The output rows, like `x`; with `first_row_apart` the pair `layout.split()` gives.
    """

    def __init__(
        self,
        hidden_size,
        num_heads,
        intermediate_size,
        hidden_act="gelu",
        hidden_dropout_rate=0.1,
        attention_dropout_rate=0.1,
        initializer_range=0.02,
        recompute=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.recompute = recompute
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_rate = hidden_dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.initializer_range = initializer_range
        init = truncated_normal(initializer_range)
        policy = self.dtype_policy
        self.attention = BertSelfAttention(
            num_heads,
            hidden_size // num_heads,
            initializer_range=initializer_range,
            dropout_rate=attention_dropout_rate,
            dtype=policy,
            name="self",
        )
        self.attention_output = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=policy, name="attention_output_dense"
        )
        self.attention_dropout = keras.layers.Dropout(hidden_dropout_rate, dtype=policy)
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype="float32", name="attention_output_LayerNorm"
        )
        self.intermediate = keras.layers.Dense(
            intermediate_size,
            activation=_activation(hidden_act),
            kernel_initializer=init,
            dtype=policy,
            name="intermediate_dense",
        )
        self.output_dense = keras.layers.Dense(
            hidden_size, kernel_initializer=init, dtype=policy, name="output_dense"
        )
        self.output_dropout = keras.layers.Dropout(hidden_dropout_rate, dtype=policy)
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype="float32", name="output_LayerNorm"
        )

    def build(self, input_shape):
        hidden_shape = (None, None, self.hidden_size)
        self.attention.build(hidden_shape)
        self.attention_output.build(hidden_shape)
        self.attention_layer_norm.build(hidden_shape)
        self.intermediate.build(hidden_shape)
        self.output_dense.build((None, None, self.intermediate_size))
        self.output_layer_norm.build(hidden_shape)
        self.built = True

    @staticmethod
    def _dropout_seed(dropout, training):
        """Draws the seed of a `keras.layers.Dropout`'s mask (advancing its generator as its own
        call would); None when there is no dropout."""
        if not training or not dropout.rate:
            return None
        return dropout.seed_generator.next()

    def call(self, x, layout, training=False, first_row_apart=False):
        seeds = (self.attention.dropout_seed(training),
                 self._dropout_seed(self.attention_dropout, training),
                 self._dropout_seed(self.output_dropout, training))
        forward = lambda x: self._forward(x, layout, seeds, first_row_apart)  # noqa: E731
        if self.recompute and training:
            return keras.remat(forward)(x)
        return forward(x)

    def _forward(self, x, layout, seeds, first_row_apart):
        attention_seed, attention_output_seed, output_seed = seeds
        groups = layout.split(x) if first_row_apart else [x]
        attended = self.attention(x, layout=layout, seed=attention_seed, split=first_row_apart)
        outputs = []
        for i, (rows, context) in enumerate(zip(groups, attended if first_row_apart else [attended])):
            a = self._residual_layer_norm(
                self.attention_output, context, rows, self.attention_layer_norm,
                self.attention_dropout, fused.group_seed(attention_output_seed, i))
            outputs.append(self._residual_layer_norm(
                self.output_dense, self._intermediate(a), a, self.output_layer_norm,
                self.output_dropout, fused.group_seed(output_seed, i)))
        return tuple(outputs) if first_row_apart else outputs[0]

    def _matmul(self, x, dense):
        """`x` times a dense layer's kernel, without its bias."""
        return ops.matmul(x, ops.cast(dense.kernel, self.compute_dtype))

    def _intermediate(self, a):
        """The intermediate dense layer and its activation; a GELU takes the bias into its
        fused kernel (`modeling.fused.gelu`)."""
        function = get_activation(self.hidden_act)
        if function not in (activations.gelu, activations.gelu_exact):
            return self.intermediate(a)
        return fused.gelu(self._matmul(a, self.intermediate),
                          approximate=function is activations.gelu, bias=self.intermediate.bias)

    def _residual_layer_norm(self, dense, x, residual, layer_norm, dropout, seed):
        """`layer_norm(dropout(dense(x)) + residual)`, the dense layer's bias added in the fused
        kernel; the LayerNorm layer holds the variables (float32) and the Dropout layer the
        rate."""
        return fused.dropout_add_layer_norm(
            self._matmul(x, dense), residual, layer_norm.gamma, layer_norm.beta,
            layer_norm.epsilon, dropout.rate, seed, bias=dense.bias)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_heads=self.num_heads,
            intermediate_size=self.intermediate_size,
            hidden_act=self.hidden_act,
            hidden_dropout_rate=self.hidden_dropout_rate,
            attention_dropout_rate=self.attention_dropout_rate,
            initializer_range=self.initializer_range,
            recompute=self.recompute,
        )
        return config


def _activation(hidden_act):
    """The config's activation; the GELUs as fused kernels (`modeling.fused.gelu`)."""
    function = get_activation(hidden_act)
    if function is activations.gelu:
        return lambda x: fused.gelu(x, approximate=True)
    if function is activations.gelu_exact:
        return lambda x: fused.gelu(x, approximate=False)
    return function
