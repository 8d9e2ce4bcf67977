"""run_classifier --long_documents: the windows (bert_tasks.classifier.windows), their records,
and the per-example aggregation of evaluation and prediction. End to end (CLI, windowed dev and
test examples): tests/test_run_classifier.py."""
import numpy as np
import pytest

from bert_tasks.classifier import features, windows
from bert_tasks.classifier.features import InputExample
from modeling_helpers import TINY


def _pieces(count, name="t"):
    return [f"{name}{i}" for i in range(count)]


def _tokenizer():
    from vocab import tokenization

    return tokenization.FullTokenizer(str(TINY / "vocab.txt"), do_lower_case=True)


def test_a_text_that_fits_is_one_window_and_a_longer_one_slides_like_run_squad():
    assert windows.window_pairs(_pieces(6), None, 8, 2) == [(_pieces(6), None)]
    tokens = _pieces(13)
    pieces = windows.window_pairs(tokens, None, 8, 4)  # room for 6 word-pieces
    assert [piece for piece, _ in pieces] == [tokens[0:6], tokens[4:10], tokens[8:13]]
    assert all(b is None for _, b in pieces)
    # A stride longer than the window: windows meet, none is skipped.
    assert [p for p, _ in windows.window_pairs(tokens, None, 8, 50)] == [
        tokens[0:6], tokens[6:12], tokens[12:13]]


def test_a_pair_keeps_the_shorter_text_whole_and_windows_the_longer():
    question, document = _pieces(3, "q"), _pieces(20, "d")
    assert windows.window_pairs(question, _pieces(4, "d"), 12, 3) == [(question, _pieces(4, "d"))]
    pieces = windows.window_pairs(question, document, 12, 3)  # room 9: 3 for A, 6 for B
    assert all(a == question for a, _ in pieces)
    assert [b for _, b in pieces] == [document[s:s + 6] for s in (0, 3, 6, 9, 12, 15)]
    # The longer text is windowed whichever side it is on.
    assert all(b == question for _, b in windows.window_pairs(document, question, 12, 3))
    # A "shorter" text longer than half the room is cut to half of it.
    long_a, long_b = _pieces(7, "a"), _pieces(30, "b")
    pieces = windows.window_pairs(long_a, long_b, 12, 4)
    assert all(a == long_a[:4] and len(b) <= 5 for a, b in pieces)
    assert pieces[-1][1][-1] == long_b[-1]


def test_a_fitting_example_gives_the_record_of_the_original_and_a_long_one_its_windows():
    tokenizer = _tokenizer()
    short = InputExample("dev-1", "the dog is happy", "a cat", "1")
    long = InputExample("dev-2", " ".join(["the big red dog"] * 10), "a cat", "0")
    label_list = ["0", "1"]
    original = features.convert_single_example(0, short, label_list, 16, tokenizer)
    assert features.convert_example_windows(0, short, label_list, 16, tokenizer, 4) == [original]
    long_windows = features.convert_example_windows(1, long, label_list, 16, tokenizer, 4)
    # 40 word-pieces of A in windows of 16 - 3 - 2 ("a cat") = 11, 4 apart.
    assert len(long_windows) == 9
    assert all(w.label_id == 0 for w in long_windows)
    assert [sum(w.input_mask) for w in long_windows] == [16] * 8 + [3 + 8 + 2]
    counts = []
    records = list(features.tf_examples([short, long], label_list, 16, tokenizer, 4, counts))
    assert counts == [1, 9] and len(records) == 10


def test_training_windows_are_shuffled_once_and_counted_as_steps():
    from bert_runner.run_config import RunConfig
    from bert_tasks.classifier.task import ClassifierTask

    examples = [InputExample(f"train-{i}", " ".join(["the big red dog"] * (8 if i % 2 else 1)),
                             None, str(i % 2)) for i in range(6)]
    task = ClassifierTask("sst-2", 16, long_documents=True, doc_stride=7)
    converted = task.records(examples, "train", _tokenizer(), None)
    records = converted.records
    assert list(converted.index) == [1, 4, 1, 4, 1, 4]
    in_order = features.tf_examples(examples, ["0", "1"], 16, _tokenizer(), 7, [])
    shuffled = [r.SerializeToString(deterministic=True) for r in records]
    expected = [r.SerializeToString(deterministic=True) for r in in_order]
    # Not example by example (the pipeline's shuffle buffer is 100 records), the same windows.
    assert shuffled != expected and sorted(shuffled) == sorted(expected)
    run = RunConfig("out", train_batch_size=5, num_train_epochs=2.0)
    assert task.training_steps(run, examples, len(records)) == run.training_steps(15)
    # Where every example fits, the records stay in the original's order.
    fitting = ClassifierTask("sst-2", 16, long_documents=True).records(
        examples[::2], "train", _tokenizer(), None).records
    assert [r.features.feature["label_ids"].int64_list.value[0] for r in fitting] == [0, 0, 0]


def test_aggregation_mean_max_first_against_loops_padding_rows_ignored():
    rng = np.random.default_rng(0)
    counts = rng.integers(1, 5, size=20)
    values = rng.normal(size=(int(counts.sum()) + 3, 4)).astype(np.float32)  # 3 padding rows
    starts = np.cumsum(counts) - counts
    for how, reduce in (("mean", lambda v: v.mean(0)), ("max", lambda v: v.max(0)),
                        ("first", lambda v: v[0])):
        expected = [reduce(values[s:s + c]) for s, c in zip(starts, counts)]
        np.testing.assert_allclose(windows.aggregate(values, counts, how), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="one of mean, max, first"):
        windows.aggregate(values, counts, "median")


def _collected(logits, labels, batch_size):
    from bert_runner.task import collect

    logits = np.asarray(logits, np.float32)
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    per_window = -np.log(probabilities[np.arange(len(labels)), labels])
    return collect([{"outputs": probabilities[i:i + batch_size], "logits": logits[i:i + batch_size],
                     "per_example_loss": per_window[i:i + batch_size],
                     "label_ids": np.asarray(labels)[i:i + batch_size],
                     "is_real_example": np.ones(len(labels[i:i + batch_size]), np.int32)}
                    for i in range(0, len(labels), batch_size)])


@pytest.mark.parametrize("how", ["mean", "max", "first"])
def test_eval_results_and_test_results_count_examples_not_windows(tmp_path, how):
    from bert_runner.splits import Split
    from bert_tasks.classifier.task import ClassifierTask

    task = ClassifierTask("mrpc", 8, long_documents=True, doc_stride=2, window_aggregation=how)
    # Example 0: 3 windows, only the last says "1"; example 1: one window, "0"; example 2: 2.
    logits = [[1, 0], [1, 0], [0, 5], [2, 0], [0, 1], [0, 2]]
    labels = [1, 1, 1, 0, 1, 1]
    outputs = _collected(logits, labels, batch_size=4)
    aggregated = windows.aggregate(np.float32(logits), [3, 1, 2], how)
    predicted = np.argmax(aggregated, -1)
    split = Split(["x"], 3, 8, index=(3, 1, 2))
    results = task.evaluate(outputs, 5, split, str(tmp_path))
    assert results["eval_accuracy"] == np.float32(np.mean(predicted == [1, 0, 1]))
    log_probs = aggregated - np.log(np.exp(aggregated).sum(-1, keepdims=True))
    assert results["eval_loss"] == pytest.approx(-np.mean(log_probs[[0, 1, 2], [1, 0, 1]]),
                                                 rel=1e-5)
    assert task.baselines(outputs, split) == {
        "eval_accuracy": "majority class '1' 0.6667, chance 0.5000"}

    task.write_predictions(iter([outputs]), Split(["x"], 6, 8, index=(3, 1, 2)),
                           str(tmp_path))
    lines = (tmp_path / "test_results.tsv").read_text().splitlines()
    assert len(lines) == 3
    np.testing.assert_allclose(np.float32([line.split("\t") for line in lines]),
                               np.exp(log_probs), rtol=1e-5)
