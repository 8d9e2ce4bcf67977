"""GLUE and multi-label evaluation metrics in numpy (no scipy/sklearn), with their conventions for
degenerate input.

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


def _precision_recall_f1(true_positives, predicted, actual):
    """(precision, recall, F1) from counts; each 0.0 where its denominator is 0 (sklearn's
    `zero_division=0`)."""
    precision = true_positives / predicted if predicted else 0.0
    recall = true_positives / actual if actual else 0.0
    denominator = predicted + actual
    return float(precision), float(recall), float(2 * true_positives / denominator
                                                  if denominator else 0.0)


def multi_label_metrics(labels, predictions, label_names):
    """Multi-label metrics of 0/1 matrices, keyed as they go into eval_results.txt.

    Args:
      labels, predictions: `[N, L]` 0/1 (or bool) arrays, real examples only.
      label_names: the L label names, for the per-label keys.
    Returns:
      dict of float: `eval_micro_{precision,recall,f1}` (counts summed over labels),
      `eval_macro_{precision,recall,f1}` (each the unweighted mean of the per-label values, as
      sklearn's average="macro"), `eval_exact_match` (the fraction of examples whose label set
      is predicted exactly) and `eval_f1_<label name>` per label. A ratio with a zero
      denominator is 0.0.
    """
    labels = np.asarray(labels).astype(bool)
    predictions = np.asarray(predictions).astype(bool)
    if labels.shape != predictions.shape or labels.ndim != 2:
        raise ValueError("labels %s and predictions %s must be the same [N, L] shape"
                         % (labels.shape, predictions.shape))
    true_positives = np.sum(labels & predictions, axis=0)
    predicted, actual = np.sum(predictions, axis=0), np.sum(labels, axis=0)
    per_label = [_precision_recall_f1(*counts)
                 for counts in zip(true_positives, predicted, actual)]
    micro = _precision_recall_f1(true_positives.sum(), predicted.sum(), actual.sum())
    values = {"eval_exact_match": float(np.mean(np.all(labels == predictions, axis=1)))}
    for i, kind in enumerate(("precision", "recall", "f1")):
        values["eval_micro_" + kind] = micro[i]
        values["eval_macro_" + kind] = float(np.mean([scores[i] for scores in per_label]))
    for name, scores in zip(label_names, per_label):
        values["eval_f1_" + name] = scores[2]
    return values


def multi_label_baselines(labels, label_names):
    """The two references printed beside each multi-label metric, from the gold `[N, L]` 0/1
    matrix: `{metric: (all-negative value, label-frequency value)}`, keyed as
    `multi_label_metrics`.

    all-negative: no label ever predicted (exact match = the fraction of examples without any
    label; every precision, recall and F1 0). label frequency: each label predicted at random,
    independently, with its frequency p_l in `labels`; the values are ratios of the expected
    counts (TP_l = N p_l², predicted_l = actual_l = N p_l, so per-label precision, recall and F1
    are all p_l) and the expected exact match, mean over examples of the product over labels of
    p_l (label present) or 1 - p_l (absent).
    """
    labels = np.asarray(labels).astype(bool)
    count = len(labels)
    frequency = labels.mean(axis=0)
    actual = labels.sum(axis=0).astype(np.float64)
    expected_tp = actual * frequency
    micro = _precision_recall_f1(expected_tp.sum(), actual.sum(), actual.sum())
    per_label = [_precision_recall_f1(tp, n, n) for tp, n in zip(expected_tp, actual)]
    match = np.where(labels, frequency, 1.0 - frequency).prod(axis=1).mean() if count else 0.0
    baselines = {"eval_exact_match": (float(np.mean(~labels.any(axis=1))), float(match))}
    for i, kind in enumerate(("precision", "recall", "f1")):
        baselines["eval_micro_" + kind] = (0.0, micro[i])
        baselines["eval_macro_" + kind] = (0.0, float(np.mean([s[i] for s in per_label])))
    for name, scores in zip(label_names, per_label):
        baselines["eval_f1_" + name] = (0.0, scores[2])
    return baselines
