"""Distillation into a smaller classifier (Hinton et al. 2015; Turc et al. 2019, "Well-Read
Students Learn Better", the original release's recommendation for its 24 small BERTs): the
student learns the teacher's softened probabilities, mixed with the labels, on the training set
and on unlabelled text of the domain (which only the teacher labels).

    loss = weight * T^2 * KL(softmax(teacher / T) || softmax(student / T))
           + (1 - weight) * cross-entropy(student, label)            (labelled examples only)

The teacher is a fine-tuned run_classifier checkpoint of the same task and vocabulary, built as
the model its run.json records (its BiLSTM on top); its logits are computed once per training set
(`teacher_logits`, cached in output_dir) and written into the training records. The student
starts from `--init_checkpoint` (a small pre-trained BERT) or from every k-th layer of the
teacher (`init_from_teacher`, DistilBERT's initialisation).
"""
import dataclasses
import hashlib
import io
import os
from typing import Optional

import numpy as np
import tensorflow as tf
from absl import logging
from keras import ops

from bert_runner import run_identity
from bert_runner.engines import compiled
from bert_runner.runs import checkpoints
from bert_runner.runs.hashes import fingerprint
from bert_runner.runs.record import VOCAB_KEY, record_directories
from modeling import checkpoint as model_checkpoint, families
from modeling.checkpoint.files import atomic_output
from modeling.losses import classification_loss

CACHE_FILE = "teacher_logits.npz"
_LAYER = "/layer_"


@dataclasses.dataclass(frozen=True)
class Teacher:
    """A fine-tuned classifier to distil: its checkpoint prefix, config and model options (as its
    run.json records them), and the settings."""
    checkpoint: str
    config: object
    config_file: str
    bilstm_on_top: bool = False
    temperature: float = 2.0
    weight: float = 0.5
    unlabeled_file: Optional[str] = None
    layer_stride: int = 0


@dataclasses.dataclass(frozen=True)
class DistillationSettings:
    """run_classifier's distillation settings, each the flag of its name (its default, help and
    range there)."""
    teacher: str
    teacher_bert_config_file: Optional[str] = None
    distillation_temperature: float = 2.0
    distillation_weight: float = 0.5
    unlabeled_file: Optional[str] = None
    init_from_teacher_stride: int = 0


def load_teacher(settings, run, task_name, student):
    """The `Teacher` of `settings` (`DistillationSettings`), checked before any work: the
    teacher was fine-tuned on `task_name` (its run.json), has the student's vocabulary (size, and
    the file's contents and --do_lower_case when its run recorded them), and with
    `--init_from_teacher_stride` the student is the teacher with fewer layers (config and
    --bilstm_on_top); the student's casing and BiLSTM are those of `run` (its `RunConfig`), its
    config, config file and vocabulary `student`'s (`bert_runner.runs.model_files.ModelFiles`).
    The teacher is the model its run.json records (--bilstm_on_top). ValueError names the flag
    and files."""
    found = checkpoints.open_checkpoint(settings.teacher, "--teacher")
    prefix, record_path, record = found.location, found.record_path, found.record
    wanted = "classifier/" + task_name.lower()
    if record is None or record.get("task") != wanted:
        trained = (f"a {record.get('task')!r} run ({record_path})" if record
                   else "no run.json beside it")
        raise ValueError(f"--teacher={settings.teacher} is not a run_classifier model of "
                         f"--task_name={task_name}: it is {trained}; give the output_dir of a "
                         f"run_classifier.py --task_name={task_name} run")
    config_file = settings.teacher_bert_config_file or os.path.join(
        record_directories(prefix)[-1], "bert_config.json")
    config = model_checkpoint.load_config(config_file)
    if config.vocab_size != student.config.vocab_size:
        differ = (f"its {config_file}: vocab_size {config.vocab_size}; the student's "
                  f"{student.config_file}: {student.config.vocab_size}")
    elif (record.get(VOCAB_KEY)
          and record[VOCAB_KEY] != run_identity.fingerprint(student.vocab_file)):
        differ = (f"the same size, but the word-pieces of {student.vocab_file} differ from those "
                  f"its run recorded in {record_path}")
    elif record.get("do_lower_case", run.do_lower_case) != run.do_lower_case:
        differ = (f"--do_lower_case={str(record['do_lower_case']).lower()} in {record_path}; the "
                  f"student's --do_lower_case={str(run.do_lower_case).lower()}")
    else:
        differ = None
    if differ:
        raise ValueError(
            f"--teacher={settings.teacher} was trained with another vocabulary ({differ}): "
            "the teacher reads the student's word-pieces, so both need the same vocab.txt")
    bilstm_on_top = bool(record.get("bilstm_on_top", False))
    stride = settings.init_from_teacher_stride
    if stride:
        check_student_shape(config, student.config, stride, config_file, student.config_file,
                            (bilstm_on_top, bool(run.bilstm_on_top)))
    return Teacher(prefix, config, config_file, bilstm_on_top,
                   settings.distillation_temperature, settings.distillation_weight,
                   settings.unlabeled_file, stride)


def check_student_shape(teacher_config, student_config, stride, teacher_file, student_file,
                        bilstm_on_top=(False, False)):
    """Refuses a student that layer `i` of the teacher cannot initialise (every layer `i *
    stride`): another width, more layers than the teacher has at that stride, or not the same
    `bilstm_on_top` (the teacher's, the student's: its head reads the BiLSTM's outputs)."""
    teacher, student = teacher_config.to_dict(), student_config.to_dict()
    teacher["bilstm_on_top"], student["bilstm_on_top"] = bilstm_on_top
    differ = sorted(k for k in teacher if k != "num_hidden_layers" and teacher[k] != student[k])
    most = -(-teacher_config.num_hidden_layers // stride)
    if differ or student_config.num_hidden_layers > most:
        raise ValueError(
            f"--init_from_teacher_stride={stride}: the student ({student_file}) must be the "
            f"teacher ({teacher_file}) with at most {most} layers; "
            + (f"they differ in {', '.join(differ)}" if differ else
               f"it has {student_config.num_hidden_layers}"))


def _teacher_model(teacher, num_labels):
    model = families.build_model("classifier", teacher.config, num_labels,
                                 bilstm_on_top=teacher.bilstm_on_top)
    report = checkpoints.initialize_from_checkpoint(model, teacher.checkpoint, flag="--teacher",
                                                    config_file=teacher.config_file)
    if report.missing:
        raise ValueError(f"--teacher={teacher.checkpoint} has no classifier head of "
                         f"{num_labels} labels ({', '.join(report.missing)})")
    return model


def teacher_logits(teacher, features, num_labels, output_dir, batch_size=64):
    """float32 `[N, num_labels]`: the teacher's logits of `features` (`InputFeatures`), read from
    output_dir/teacher_logits.npz when it holds this teacher's logits of the same inputs, else
    computed and written there."""
    ids = np.asarray([f.input_ids for f in features], np.int32)
    key = hashlib.sha256(ids.tobytes() + np.asarray(
        [f.segment_ids for f in features], np.int8).tobytes()).hexdigest()
    # The teacher by content: its weights and the config that reads them.
    key += (f"|{fingerprint(teacher.checkpoint)}|{run_identity.config_sha256(teacher.config)}"
            f"|bilstm_on_top={teacher.bilstm_on_top}")
    path = os.path.join(output_dir, CACHE_FILE)
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path, "rb") as f:
            cached = np.load(io.BytesIO(f.read()))
        if str(cached["key"]) == key:
            logging.info("Teacher logits of %d training examples read from %s", len(ids), path)
            return cached["logits"]
    model = _teacher_model(teacher, num_labels)
    inputs = {"input_ids": ids, "input_mask": np.asarray([f.input_mask for f in features], np.int32),
              "segment_ids": np.asarray([f.segment_ids for f in features], np.int32)}
    forward = compiled(lambda batch: model(batch, training=False)["logits"])
    logits = np.concatenate([
        np.asarray(forward({k: v[start:start + batch_size] for k, v in inputs.items()}))
        for start in range(0, len(ids), batch_size)]).astype(np.float32)
    data = io.BytesIO()
    np.savez(data, key=np.asarray(key), logits=logits)
    with atomic_output(path) as tmp_path:
        with tf.io.gfile.GFile(tmp_path, "wb") as f:
            f.write(data.getvalue())
    logging.info("Teacher logits of %d training examples computed (%s) and kept in %s",
                 len(ids), teacher.checkpoint, path)
    return logits


def distillation_loss(logits, labels, has_label, teacher, temperature, weight):
    """(scalar loss, per-example loss [B]): see the module docstring. `logits`, `teacher`
    float `[B, C]`; `labels` int `[B]`; `has_label` `[B]` 1 for a labelled example."""
    t = ops.cast(temperature, "float32")
    soft_targets = ops.softmax(ops.cast(teacher, "float32") / t, axis=-1)
    student = ops.log_softmax(ops.cast(logits, "float32") / t, axis=-1)
    soft = t * t * ops.sum(
        soft_targets * (ops.log(ops.maximum(soft_targets, 1e-20)) - student), axis=-1)
    _, hard, _ = classification_loss(logits, labels)
    labelled = ops.cast(has_label, "float32")
    per_example = weight * soft + (1.0 - weight) * hard * labelled
    # The hard term is the mean over the batch's labelled examples, as without distillation.
    hard_mean = ops.sum(hard * labelled) / ops.maximum(ops.sum(labelled), 1.0)
    return weight * ops.mean(soft) + (1.0 - weight) * hard_mean, per_example


def init_from_teacher(model, teacher, num_labels):
    """Initialises the student `model` from the teacher: embeddings, pooler and head as they
    are, student layer `i` from teacher layer `i * layer_stride` (DistilBERT's every other layer
    at stride 2)."""
    source = {v.path: v for v in _teacher_model(teacher, num_labels).variables
              if "seed_generator" not in v.path}
    stride = teacher.layer_stride
    for variable in model.variables:
        path = variable.path
        if "seed_generator" in path:
            continue
        if _LAYER in path:
            head, rest = path.split(_LAYER, 1)
            index, tail = rest.split("/", 1)
            path = f"{head}{_LAYER}{int(index) * stride}/{tail}"
        variable.assign(source[path])
    logging.info("Student initialised from the teacher %s: its layers %s", teacher.checkpoint,
                 ", ".join(str(i * stride) for i in range(model.encoder.config.num_hidden_layers)))
