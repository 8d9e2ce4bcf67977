"""run_classifier.py end to end (CLI) on a small learnable task; in process through
bert_runner.driver: --seeds, start-up errors; the metric/summary arithmetic of
bert_tasks.classifier.task. What the driver does for every task (resume, restore, output_dir
ownership, padding): tests/test_driver.py."""
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from modeling_helpers import TINY

# Words of the tiny fixture vocabulary; "good"/"bad" are left out and decide the label.
WORDS = ("the a dog cat bird fish tree house car road river city hill sun moon star rain snow "
         "wind red blue green small big old new happy sad run walk jump swim read write sing "
         "play eat drink sleep see").split()
MRPC_HEADER = ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]


def _keyword_rows(rng, count, long_every=0):
    """MRPC rows (label, id1, id2, s1, s2): label 1 iff s2 holds "good" (else it holds "bad");
    with `long_every`, every long_every-th s1 has 40 words (longer than max_seq_length 24)."""
    rows = []
    for i in range(count):
        label = rng.randrange(2)
        words = [rng.choice(WORDS) for _ in range(6)]
        words.insert(rng.randrange(7), "good" if label else "bad")
        first_words = 40 if long_every and i % long_every == 0 else 6
        first = " ".join(rng.choice(WORDS) for _ in range(first_words))
        rows.append([str(label), str(1000 + i), str(5000 + i), first, " ".join(words)])
    return rows


def _write_tsv(path, header, rows):
    path.write_text("".join("\t".join(row) + "\n" for row in [header] + rows), encoding="utf-8")


def write_keyword_mrpc(data_dir, num_train=128, num_dev=64, num_test=20, long_every=0):
    """An MRPC-layout task whose label is decided by a keyword; returns the test rows' labels.
    `long_every`: every long_every-th dev and test example is longer than the window."""
    rng = random.Random(0)
    data_dir.mkdir(parents=True, exist_ok=True)
    _write_tsv(data_dir / "train.tsv", MRPC_HEADER, _keyword_rows(rng, num_train))
    _write_tsv(data_dir / "dev.tsv", MRPC_HEADER, _keyword_rows(rng, num_dev, long_every))
    test = _keyword_rows(rng, num_test, long_every)
    _write_tsv(data_dir / "test.tsv", ["index"] + MRPC_HEADER[1:],
               [[str(i)] + row[1:] for i, row in enumerate(test)])
    return [int(row[0]) for row in test]


def run_classifier(*args):
    cmd = [sys.executable, str(ROOT / "run_classifier.py"), f"--vocab_file={TINY / 'vocab.txt'}",
           f"--bert_config_file={TINY / 'bert_config.json'}", *args]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def read_eval_results(path):
    return dict(line.rstrip("\n").split(" = ") for line in open(path, encoding="utf-8"))


def checkpoint_values(prefix):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_fine_tunes_a_keyword_task_from_the_tiny_checkpoint(tmp_path):
    # With --long_documents: every training example fits (its records and training are the
    # original's); every 4th dev and test pair has a first sentence longer than the window,
    # which is windowed beside the whole second sentence (which holds the keyword).
    test_labels = write_keyword_mrpc(tmp_path / "data", long_every=4)
    out = tmp_path / "out"
    result = run_classifier(
        "--task_name=MRPC", "--do_train=true", "--do_eval=true", "--do_predict=true",
        f"--data_dir={tmp_path / 'data'}", f"--init_checkpoint={TINY / 'bert_model.ckpt'}",
        "--max_seq_length=24", "--train_batch_size=16", "--learning_rate=1e-3",
        "--num_train_epochs=16", f"--output_dir={out}", "--long_documents=true",
        "--doc_stride=8")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "train: 128 examples in 128 windows" in result.stderr
    # 16 long pairs of 40 + 8 word-pieces: 5 windows each (14 of the first sentence, 8 apart).
    assert "eval: 64 examples in 128 windows" in result.stderr
    assert "predict: 20 examples in 40 windows" in result.stderr
    # The encoder comes from the checkpoint, the classifier layer is new; the log says which.
    assert "bert/embeddings/word_embeddings, shape = [99, 32], *INIT_FROM_CKPT*" in result.stderr
    assert "newly initialised: output_weights, output_bias" in result.stderr

    results = read_eval_results(out / "eval_results.txt")
    assert sorted(results) == ["eval_accuracy", "eval_f1", "eval_loss", "global_step", "loss"]
    # lr 1e-3 for 128 steps learns the task at every seed tried (12345, 1, 2, 3); lr 3e-3 for 64
    # steps reached 1.0 at some seeds and stayed at the majority 0.61 at others.
    assert results["global_step"] == "128"  # int(128 / 16 * 16)
    assert float(results["eval_accuracy"]) >= 0.9
    assert float(results["eval_f1"]) >= 0.9

    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (20, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    submission = (out / "MRPC.tsv").read_text().splitlines()
    assert submission[0] == "index\tprediction"
    assert [line.split("\t")[0] for line in submission[1:]] == [str(i) for i in range(20)]
    predicted = [int(line.split("\t")[1]) for line in submission[1:]]
    assert predicted == list(np.argmax(probabilities, axis=1))
    assert np.mean(np.asarray(predicted) == test_labels) >= 0.9
    for name in ("train.tf_record", "eval.tf_record", "predict.tf_record", "ckpt-128.index"):
        assert (out / name).exists(), name
    assert not list(out.glob("*.tmp-*"))
    assert '"task": "classifier/mrpc"' in (out / "run.json").read_text()


def run_in_process(data_dir, output_dir, task_name="mrpc", seeds=None, **flags):
    """`run_classifier.py` with these flags, through the driver in this process."""
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.classifier.task import ClassifierTask

    run = RunConfig(str(output_dir), **{
        "bert_config_file": str(TINY / "bert_config.json"), "vocab_file": str(TINY / "vocab.txt"),
        **flags})
    return driver.run_command(ClassifierTask(task_name, 24, str(data_dir)), run, seeds=seeds)


@pytest.mark.large
def test_seeds_run_apart_and_start_from_the_checkpoint_encoder_exactly(tmp_path):
    write_keyword_mrpc(tmp_path / "data", num_train=64, num_dev=16, num_test=4)
    out = tmp_path / "out"
    # learning_rate=0: one step that changes nothing, so the saved encoder is the initial one.
    by_seed = run_in_process(
        tmp_path / "data", out, seeds=[3, 7], do_train=True, do_eval=True,
        init_checkpoint=str(TINY / "bert_model.ckpt"), train_batch_size=32,
        num_train_epochs=0.5, learning_rate=0.0, save_tf1_checkpoint=True)
    assert list(by_seed) == [3, 7]

    original = checkpoint_values(TINY / "bert_model.ckpt")
    heads = []
    for seed in (3, 7):
        saved = checkpoint_values(out / f"seed_{seed}" / "bert_model.ckpt")
        assert saved["global_step"] == 1
        encoder = [name for name in saved if name.startswith("bert/")]
        assert len(encoder) == 39
        for name in encoder:
            np.testing.assert_array_equal(saved[name], original[name], err_msg=name)
        heads.append(saved["output_weights"])
        assert (out / f"seed_{seed}" / "eval_results.txt").exists()
    assert not np.array_equal(*heads)  # each seed initialises its own classifier layer

    per_seed = [read_eval_results(out / f"seed_{s}" / "eval_results.txt") for s in (3, 7)]
    summary = (out / "eval_results_seeds.txt").read_text().splitlines()
    assert [line.split(" = ")[0] for line in summary] == ["eval_accuracy", "eval_f1", "eval_loss",
                                                          "loss"]
    for line in summary:
        name = line.split(" = ")[0]
        values = [float(r[name]) for r in per_seed]
        mean, std = line.split(" = ")[1].split(" (")[0].split(" ± ")
        assert float(mean) == pytest.approx(np.mean(values), rel=1e-5, abs=1e-6)
        assert float(std) == pytest.approx(np.std(values, ddof=1), rel=1e-5, abs=1e-6)
        assert line.endswith("(seeds 3, 7: %s, %s)" % (per_seed[0][name], per_seed[1][name]))
    # Features are written once, beside the seed folders.
    assert (out / "train.tf_record").exists() and not (out / "seed_3" / "train.tf_record").exists()


def test_unknown_task_fails_naming_the_known_tasks():
    from bert_tasks.classifier.task import ClassifierTask

    with pytest.raises(ValueError, match=re.escape(
            "Task not found: squad (known tasks: ax, cola, mnli, mnli-mm, mrpc, multilabel, qnli, "
            "qqp, rerank, rte, sst-2, sts-b, wnli, xnli)")):
        ClassifierTask("squad", 24)
    # What run.json records, so that MNLI is refused where MRPC ran (tests/test_driver.py).
    assert ClassifierTask("CoLA", 24).name == "classifier/cola"


def test_bad_seeds_are_refused_at_flag_parsing(tmp_path):
    result = run_classifier("--task_name=mrpc", "--do_train=true", "--seeds=1,x",
                            f"--data_dir={tmp_path}", f"--output_dir={tmp_path / 'out'}")
    assert result.returncode != 0
    assert "--seeds expects comma-separated integers" in result.stderr


def _task(task_name):
    from bert_tasks.classifier.task import ClassifierTask

    return ClassifierTask(task_name, max_seq_length=8)


def _outputs(per_example_loss, batch_sizes, labels, outputs, real):
    from bert_runner.task import collect

    batches, start = [], 0
    for size in batch_sizes:
        rows = slice(start, start + size)
        batches.append({"outputs": np.asarray(outputs, np.float32)[rows],
                        "per_example_loss": np.asarray(per_example_loss, np.float32)[rows],
                        "label_ids": np.asarray(labels)[rows],
                        "is_real_example": np.asarray(real, np.int32)[rows]})
        start += size
    # An idle replica's empty share of the last batch is ignored.
    empty = {name: value[:0] for name, value in batches[-1].items()}
    return collect(batches + [empty])


def test_eval_results_weigh_real_examples_and_batches_as_the_original():
    # Two batches of 3; the last row is TPU padding.
    outputs = _outputs(per_example_loss=[1, 2, 3, 4, 5, 6], batch_sizes=[3, 3],
                       labels=[1, 0, 1, 1, 0, 0],
                       outputs=[[.2, .8], [.9, .1], [.6, .4], [.3, .7], [.4, .6], [.5, .5]],
                       real=[1, 1, 1, 1, 1, 0])
    results = _task("MRPC").evaluate(outputs, 12, split=None, output_dir=None)
    assert {k: str(v) for k, v in results.items()} == {
        "global_step": "12",
        "eval_accuracy": "0.6",  # 3 of the 5 real rows
        "eval_loss": "3.0",  # mean over real rows: 15 / 5
        "loss": "3.5",  # mean of the batch means (2 and 5), padding included, as the Estimator
        "eval_f1": str(np.float32(2 * 2 / (2 * 2 + 1 + 1))),
    }
    assert all(isinstance(v, np.float32) for k, v in results.items() if k != "global_step")
    # Printed beside eval_accuracy: label "1" is 3 of the 5 real rows.
    assert _task("MRPC").baselines(outputs, split=None) == {
        "eval_accuracy": "majority class '1' 0.6000, chance 0.5000"}


def test_regression_eval_results_have_correlations_and_no_accuracy():
    outputs = _outputs(per_example_loss=[0.25, 0.0, 1.0, 0.0], batch_sizes=[4],
                       labels=np.float32([1.0, 2.0, 3.0, 4.0]),
                       outputs=[[1.5], [2.0], [4.0], [4.0]], real=[1, 1, 1, 1])
    results = _task("sts-b").evaluate(outputs, 3, split=None, output_dir=None)
    assert sorted(results) == ["eval_loss", "eval_pearson", "eval_spearman", "global_step", "loss"]
    ranks_of_predictions = [1, 2, 3.5, 3.5]
    assert results["eval_spearman"] == pytest.approx(
        np.corrcoef([1, 2, 3, 4], ranks_of_predictions)[0, 1])


def test_seed_summary_lines():
    from bert_runner.seeds import summarize_seeds

    summary = summarize_seeds({
        1: {"eval_accuracy": np.float32(0.8), "global_step": np.int64(9)},
        2: {"eval_accuracy": np.float32(0.9), "global_step": np.int64(9)},
    })
    assert summary == "eval_accuracy = 0.85 ± 0.0707107 (seeds 1, 2: 0.8, 0.9)\n"
    one = summarize_seeds({5: {"loss": np.float32(0.5)}})
    assert one == "loss = 0.5 ± 0 (seeds 5: 0.5)\n"


@pytest.mark.parametrize("task_name, num_labels", [("mnli", 3), ("sts-b", 1)])
def test_step_functions_on_the_tiny_model(task_name, num_labels):
    from modeling_helpers import tiny_config, tiny_expected

    expected = tiny_expected()
    features = {k: expected[k] for k in ("input_ids", "input_mask", "segment_ids")}
    batch = len(features["input_ids"])
    is_regression = num_labels == 1
    features["label_ids"] = (np.linspace(0, 5, batch, dtype=np.float32) if is_regression
                             else np.arange(batch, dtype=np.int32) % num_labels)
    features["is_real_example"] = np.ones(batch, np.int32)
    task = _task(task_name)
    model = task.build_model(tiny_config())

    out = task.predict_step(model, features)
    assert out["outputs"].shape == (batch, num_labels)
    loss, extra = task.loss(model, features, training=False)
    assert extra == {}
    np.testing.assert_allclose(float(loss), np.mean(out["per_example_loss"]), rtol=1e-6)
    logits = model(features)["logits"].numpy()
    if is_regression:
        np.testing.assert_allclose(out["outputs"], logits)
        np.testing.assert_allclose(out["per_example_loss"],
                                   (logits[:, 0] - features["label_ids"]) ** 2, rtol=1e-5)
    else:
        probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        np.testing.assert_allclose(out["outputs"], probabilities, rtol=1e-5)
        np.testing.assert_allclose(
            out["per_example_loss"],
            -np.log(probabilities[np.arange(batch), features["label_ids"]]), rtol=1e-5)


def _weights(layer):
    return [v.numpy() for v in layer.weights]


def test_initialises_from_a_run_pretraining_output_dir(tmp_path):
    """--init_checkpoint=<run_pretraining output_dir>: encoder loaded, classifier layer new."""
    from modeling import BertClassifier, BertPretrainer
    from modeling_helpers import save_like_the_trainer, tiny_config
    from modeling import checkpoint as checkpoints

    pretrained = BertPretrainer(tiny_config())
    classifier = BertClassifier(tiny_config(), 3)
    head = _weights(classifier.classifier)
    checkpoints.initialize_from_checkpoint(
        classifier, save_like_the_trainer(pretrained, tmp_path / "pretraining"))
    for ours, theirs in zip(_weights(classifier.classifier), head):
        np.testing.assert_array_equal(ours, theirs)
    for ours, theirs in zip(_weights(classifier.encoder), _weights(pretrained.encoder)):
        np.testing.assert_array_equal(ours, theirs)


def test_a_span_models_directory_without_pooler_loads_and_an_untrained_head_is_said(
        tmp_path, caplog):
    """Hugging Face's BertForQuestionAnswering saves no pooler: its encoder still loads, with
    a new pooler as a new head. Evaluating or predicting from it without training says that
    the classifier is untrained; training from it does not."""
    import logging

    from modeling import BertClassifier, BertModel
    from modeling import checkpoint as checkpoints
    from modeling.checkpoint.hugging_face import read_safetensors, write_safetensors
    from modeling_helpers import tiny_config
    from test_modeling_hf_import import hf_checkpoint_from_fixture

    hf = tmp_path / "squad_model"
    hf.mkdir()
    hf_checkpoint_from_fixture(hf)
    weights = read_safetensors(hf / "model.safetensors")
    write_safetensors(hf / "model.safetensors", {
        name: value for name, value in weights.items() if ".pooler." not in name})
    (hf / "vocab.txt").write_text((TINY / "vocab.txt").read_text())
    pooler = ["bert/pooler/dense/kernel", "bert/pooler/dense/bias"]
    assert checkpoints.open_checkpoint(hf).check_fits(BertModel(tiny_config())) == pooler
    assert sorted(checkpoints.open_checkpoint(hf).check_fits(BertClassifier(tiny_config(), 2))) \
        == sorted(pooler + ["output_bias", "output_weights"])

    # The batch shapes of the first test's run (training 16, prediction 8): XLA's kernels for
    # them are compiled already (the session's cache).
    write_keyword_mrpc(tmp_path / "data", num_train=16, num_dev=8, num_test=8)
    caplog.set_level(logging.INFO)
    untrained = "trains nothing, so its evaluation and predictions are of an untrained head"
    run_in_process(tmp_path / "data", tmp_path / "predicted", do_predict=True,
                   init_checkpoint=str(hf), bert_config_file=None, vocab_file=str(hf / "vocab.txt"))
    assert f"--init_checkpoint={hf} has no " in caplog.text and untrained in caplog.text
    caplog.clear()
    run_in_process(tmp_path / "data", tmp_path / "trained", do_train=True, train_batch_size=16,
                   num_train_epochs=1.0, init_checkpoint=str(hf), bert_config_file=None,
                   vocab_file=str(hf / "vocab.txt"))
    assert untrained not in caplog.text


@pytest.mark.parametrize("problem", ["truncated", "config"])
def test_a_bad_init_checkpoint_is_named_before_any_feature_is_written(tmp_path, problem):
    import json
    import shutil

    write_keyword_mrpc(tmp_path / "data", num_train=16, num_dev=8, num_test=4)
    checkpoint = tmp_path / "model" / "bert_model.ckpt"
    checkpoint.parent.mkdir()
    for part in TINY.glob("bert_model.ckpt.*"):
        shutil.copy(part, checkpoint.parent / part.name)
    config = json.loads((TINY / "bert_config.json").read_text())
    if problem == "truncated":  # a copy cut short, as by a full disk or an interrupted download
        data = checkpoint.parent / "bert_model.ckpt.data-00000-of-00001"
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
        expected = f"Checkpoint {checkpoint} (--init_checkpoint) is unreadable"
    else:  # a config for another vocabulary than the checkpoint's
        config["vocab_size"] = 120
        expected = "shape mismatch bert/embeddings/word_embeddings: model [120, 32], checkpoint [99, 32]"
    (tmp_path / "bert_config.json").write_text(json.dumps(config))
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=re.escape(expected)):
        run_in_process(tmp_path / "data", out, do_train=True, init_checkpoint=str(checkpoint),
                       bert_config_file=str(tmp_path / "bert_config.json"))
    assert not (out / "train.tf_record").exists()
