"""`BertModel`: the encoder of the original `modeling.BertModel`, as a Keras 3 model."""
import copy

import keras
from keras import ops

from modeling.layers import token_rows
from modeling.bert.config import BertConfig
from modeling.bert.modes import EncoderModes
from modeling.layers.embeddings import BertEmbeddings
from modeling.layers.initializers import GlorotUniform, truncated_normal
from modeling.layers.kernels import use_fast
from modeling.layers.lora import LoraSettings, is_adapter_path
from modeling.layers.token_rows import GridRows, RealRows
from modeling.layers.transformer_layer import TransformerLayer


class BertModel(keras.Model):
    """BERT encoder: embeddings, `num_hidden_layers` post-LN transformer blocks, tanh pooler.

    A config with `"pretraining_objective": "ltr"` (`BertConfig.causal`) gives the paper's
    left-to-right model: causal self-attention, position i sees positions 0..i only. Its [CLS]
    row then sees nothing but itself, so its pooler reads the last real token, the only row that
    has seen the whole input (as OpenAI GPT classifies from its last token).

    Args:
        config: `BertConfig` (or its dict).
        use_one_hot_embeddings: the original's TPU embedding lookup (a one-hot matmul).
        modes: `EncoderModes` (or its dict; default: none): activation recomputation, static
            shapes, small real-row blocks, the last layer whole. They change how the encoder
            computes, never what.
        lora: `modeling.layers.lora.LoraSettings` (or its dict), or None: low-rank adapters
            beside the encoder layers' kernels; the encoder's other variables are then frozen.
        embeddings: a `BertEmbeddings` layer to share with another encoder (ELECTRA's generator
            shares its discriminator's tables), or None: this encoder's own.
        kernels: `"fast"` (the default): the encoder blocks' elementwise work and attention
            softmax as fused TensorFlow kernels (`modeling.layers.kernels`; on other backends the
            reference); `"reference"`: `keras.ops` op by op on every backend. The same values
            to float rounding, the same dropout masks.

    Call args:
        inputs: dict with `input_ids` int `[B, S]` and optionally `input_mask` (default all
            ones) and `token_type_ids` (default all zeros), int `[B, S]`. Packed rows (several
            sequences in a row, `bert_runner.packing`) add `sequence_ids` (int
            `[B, S]`: 1, 2, ... for each position's sequence, 0 on padding; attention stays
            within each sequence) and `position_ids` (int `[B, S]`, restarting at 0 for each
            sequence); every real position then gets the values it has unpacked.
        training: enables dropout (the original forces dropout to 0 when not training).
        skip_padding: compute the encoder layers on the real tokens' rows only
            (`modeling.layers.token_rows.RealRows`; on backends without data-dependent shapes, on
            every row as usual). Real rows get the same values; padded rows of the outputs
            hold zeros, not the original's values. For callers that read
            only real positions and `pooled_output`: classifiers, multiple choice, token tagging.
            The modes `static_shapes` (every row on the grid instead) and `small_row_blocks`
            (small blocks padded to a multiple of 8) say how.
        first_row_apart: the last layer computes each sequence's first row ([CLS]) and the
            other rows as two groups (a causal model, packed rows and the mode
            `whole_last_layer` keep it whole), so that a graph reading only `pooled_output` (a
            classifier's) drops the other rows' work there. Default: the layer whole, for a
            caller reading every row, where the groups would only add kernel calls and
            compilations of the kernels' shapes.
    Returns:
        dict with
          `sequence_output`     float `[B, S, H]` (the last layer; padded rows: the
                                original's values, or zeros with `skip_padding`),
          `pooled_output`       float `[B, H]` = tanh(dense(sequence_output[:, 0])); for a
                                left-to-right model (`config.causal`) of the last real
                                token's row instead (`last_real_vectors`),
          `all_encoder_layers`  list of `num_hidden_layers` float `[B, S, H]` (no embeddings),
          `embedding_output`    float `[B, S, H]`.
    """

    # The config class a dict config is read as; whether the encoder has the tanh pooler.
    config_class = BertConfig
    has_pooler = True

    def __init__(self, config, use_one_hot_embeddings=False, kernels="fast", modes=None,
                 lora=None, embeddings=None, name="bert", **kwargs):
        super().__init__(name=name, **kwargs)
        if isinstance(config, dict):
            config = self.config_class.from_dict(config)
        self.config = copy.deepcopy(config).validate()
        self.use_one_hot_embeddings = use_one_hot_embeddings
        self.kernels = kernels
        self.modes = EncoderModes.of(modes)
        self.lora = LoraSettings.of(lora)
        c = self.config
        # Sub-layers follow this model's dtype policy (Keras does not pass it down by itself).
        policy = self.dtype_policy
        width = self.embedding_size
        self.embeddings = embeddings or BertEmbeddings(
            vocab_size=c.vocab_size,
            type_vocab_size=c.type_vocab_size,
            max_position_embeddings=c.max_position_embeddings,
            hidden_size=width,
            initializer_range=c.initializer_range,
            dropout_rate=c.hidden_dropout_prob,
            use_one_hot_embeddings=use_one_hot_embeddings,
            dtype=policy,
            name="embeddings",
        )
        # Tables narrower than the encoder (ELECTRA's `embedding_size`) are projected to it, as
        # the original ELECTRA's `embeddings_project` (a dense layer, no activation).
        self.embeddings_project = None if width == c.hidden_size else keras.layers.Dense(
            c.hidden_size,
            kernel_initializer=GlorotUniform(),
            dtype=policy,
            name="embeddings_project",
        )
        self.encoder_layers = [
            TransformerLayer(
                hidden_size=c.hidden_size,
                num_heads=c.num_attention_heads,
                intermediate_size=c.intermediate_size,
                hidden_act=c.hidden_act,
                hidden_dropout_rate=c.hidden_dropout_prob,
                attention_dropout_rate=c.attention_probs_dropout_prob,
                initializer_range=c.initializer_range,
                recompute=self.modes.recompute,
                kernels=kernels,
                causal=c.causal,
                lora=self.lora,
                fused_attention=self.modes.fused_attention,
                dtype=policy,
                name=f"layer_{i}",
            )
            for i in range(c.num_hidden_layers)
        ]
        self.pooler = keras.layers.Dense(
            c.hidden_size,
            activation="tanh",
            kernel_initializer=truncated_normal(c.initializer_range),
            dtype=policy,
            name="pooler",
        ) if self.has_pooler else keras.layers.Identity(dtype=policy, name="pooler")
        self.build()
        if self.lora is not None:  # the adapters alone train
            for variable in self.variables:
                variable.trainable = is_adapter_path(variable.path) and variable.trainable

    @property
    def embedding_size(self):
        """The width of the embedding tables: the config's `embedding_size` where it has one
        (ELECTRA's), else `hidden_size`."""
        return getattr(self.config, "embedding_size", None) or self.config.hidden_size

    def build(self, input_shape=None):
        hidden_shape = (None, None, self.config.hidden_size)
        if not self.embeddings.built:  # a shared layer is built by its first encoder
            self.embeddings.build()
        if self.embeddings_project is not None:
            self.embeddings_project.build((None, None, self.embedding_size))
        for layer in self.encoder_layers:
            layer.build(hidden_shape)
        self.pooler.build((None, self.config.hidden_size))
        self.built = True

    @property
    def recompute(self):
        """Whether training recomputes the encoder layers' activations in the backward pass."""
        return self.modes.recompute

    @property
    def embedding_table(self):
        """The word-embedding variable `[vocab_size, H]`, shared with tied output heads."""
        return self.embeddings.word_embeddings

    def call(self, inputs, training=False, skip_padding=False, first_row_apart=False):
        input_ids = inputs["input_ids"]
        input_mask = inputs.get("input_mask")
        if input_mask is None:
            input_mask = ops.ones_like(input_ids)
        token_type_ids = inputs.get("token_type_ids")
        if token_type_ids is None:
            token_type_ids = ops.zeros_like(input_ids)
        sequence_ids = inputs.get("sequence_ids")
        embedding_output = self.embeddings(input_ids, token_type_ids, training=training,
                                           position_ids=inputs.get("position_ids"))
        if self.embeddings_project is not None:
            embedding_output = self.embeddings_project(embedding_output)
        if (skip_padding and token_rows.supported() and not self.modes.static_shapes
                and sequence_ids is None):
            layout = RealRows(input_mask, fast=use_fast(self.kernels),
                              small_blocks=self.modes.small_row_blocks)
        else:
            layout = GridRows(input_mask, sequence_ids)
        x = layout.rows(embedding_output)
        all_layers = []
        causal = self.config.causal
        whole_rows = (not first_row_apart or causal or sequence_ids is not None
                      or self.modes.whole_last_layer)
        for layer in self.encoder_layers if whole_rows else self.encoder_layers[:-1]:
            x = layer(x, layout=layout, training=training)
            all_layers.append(x)
        if not whole_rows:
            # The last layer's [CLS] rows apart: a caller using only `pooled_output`
            # skips the other rows' work there once the graph is pruned.
            first, others = self.encoder_layers[-1](x, layout=layout, training=training,
                                                    first_row_apart=True)
            all_layers.append(layout.join(first, others))
            pooled = self.pooler(layout.first_vectors(first))
        all_layers = [layout.to_grid(rows) for rows in all_layers]
        if causal:
            pooled = self.pooler(last_real_vectors(all_layers[-1], input_mask))
        elif whole_rows:  # packed: the row's first sequence's [CLS]; `pool` for the others
            pooled = self.pooler(all_layers[-1][:, 0])
        return {
            "sequence_output": all_layers[-1],
            "pooled_output": pooled,
            "all_encoder_layers": all_layers,
            "embedding_output": embedding_output,
        }

    def pool(self, sequence_output, positions):
        """The pooler on the rows at `positions` (int `[B, K]`) of `sequence_output` `[B, S, H]`:
        `[B, K, H]`, each packed sequence's pooled output from its [CLS] position."""
        rows = ops.take_along_axis(sequence_output, positions[:, :, None], axis=1)
        return self.pooler(rows)

    def get_config(self):
        return {
            "name": self.name,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "config": self.config.to_dict(),
            "use_one_hot_embeddings": self.use_one_hot_embeddings,
            "kernels": self.kernels,
            "modes": self.modes.to_dict(),
            "lora": self.lora and self.lora.to_dict(),
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def last_real_vectors(sequence, input_mask):
    """`[B, S, H]`, int `[B, S]` -> `[B, H]`: each sequence's row at its last real position
    (position 0 for a sequence without any real token: a TPU padding example)."""
    last = ops.maximum(ops.sum(ops.cast(input_mask, "int32"), axis=1) - 1, 0)
    return ops.take_along_axis(sequence, last[:, None, None], axis=1)[:, 0]
