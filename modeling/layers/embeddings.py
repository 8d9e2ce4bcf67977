"""Word + token-type + position embeddings, LayerNorm and dropout (scope `bert/embeddings`)."""
import keras
from keras import ops

from modeling.layers.hashed_dropout import HashedDropout
from modeling.layers.initializers import truncated_normal

# The original's contrib layer_norm epsilon; Keras' default (1e-3) moves outputs by ~1e-2.
LAYER_NORM_EPSILON = 1e-12


class BertEmbeddings(keras.layers.Layer):
    """Embeds token ids as in the original `embedding_lookup` + `embedding_postprocessor`.

    Call args:
        input_ids: int `[B, S]`.
        token_type_ids: int `[B, S]`.
        position_ids: int `[B, S]` (packed rows: each sequence's positions from 0), or None:
            0..S-1 in every row, as the original (which has no position-id input).
    Returns:
        float `[B, S, hidden_size]`: LayerNorm(word + token_type + position), then dropout.

    The word table is public (`word_embeddings`) because the masked-LM head is tied to it.
    """

    def __init__(
        self,
        vocab_size,
        type_vocab_size,
        max_position_embeddings,
        hidden_size,
        initializer_range=0.02,
        dropout_rate=0.1,
        use_one_hot_embeddings=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.type_vocab_size = type_vocab_size
        self.max_position_embeddings = max_position_embeddings
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.dropout_rate = dropout_rate
        self.use_one_hot_embeddings = use_one_hot_embeddings
        # LayerNorm statistics stay in float32 under mixed precision.
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=LAYER_NORM_EPSILON, dtype="float32", name="LayerNorm"
        )
        self.dropout = HashedDropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        # Creation order is the original's: word, token type, position, then LayerNorm. One
        # initializer each: a shared Keras initializer gives every table the same leading rows.
        # Not autocast: under mixed precision `call` gathers from the float32 tables and casts
        # the rows it took (`_lookup`), so the tables' gradients are float32 scatter-adds (a
        # bfloat16 scatter-add is a slow atomic loop on GPUs) and no whole table is cast.
        self.word_embeddings, self.token_type_embeddings, self.position_embeddings = (
            self.add_weight(name=name, shape=(rows, self.hidden_size),
                            initializer=truncated_normal(self.initializer_range), autocast=False)
            for name, rows in (("word_embeddings", self.vocab_size),
                               ("token_type_embeddings", self.type_vocab_size),
                               ("position_embeddings", self.max_position_embeddings)))
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, input_ids, token_type_ids, training=False, position_ids=None):
        seq_length = input_ids.shape[1]
        if seq_length is not None and seq_length > self.max_position_embeddings:
            raise ValueError(
                f"Sequence length {seq_length} exceeds max_position_embeddings "
                f"{self.max_position_embeddings} of the config"
            )
        if self.use_one_hot_embeddings:
            # The original's TPU path; bit-identical to the gather on CPU.
            one_hot = ops.one_hot(input_ids, self.vocab_size, dtype=self.compute_dtype)
            words = ops.matmul(one_hot, ops.cast(self.word_embeddings, self.compute_dtype))
        else:
            words = self._lookup(self.word_embeddings, input_ids)
        # The original multiplies a one-hot matrix by the token-type table; with finite weights
        # the non-selected terms are exact zeros, so a gather gives the identical sum.
        token_types = self._lookup(self.token_type_embeddings, token_type_ids)
        if position_ids is None:
            positions = ops.expand_dims(ops.cast(
                self.position_embeddings[:ops.shape(input_ids)[1]], self.compute_dtype), 0)
        else:
            positions = self._lookup(self.position_embeddings, position_ids)
        embeddings = words + token_types + positions
        embeddings = self.layer_norm(embeddings)
        return self.dropout(ops.cast(embeddings, self.compute_dtype), training=training)

    def _lookup(self, table, ids):
        """The rows `ids` of the float32 `table`, in the compute dtype: the same values as a
        gather from the table cast whole."""
        return ops.cast(ops.take(table, ids, axis=0), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            type_vocab_size=self.type_vocab_size,
            max_position_embeddings=self.max_position_embeddings,
            hidden_size=self.hidden_size,
            initializer_range=self.initializer_range,
            dropout_rate=self.dropout_rate,
            use_one_hot_embeddings=self.use_one_hot_embeddings,
        )
        return config
