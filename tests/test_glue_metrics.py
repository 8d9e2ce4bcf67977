"""GLUE metrics against hand-computed values (no scipy/sklearn in the project)."""
import math

import pytest

from bert_tasks.classifier import metrics

LABELS = [1, 0, 1, 1, 0]
PREDICTIONS = [1, 1, 1, 0, 0]  # TP=2, TN=1, FP=1, FN=1


def test_accuracy_f1_matthews_by_hand():
    assert metrics.accuracy(LABELS, PREDICTIONS) == pytest.approx(3 / 5)
    assert metrics.f1(LABELS, PREDICTIONS) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    # (2*1 - 1*1) / sqrt(3*3*2*2)
    assert metrics.matthews_corrcoef(LABELS, PREDICTIONS) == pytest.approx(1 / 6)
    assert metrics.matthews_corrcoef([0, 1, 1], [0, 1, 1]) == pytest.approx(1.0)
    assert metrics.matthews_corrcoef([0, 1, 1], [1, 0, 0]) == pytest.approx(-1.0)


def test_degenerate_cases_follow_sklearn():
    assert metrics.f1([0, 0], [0, 0]) == 0.0
    assert metrics.matthews_corrcoef([0, 1, 1], [1, 1, 1]) == 0.0
    assert math.isnan(metrics.pearson([1, 1, 1], [1, 2, 3]))


def test_pearson_and_spearman_by_hand():
    # dx = [-1, 0, 1], dy = [-4/3, -1/3, 5/3]: 3 / sqrt(2 * 42/9)
    assert metrics.pearson([1, 2, 3], [1, 2, 4]) == pytest.approx(9 / math.sqrt(84))
    # Tied x ranks are averaged: [1, 2.5, 2.5, 4] against [1, 2, 3, 4] -> 4.5 / sqrt(4.5 * 5)
    assert metrics.spearman([1, 2, 2, 3], [10, 20, 30, 40]) == pytest.approx(math.sqrt(0.9))
    assert metrics.spearman([3.0, 1.0, 2.0, 4.0], [9, 1, 4, 16]) == pytest.approx(1.0)
    assert metrics.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_task_metrics_keys():
    assert metrics.task_metrics("CoLA", LABELS, PREDICTIONS) == pytest.approx(
        {"eval_accuracy": 0.6, "eval_matthews_corrcoef": 1 / 6})
    assert metrics.task_metrics("qqp", LABELS, PREDICTIONS) == pytest.approx(
        {"eval_accuracy": 0.6, "eval_f1": 2 / 3})
    assert metrics.task_metrics("mnli", [0, 2], [0, 1]) == {"eval_accuracy": 0.5}
    assert metrics.task_metrics("sts-b", [1, 2, 2, 3], [1.0, 2.0, 3.0, 4.0]) == pytest.approx(
        {"eval_pearson": metrics.pearson([1, 2, 2, 3], [1, 2, 3, 4]),
         "eval_spearman": math.sqrt(0.9)})
    with pytest.raises(ValueError, match="2 labels but 1 predictions"):
        metrics.task_metrics("rte", [0, 1], [0])
