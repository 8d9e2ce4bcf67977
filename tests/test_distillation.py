"""Distillation (`run_classifier.py --teacher`): the loss against a NumPy reference; a one-layer
student started from the tiny teacher's layer 0 (`--init_from_teacher_stride=2`) learns the
teacher's answers from the training set and unlabelled text, with the teacher's logits computed
once; the refusals."""
import dataclasses
import json
import logging
import random

import numpy as np
import pytest

from modeling_helpers import TINY
from refusals import assert_refused, message
from test_run_classifier import (
    _keyword_rows, read_eval_results, run_classifier, run_in_process, write_keyword_mrpc)


def reference(student, teacher, labels, has_label, temperature, weight):
    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    p_teacher = softmax(teacher / temperature)
    log_student = np.log(softmax(student / temperature))
    soft = temperature ** 2 * np.sum(p_teacher * (np.log(p_teacher) - log_student), axis=1)
    hard = -np.log(softmax(student)[np.arange(len(labels)), labels])
    return weight * soft.mean() + (1 - weight) * (hard * has_label).sum() / has_label.sum()


@pytest.mark.parametrize("temperature,weight", [(1.0, 0.5), (2.0, 0.7), (4.0, 1.0)])
def test_the_loss_mixes_the_softened_teacher_and_the_labels(temperature, weight):
    from bert_tasks.classifier.distillation import distillation_loss

    rng = np.random.default_rng(0)
    student, teacher = rng.normal(size=(6, 3)), rng.normal(size=(6, 3)) * 2
    labels, has_label = rng.integers(0, 3, 6), np.array([1, 0, 1, 1, 0, 1])
    loss, per_example = distillation_loss(student.astype("float32"), labels, has_label,
                                          teacher.astype("float32"), temperature, weight)
    np.testing.assert_allclose(float(loss), reference(student, teacher, labels, has_label,
                                                      temperature, weight), rtol=1e-5)
    assert per_example.shape == (6,)


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """The tiny model fine-tuned on the keyword task: the teacher."""
    folder = tmp_path_factory.mktemp("distillation")
    write_keyword_mrpc(folder / "data", num_train=64, num_dev=32, num_test=4)
    run_in_process(folder / "data", folder / "teacher", do_train=True, do_eval=True,
                   init_checkpoint=str(TINY / "bert_model.ckpt"), train_batch_size=16,
                   eval_batch_size=16, num_train_epochs=6, learning_rate=2e-3)
    config = json.loads((TINY / "bert_config.json").read_text())
    (folder / "student_config.json").write_text(json.dumps({**config, "num_hidden_layers": 1}))
    return folder


def _teacher(folder, unlabeled=None, layer_stride=2):
    from bert_tasks.classifier.distillation import Teacher
    from modeling.bert.config import BertConfig

    return Teacher(str(folder / "teacher" / "ckpt-24"),
                   BertConfig.from_json_file(str(TINY / "bert_config.json")),
                   str(folder / "teacher" / "bert_config.json"), temperature=2.0, weight=1.0,
                   unlabeled_file=unlabeled and str(unlabeled), layer_stride=layer_stride)


def test_the_student_starts_from_every_kth_teacher_layer(teacher):
    import tensorflow as tf

    from bert_tasks.classifier.distillation import init_from_teacher
    from modeling import BertClassifier
    from modeling.bert.config import BertConfig

    student = BertClassifier(BertConfig.from_json_file(str(teacher / "student_config.json")), 2)
    init_from_teacher(student, _teacher(teacher), 2)
    taught = tf.train.load_checkpoint(str(teacher / "teacher" / "ckpt-24"))
    for variable in student.variables:
        if "seed_generator" in variable.path:
            continue
        key = variable.path.replace("/", ".S")  # layer 0 is the teacher's layer 0 (stride 2)
        np.testing.assert_array_equal(
            np.asarray(variable),
            taught.get_tensor(f"model/by_path/{key}/.ATTRIBUTES/VARIABLE_VALUE"), key)
    assert len(student.encoder.encoder_layers) == 1


@pytest.mark.large
def test_a_student_learns_the_teachers_answers_from_unlabelled_text(teacher, tmp_path, caplog):
    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.classifier import distillation, features
    from bert_tasks.classifier.task import ClassifierTask

    unlabeled = tmp_path / "unlabeled.tsv"
    rows = _keyword_rows(random.Random(7), 96)
    unlabeled.write_text("".join(f"{row[3]}\t{row[4]}\n" for row in rows))
    distilled = _teacher(teacher, unlabeled)
    run = RunConfig(str(tmp_path / "student"), bert_config_file=str(teacher / "student_config.json"),
                    vocab_file=str(TINY / "vocab.txt"), do_train=True, do_eval=True,
                    train_batch_size=16, num_train_epochs=8, learning_rate=2e-3)
    with caplog.at_level(logging.INFO, logger="absl"):
        result = driver.run_command(
            ClassifierTask("mrpc", 24, str(teacher / "data"), teacher=distilled), run)
    # The student's run directory supplies its vocabulary for serving: the teacher's, found
    # through the teacher it distilled (it started from no checkpoint).
    from bert_runner.runs import supplied

    assert supplied.supplied(str(tmp_path / "student"), "--checkpoint", True) == (
        str(tmp_path / "student" / "bert_config.json"), str(TINY / "vocab.txt"))
    cached = np.load(tmp_path / "student" / "teacher_logits.npz")["logits"]
    assert cached.shape == (64 + 96, 2)
    assert any("Teacher logits of 160 training examples computed" in m for m in caplog.messages)
    # The student learned the teacher's answers (which are the labels', here).
    assert float(result.eval_results["eval_accuracy"]) >= 0.9 * float(read_eval_results(
        teacher / "teacher" / "eval_results.txt")["eval_accuracy"])
    # Computed once: the same inputs and teacher read them back.
    from vocab import tokenization

    tokenizer = tokenization.FullTokenizer(str(TINY / "vocab.txt"), True)
    examples = ClassifierTask("mrpc", 24, str(teacher / "data")).read_examples("train")[:8]
    converted = features.convert_examples_to_features(examples, ["0", "1"], 24, tokenizer)
    first = distillation.teacher_logits(distilled, converted, 2, str(tmp_path))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="absl"):
        again = distillation.teacher_logits(distilled, converted, 2, str(tmp_path))
    np.testing.assert_array_equal(first, again)
    assert any("read from" in m for m in caplog.messages)
    # The same weights read by another config are another teacher: its logits computed again.
    relu = type(distilled.config).from_dict({**distilled.config.to_dict(), "hidden_act": "relu"})
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="absl"):
        other = distillation.teacher_logits(dataclasses.replace(distilled, config=relu),
                                            converted, 2, str(tmp_path))
    assert not any("read from" in m for m in caplog.messages)
    assert np.abs(other - first).max() > 1e-4


def _flags(teacher, **given):
    """run_classifier's distillation flags, as `load_teacher` reads them."""
    from bert_tasks.classifier import distillation

    return distillation.DistillationSettings(**{
        "teacher": str(teacher), "teacher_bert_config_file": None,
        "distillation_temperature": 2.0, "distillation_weight": 0.5, "unlabeled_file": None,
        "init_from_teacher_stride": 0, **given})


def _student_files():
    """The student's config, its file and vocabulary: the tiny model's."""
    from bert_runner.runs.model_files import ModelFiles
    from modeling.bert.config import BertConfig

    config_file = str(TINY / "bert_config.json")
    return ModelFiles(BertConfig.from_json_file(config_file), config_file, str(TINY / "vocab.txt"))


def _student_run(tmp_path, **given):
    """The student's `RunConfig`, whose casing and BiLSTM the teacher must share."""
    from bert_runner.run_config import RunConfig

    return RunConfig(str(tmp_path / "student"), **given)


@pytest.mark.large
def test_a_teacher_with_a_bilstm_teaches_its_own_probabilities(tmp_path):
    """A teacher trained with --bilstm_on_top is the model its run.json records: the
    probabilities the student learns are those the teacher predicts itself (test_results.tsv)."""
    from bert_tasks.classifier import distillation, features
    from bert_tasks.classifier.task import ClassifierTask
    from modeling import BertClassifier
    from modeling.bert.config import BertConfig
    from vocab import tokenization

    write_keyword_mrpc(tmp_path / "data", num_train=16, num_dev=4, num_test=6)
    run_in_process(tmp_path / "data", tmp_path / "teacher", do_train=True, do_predict=True,
                   init_checkpoint=str(TINY / "bert_model.ckpt"), train_batch_size=16,
                   num_train_epochs=1, learning_rate=1e-3, bilstm_on_top=True)
    own = np.loadtxt(tmp_path / "teacher" / "test_results.tsv", ndmin=2)
    config_file = str(TINY / "bert_config.json")
    teacher = distillation.load_teacher(
        _flags(tmp_path / "teacher"), _student_run(tmp_path), "mrpc",
        _student_files())
    assert teacher.bilstm_on_top
    with pytest.raises(ValueError, match=message("distillation-teacher-other-vocabulary")) as error:
        distillation.load_teacher(
            _flags(tmp_path / "teacher"), _student_run(tmp_path, do_lower_case=False), "mrpc",
            _student_files())
    assert "(--do_lower_case=true in " in str(error.value)
    tokenizer = tokenization.FullTokenizer(str(TINY / "vocab.txt"), True)
    examples = ClassifierTask("mrpc", 24, str(tmp_path / "data")).read_examples("predict")
    converted = features.convert_examples_to_features(examples, ["0", "1"], 24, tokenizer)
    logits = distillation.teacher_logits(teacher, converted, 2, str(tmp_path))
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(probabilities, own, atol=1e-5)
    # A student started from its layers has its BiLSTM too; from every layer, it is the teacher.
    with pytest.raises(ValueError, match=message("distillation-student-shape")) as error:
        distillation.load_teacher(
            _flags(tmp_path / "teacher", init_from_teacher_stride=1), _student_run(tmp_path),
            "mrpc", _student_files())
    assert "they differ in bilstm_on_top" in str(error.value)
    every_layer = distillation.load_teacher(
        _flags(tmp_path / "teacher", init_from_teacher_stride=1),
        _student_run(tmp_path, bilstm_on_top=True), "mrpc",
        _student_files())
    student = BertClassifier(BertConfig.from_json_file(config_file), 2, bilstm_on_top=True)
    distillation.init_from_teacher(student, every_layer, 2)
    batch = {name: np.asarray([getattr(f, name) for f in converted], np.int32)
             for name in ("input_ids", "input_mask", "segment_ids")}
    np.testing.assert_allclose(student(batch, training=False)["logits"], logits, atol=1e-5)


def test_refusals(teacher, tmp_path):
    data = teacher / "data"
    common = [f"--data_dir={data}", "--max_seq_length=24", "--do_train",
              f"--output_dir={tmp_path / 'out'}"]
    other_task = run_classifier("--task_name=qqp", *common, f"--teacher={teacher / 'teacher'}")
    assert_refused(other_task, "distillation-teacher-other-task")
    config = json.loads((TINY / "bert_config.json").read_text())
    other = tmp_path / "other_vocabulary.json"
    other.write_text(json.dumps({**config, "vocab_size": 120}))
    other_vocabulary = run_classifier("--task_name=mrpc", *common,
                                      f"--teacher={teacher / 'teacher'}",
                                      f"--teacher_bert_config_file={other}")
    assert_refused(other_vocabulary, "distillation-teacher-other-vocabulary")
    assert "vocab_size 120; the student's" in other_vocabulary.stderr
    # As many word-pieces, one of them another: the contents differ, not the size.
    words = (TINY / "vocab.txt").read_text(encoding="utf-8").splitlines()
    same_size = tmp_path / "vocab.txt"
    same_size.write_text("\n".join(words[:-1] + ["zzzz"]) + "\n", encoding="utf-8")
    other_words = run_classifier("--task_name=mrpc", *common, f"--teacher={teacher / 'teacher'}",
                                 f"--vocab_file={same_size}")
    assert_refused(other_words, "distillation-teacher-other-vocabulary")
    assert (f"(the same size, but the word-pieces of {same_size} differ from those its run "
            f"recorded in {teacher / 'teacher' / 'run.json'})") in other_words.stderr
    too_deep = run_classifier("--task_name=mrpc", *common, f"--teacher={teacher / 'teacher'}",
                              "--init_from_teacher_stride=2")  # the student has 2 layers too
    assert_refused(too_deep, "distillation-student-shape")
    assert not (tmp_path / "out").exists()
