"""ELECTRA's SQuAD head: the original `finetune/qa/qa_tasks.QATask.get_prediction_module` with its
defaults (`joint_prediction`, `answerable_classifier`, `answerable_uses_start_logits`,
`beam_size` 20, `answerable_weight` 0.5), over `ElectraModel`.

* Start logits: one dense unit per token, masked to the answer positions (the context tokens,
  `input_mask * segment_ids`, and position 0).
* End logits, conditioned on the start: dense(512, exact GELU) `qa_hidden` of [start vector, token
  vector] for every token, then a dense unit. Training reads the gold start (a feature:
  `start_positions`); prediction the `beam_size` most likely starts, each with its
  `beam_size` most likely ends (fixed k: static shapes).
* Answerability: dense(512, exact GELU) then a dense unit on [first token's vector, the start-softmax
  weighted vector]; its logit is the log-odds that the question has no answer in the window.
* Loss per window: (start CE + end CE) / 2 + 0.5 * sigmoid CE(is_impossible, answerable logit);
  the original adds the answerable term on v1.1 too (labels all 0), and so does this.

`bert_tasks.squad` reads the model through what it declares (`span_loss`,
`prediction_outputs`, `training_features`), and decodes the beams with the original's
`qa_metrics` rule (`bert_tasks.squad.postprocess`).

Variables: our checkpoints `squad/{start_logits,qa_hidden,qa_logits,answerable_hidden,
answerable_logit}/{kernel,bias}`; in the original layout, under `task_specific/<task name>/`
("squad": the original's SQuAD 2.0 task; its v1.1 task is "squadv1", `original_task_name`),
`dense`, `qa_hidden`, `dense_1`, `dense_2`, `dense_3` in that creation order: the original
names only `qa_hidden` (its "qa_logits" is the name of a squeeze op, not of a layer).
"""
import keras
from keras import ops

from modeling.layers.activations import gelu_exact
from modeling.layers.initializers import GlorotUniform
from modeling.electra.encoder import ElectraModel
from modeling.bert.task_models import BertTaskModel

# The original's configure_finetuning defaults.
BEAM_SIZE = 20
HIDDEN_UNITS = 512
ANSWERABLE_WEIGHT = 0.5
# The original masks logits by adding 1000 * (mask - 1).
_MASK_PENALTY = 1000.0


def answer_mask(input_mask, segment_ids):
    """float32 `[B, S]`: 1 where an answer may start or end (context tokens and position 0, the
    no-answer position), else 0: the original's `input_mask * segment_ids + one_hot(0)`."""
    mask = ops.cast(input_mask, "float32") * ops.cast(segment_ids, "float32")
    first = ops.cast(ops.arange(ops.shape(mask)[1]) == 0, "float32")
    return mask + first[None, :]


def _dense(units, name, activation=None, dtype=None):
    # tf.layers.dense's defaults, which the original keeps: Glorot-uniform kernel, zero bias.
    return keras.layers.Dense(units, activation=activation, kernel_initializer=GlorotUniform(),
                              dtype=dtype, name=name)


class ElectraSquadHead(keras.layers.Layer):
    """The joint start/end and answerability layers on ELECTRA's last layer.

    Call args:
      sequence: float `[B, S, H]`; mask: float32 `[B, S]` (`answer_mask`);
      start_positions: int `[B]` gold starts (training), or None (prediction: beams).
    Returns a dict of float32 tensors (int32 indexes):
      training: `start_logits`, `end_logits` `[B, S]` (masked), `answerable_logit` `[B]`;
      prediction: `start_logits` `[B, S]`, `start_top_log_probs`, `start_top_index` `[B, K]`,
        `end_top_log_probs`, `end_top_index` `[B, K, K]` (row i: the ends of start i),
        `answerable_logit` `[B]`; K = min(beam_size, S).
    """

    def __init__(self, hidden_size, beam_size=BEAM_SIZE, hidden_units=HIDDEN_UNITS, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.beam_size = beam_size
        self.hidden_units = hidden_units
        policy = self.dtype_policy
        self.start_logits = _dense(1, "start_logits", dtype=policy)
        self.qa_hidden = _dense(hidden_units, "qa_hidden", dtype=policy)
        self.qa_logits = _dense(1, "qa_logits", dtype=policy)
        # The original's `modeling.gelu` is the exact (erf) GELU, not BERT's tanh approximation.
        self.answerable_hidden = _dense(hidden_units, "answerable_hidden", gelu_exact,
                                        dtype=policy)
        self.answerable_logit = _dense(1, "answerable_logit", dtype=policy)

    def build(self, input_shape=None):
        h, u = self.hidden_size, self.hidden_units
        self.start_logits.build((None, h))
        self.qa_hidden.build((None, 2 * h))
        self.qa_logits.build((None, u))
        self.answerable_hidden.build((None, 2 * h))
        self.answerable_logit.build((None, u))
        self.built = True

    def layers_in_order(self):
        """The dense layers in the original's creation order."""
        return [self.start_logits, self.qa_hidden, self.qa_logits, self.answerable_hidden,
                self.answerable_logit]

    def _end_logits(self, start_vectors, sequence):
        """`qa_logits(gelu(qa_hidden([start, token])))` for every start row and token:
        start_vectors `[B, K, H]`, sequence `[B, S, H]` -> `[B, K, S]` float32.

        The kernel is split into its start and token halves: the same sum as the dense layer on
        the concatenation, without the `[B, K, S, 2H]` tensor the original tiles."""
        h = self.hidden_size
        kernel = ops.cast(self.qa_hidden.kernel, self.compute_dtype)
        bias = ops.cast(self.qa_hidden.bias, self.compute_dtype)
        from_start = ops.matmul(start_vectors, kernel[:h])  # [B, K, U]
        from_token = ops.matmul(sequence, kernel[h:]) + bias  # [B, S, U]
        hidden = gelu_exact(from_start[:, :, None, :] + from_token[:, None, :, :])  # [B, K, S, U]
        return ops.cast(ops.squeeze(self.qa_logits(hidden), -1), "float32")

    def call(self, sequence, mask, start_positions=None):
        penalty = _MASK_PENALTY * (mask - 1.0)
        start_logits = ops.cast(ops.squeeze(self.start_logits(sequence), -1), "float32")
        start_logits = start_logits + penalty
        outputs = {"start_logits": start_logits,
                   "answerable_logit": self._answerable_logit(sequence, start_logits)}
        if start_positions is not None:
            gold = ops.take_along_axis(
                sequence, ops.reshape(ops.cast(start_positions, "int32"), (-1, 1, 1)), axis=1)
            outputs["end_logits"] = self._end_logits(gold, sequence)[:, 0] + penalty
            return outputs
        # A graph traced on windows of any length takes K (they are at least K long).
        k = self.beam_size if sequence.shape[1] is None else min(self.beam_size,
                                                                 sequence.shape[1])
        start_log_probs = ops.log_softmax(start_logits, axis=-1)
        outputs["start_top_log_probs"], start_index = ops.top_k(start_log_probs, k)
        outputs["start_top_index"] = ops.cast(start_index, "int32")
        starts = ops.take_along_axis(sequence, ops.expand_dims(start_index, -1), axis=1)
        end_logits = self._end_logits(starts, sequence) + penalty[:, None, :]  # [B, K, S]
        end_top, end_index = ops.top_k(ops.log_softmax(end_logits, axis=-1), k)
        outputs["end_top_log_probs"] = end_top
        outputs["end_top_index"] = ops.cast(end_index, "int32")
        return outputs

    def _answerable_logit(self, sequence, start_logits):
        """`[B]` float32: the first token's vector and the start-softmax-weighted one, through
        `answerable_hidden` and `answerable_logit`."""
        start_p = ops.cast(ops.softmax(start_logits, axis=-1), sequence.dtype)
        weighted = ops.sum(start_p[:, :, None] * sequence, axis=1)
        hidden = self.answerable_hidden(ops.concatenate([sequence[:, 0], weighted], axis=-1))
        return ops.cast(ops.squeeze(self.answerable_logit(hidden), -1), "float32")

    def get_config(self):
        return {**super().get_config(), "hidden_size": self.hidden_size,
                "beam_size": self.beam_size, "hidden_units": self.hidden_units}


class ElectraSquadModel(BertTaskModel):
    """`ElectraModel` + `ElectraSquadHead`: the original ELECTRA's SQuAD model (the family's
    "span" model).

    Inputs: `input_ids`, `input_mask`, `segment_ids` int `[B, S]`; with `start_positions` int
    `[B]` (the loss's features) the end logits are of the gold start, otherwise the beams.
    Returns: `ElectraSquadHead`'s dict.

    What `bert_tasks.squad` reads (it dispatches on these, not on the family):
      training_features: the training records' further features the loss reads.
      prediction_outputs: the outputs a prediction keeps per window (decoded by the beam rule
        of `bert_tasks.squad.postprocess`).
      span_loss(features, outputs): the scalar loss.

    Args: config (an `ElectraConfig`); `beam_size` (K); `original_task_name`: the task scope of
    the original layout (`task_specific/<name>/`), "squad" (SQuAD 2.0) or "squadv1".
    """

    encoder_class = ElectraModel
    training_features = ("is_impossible",)
    # configure_finetuning.qa_na_threshold: "" is predicted where the answerable logit's
    # null odds exceed it (run_squad.py's --null_score_diff_threshold when not given).
    null_score_diff_threshold = -2.75
    prediction_outputs = ("start_top_log_probs", "start_top_index", "end_top_log_probs",
                          "end_top_index", "answerable_logit")

    def __init__(self, config, name="electra_squad", beam_size=BEAM_SIZE,
                 original_task_name="squad", **kwargs):
        super().__init__(config, name, **kwargs)
        self.original_task_name = original_task_name
        self.span = ElectraSquadHead(self.config.hidden_size, beam_size,
                                     dtype=self.dtype_policy, name="squad")
        self.span.build()

    @property
    def beam_size(self):
        return self.span.beam_size

    def call(self, features, training=False):
        sequence = self.encode(features, training=training)["sequence_output"]
        mask = answer_mask(features["input_mask"], features["segment_ids"])
        return self.span(sequence, mask, features.get("start_positions"))

    def span_loss(self, features, outputs):
        """Mean over the batch of (start CE + end CE) / 2 + 0.5 * the answerable sigmoid CE,
        labels `is_impossible` (all 0 when the features lack it: SQuAD v1.1).

        features: `start_positions`, `end_positions` int `[B]`, optional `is_impossible` int
        `[B]`; outputs: this model's training outputs. Returns a float32 scalar."""
        start = _cross_entropy(outputs["start_logits"], features["start_positions"])
        end = _cross_entropy(outputs["end_logits"], features["end_positions"])
        logit = outputs["answerable_logit"]
        labels = features.get("is_impossible")
        labels = ops.zeros_like(logit) if labels is None else ops.cast(
            ops.reshape(labels, ops.shape(logit)), "float32")
        # Sigmoid cross-entropy in its stable form, as tf.nn.sigmoid_cross_entropy_with_logits.
        answerable = (ops.maximum(logit, 0.0) - logit * labels
                      + ops.log1p(ops.exp(-ops.abs(logit))))
        return ops.mean((start + end) / 2.0 + ANSWERABLE_WEIGHT * answerable)

    def get_config(self):
        return {**self._config_dict(), "beam_size": self.beam_size,
                "original_task_name": self.original_task_name}

    def tf1_head_variables(self):
        scope = f"task_specific/{self.original_task_name}"
        names = ("dense", "qa_hidden", "dense_1", "dense_2", "dense_3")
        return [(f"{scope}/{name}/{part}", getattr(layer, part))
                for name, layer in zip(names, self.span.layers_in_order())
                for part in ("kernel", "bias")]


def _cross_entropy(logits, positions):
    """Per-row softmax cross-entropy: logits float32 `[B, S]`, positions int `[B]` -> `[B]`."""
    log_probs = ops.log_softmax(logits, axis=-1)
    positions = ops.reshape(ops.cast(positions, "int32"), (-1, 1))
    return -ops.squeeze(ops.take_along_axis(log_probs, positions, axis=1), -1)
