"""GLUE evaluation metrics in numpy (no scipy/sklearn), with their conventions for degenerate input.

Each function takes the gold labels and the predictions of the real examples only (drop padding
rows, `is_real_example == 0`, first).
"""
import numpy as np

from bert_tasks.classifier import processors


def accuracy(labels, predictions):
    """Fraction of predictions equal to the label; float."""
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    return float(np.mean(labels == predictions))


def f1(labels, predictions, positive=1):
    """F1 of the positive class (binary tasks: MRPC, QQP).

    2·TP / (2·TP + FP + FN); 0.0 when there is no positive label and no positive prediction
    (sklearn's `zero_division=0` convention).
    """
    labels, predictions = np.asarray(labels) == positive, np.asarray(predictions) == positive
    true_positives = np.sum(labels & predictions)
    denominator = np.sum(labels) + np.sum(predictions)
    return float(2 * true_positives / denominator) if denominator else 0.0


def matthews_corrcoef(labels, predictions):
    """Matthews correlation coefficient, binary (CoLA's official metric).

    (TP·TN - FP·FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)); 0.0 when any factor is 0 (a constant
    label or prediction), as sklearn does.
    """
    labels, predictions = np.asarray(labels) == 1, np.asarray(predictions) == 1
    tp = float(np.sum(labels & predictions))
    tn = float(np.sum(~labels & ~predictions))
    fp = float(np.sum(~labels & predictions))
    fn = float(np.sum(labels & ~predictions))
    denominator = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
    return float((tp * tn - fp * fn) / np.sqrt(denominator)) if denominator else 0.0


def pearson(x, y):
    """Pearson correlation of two float sequences (computed in float64); nan if one is constant."""
    x = np.asarray(x, dtype=np.float64) - np.mean(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64) - np.mean(y, dtype=np.float64)
    denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
    return float(np.sum(x * y) / denominator) if denominator else float("nan")


def _average_ranks(values):
    """1-based ranks with ties given their mean rank (scipy.stats.rankdata's default)."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    # Start of each run of equal values, and each element's run.
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    run = np.cumsum(np.r_[True, sorted_values[1:] != sorted_values[:-1]]) - 1
    ends = np.r_[starts[1:], len(values)]
    mean_rank = (starts + ends + 1) / 2.0  # mean of the 1-based ranks starts+1 .. ends
    ranks = np.empty(len(values))
    ranks[order] = mean_rank[run]
    return ranks


def spearman(x, y):
    """Spearman rank correlation: Pearson of the tie-averaged ranks; nan if one is constant."""
    return pearson(_average_ranks(x), _average_ranks(y))


# Official GLUE metric names per task, beyond accuracy.
_EXTRA_METRICS = {
    "cola": {"eval_matthews_corrcoef": matthews_corrcoef},
    "mrpc": {"eval_f1": f1},
    "qqp": {"eval_f1": f1},
}
_REGRESSION_METRICS = {"eval_pearson": pearson, "eval_spearman": spearman}


def task_metrics(task_name, labels, predictions):
    """The task's official metrics, keyed as they go into eval_results.txt.

    Args:
      task_name: str, a key of processors.PROCESSORS (case-insensitive).
      labels: gold label ids (classification) or scores (regression), real examples only.
      predictions: predicted label ids (argmax of the logits) or scores, same length.
    Returns:
      dict of float. Classification: `eval_accuracy`, plus `eval_f1` (MRPC, QQP) or
      `eval_matthews_corrcoef` (CoLA). Regression (STS-B): `eval_pearson`, `eval_spearman`.
    """
    processor = processors.get_processor(task_name)
    if len(labels) != len(predictions):
        raise ValueError("%d labels but %d predictions" % (len(labels), len(predictions)))
    if processor.is_regression:
        metric_fns = _REGRESSION_METRICS
    else:
        metric_fns = {"eval_accuracy": accuracy, **_EXTRA_METRICS.get(task_name.lower(), {})}
    return {name: fn(labels, predictions) for name, fn in metric_fns.items()}
