"""The original's losses, in float32 whatever the compute dtype.

Each returns what the original `get_*_output` returns: `(loss, per_example_loss, log_probs)`.
"""
from keras import ops

# run_pretraining.get_masked_lm_output divides by sum(weights) + 1e-5, not sum(weights).
MASKED_LM_DENOMINATOR_EPSILON = 1e-5


def _label_log_prob(log_probs, labels):
    """`-log_probs[i, labels[i]]`, equal to the original `-Σ one_hot · log_probs`."""
    labels = ops.cast(ops.expand_dims(labels, -1), "int32")
    return -ops.squeeze(ops.take_along_axis(log_probs, labels, axis=-1), -1)


def masked_lm_loss(logits, label_ids, label_weights, epsilon=MASKED_LM_DENOMINATOR_EPSILON):
    """Masked-LM loss.

    Args:
        logits: `[B, P, V]`; label_ids: int `[B, P]`; label_weights: float `[B, P]` (0 = padding);
        epsilon: added to the denominator (BERT's 1e-5; ELECTRA's generator 1e-6).
    Returns:
        loss scalar `Σ w·l / (Σ w + epsilon)`, per-example loss `[B·P]`, log-probs `[B·P, V]`.
    """
    vocab_size = ops.shape(logits)[-1]
    log_probs = ops.log_softmax(ops.reshape(ops.cast(logits, "float32"), (-1, vocab_size)), axis=-1)
    per_example = _label_log_prob(log_probs, ops.reshape(label_ids, (-1,)))
    weights = ops.reshape(ops.cast(label_weights, "float32"), (-1,))
    loss = ops.sum(weights * per_example) / (ops.sum(weights) + epsilon)
    return loss, per_example, log_probs


# ELECTRA's losses divide by their weights' sum + 1e-6 (run_pretraining.get_softmax_output,
# _get_discriminator_output).
ELECTRA_DENOMINATOR_EPSILON = 1e-6


def replaced_token_loss(logits, labels, input_mask):
    """ELECTRA's discriminator loss: sigmoid cross-entropy of "replaced" at every real token.

    Args:
        logits: `[B, S]`; labels: int `[B, S]` (1 = replaced); input_mask: int `[B, S]`.
    Returns:
        loss scalar `Σ m·l / (Σ m + 1e-6)`, per-example loss `[B]` (each row's mean, the same
        epsilon), and the probabilities `sigmoid(logits)` `[B, S]`; float32.
    """
    _, per_token, probs = multi_label_loss(logits[..., None], labels[..., None])
    weights = ops.cast(input_mask, "float32")
    losses = ops.reshape(per_token, ops.shape(weights)) * weights
    per_example = ops.sum(losses, axis=-1) / (ELECTRA_DENOMINATOR_EPSILON
                                              + ops.sum(weights, axis=-1))
    loss = ops.sum(losses) / (ELECTRA_DENOMINATOR_EPSILON + ops.sum(weights))
    return loss, per_example, ops.squeeze(probs, -1)


def next_token_loss(logits, input_ids, input_mask):
    """The left-to-right language model's loss: position i predicts token i + 1, at every real
    position that has a next one.

    Args:
        logits: `[B, S - 1, V]`, the predictions of positions 0..S-2; input_ids, input_mask: int
            `[B, S]` (right-padded).
    Returns:
        loss scalar: the mean over the predicted tokens `Σ w·l / max(Σ w, 1)` (w =
        input_mask[:, 1:]), per-position loss `[B·(S-1)]`, log-probs `[B·(S-1), V]`.
    """
    vocab_size = ops.shape(logits)[-1]
    log_probs = ops.log_softmax(ops.reshape(ops.cast(logits, "float32"), (-1, vocab_size)), axis=-1)
    per_position = _label_log_prob(log_probs, ops.reshape(input_ids[:, 1:], (-1,)))
    weights = ops.reshape(ops.cast(input_mask[:, 1:], "float32"), (-1,))
    loss = ops.sum(weights * per_position) / ops.maximum(ops.sum(weights), 1.0)
    return loss, per_position, log_probs


def classification_loss(logits, labels):
    """Mean softmax cross-entropy; `logits [B, C]`, int `labels [B]` or `[B, 1]`.

    Used for next-sentence prediction and the classifier.
    Returns loss, per-example loss `[B]`, log-probs `[B, C]`.
    """
    log_probs = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    per_example = _label_log_prob(log_probs, ops.reshape(labels, (-1,)))
    return ops.mean(per_example), per_example, log_probs


def regression_loss(predictions, targets):
    """Mean squared error for one-output regression (STS-B); `predictions [B, 1]`, `targets [B]`.

    Returns loss, per-example loss `[B]`, predictions `[B]`.
    """
    predictions = ops.reshape(ops.cast(predictions, "float32"), (-1,))
    per_example = ops.square(predictions - ops.reshape(ops.cast(targets, "float32"), (-1,)))
    return ops.mean(per_example), per_example, predictions


def multi_label_loss(logits, labels):
    """Binary cross-entropy of independent sigmoid outputs (multi-label classification).

    Args:
        logits: `[B, L]`; labels: 0/1 `[B, L]` (any numeric dtype).
    Returns:
        loss (mean over the batch), per-example loss `[B]` (mean over the L labels), and the
        probabilities `sigmoid(logits)` `[B, L]`; float32. The cross-entropy is computed from the
        logits, `max(x, 0) - x·z + log(1 + exp(-|x|))` (tf.nn.sigmoid_cross_entropy_with_logits),
        which stays finite where log(sigmoid(x)) would overflow.
    """
    logits = ops.cast(logits, "float32")
    labels = ops.cast(labels, "float32")
    per_label = (ops.maximum(logits, 0.0) - logits * labels
                 + ops.log1p(ops.exp(-ops.abs(logits))))
    per_example = ops.mean(per_label, axis=-1)
    return ops.mean(per_example), per_example, ops.sigmoid(logits)


def span_loss(start_logits, end_logits, start_positions, end_positions):
    """run_squad's loss: mean over the batch of (start CE + end CE) / 2; logits `[B, S]`."""
    start, _, _ = classification_loss(start_logits, start_positions)
    end, _, _ = classification_loss(end_logits, end_positions)
    return (start + end) / 2.0
