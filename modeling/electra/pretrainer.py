"""ELECTRA's pre-training model: a small masked-LM generator and the discriminator it trains
(replaced-token detection), as the original's `run_pretraining.PretrainingModel`.

    masked input ──generator──> masked-LM logits at the masked positions ──sample──> tokens
    original input with the samples at the masked positions ──discriminator──> is each replaced?

| layer                      | original scope               | variables                            |
|----------------------------|------------------------------|--------------------------------------|
| shared embedding tables    | electra/embeddings           | word, token type, position, LayerNorm |
| discriminator (`.encoder`) | electra/embeddings_project, electra/encoder | as BERT's encoder     |
| generator (`.generator`)   | generator/embeddings_project, generator/encoder | as BERT's encoder  |
| `GeneratorHead`            | generator_predictions        | dense [Hg, E], LayerNorm, output_bias [V] |
| `DiscriminatorHead`        | discriminator_predictions    | dense [H, H], dense_1 [H, 1]         |

The samples are drawn with the Gumbel-max trick as the original's `sample_from_softmax`, from
uniform noise hashed from the element index and a seed (`kernels.dropout.random_bits`), so a
step draws the same tokens op by op and under XLA; the shapes are static (`[B, P]`).
"""
import keras
from keras import ops

from modeling.layers.activations import get_activation
from modeling.bert.checkpoint_names import dense_names, encoder_names, layer_norm_names
from modeling.electra.encoder import ElectraModel
from modeling.layers.heads import MaskedLMHead
from modeling.layers.initializers import GlorotUniform, truncated_normal
from modeling.layers.kernels.dropout import random_bits
from modeling.bert.task_models import BertTaskModel, _encoder_inputs

# pretrain_helpers.sample_from_softmax's guards against log(0).
_GUMBEL_EPSILON = 1e-9


def scatter_update(sequence, updates, positions):
    """The original's `pretrain_helpers.scatter_update` for int ids, quirks included.

    Args: sequence int `[B, S]`; updates int `[B, P]`; positions int `[B, P]`.
    Returns: (`sequence` with `updates` at `positions`, int `[B, S]` 1 where updated).
    Updates to position 0 are ignored (padding slots point there; [CLS] is never masked). Where
    a position appears twice, the original sums the updates and floor-divides by the count, so
    two different samples give their floored mean: reproduced.
    """
    length = ops.shape(sequence)[1]
    hits = ops.one_hot(positions, length, dtype="int32")  # [B, P, S]
    counts = ops.sum(hits, axis=1)
    sums = ops.sum(hits * ops.cast(updates, "int32")[:, :, None], axis=1)
    not_first = ops.cast(ops.arange(length) > 0, "int32")[None, :]
    updated = ops.minimum(counts, 1) * not_first
    values = ops.floor_divide(sums, ops.maximum(counts, 1))
    sequence = ops.cast(sequence, "int32")
    return (1 - updated) * sequence + updated * values, updated


def sample_tokens(logits, seed, temperature=1.0):
    """Token ids `[B, P]` sampled from `softmax(logits / temperature)` (`[B, P, V]`) by the
    Gumbel-max trick (the original's `sample_from_softmax`: the argmax of logits plus Gumbel
    noise; the softmax it takes first does not move the argmax), with the int `[2]` `seed`."""
    logits = ops.cast(logits, "float32") / temperature
    bits = random_bits(ops.shape(logits), seed)
    # The top 24 bits as a float32 in [0, 1): exact, uniform.
    uniform = ops.cast(ops.right_shift(bits, 8), "float32") * (1.0 / (1 << 24))
    gumbel = -ops.log(-ops.log(uniform + _GUMBEL_EPSILON) + _GUMBEL_EPSILON)
    return ops.cast(ops.argmax(logits + gumbel, axis=-1), "int32")


def replace_tokens(features, sampled):
    """The discriminator's input (the original's `_get_fake_data`): the masked ids restored
    (`unmask`), then the samples written at the masked positions.

    Returns (original ids, replaced ids, is-replaced labels), int `[B, S]` each; a sample equal
    to the original token is labelled original, as there.
    """
    positions = features["masked_lm_positions"]
    original, _ = scatter_update(features["input_ids"], features["masked_lm_ids"], positions)
    replaced, updated = scatter_update(original, sampled, positions)
    labels = updated * ops.cast(ops.not_equal(replaced, original), "int32")
    return original, replaced, labels


class DiscriminatorHead(keras.layers.Layer):
    """`discriminator_predictions`: dense(H, the config's activation), then one logit a token.

    Call args: sequence_output float `[B, S, H]`. Returns float32 logits `[B, S]`.
    """

    def __init__(self, hidden_size, hidden_act="gelu_exact", initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            hidden_size, activation=get_activation(hidden_act),
            kernel_initializer=truncated_normal(initializer_range), dtype=self.dtype_policy,
            name="dense")
        # tf.layers.dense's default initializer: Glorot uniform.
        self.dense_prediction = keras.layers.Dense(1, kernel_initializer=GlorotUniform(),
                                                   dtype=self.dtype_policy, name="dense_1")

    def build(self, input_shape=None):
        self.dense.build((None, None, self.hidden_size))
        self.dense_prediction.build((None, None, self.hidden_size))
        self.built = True

    def call(self, sequence_output):
        return ops.cast(ops.squeeze(self.dense_prediction(self.dense(sequence_output)), -1),
                        "float32")

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "hidden_act": self.hidden_act, "initializer_range": self.initializer_range}

    def original_names(self, prefix):
        return dense_names(f"{prefix}/dense", self.dense) + dense_names(
            f"{prefix}/dense_1", self.dense_prediction)


class ElectraPretrainer(BertTaskModel):
    """Generator + discriminator (the original's `PretrainingModel` with its defaults: a
    separate generator sharing the embedding tables, `untied_generator`).

    Inputs: the masked-LM features of BERT's records: `input_ids` (masked), `input_mask`,
    `segment_ids` int `[B, S]`, `masked_lm_positions`, `masked_lm_ids` int `[B, P]`; packed
    rows also `sequence_ids`, `position_ids`. `sampled_ids` int `[B, P]`, when given, replaces
    the sampling (the samples to test the discriminator on).
    Returns: `masked_lm_logits` float32 `[B, P, V]` (the generator's), `sampled_ids` int
    `[B, P]`, `is_replaced` int `[B, S]` (the discriminator's labels), `discriminator_logits`
    float32 `[B, S]`.
    `temperature`: the sampling's (the original's 1.0), an attribute.
    """

    encoder_class = ElectraModel

    def __init__(self, config, name="electra_pretrainer", temperature=1.0, **kwargs):
        super().__init__(config, name, **kwargs)
        c = self.config
        self.temperature = temperature
        self.generator = ElectraModel(c.generator_config(), embeddings=self.encoder.embeddings,
                                      kernels=self.encoder.kernels, modes=self.encoder.modes,
                                      dtype=self.dtype_policy,
                                      name="generator")
        g = self.generator.config
        self.generator_predictions = MaskedLMHead(
            c.vocab_size, c.embedding_size, c.hidden_act, c.initializer_range,
            input_size=g.hidden_size, dtype=self.dtype_policy, name="generator_predictions")
        self.discriminator_predictions = DiscriminatorHead(
            c.hidden_size, c.hidden_act, c.initializer_range, dtype=self.dtype_policy,
            name="discriminator_predictions")
        self.generator_predictions.build()
        self.discriminator_predictions.build()
        self.seed_generator = keras.random.SeedGenerator(name="sampling_seed")

    # The original-layout scope of the generator's head (`masked_lm_logits`'s weights).
    masked_lm_scope = "generator_predictions"

    def masked_lm_logits(self, features, training=False):
        """float32 `[B, P, V]`: the generator's logits at `features["masked_lm_positions"]`."""
        generated = self.generator(_encoder_inputs(features), training=training)
        return self.generator_predictions(generated["sequence_output"],
                                          features["masked_lm_positions"],
                                          self.encoder.embedding_table)

    def call(self, features, training=False):
        inputs = _encoder_inputs(features)
        logits = self.masked_lm_logits(features, training)
        sampled = features.get("sampled_ids")
        if sampled is None:
            sampled = ops.stop_gradient(
                sample_tokens(logits, self.seed_generator.next(), self.temperature))
        _, replaced, labels = replace_tokens(features, sampled)
        discriminated = self.encoder({**inputs, "input_ids": replaced}, training=training)
        return {"masked_lm_logits": logits, "sampled_ids": sampled, "is_replaced": labels,
                "discriminator_logits": self.discriminator_predictions(
                    discriminated["sequence_output"])}

    def get_config(self):
        return {**self._config_dict(), "temperature": self.temperature}

    def required_scopes(self):
        """A starting point must hold the generator as well as the discriminator: without it
        the discriminator would be trained on a random generator's samples."""
        return (("generator", "a BERT checkpoint, or an ELECTRA discriminator alone (a Hugging "
                 "Face ElectraForPreTraining directory without its generator/); ELECTRA "
                 "pre-training goes on from a checkpoint with its generator (a released ELECTRA "
                 "folder, an ELECTRA pre-training run), or starts from random weights"),)

    def generator_names(self):
        """`[(original name, variable)]` of the generator's encoder (its own layers; the tables
        are the discriminator's) and its head."""
        head = self.generator_predictions
        return (encoder_names(self.generator, "generator", with_embeddings=False)
                + dense_names("generator_predictions/dense", head.transform)
                + layer_norm_names("generator_predictions/LayerNorm", head.layer_norm)
                + [("generator_predictions/output_bias", head.output_bias)])

    def tf1_head_variables(self):
        return self.generator_names() + self.discriminator_predictions.original_names(
            "discriminator_predictions")
