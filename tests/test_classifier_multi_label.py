"""run_classifier --task_name=multilabel: the TSV layout, the metrics (against scikit-learn) and
their baselines, the sigmoid head and its loss, and a run through the driver in process (long
documents, the TF1 head names)."""
import itertools
import re

import numpy as np
import pytest

from bert_tasks.classifier import metrics
from modeling_helpers import TINY


def _sklearn_metrics(labels, predictions, names):
    from sklearn import metrics as sk

    values = {"eval_exact_match": sk.accuracy_score(labels, predictions)}
    for average in ("micro", "macro"):
        precision, recall, f1, _ = sk.precision_recall_fscore_support(
            labels, predictions, average=average, zero_division=0)
        values.update({f"eval_{average}_precision": precision, f"eval_{average}_recall": recall,
                       f"eval_{average}_f1": f1})
    _, _, per_label, _ = sk.precision_recall_fscore_support(
        labels, predictions, average=None, zero_division=0)
    values.update({f"eval_f1_{name}": f1 for name, f1 in zip(names, per_label)})
    return values


def test_metrics_agree_with_scikit_learn_on_random_cases():
    rng = np.random.default_rng(0)
    for case in range(100):
        # sklearn reads one column as a binary task (micro-average over both classes): 2 or more.
        count, width = rng.integers(1, 40), rng.integers(2, 7)
        density = rng.choice([0.0, 0.1, 0.5, 0.9, 1.0])
        labels = rng.random((count, width)) < density
        predictions = rng.random((count, width)) < rng.choice([0.0, 0.3, 0.7, 1.0])
        names = [f"l{i}" for i in range(width)]
        ours = metrics.multi_label_metrics(labels, predictions, names)
        theirs = _sklearn_metrics(labels, predictions, names)
        assert sorted(ours) == sorted(theirs), case
        for name, value in theirs.items():
            assert ours[name] == pytest.approx(value, abs=1e-12), (case, name)


def test_baselines_all_negative_and_label_frequency():
    rng = np.random.default_rng(1)
    labels = rng.random((25, 3)) < [0.2, 0.5, 0.8]
    names = ["a", "b", "c"]
    baselines = metrics.multi_label_baselines(labels, names)
    # All-negative: exactly the metrics of predicting nothing.
    nothing = metrics.multi_label_metrics(labels, np.zeros_like(labels), names)
    assert {name: values[0] for name, values in baselines.items()} == pytest.approx(nothing)
    # Label frequency: expected counts of independent draws with each label's frequency.
    frequency = labels.mean(0)
    assert [baselines[f"eval_f1_{n}"][1] for n in names] == pytest.approx(frequency)
    assert baselines["eval_macro_f1"][1] == pytest.approx(frequency.mean())
    actual = labels.sum(0)
    assert baselines["eval_micro_f1"][1] == pytest.approx(
        np.sum(actual * frequency) / actual.sum())
    # The expected exact match, over every prediction pattern with its probability.
    expected = 0.0
    for pattern in itertools.product([0, 1], repeat=3):
        probability = np.prod(np.where(pattern, frequency, 1 - frequency))
        expected += probability * np.mean(np.all(labels == np.array(pattern, bool), axis=1))
    assert baselines["eval_exact_match"][1] == pytest.approx(expected)


def _write(path, header, rows):
    path.write_text("\n".join("\t".join(row) for row in [header] + rows) + "\n", encoding="utf-8")


def test_the_layout_label_sets_and_bad_rows(tmp_path):
    from bert_tasks.classifier import processors

    _write(tmp_path / "train.tsv", ["labels", "text_a"],
           [["sport,politics", "a b"], ["", "c"], ["weather", "d"]])
    _write(tmp_path / "dev.tsv", ["text_a", "text_b", "labels"], [["x", "y", "weather"]])
    _write(tmp_path / "test.tsv", ["index", "text_a"], [["7", "z"]])
    processor = processors.get_processor("MultiLabel")
    train = processor.get_train_examples(str(tmp_path))
    assert processor.train_labels(str(tmp_path)) == ("politics", "sport", "weather")  # sorted
    processor = processors.get_processor("MultiLabel", processor.train_labels(str(tmp_path)))
    assert [e.label for e in train] == [("sport", "politics"), (), ("weather",)]
    dev = processor.get_dev_examples(str(tmp_path))
    assert (dev[0].text_a, dev[0].text_b, dev[0].guid) == ("x", "y", "dev-1")
    test = processor.get_test_examples(str(tmp_path))
    assert (test[0].index, test[0].label) == ("7", ())
    # --labels: that order; a label outside it is named with file and line.
    processor = processors.get_processor("multilabel", ["weather", "sport"])
    with pytest.raises(ValueError, match=re.escape(
            f"{tmp_path / 'train.tsv'}:2: unknown label(s) 'politics'; the label set is "
            "'weather', 'sport'")):
        processor.get_train_examples(str(tmp_path))
    with pytest.raises(ValueError, match="pass --labels"):
        processors.get_processor("multilabel").get_dev_examples(str(tmp_path))
    with pytest.raises(ValueError, match="--labels is for --task_name=multilabel"):
        processors.get_processor("mrpc", ["a"])
    _write(tmp_path / "dev.tsv", ["text_a", "labels"], [["x", "sport,sport"]])
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'dev.tsv'}:2: label sport "
                                                   "given twice")):
        processor.get_dev_examples(str(tmp_path))
    _write(tmp_path / "dev.tsv", ["sentence", "labels"], [["x", "sport"]])
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'dev.tsv'}:1: the header must")):
        processor.get_dev_examples(str(tmp_path))


def test_loss_is_binary_cross_entropy_and_the_head_has_its_own_names():
    from modeling import BertMultiLabelClassifier, multi_label_loss
    from modeling_helpers import tiny_config

    logits = np.float32([[2.0, -1.0, 12.0], [-30.0, 0.0, 0.5]])
    labels = np.int32([[1, 0, 0], [1, 1, 0]])
    loss, per_example, probabilities = multi_label_loss(logits, labels)
    p = 1 / (1 + np.exp(-logits.astype(np.float64)))
    bce = -(labels * np.log(p) + (1 - labels) * np.log1p(-p))
    np.testing.assert_allclose(per_example, bce.mean(1), rtol=1e-5)
    np.testing.assert_allclose(float(loss), bce.mean(), rtol=1e-5)
    np.testing.assert_allclose(probabilities, p, rtol=1e-6)

    model = BertMultiLabelClassifier(tiny_config(), 3)
    assert [name for name, _ in model.tf1_head_variables()] == [
        "cls/multi_label/output_weights", "cls/multi_label/output_bias"]
    assert model.tf1_head_variables()[0][1].shape == (3, 32)
    assert model.classifier.output_weights.path == "multi_label/output_weights"


def test_an_evaluation_and_prediction_run_with_long_documents_from_the_original_checkpoint(
        tmp_path):
    """Through the driver, from the original tiny checkpoint (the encoder loaded, the head new):
    the label file, the eval_results keys, one line of per-label probabilities per test example
    (not per window); then the TF1 layout of the model, and the training loss on a batch."""
    import tensorflow as tf
    from bert_runner import driver
    from bert_runner import plan
    from bert_runner.run_config import RunConfig
    from bert_tasks.classifier.task import make_task
    from modeling.checkpoint import original as original_layout
    from test_export import _fine_tuned_run, export_run
    from vocab.tokenization import FullTokenizer

    data = tmp_path / "data"
    data.mkdir()
    long_text = " ".join(["the big red dog"] * 8)
    _write(data / "dev.tsv", ["text_a", "labels"], [[long_text, "bad"], ["a cat", "good"]])
    _write(data / "test.tsv", ["text_a"], [[long_text], ["a cat"], ["the sun"]])
    out = tmp_path / "out"
    task = make_task("multilabel", 16, str(data), labels=["bad", "good"], long_documents=True,
                     doc_stride=8)
    run = RunConfig(str(out), bert_config_file=str(TINY / "bert_config.json"),
                    vocab_file=str(TINY / "vocab.txt"),
                    init_checkpoint=str(TINY / "bert_model.ckpt"), do_eval=True, do_predict=True)
    result = driver.run_command(task, run)
    assert (out / "label_list.txt").read_text() == "bad\ngood\n"
    assert sorted(result.eval_results) == sorted(
        ["eval_loss", "loss", "global_step", "eval_exact_match", "eval_f1_bad", "eval_f1_good"]
        + [f"eval_{a}_{m}" for a in ("micro", "macro") for m in ("precision", "recall", "f1")])
    tokenizer = FullTokenizer(str(TINY / "vocab.txt"))
    for split, counts in (("eval", [4, 1]), ("predict", [4, 1, 1])):
        converted = task.records(task.read_examples(split), split, tokenizer, run)
        assert list(converted.index) == counts
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (3, 2) and np.all((probabilities > 0) & (probabilities < 1))
    # Prediction from a multi-label run, or from its Hugging Face export, without --labels: the
    # labels recorded beside the model it starts from, as the plan reads them when it opens it.
    trained = tmp_path / "trained"
    trained.mkdir()
    _fine_tuned_run(trained, "classifier/multilabel", "multi_label", 2, ["bad", "good"])
    hf = export_run(trained, "huggingface", tmp_path / "hf")
    recorded = make_task("multilabel", 16, str(data))
    for start_from in (str(trained), hf):
        fresh = RunConfig(str(tmp_path / "fresh"), init_checkpoint=start_from)
        labels = plan.resolve_start(fresh, 16)[0].labels
        examples = {"predict": recorded.read_examples("predict", fresh, labels)}
        assert len(examples["predict"]) == 3
        assert recorded.settle(examples, fresh, labels=labels).label_names == ["bad", "good"]
        with pytest.raises(ValueError, match=re.escape(
                "--labels=good,bad: the model at %s was trained with the labels bad,good in "
                "this order" % start_from)):
            make_task("multilabel", 16, str(data), labels=["good", "bad"]).settle(
                examples, fresh, labels=labels)

    # The TPU padding record parses with the task's spec: no label applies, not a real example.
    padding = tf.io.parse_single_example(task.padding_record().SerializeToString(),
                                         task.feature_spec(False))
    assert padding["label_ids"].numpy().tolist() == [0, 0] and padding["is_real_example"] == 0

    model = result.trainer.model
    prefix = original_layout.save_tf1_checkpoint(model, str(tmp_path / "tf1" / "bert_model.ckpt"))
    saved = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    assert saved["cls/multi_label/output_weights"] == [2, 32] and "output_weights" not in saved
    # One example in every row of a batch of the prediction's shape (its 4 + 1 + 1 windows of
    # 16 tokens): kernels the run compiled, and a mean loss that is the example's.
    row = {"input_ids": [2, 19, 27, 3] + [0] * 12, "input_mask": [1] * 4 + [0] * 12,
           "segment_ids": [0] * 16, "label_ids": [1, 0], "is_real_example": 1}
    batch = {name: np.int32([value] * 6) for name, value in row.items()}
    loss, _ = task.loss(model, batch, training=False)
    logits = model(batch)["logits"].numpy().astype(np.float64)
    p = 1 / (1 + np.exp(-logits))
    assert float(loss) == pytest.approx(-np.mean([np.log(p[0, 0]), np.log1p(-p[0, 1])]),
                                        rel=1e-5)


def test_labels_other_than_the_models_are_refused(tmp_path):
    """--labels must name the trained model's labels in its order (label_list.txt beside its
    checkpoints), and none may be empty."""
    import tensorflow as tf

    from bert_runner.runs import labels as run_labels
    from bert_tasks.classifier.processors import get_processor
    from bert_runner.run_config import RunConfig
    from bert_tasks.classifier.task import MultiLabelTask
    from refusals import message

    with pytest.raises(ValueError, match=re.escape(message("multilabel-empty-label"))):
        get_processor("multilabel", ["animal", "", "weather"])
    run = tmp_path / "run"
    run.mkdir()
    (run / "label_list.txt").write_text("animal\nvehicle\nweather\n")

    def settled(labels, output_dir, init_checkpoint=None):
        """The task of `labels` settled for a run into `output_dir` from `init_checkpoint`,
        given the labels that govern its model (`runs.labels.governing`, as the plan finds
        them); the run."""
        config = RunConfig(str(output_dir), init_checkpoint=init_checkpoint)
        governing = run_labels.governing(
            config.output_dir, None, init_checkpoint and run_labels.recorded(init_checkpoint))
        return MultiLabelTask(32, labels=labels).settle({}, config, labels=governing), config

    # Without a checkpoint there is no model to contradict: the file is rewritten.
    task, config = settled(["weather", "animal", "vehicle"], run)
    task.write_run_files(config)
    assert (run / "label_list.txt").read_text() == "weather\nanimal\nvehicle\n"
    tf.train.Checkpoint(v=tf.Variable(1.0)).save(str(run / "ckpt"))
    with pytest.raises(ValueError, match=re.escape(message("multilabel-labels-order"))):
        settled(["animal", "vehicle", "weather"], run)
    settled(["weather", "animal", "vehicle"], run)
    # A new output_dir whose model comes from that run's checkpoint (--init_checkpoint, e.g. a
    # --do_predict run): the labels recorded beside the checkpoint govern.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    with pytest.raises(ValueError, match=re.escape(message("multilabel-labels-order"))):
        settled(["animal", "vehicle", "weather"], fresh, str(run / "ckpt-1"))
    task, config = settled(["weather", "animal", "vehicle"], fresh, str(run))
    task.write_run_files(config)
    assert (fresh / "label_list.txt").read_text() == "weather\nanimal\nvehicle\n"
    # export_model --labels (and --entity_types) against the checkpoint's recorded labels.
    run_labels.check_recorded_labels(["weather", "animal", "vehicle"], str(run / "ckpt-1"),
                                      "--labels", "weather,animal,vehicle")
    with pytest.raises(ValueError, match="trained with the labels weather,animal,vehicle"):
        run_labels.check_recorded_labels(["animal"], str(run / "ckpt-1"), "--labels", "animal")
