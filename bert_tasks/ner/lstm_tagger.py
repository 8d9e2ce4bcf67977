"""The feature-based tagger of the BERT paper's Table 7: frozen BERT activations of each word ->
a layer combination -> a two-layer bidirectional LSTM -> a token classification layer.

The paper: "we use the representation of one or more layers [...] as input to a randomly
initialized two-layer 768-dimensional BiLSTM before the classification layer". Here the LSTM runs
over the words of a sentence, each word represented by the activations at its first sub-token
(the position the fine-tuned model classifies; see `bert_tasks.ner.features`). Model code uses keras.layers /
keras.ops only.
"""
import keras
from keras import ops

from modeling.layers.initializers import GlorotUniform, Orthogonal

COMBINATIONS = ("single", "weighted_sum", "concat")


class BiLstmTagger(keras.Model):
    """Layer combination + 2-layer BiLSTM + classification layer.

    Args:
      num_inputs: K, the number of BERT layers fed in per word.
      combination: "single" (K = 1), "weighted_sum" (softmax-normalised learned scalar weights,
        initially equal, as ELMo's scalar mix without its scale) or "concat" (K*H features).
      lstm_units: units per direction (the paper: 768).
      num_labels: int.
    Call args:
      inputs: dict with `activations` float `[B, T, K, H]` and `word_mask` bool/int `[B, T]` (0 =
        padding word).
    Returns:
      logits float32 `[B, T, num_labels]`.
    """

    def __init__(self, num_inputs, combination, lstm_units, num_labels, name="bilstm_tagger",
                 **kwargs):
        super().__init__(name=name, **kwargs)
        if combination not in COMBINATIONS:
            raise ValueError("combination must be one of %s, got %r"
                             % (", ".join(COMBINATIONS), combination))
        if combination == "single" and num_inputs != 1:
            raise ValueError("combination 'single' takes 1 input layer, got %d" % num_inputs)
        self.num_inputs = num_inputs
        self.combination = combination
        self.lstm_units = lstm_units
        self.num_labels = num_labels
        if combination == "weighted_sum":
            self.mix_logits = self.add_weight(
                name="mix_logits", shape=(num_inputs,), initializer="zeros")
        self.lstm_layers = [
            keras.layers.Bidirectional(
                keras.layers.LSTM(lstm_units, return_sequences=True,
                                  kernel_initializer=GlorotUniform(),
                                  recurrent_initializer=Orthogonal(), dtype=self.dtype_policy),
                dtype=self.dtype_policy, name="bilstm_%d" % i)
            for i in range(2)]
        self.classifier = keras.layers.Dense(num_labels, kernel_initializer=GlorotUniform(),
                                             dtype=self.dtype_policy, name="classifier")

    def _combine(self, activations):
        if self.combination == "single":
            return activations[:, :, 0]
        if self.combination == "concat":
            shape = ops.shape(activations)
            return ops.reshape(activations, (shape[0], shape[1], shape[2] * shape[3]))
        weights = ops.cast(ops.softmax(self.mix_logits), activations.dtype)
        return ops.einsum("btkh,k->bth", activations, weights)

    def call(self, inputs, training=False):
        activations = ops.cast(inputs["activations"], self.compute_dtype)
        mask = ops.cast(inputs["word_mask"], "bool")
        x = self._combine(activations)
        for lstm in self.lstm_layers:
            x = lstm(x, mask=mask, training=training)
        return ops.cast(self.classifier(x), "float32")

    def get_config(self):
        return {
            "name": self.name,
            "num_inputs": self.num_inputs,
            "combination": self.combination,
            "lstm_units": self.lstm_units,
            "num_labels": self.num_labels,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)
