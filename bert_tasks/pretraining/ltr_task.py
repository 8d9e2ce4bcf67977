"""Pre-training a left-to-right language model: the paper's "LTR & No NSP" (Table 5), as OpenAI
GPT is trained, on `create_pretraining_data.py --pretraining_objective=ltr` records.

The model is `BertPretrainer` with causal self-attention (`BertConfig.causal`: the config's
`"pretraining_objective": "ltr"`, written to output_dir/bert_config.json): position i sees
positions 0..i only, and its masked-LM head (the same `cls/predictions` variables, tied to the
word embeddings) predicts token i + 1 at every real position that has one. No token is masked
and there is no next-sentence loss: the next-sentence head and the pooler get no gradient and
keep their initial values, as without NSP (`bert_tasks.pretraining.task`). Checkpoints load
wherever the masked LM's do; the config makes every script build the causal encoder.
"""
import numpy as np
from absl import logging
from keras import ops

from modeling import next_token_loss
from bert_tasks.pretraining.data.features import name_to_features
from bert_tasks.pretraining.task import PretrainingTask, _correct
from bert_runner.task import encoder_training_flops


def next_token_outputs(model, features, training):
    """`next_token_loss` of `model` (a causal `BertPretrainer`) on a batch: the head applied at
    positions 0..S-2. Returns `(loss, per_position [B·(S-1)], log_probs [B·(S-1), V])`."""
    input_ids = features["input_ids"]
    batch, seq = ops.shape(input_ids)[0], ops.shape(input_ids)[1]
    positions = ops.tile(ops.arange(seq - 1, dtype="int32")[None], (batch, 1))
    logits = model({**features, "masked_lm_positions": positions},
                   training=training)["masked_lm_logits"]
    return next_token_loss(logits, input_ids, features["input_mask"])


def _targets(features):
    """The next-token targets `[B·(S-1)]` and their weights (1.0 at real targets)."""
    return (ops.reshape(features["input_ids"][:, 1:], (-1,)),
            ops.reshape(ops.cast(features["input_mask"][:, 1:], "float32"), (-1,)))


class LtrPretrainingTask(PretrainingTask):
    """`PretrainingTask` for the left-to-right model: same flags, splits and output_dir layout.

    eval_results.txt: `next_token_accuracy` and `next_token_loss` over every predicted token,
    `loss` (the Estimator's mean of the batch losses) and `global_step`; the log prints the
    accuracy beside always predicting the most frequent token.
    """

    objective = "ltr"
    masked_lm = False

    def __init__(self, max_seq_length, input_file=None, num_train_steps=0, num_warmup_steps=0,
                 max_eval_steps=None, dynamic_input=None):
        super().__init__(max_seq_length, 0, False, input_file, num_train_steps,
                         num_warmup_steps, max_eval_steps, dynamic_input)

    def records_settings(self, records):
        # next_sentence stays False whatever the records hold: the LTR model has no
        # next-sentence loss, so there is nothing to settle, only the objective to log.
        logging.info("Objective: left-to-right language model (causal attention, every "
                     "next token predicted; no masking, no next sentence prediction)")
        return {}

    def feature_spec(self, is_training):
        return name_to_features(self.max_seq_length, 0, next_sentence=False, masked_lm=False)

    def loss(self, model, features, training):
        loss, _, log_probs = next_token_outputs(model, features, training)
        targets, weights = _targets(features)
        accuracy = (ops.sum(_correct(log_probs, targets) * weights)
                    / ops.maximum(ops.sum(weights), 1.0))
        return loss, {"next_token_loss": loss, "next_token_accuracy": accuracy}

    def predict_step(self, model, features):
        """Per example `[B]`: summed loss and correct count over its predicted tokens, their
        number; and the targets with their weights `[B, S-1]` for the baseline."""
        _, per_position, log_probs = next_token_outputs(model, features, False)
        targets, weights = _targets(features)
        batch = ops.shape(features["input_ids"])[0]

        def per_example(values):
            return ops.sum(ops.reshape(values * weights, (batch, -1)), axis=1)

        return {
            "lm_loss": per_example(per_position),
            "lm_correct": per_example(_correct(log_probs, targets)),
            "lm_weight": per_example(ops.ones_like(weights)),
            "targets": ops.reshape(targets, (batch, -1)),
            "target_weights": ops.reshape(weights, (batch, -1)),
        }

    def evaluate(self, outputs, global_step, split, output_dir):
        batch = outputs["batch_index"]
        weight = max(np.sum(outputs["lm_weight"], dtype=np.float64), 1e-12)
        batch_loss = (np.bincount(batch, weights=outputs["lm_loss"])
                      / np.maximum(np.bincount(batch, weights=outputs["lm_weight"]), 1.0))
        values = {
            "loss": np.mean(batch_loss),
            "next_token_accuracy": np.sum(outputs["lm_correct"], dtype=np.float64) / weight,
            "next_token_loss": np.sum(outputs["lm_loss"], dtype=np.float64) / weight,
        }
        return {"global_step": np.int64(global_step),
                **{k: np.float32(v) for k, v in values.items()}}

    def baselines(self, outputs, split):
        targets = outputs["targets"].reshape(-1)[outputs["target_weights"].reshape(-1) > 0]
        if not len(targets):
            return {}
        counts = np.bincount(targets)
        return {"next_token_accuracy": "most frequent token (id %d) %.4f" % (
            int(np.argmax(counts)), counts.max() / len(targets))}

    def flops_per_example(self, config):
        return encoder_training_flops(config, self.max_seq_length, self.max_seq_length - 1)
