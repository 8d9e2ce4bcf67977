"""One post-LayerNorm encoder block (scope `bert/encoder/layer_{i}`)."""
import functools

import keras
from keras import ops

from modeling.layers import activations
from modeling.layers.attention import attention
from modeling.layers.embeddings import LAYER_NORM_EPSILON
from modeling.layers.initializers import truncated_normal
from modeling.layers.kernels import dropout_add_layer_norm, gelu, use_fast
from modeling.layers.lora import LoraSettings, initial_lora_a


class TransformerLayer(keras.layers.Layer):
    """`a = LN(x + drop(dense(attn(x))))`, `y = LN(a + drop(dense(act(dense(a)))))`: the
    original `transformer_model`'s loop body.

    The elementwise steps are `modeling.layers.kernels` functions (GELU, dropout + residual +
    LayerNorm) and `modeling.layers.attention.attention`; `kernels` chooses their fast TensorFlow
    versions or the `keras.ops` reference. Each dense layer's bias is added by the function that
    reads its matmul (a GELU or LayerNorm kernel, the move onto the attention heads), which is
    where the fast kernels take it.

    With `recompute=True`, training keeps only the layer's input for the backward pass and
    computes the layer's activations again there (`keras.remat`): less memory for ~1/3 more
    compute. The dropout seeds are drawn before, outside the recomputed function, so the second
    pass draws the same masks and the gradients are those of the stored-activation layer.

    Variables (paths under the layer's; the original's names in `modeling.bert.family`):
    `self/{query,key,value}/{kernel,bias}`, `attention_output_dense/{kernel,bias}`,
    `attention_output_LayerNorm/{gamma,beta}`, `intermediate_dense/{kernel,bias}`,
    `output_dense/{kernel,bias}`, `output_LayerNorm/{gamma,beta}`, created in this order (the
    original's); LayerNorm variables are float32 under every dtype policy.

    With `fused_attention=True` the attention is the backend's fused operation where that gives
    the same values (`modeling.layers.attention.attention`'s `fused`; `EncoderModes`).

    With `causal=True` (a left-to-right model, `BertConfig.causal`) each position attends to the
    positions up to itself only (`modeling.layers.attention.mask_bias`).

    `lora`: `modeling.layers.lora.LoraSettings` (or its dict), or None: the layer builds
    `lora_a [in, rank]`, `lora_b [rank, out]` and `lora_scale` beside each targeted kernel, under
    the kernel's own scope (`.../self/query/lora_a`), and adds their update to its product.

    Call args:
        x: the rows of the batch in `layout`: float `[B, S, H]` on the grid, `[R, H]` as real
            rows (`modeling.layers.token_rows`).
        layout: `GridRows` or `RealRows` of the batch's int `[B, S]` input mask.
        training: enables dropout.
        first_row_apart: compute each sequence's first row (`[CLS]`) and the other rows as two
            groups (each row's output depends on every row of `x`, but only on its own row after
            the attention): a caller that uses only the first rows lets graph pruning drop the
            other rows' queries, attention, feed-forward and LayerNorms. Not with `causal`.
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
        kernels="fast",
        causal=False,
        lora=None,
        fused_attention=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_rate = hidden_dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.initializer_range = initializer_range
        self.recompute = recompute
        self.kernels = kernels
        self.causal = causal
        self.fused_attention = fused_attention
        self.lora = LoraSettings.of(lora)
        self._fast = use_fast(kernels)
        self.activation = activations.get_activation(hidden_act)
        # Each dropout generator (here) and kernel initializer (in `build`) draws its seed from
        # Python's random state: with `keras.utils.set_random_seed`, the same seed gives the same
        # weights and dropout streams.
        self.attention_dropout = _seed_generator(attention_dropout_rate)
        self.attention_output_dropout = _seed_generator(hidden_dropout_rate)
        self.output_dropout = _seed_generator(hidden_dropout_rate)
        # {kernel path: (lora_a, lora_b, lora_scale)}: the adapters of `lora`.
        self._lora = {}

    def build(self, input_shape=None):
        h, i = self.hidden_size, self.intermediate_size
        with keras.name_scope("self"):
            self.query_kernel, self.query_bias = self._dense("query", h, h)
            self.key_kernel, self.key_bias = self._dense("key", h, h)
            self.value_kernel, self.value_bias = self._dense("value", h, h)
        self.attention_output_kernel, self.attention_output_bias = self._dense(
            "attention_output_dense", h, h)
        self.attention_gamma, self.attention_beta = self._layer_norm("attention_output_LayerNorm")
        self.intermediate_kernel, self.intermediate_bias = self._dense("intermediate_dense", h, i)
        self.output_kernel, self.output_bias = self._dense("output_dense", i, h)
        self.output_gamma, self.output_beta = self._layer_norm("output_LayerNorm")
        if self.lora is not None:
            self._build_adapters()
        self.built = True

    def _dense(self, scope, inputs, units):
        """A dense layer's `kernel [inputs, units]` and `bias [units]`, under `scope`. Each
        kernel has an initializer of its own: a Keras initializer repeats its values on every
        call, so a shared one would start the query, key and value kernels equal (the original
        draws each variable independently)."""
        return (self._variable(scope, "kernel", (inputs, units),
                               truncated_normal(self.initializer_range)),
                self._variable(scope, "bias", (units,), "zeros"))

    def _layer_norm(self, scope):
        """A LayerNorm's `gamma` and `beta` `[H]`, under `scope`: float32, and read as float32
        in a bfloat16 computation too (not autocast), as `keras.layers.LayerNormalization`'s."""
        return tuple(self._variable(scope, name, (self.hidden_size,), initializer, "float32",
                                    autocast=False)
                     for name, initializer in (("gamma", "ones"), ("beta", "zeros")))

    def _variable(self, scope, name, shape, initializer, dtype=None, autocast=True):
        """A variable at path `<this layer's path>/<open scopes>/<scope>/<name>`, tracked when
        assigned to an attribute. Not `add_weight`, which would drop the scopes: the paths are
        those of the sub-layers this block once had, which this project's checkpoints store."""
        with keras.name_scope(scope):
            return keras.Variable(keras.initializers.get(initializer), shape=shape,
                                  dtype=dtype or self.variable_dtype, autocast=autocast,
                                  name=name)

    def call(self, x, layout, training=False, first_row_apart=False):
        if first_row_apart and (self.causal or layout.sequence_ids is not None):
            raise ValueError("first_row_apart needs bidirectional attention over whole rows: a "
                             "causal or packed layer's queries are the grid's positions in order")
        seeds = [generator.next() if training and generator else None for generator in
                 (self.attention_dropout, self.attention_output_dropout, self.output_dropout)]
        forward = functools.partial(self._forward, layout=layout, seeds=seeds,
                                    first_row_apart=first_row_apart)
        if self.recompute and training:
            return keras.remat(forward)(x)
        return forward(x)

    def _forward(self, x, layout, seeds, first_row_apart):
        """The block's rows: `_block` on all rows, or on each group of `layout.split(x)` (their
        queries and everything after; keys and values from every row). The dropout masks are
        drawn for each row's grid position (`layout.positions`): the groups' together are the
        masks of all rows, and the same in every layout."""
        # The three projections stay apart: one matmul with their kernels side by side was
        # slower on a CPU (its split and transposes cost more than it saved).
        keys = self._heads(x, self.key_kernel, self.key_bias, layout)
        values = self._heads(x, self.value_kernel, self.value_bias, layout)
        if not first_row_apart:
            return self._block(x, keys, values, layout, None, seeds)
        return tuple(self._block(rows, keys, values, layout, group, seeds)
                     for group, rows in enumerate(layout.split(x)))

    def _block(self, x, keys, values, layout, group, seeds):
        """The block on rows `x` (all of `layout`'s, or group `group` of `layout.split`), the
        keys and values `[B, N, S, D]` given."""
        attention_seed, attention_output_seed, output_seed = seeds
        fast = self._fast
        # Self-attention: the rows' queries against every row's keys and values.
        queries = self._heads(x, self.query_kernel, self.query_bias, layout, group)
        context = attention(queries, keys, values, layout.input_mask, self.attention_dropout_rate,
                            attention_seed, fast=fast, causal=self.causal,
                            sequence_ids=layout.sequence_ids, fused=self.fused_attention,
                            query_positions=None if attention_seed is None
                            else layout.query_positions(group))
        context = layout.from_heads(context, group)
        positions = None if output_seed is None else ops.expand_dims(layout.positions(group), -1)
        # Attention output: dense, dropout, residual, LayerNorm.
        a = dropout_add_layer_norm(
            self._matmul(context, self.attention_output_kernel), x, self.attention_gamma,
            self.attention_beta, epsilon=LAYER_NORM_EPSILON, rate=self.hidden_dropout_rate,
            seed=attention_output_seed, rows=positions, bias=self.attention_output_bias, fast=fast)
        # Feed-forward: intermediate dense and activation, output dense, dropout, residual,
        # LayerNorm.
        h = self._intermediate_activation(self._matmul(a, self.intermediate_kernel))
        return dropout_add_layer_norm(
            self._matmul(h, self.output_kernel), a, self.output_gamma, self.output_beta,
            epsilon=LAYER_NORM_EPSILON, rate=self.hidden_dropout_rate, seed=output_seed,
            rows=positions, bias=self.output_bias, fast=fast)

    def _matmul(self, x, kernel):
        """`x @ kernel` in the compute dtype, plus its LoRA adapter's `scale * (x @ A) @ B` where
        it has one. The cast matters in the backward pass of `recompute`, which runs outside the
        layer's autocast scope.

        Rows on the grid `[B, S, H]` are multiplied as one `[B * S, H]` block between two
        reshapes: TensorFlow's product of a rank-3 by a rank-2 tensor is a tensordot, whose
        shape arithmetic becomes a dozen small ops per product in a converted (ONNX) graph."""
        lead = ops.shape(x)[:-1]
        rows = ops.reshape(x, (-1, x.shape[-1])) if len(lead) > 1 else x
        y = ops.matmul(rows, ops.cast(kernel, self.compute_dtype))
        adapter = self._lora.get(kernel.path)
        if adapter is not None:
            a, b, scale = (ops.cast(v, self.compute_dtype) for v in adapter)
            y = y + scale * ops.matmul(ops.matmul(rows, a), b)
        return ops.reshape(y, (*lead, kernel.shape[-1])) if len(lead) > 1 else y

    def _build_adapters(self):
        """The adapters of `self.lora` beside each targeted kernel (see the class docstring)."""
        rank = self.lora.rank
        for target in self.lora.kernels:
            kernel = getattr(self, f"{target}_kernel")
            parent, scope, _ = kernel.path.rsplit("/", 2)
            with keras.name_scope(scope, override_parent=parent):
                adapter = (
                    keras.Variable(initial_lora_a((kernel.shape[0], rank), self.variable_dtype),
                                   name="lora_a"),
                    keras.Variable(keras.initializers.Zeros(), shape=(rank, kernel.shape[1]),
                                   dtype=self.variable_dtype, name="lora_b"),
                    keras.Variable(self.lora.scale, shape=(), dtype="float32", trainable=False,
                                   name="lora_scale"))
            setattr(self, f"{target}_lora", adapter)
            self._lora[kernel.path] = adapter

    def lora_adapters(self):
        """`[(kernel, (lora_a, lora_b, lora_scale))]` of the layer's adapters."""
        kernels = {v.path: v for v in self.variables}
        return [(kernels[path], adapter) for path, adapter in self._lora.items()]

    def _heads(self, x, kernel, bias, layout, group=None):
        """The projection `x @ kernel + bias` as the attention's heads `[B, N, S_q, D]`: the bias
        added by the move onto the heads (`layout.to_heads`)."""
        return layout.to_heads(self._matmul(x, kernel), self.num_heads, group, bias=bias)

    def _intermediate_activation(self, x):
        """`act(x + bias)` with the intermediate dense layer's bias; a GELU is one kernel with
        the bias (`modeling.layers.kernels.gelu`)."""
        if self.activation in (activations.gelu, activations.gelu_exact):
            return gelu(x, approximate=self.activation is activations.gelu,
                        bias=self.intermediate_bias, fast=self._fast)
        return self.activation(x + ops.cast(self.intermediate_bias, x.dtype))

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
            kernels=self.kernels,
            causal=self.causal,
            lora=self.lora and self.lora.to_dict(),
            fused_attention=self.fused_attention,
        )
        return config


def _seed_generator(rate):
    """The generator of a dropout's seeds, None for rate 0 (as `keras.layers.Dropout` has)."""
    return keras.random.SeedGenerator() if rate else None
