"""Distillation (`run_classifier.py --teacher`): the loss against a NumPy reference; a one-layer
student started from the tiny teacher's layer 0 (`--init_from_teacher_stride=2`) learns the
teacher's answers from the training set and unlabelled text, with the teacher's logits computed
once; the refusals."""
import json
import logging
import random

import numpy as np
import pytest

from modeling_helpers import TINY
from refusals import assert_refused
from test_run_classifier import (
    _keyword_rows, checkpoint_values, read_eval_results, run_classifier, run_in_process,
    write_keyword_mrpc)


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
                   num_train_epochs=6, learning_rate=2e-3)
    config = json.loads((TINY / "bert_config.json").read_text())
    (folder / "student_config.json").write_text(json.dumps({**config, "num_hidden_layers": 1}))
    return folder


def test_a_student_from_the_teachers_layers_learns_its_answers(teacher, tmp_path, caplog):
    import tensorflow as tf

    from bert_runner import driver
    from bert_runner.run_config import RunConfig
    from bert_tasks.classifier.distillation import Teacher
    from bert_tasks.classifier.task import ClassifierTask
    from modeling.config import BertConfig

    unlabeled = tmp_path / "unlabeled.tsv"
    rows = _keyword_rows(random.Random(7), 96)
    unlabeled.write_text("".join(f"{row[3]}\t{row[4]}\n" for row in rows))
    config = BertConfig.from_json_file(str(TINY / "bert_config.json"))

    def student(output_dir, learning_rate, epochs=8):
        distilled = Teacher(str(teacher / "teacher" / "ckpt-24"), config,
                            str(teacher / "teacher" / "bert_config.json"), temperature=2.0,
                            weight=1.0, unlabeled_file=str(unlabeled), layer_stride=2)
        run = RunConfig(str(output_dir), bert_config_file=str(teacher / "student_config.json"),
                        vocab_file=str(TINY / "vocab.txt"), do_train=True, do_eval=True,
                        train_batch_size=16, num_train_epochs=epochs,
                        learning_rate=learning_rate, save_tf1_checkpoint=True)
        return driver.run(ClassifierTask("mrpc", 24, str(teacher / "data"), teacher=distilled),
                          run)

    # Learning rate 0: the student is the teacher's layer 0, embeddings, pooler and classifier.
    student(tmp_path / "start", 0.0, epochs=0.1)
    started = checkpoint_values(tmp_path / "start" / "bert_model.ckpt")
    taught = tf.train.load_checkpoint(str(teacher / "teacher" / "ckpt-24"))
    for student_layer, teacher_layer in ((0, 0),):
        np.testing.assert_array_equal(
            started[f"bert/encoder/layer_{student_layer}/attention/self/query/kernel"],
            taught.get_tensor(f"model/by_path/bert.Slayer_{teacher_layer}.Sself.Squery.Skernel"
                              "/.ATTRIBUTES/VARIABLE_VALUE"))
    assert "bert/encoder/layer_1/attention/self/query/kernel" not in started

    with caplog.at_level(logging.INFO, logger="absl"):
        result = student(tmp_path / "student", 2e-3)
    logits = np.load(tmp_path / "student" / "teacher_logits.npz")["logits"]
    assert logits.shape == (64 + 96, 2)
    assert any("Teacher logits of 160 training examples computed" in m for m in caplog.messages)
    # The student learned the teacher's answers (which are the labels', here).
    assert float(result.eval_results["eval_accuracy"]) >= 0.9 * float(read_eval_results(
        teacher / "teacher" / "eval_results.txt")["eval_accuracy"])
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="absl"):
        student(tmp_path / "student", 2e-3)  # finished: resumed, the logits read back
    assert any("read from" in m and "teacher_logits.npz" in m for m in caplog.messages)


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
    too_deep = run_classifier("--task_name=mrpc", *common, f"--teacher={teacher / 'teacher'}",
                              "--init_from_teacher_stride=2")  # the student has 2 layers too
    assert_refused(too_deep, "distillation-student-shape")
    assert not (tmp_path / "out").exists()
