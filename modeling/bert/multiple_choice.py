"""`BertMultipleChoice`: the encoder scoring each of several candidate sequences (BERT paper
section 4.4, SWAG; run_swag.py).

Each example holds `num_choices` sequences (`[CLS] context [SEP] candidate [SEP]`). The encoder
runs on all of them as one batch of B * num_choices; the only new parameters are one vector whose
dot product with the pooled output is the choice's score, and a softmax over an example's scores
gives its choice probabilities. Dropout 0.1 on the pooled output, as run_classifier's layer.

The original release has no SWAG script; in TF1 checkpoints the vector is stored as
`cls/swag/output_weights` `[1, H]`, beside run_squad's `cls/squad/output_weights` and in the same
`[out, in]` layout. It has no bias: a bias shared by all choices cancels in the softmax.
"""
import keras
from keras import ops

from modeling.layers.hashed_dropout import HashedDropout
from modeling.layers.initializers import truncated_normal
from modeling.bert.task_models import BertTaskModel


class ChoiceScoreHead(keras.layers.Layer):
    """Pooled outputs `[N, H]` -> scores `[N]`: dropout, then the dot product with `output_weights`.

    `output_weights` is `[1, H]` (the original output layers' `[out, in]` layout).
    """

    def __init__(self, hidden_size, initializer_range=0.02, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.dropout_rate = dropout_rate
        self.dropout = HashedDropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(1, self.hidden_size),
            initializer=truncated_normal(self.initializer_range))
        self.built = True

    def call(self, pooled_output, training=False):
        x = self.dropout(pooled_output, training=training)
        return ops.matmul(x, ops.transpose(self.output_weights))[:, 0]

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range,
                      dropout_rate=self.dropout_rate)
        return config


class BertMultipleChoice(BertTaskModel):
    """Encoder + choice scores.

    Inputs: `input_ids`, `input_mask`, `segment_ids` int `[B, num_choices, S]`.
    Returns: `logits` float32 `[B, num_choices]` (softmax over axis 1 gives the probabilities).
    """

    def __init__(self, config, num_choices=4, name="bert_multiple_choice", **kwargs):
        super().__init__(config, name, **kwargs)
        self.num_choices = num_choices
        self.scorer = ChoiceScoreHead(
            self.config.hidden_size, self.config.initializer_range, dtype=self.dtype_policy,
            name="swag")
        self.scorer.build()

    def call(self, features, training=False):
        # [B, C, S] -> [B * C, S]: every choice is an ordinary sequence for the encoder.
        flat = {name: ops.reshape(value, (-1, ops.shape(value)[-1]))
                for name, value in features.items()
                if name in ("input_ids", "input_mask", "segment_ids", "token_type_ids")}
        pooled = self.encode(flat, training=training, skip_padding=True,
                             first_row_apart=True)["pooled_output"]
        scores = ops.reshape(self.scorer(pooled, training=training), (-1, self.num_choices))
        return {"logits": ops.cast(scores, "float32")}

    def get_config(self):
        return {**self._config_dict(), "num_choices": self.num_choices}

    def tf1_head_variables(self):
        return [("cls/swag/output_weights", self.scorer.output_weights)]
