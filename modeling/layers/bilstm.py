"""`BiLstmOnTop`: the paper's "+ BiLSTM" (Table 5): a randomly initialised bidirectional LSTM
between the encoder and a fine-tuning task's output layer.

The paper adds it to the left-to-right model for SQuAD, where a token's representation from a
causal encoder has seen nothing to its right; the BiLSTM gives each token both sides again. Here
any fine-tuning model takes it (`BertTaskModel(bilstm_on_top=True)`, the scripts'
`--bilstm_on_top`): its per-token outputs replace `sequence_output` (SQuAD spans, NER tags) and
its two final states replace `pooled_output` (classifier, SWAG).
"""
import keras
from keras import ops

from modeling.layers.initializers import GlorotUniform, Orthogonal


class BiLstmOnTop(keras.layers.Layer):
    """One bidirectional LSTM layer, `hidden_size / 2` units per direction, so that its outputs
    are `hidden_size` wide as the encoder's and the task's output layer keeps its shape.

    Call args:
        sequence: float `[B, S, H]` (the encoder's `sequence_output`).
        input_mask: int `[B, S]`, 1 for real tokens (right-padded); padded steps are skipped.
        training: unused (no dropout), for the Keras signature.
    Returns:
        (`sequence` float `[B, S, H]`: the forward and backward states of each position side by
        side, zeros at padded positions; `summary` float `[B, H]`: the forward LSTM's state after
        the last real token and the backward LSTM's after the first, i.e. each direction's
        reading of the whole input, in place of the pooled output).

    Variables (under the layer's path): `forward_lstm/lstm_cell/{kernel, recurrent_kernel,
    bias}` and the same for `backward_lstm` (Keras' LSTM: gates i, f, c, o; forget-gate bias 1).
    """

    def __init__(self, hidden_size, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % 2:
            raise ValueError(f"a BiLSTM on top needs an even hidden_size (half per direction), "
                             f"got {hidden_size}")
        self.hidden_size = hidden_size
        # Named: an automatic name is numbered per Keras session ("lstm_1" in a process that
        # built another), and the variables' paths, which checkpoints are read by, with it.
        self.lstm = keras.layers.Bidirectional(
            keras.layers.LSTM(hidden_size // 2, return_sequences=True, return_state=True,
                              kernel_initializer=GlorotUniform(),
                              recurrent_initializer=Orthogonal(), dtype=self.dtype_policy,
                              name="lstm"),
            dtype=self.dtype_policy, name="bidirectional")

    def build(self, input_shape=None):
        self.lstm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, sequence, input_mask, training=False):
        del training
        mask = ops.not_equal(input_mask, 0)
        outputs, forward_h, _, backward_h, _ = self.lstm(sequence, mask=mask)
        # Zeros at padded steps (Keras leaves the state carried there), and the tensor without
        # the Keras mask, which the task's output layer does not take.
        outputs = ops.where(mask[..., None], outputs, ops.zeros_like(outputs))
        return outputs, ops.concatenate([forward_h, backward_h], axis=-1)

    def tf1_variables(self, prefix="bilstm"):
        """`[(original-layout name, variable)]`: `<prefix>/{forward,backward}/{kernel,
        recurrent_kernel,bias}` (the original release has no BiLSTM: names of this project)."""
        names = []
        for direction, layer in (("forward", self.lstm.forward_layer),
                                 ("backward", self.lstm.backward_layer)):
            cell = layer.cell
            names += [(f"{prefix}/{direction}/kernel", cell.kernel),
                      (f"{prefix}/{direction}/recurrent_kernel", cell.recurrent_kernel),
                      (f"{prefix}/{direction}/bias", cell.bias)]
        return names

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size)
        return config
