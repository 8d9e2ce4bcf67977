"""run_classifier's model side: loss, per-batch outputs, eval_results values, seed summaries.

The original's `model_fn` computed everything inside the graph with `tf.metrics`; here one step
function returns per-example values for evaluation and prediction alike, and the metrics are
computed in NumPy afterwards, so the task's official metrics (F1, Matthews, Pearson, Spearman)
come from the same pass as the original's accuracy and loss.
"""
import os

import numpy as np
import tensorflow as tf

from glue import metrics
from glue.outputs import predicted_values
from modeling import classification_loss, regression_loss


def _task_loss(model, features, is_regression, training):
    """(mean loss, per-example loss [B], outputs) of the classifier on one batch.

    outputs: softmax probabilities [B, num_labels], or the predicted score [B, 1] for regression.
    """
    logits = model(features, training=training)["logits"]
    if is_regression:
        loss, per_example, _ = regression_loss(logits, features["label_ids"])
        return loss, per_example, logits
    loss, per_example, _ = classification_loss(logits, features["label_ids"])
    # The original's `probabilities = tf.nn.softmax(logits)`, which test_results.tsv prints.
    return loss, per_example, tf.nn.softmax(logits, axis=-1)


def make_loss_fn(is_regression):
    """The Trainer's `loss_fn(model, features, training) -> (loss, {})`: the original total_loss
    (mean softmax cross-entropy, or mean squared error for STS-B)."""

    def loss_fn(model, features, training):
        loss, _, _ = _task_loss(model, features, is_regression, training)
        return loss, {}

    return loss_fn


def make_output_step(is_regression):
    """The Trainer's `predict_step(model, features) -> {name: [B, ...] tensor}`, for evaluation
    and prediction alike.

    Returns `outputs` (probabilities [B, C] or scores [B, 1]), `per_example_loss` [B] float32,
    `label_ids` [B] and `is_real_example` [B] int32 (0 on TPU padding rows).
    """

    def output_step(model, features):
        _, per_example, outputs = _task_loss(model, features, is_regression, training=False)
        return {
            "outputs": outputs,
            "per_example_loss": per_example,
            "label_ids": features["label_ids"],
            "is_real_example": features["is_real_example"],
        }

    return output_step


def collect_outputs(batches):
    """Concatenates the per-batch dicts yielded by `Trainer.predict`.

    Returns the concatenated arrays (N rows, file order) plus `batch_loss` [num_batches] float64:
    each batch's unweighted mean loss, as the Estimator's `loss` averages it.
    """
    parts, batch_loss = {}, []
    for batch in batches:
        if not len(batch["per_example_loss"]):
            continue  # an idle replica's empty share of the last batch
        for name, value in batch.items():
            parts.setdefault(name, []).append(value)
        batch_loss.append(np.mean(batch["per_example_loss"], dtype=np.float64))
    if not parts:
        raise ValueError("the evaluation/prediction set yielded no examples")
    collected = {name: np.concatenate(values) for name, values in parts.items()}
    collected["batch_loss"] = np.asarray(batch_loss)
    return collected


def eval_results(outputs, task_name, is_regression, global_step):
    """The values of eval_results.txt, as numpy scalars (so they print as the original's).

    Args:
      outputs: from `collect_outputs` over the dev set.
    Returns:
      dict: `eval_loss` (mean per-example loss over real examples), `loss` (mean of the batch
      losses, padding rows included: the Estimator's), `global_step` (np.int64), `eval_accuracy`
      (classification), and the task's official metrics from `glue.metrics.task_metrics`; all
      float32.
    """
    real = outputs["is_real_example"].astype(bool)
    labels = outputs["label_ids"][real]
    predictions = predicted_values(outputs["outputs"][real], is_regression)
    values = {
        "eval_loss": np.mean(outputs["per_example_loss"][real], dtype=np.float64),
        "loss": np.mean(outputs["batch_loss"]),
        **metrics.task_metrics(task_name, labels, predictions),
    }
    return {"global_step": np.int64(global_step), **{k: np.float32(v) for k, v in values.items()}}


def seed_dir(output_dir, seed):
    """Where `--seeds` puts the run of one seed: `<output_dir>/seed_<seed>`."""
    return os.path.join(output_dir, "seed_%d" % seed)


def summarize_seeds(results_by_seed):
    """The text of eval_results_seeds.txt: each metric's spread over the seeds.

    Args:
      results_by_seed: {seed (int): eval_results dict}, in run order.
    Returns:
      str, one line per metric (sorted; `global_step` left out), e.g.
      "eval_accuracy = 0.852941 ± 0.0073529 (seeds 1, 2: 0.845588, 0.860294)\\n".
      The spread is the sample standard deviation (n - 1 in the denominator; 0 for one seed).
    """
    seeds = list(results_by_seed)
    names = sorted(name for name in results_by_seed[seeds[0]] if name != "global_step")
    lines = []
    for name in names:
        values = [results_by_seed[s][name] for s in seeds]
        numbers = np.asarray(values, dtype=np.float64)
        std = np.std(numbers, ddof=1) if len(numbers) > 1 else 0.0
        lines.append("%s = %.6g ± %.6g (seeds %s: %s)\n" % (
            name, np.mean(numbers), std, ", ".join(map(str, seeds)), ", ".join(map(str, values))))
    return "".join(lines)
