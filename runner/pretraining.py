"""Pre-training loss, evaluation metrics and FLOP count (run_pretraining's `model_fn` and `metric_fn`)."""
import numpy as np
import tensorflow as tf

from modeling import classification_loss, masked_lm_loss


def _heads(model, features, training):
    """Both losses (`(loss, per_example, log_probs)` each) and the masked-LM weights `[B·P]`."""
    outputs = model(features, training=training)
    mlm = masked_lm_loss(
        outputs["masked_lm_logits"], features["masked_lm_ids"], features["masked_lm_weights"])
    nsp = classification_loss(outputs["next_sentence_logits"], features["next_sentence_labels"])
    return mlm, nsp, tf.reshape(features["masked_lm_weights"], [-1])


def _correct(log_probs, labels):
    """1.0 where the argmax of `log_probs [N, C]` equals `labels` (any shape with N entries)."""
    predicted = tf.argmax(log_probs, -1, output_type=tf.int32)
    return tf.cast(tf.equal(predicted, tf.reshape(labels, [-1])), tf.float32)


def pretraining_loss(model, features, training):
    """total_loss = masked_lm_loss + next_sentence_loss; also reports the MLM accuracy."""
    (mlm_loss, _, mlm_log_probs), (nsp_loss, _, _), weights = _heads(model, features, training)
    correct = _correct(mlm_log_probs, features["masked_lm_ids"])
    accuracy = tf.reduce_sum(correct * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)
    return mlm_loss + nsp_loss, {
        "masked_lm_loss": mlm_loss,
        "next_sentence_loss": nsp_loss,
        "masked_lm_accuracy": accuracy,
    }


def pretraining_eval_sums(model, features):
    """Per-batch sums from which `eval_metrics` computes the original's `metric_fn` values."""
    mlm, nsp, weights = _heads(model, features, training=False)
    (mlm_loss, mlm_per_example, mlm_log_probs), (nsp_loss, nsp_per_example, nsp_log_probs) = mlm, nsp
    return {
        "mlm_correct": tf.reduce_sum(_correct(mlm_log_probs, features["masked_lm_ids"]) * weights),
        "mlm_loss": tf.reduce_sum(mlm_per_example * weights),
        "mlm_weight": tf.reduce_sum(weights),
        "nsp_correct": tf.reduce_sum(_correct(nsp_log_probs, features["next_sentence_labels"])),
        "nsp_loss": tf.reduce_sum(nsp_per_example),
        "nsp_count": tf.cast(tf.size(nsp_per_example), tf.float32),
        "total_loss": mlm_loss + nsp_loss,
    }


def eval_metrics(sums, global_step):
    """The original's eval_results.txt values from summed batches.

    `masked_lm_accuracy`/`masked_lm_loss` are weighted by masked_lm_weights (tf.metrics.accuracy /
    mean with weights); `loss` is the Estimator's mean over batches of the batch total loss.
    """
    batches = max(sums["num_batches"], 1)
    values = {
        "loss": sums["total_loss"] / batches,
        "masked_lm_accuracy": sums["mlm_correct"] / max(sums["mlm_weight"], 1e-12),
        "masked_lm_loss": sums["mlm_loss"] / max(sums["mlm_weight"], 1e-12),
        "next_sentence_accuracy": sums["nsp_correct"] / max(sums["nsp_count"], 1),
        "next_sentence_loss": sums["nsp_loss"] / max(sums["nsp_count"], 1),
    }
    # numpy scalars, so eval_results.txt shows the original's float32 / int64 text.
    return {"global_step": np.int64(global_step), **{k: np.float32(v) for k, v in values.items()}}


def training_flops_per_example(config, seq_length, max_predictions):
    """Model FLOPs of one training example (forward + backward = 3 × forward).

    Counts the matmuls: per token 2·(4H² + 2HI) per layer plus attention 4·S·H per layer, and the
    masked-LM head (2·(H² + HV)) at each predicted position. BERT-Base at S=128, P=20: ≈69.9 GFLOPs.
    """
    h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size
    per_token = config.num_hidden_layers * (2 * (4 * h * h + 2 * h * i) + 4 * seq_length * h)
    head = max_predictions * 2 * (h * h + h * v)
    return 3 * (per_token * seq_length + head)
