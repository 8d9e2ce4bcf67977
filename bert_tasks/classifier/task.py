"""run_classifier as a `bert_runner.task.Task`: the original's splits and TFRecords, `model_fn`
(classifier, loss) and outputs; new: long documents in windows, and several labels per example.

The original computed its metrics inside the graph with `tf.metrics`; here one step returns
per-example values for evaluation and prediction alike, and the metrics are computed in NumPy
afterwards, so the task's official metrics (F1, Matthews, Pearson, Spearman) come from the same
pass as the original's accuracy and loss.

With `long_documents`, an example longer than max_seq_length is written as overlapping windows
(`bert_tasks.classifier.windows`); training sees every window with the example's label, and
evaluation and prediction aggregate the windows' logits per example before the softmax (or
sigmoid), so every per-example output and metric counts examples, not windows.

    task = make_task("mrpc", 128, data_dir)                         # the original's
    task = make_task("multilabel", 128, data_dir, long_documents=True, threshold=0.5)
"""
import os
import random

import numpy as np
import tensorflow as tf
from absl import logging
from keras import ops

from bert_tasks.classifier import (
    distillation, features, files, metrics, outputs as glue_outputs, processors, windows)
from bert_tasks.classifier.outputs import predicted_values
from modeling import classification_loss, multi_label_loss, regression_loss, families
from bert_runner import run_identity
from bert_runner.tfrecords import float_feature, int_feature
from bert_runner.packing import slot_mean
from bert_runner.runs import labels as run_labels
from bert_runner.task import (
    SplitRecords, Task, collect, encoder_training_flops, per_batch_mean)
from bert_tasks import ranking

# Windows of one example are adjacent in the records, and the input pipeline shuffles only within
# 100 records: training windows are written in an order shuffled with this seed.
_WINDOW_SHUFFLE_SEED = 12345
# The guid prefix of --unlabeled_file's examples (no label of their own).
_UNLABELED = "unlabeled-"
# A reranker's dev metrics beside accuracy (`bert_tasks.ranking`).
_RANKING_METRICS = ("mrr_at_10", "ndcg_at_10", "recall_at_1")


def make_task(task_name, max_seq_length, data_dir=None, labels=None, threshold=0.5, **options):
    """The task of `--task_name`: a `MultiLabelTask` for "multilabel" (`labels`, `threshold`),
    else a `ClassifierTask`; `options` are `ClassifierTask`'s (the windows', the teacher)."""
    if task_name.lower() == "multilabel":
        return MultiLabelTask(max_seq_length, data_dir, labels, threshold, **options)
    return ClassifierTask(task_name, max_seq_length, data_dir, labels=labels, **options)


class ClassifierTask(Task):
    """A GLUE / XNLI task of `bert_tasks.classifier.processors`, fine-tuned with one output layer.

    Args:
      task_name: the `--task_name` (its processor, metrics and the run's name); an unknown name
        raises ValueError listing the known ones.
      max_seq_length: the TFRecords' sequence length.
      data_dir: the task's TSV files (train.tsv, dev.tsv, test.tsv or the task's names).
      long_documents: write an example longer than max_seq_length as overlapping windows,
        `doc_stride` word-pieces apart; evaluation and prediction aggregate the windows' logits
        per example with `window_aggregation` ("mean", "max" or "first",
        `bert_tasks.classifier.windows.aggregate`). False: the original's truncation.
      labels: the multilabel task's label set (`--labels`); refused for the other tasks.
    Splits: train, eval (the dev set), predict (the test set), written to train.tf_record,
    eval.tf_record and predict.tf_record as the original.
    """

    def __init__(self, task_name, max_seq_length, data_dir=None, long_documents=False,
                 doc_stride=64, window_aggregation="mean", labels=None, teacher=None):
        self.processor = processors.get_processor(task_name, labels)
        if teacher is not None and (self.processor.is_regression or self.processor.is_multi_label
                                    or long_documents):
            raise ValueError("--teacher distils a single-label classifier without "
                             "--long_documents (not regression, multilabel or windows)")
        # A `distillation.Teacher`, or None.
        self.teacher = teacher
        if long_documents and doc_stride < 1:
            raise ValueError("--doc_stride must be at least 1, got %d" % doc_stride)
        if window_aggregation not in windows.AGGREGATIONS:
            raise ValueError("--window_aggregation must be one of %s, got %r"
                             % (", ".join(windows.AGGREGATIONS), window_aggregation))
        self.task_name = task_name
        self.max_seq_length = max_seq_length
        self.data_dir = data_dir
        self.doc_stride = doc_stride if long_documents else None
        self.window_aggregation = window_aggregation
        self.name = "classifier/" + task_name.lower()

    @property
    def is_regression(self):
        return self.processor.is_regression

    def read_examples(self, split, run=None, labels=None):
        processor = self.processor_of(run, labels)
        read = {"train": processor.get_train_examples,
                "eval": processor.get_dev_examples,
                "predict": processor.get_test_examples}[split]
        examples = read(self.data_dir)
        if split == "train" and self.teacher is not None and self.teacher.unlabeled_file:
            # Labelled and unlabelled examples mixed once (the pipeline shuffles within 100).
            examples += self._unlabeled_examples(self.teacher.unlabeled_file)
            random.Random(_WINDOW_SHUFFLE_SEED).shuffle(examples)
        return examples

    def processor_of(self, run, labels=None):
        """The processor that reads `run`'s examples: the task's own (its labels are the task
        name's)."""
        return self.processor

    def _unlabeled_examples(self, path):
        """--unlabeled_file's lines as examples (the teacher labels them): one text a line, two
        tab-separated for a pair task; blank lines left out."""
        pair = self.processor.train.text_b is not None
        examples = []
        for line_number, row in files.read_tsv_lines(path):
            if not any(field.strip() for field in row):
                continue
            if len(row) != 1 + pair or not all(field.strip() for field in row):
                raise ValueError("%s:%d: expected %s, got %d tab-separated field(s)" % (
                    path, line_number, "text_a<TAB>text_b" if pair else "one text", len(row)))
            examples.append(features.InputExample(
                guid="%s%d" % (_UNLABELED, line_number), text_a=row[0],
                text_b=row[1] if pair else None, label=self.processor.get_labels()[0]))
        if not examples:
            raise ValueError("%s (--unlabeled_file): no text" % path)
        logging.info("Distillation: %d unlabelled examples from %s", len(examples), path)
        return examples

    def records(self, examples, split, tokenizer, run):
        """The split's records; with long documents every window's, made at once, and the
        windows of each example (a tuple of counts) as the index."""
        if split == "train" and self.teacher is not None:
            return SplitRecords(self._distillation_records(examples, tokenizer, run.output_dir))
        if self.doc_stride is None:
            return SplitRecords(features.tf_examples(
                examples, self.processor.get_labels(), self.max_seq_length, tokenizer))
        counts = []
        records = list(features.tf_examples(examples, self.processor.get_labels(),
                                            self.max_seq_length, tokenizer, self.doc_stride,
                                            counts))
        logging.info("%s: %d examples in %d windows", split, len(counts), len(records))
        if split == "train" and len(records) > len(counts):
            # In memory already: the training set's windows shuffled once.
            random.Random(_WINDOW_SHUFFLE_SEED).shuffle(records)
        return SplitRecords(records, tuple(counts))

    def _distillation_records(self, examples, tokenizer, output_dir):
        """The training records with the teacher's logits (`teacher_logits` [C] float, cached
        in `output_dir`) and whether the example has its own label (`has_label`)."""
        converted = features.convert_examples_to_features(
            examples, self.processor.get_labels(), self.max_seq_length, tokenizer)
        logits = distillation.teacher_logits(self.teacher, converted, self.processor.num_labels,
                                             output_dir)
        for example, feature, row in zip(examples, converted, logits):
            record = features.features_to_tf_example(feature)
            record.features.feature["teacher_logits"].CopyFrom(float_feature(row))
            record.features.feature["has_label"].CopyFrom(
                int_feature([int(not example.guid.startswith(_UNLABELED))]))
            yield record

    # Distillation: what the student is trained with.
    training_only_settings = ("teacher", run_identity.TEACHER_HASH, "distillation_temperature",
                              "distillation_weight", "unlabeled_file")

    def recorded_settings(self):
        distilled = {} if self.teacher is None else {
            "teacher": self.teacher.checkpoint,
            run_identity.TEACHER_HASH: run_identity.fingerprint(self.teacher.checkpoint),
            "distillation_temperature": self.teacher.temperature,
            "distillation_weight": self.teacher.weight,
            "unlabeled_file": self.teacher.unlabeled_file}
        return {"max_seq_length": self.max_seq_length,
                "long_documents": self.doc_stride is not None, "doc_stride": self.doc_stride,
                "window_aggregation": self.window_aggregation, **distilled}

    def training_steps(self, run, examples, num_records):
        """The original's count of training examples; with long documents, of windows, so that
        an epoch is one pass over every window."""
        return run.training_steps(num_records if self.doc_stride is not None else len(examples))

    def padding_record(self):
        return features.features_to_tf_example(features.convert_single_example(
            0, features.PaddingInputExample(), self.processor.get_labels(), self.max_seq_length,
            tokenizer=None))

    def build_model(self, config, bilstm_on_top=False, modes=None):
        return families.build_model("classifier", config, self.processor.num_labels,
                                    bilstm_on_top=bilstm_on_top, modes=modes)

    def initializer(self, model):
        """With `--init_from_teacher_stride`: the student from every k-th teacher layer."""
        if self.teacher is None or not self.teacher.layer_stride:
            return None
        return lambda: distillation.init_from_teacher(model, self.teacher,
                                                      self.processor.num_labels)

    def feature_spec(self, is_training):
        spec = features.name_to_features(self.max_seq_length, self.is_regression)
        if is_training and self.teacher is not None:
            spec.update(teacher_logits=tf.io.FixedLenFeature([self.processor.num_labels],
                                                             tf.float32),
                        has_label=tf.io.FixedLenFeature([], tf.int64))
        return spec

    def _head(self, logits, label_ids):
        """(mean loss, per-example loss [B], outputs) of logits [B, num_labels]: outputs are the
        softmax probabilities [B, num_labels] (the original's `probabilities`, which
        test_results.tsv prints), or the predicted score [B, 1] for regression."""
        if self.is_regression:
            loss, per_example, _ = regression_loss(logits, label_ids)
            return loss, per_example, logits
        loss, per_example, _ = classification_loss(logits, label_ids)
        return loss, per_example, ops.softmax(logits, axis=-1)

    def _forward(self, model, features, training):
        """(mean loss, per-example loss [B], outputs, logits [B, num_labels]); see `_head`."""
        logits = model(features, training=training)["logits"]
        return (*self._head(logits, features["label_ids"]), logits)

    def loss(self, model, features, training):
        """The original total_loss: mean softmax cross-entropy (mean squared error for STS-B);
        on packed rows (`--max_sequences_per_row`) the mean over the filled sequence slots."""
        if "teacher_logits" in features:
            logits = model(features, training=training)["logits"]
            loss, _ = distillation.distillation_loss(
                logits, features["label_ids"], features["has_label"], features["teacher_logits"],
                self.teacher.temperature, self.teacher.weight)
            return loss, {}
        if "sequence_starts" not in features:
            loss, _, _, _ = self._forward(model, features, training)
            return loss, {}
        logits = model(features, training=training)["logits"]  # [B, K, C]
        labels = features["label_ids"]  # [B, K] (multi-label [B, K, L])
        _, per_slot, _ = self._head(ops.reshape(logits, (-1, logits.shape[-1])),
                                    ops.reshape(labels, (-1, *labels.shape[2:])))
        return slot_mean(per_slot, features["sequence_starts"]), {}

    def predict_step(self, model, features):
        """`outputs` (probabilities [B, C] or scores [B, 1]), `logits` [B, C],
        `per_example_loss` [B], `label_ids` [B] and `is_real_example` [B] (0 on TPU padding
        rows). With long documents the rows are windows."""
        _, per_example, outputs, logits = self._forward(model, features, training=False)
        return {
            "outputs": outputs,
            "logits": logits,
            "per_example_loss": per_example,
            "label_ids": features["label_ids"],
            "is_real_example": features["is_real_example"],
        }

    def _per_example(self, outputs, split):
        """The real examples' `outputs`, `per_example_loss` and `label_ids` (numpy, [N, ...]) of
        `split` (the `Split`).

        Without long documents, the rows of `outputs` that are real. With them, each example's
        windows' logits aggregated (`window_aggregation`; the split's `index`: the windows of
        each example), then the head's outputs and loss of those, and the label of its first
        window.
        """
        if self.doc_stride is None:
            real = outputs["is_real_example"].astype(bool)
            return {name: outputs[name][real]
                    for name in ("outputs", "per_example_loss", "label_ids")}
        counts = split.index
        logits = windows.aggregate(outputs["logits"], counts, self.window_aggregation)
        labels = outputs["label_ids"][windows.window_starts(counts)]
        _, per_example, example_outputs = self._head(logits, labels)
        return {"outputs": np.asarray(example_outputs), "label_ids": labels,
                "per_example_loss": np.asarray(per_example)}

    def _losses(self, outputs, examples):
        """`eval_loss` (mean per-example loss over real examples) and `loss` (the mean of the
        batch losses, padding rows included: the Estimator's; with long documents the batches
        are of windows, so it is the windows' loss)."""
        return {
            "eval_loss": np.mean(examples["per_example_loss"], dtype=np.float64),
            "loss": np.mean(per_batch_mean(outputs["per_example_loss"], outputs["batch_index"])),
        }

    def evaluate(self, outputs, global_step, split, output_dir):
        """eval_results.txt: `eval_loss`, `loss` (see `_losses`), `global_step`,
        `eval_accuracy` (classification) and the task's official metrics; all float32."""
        examples = self._per_example(outputs, split)
        predictions = predicted_values(examples["outputs"], self.is_regression)
        values = {**self._losses(outputs, examples),
                  **metrics.task_metrics(self.task_name, examples["label_ids"], predictions)}
        candidates = self._candidate_lists(split)
        if candidates is not None:
            values.update(self._ranking(candidates, examples["outputs"][:, 1],
                                        examples["label_ids"]))
        return {"global_step": np.int64(global_step),
                **{k: np.float32(v) for k, v in values.items()}}

    def _candidate_lists(self, split):
        """A reranker's dev candidate lists: `[[example index, ...] per query]` of `split`'s
        examples in file order; None for a task that does not rank candidates."""
        if not self.processor.ranks_candidates:
            return None
        return ranking.candidate_lists([e.text_a for e in split.examples])

    @staticmethod
    def _ranking(candidates, scores, labels):
        """eval_mrr_at_10, eval_ndcg_at_10, eval_recall_at_1 of each dev query's `candidates`
        ranked by `scores` (queries without a relevant candidate left out, as IR evaluations)."""
        values = ranking.list_metrics(candidates, scores, labels == 1)
        return {f"eval_{name}": values[name] for name in _RANKING_METRICS}

    def baselines(self, outputs, split):
        if self.is_regression:
            return {}
        labels = self._per_example(outputs, split)["label_ids"]
        counts = np.bincount(labels, minlength=self.processor.num_labels)
        majority = int(np.argmax(counts))
        found = {"eval_accuracy": "majority class %r %.4f, chance %.4f" % (
            self.processor.get_labels()[majority], counts[majority] / max(len(labels), 1),
            1.0 / self.processor.num_labels)}
        candidates = self._candidate_lists(split)
        if candidates is not None:
            # The first stage's order: the file's, the earlier candidate first.
            first_stage = self._ranking(candidates, -np.arange(len(labels), dtype=np.float64),
                                        labels)
            chance = ranking.list_chance_metrics(candidates, labels == 1)
            queries = sum(any(labels[i] for i in group) for group in candidates)
            found.update({
                f"eval_{name}": "first-stage order %.4f, random order %.4f (%d queries)" % (
                    first_stage[f"eval_{name}"], chance[name], queries)
                for name in _RANKING_METRICS})
        return found

    def write_predictions(self, batches, split, output_dir):
        """test_results.tsv (the original's: one line per example, in input order), and the GLUE
        submission file where there is one."""
        examples = self._per_example(collect(batches), split)
        glue_outputs.write_test_results(
            os.path.join(output_dir, "test_results.tsv"), examples["outputs"],
            len(examples["outputs"]))
        if self.processor.submission_name and split.examples is not None:
            path = glue_outputs.write_glue_submission(
                output_dir, self.processor, split.examples,
                predicted_values(examples["outputs"], self.is_regression))
            logging.info("Wrote GLUE submission file %s", path)

    def flops_per_example(self, config):
        return encoder_training_flops(config, self.max_seq_length)


class MultiLabelTask(ClassifierTask):
    """`--task_name=multilabel`: several labels per example (`processors.MultiLabelProcessor`'s
    layout), one sigmoid output per label, binary cross-entropy, and a label predicted where its
    probability is at least `threshold`.

    Args:
      max_seq_length, data_dir, and the windows' options: as `ClassifierTask`.
      labels: the label set in order (`--labels`); None: the sorted labels of train.tsv.
      threshold: the decision threshold on each label's probability, in (0, 1).
    The model is `modeling.BertMultiLabelClassifier` (TF1 head `cls/multi_label/...`); the
    labels' order is written to output_dir/label_list.txt.
    """

    def __init__(self, max_seq_length, data_dir=None, labels=None, threshold=0.5, **options):
        super().__init__("multilabel", max_seq_length, data_dir, labels=labels, **options)
        if not 0.0 < threshold < 1.0:
            raise ValueError("--multi_label_threshold must be in (0, 1), got %r" % threshold)
        self.threshold = threshold

    @property
    def label_names(self):
        return self.processor.get_labels()

    def processor_of(self, run, labels=None):
        """A processor of `run`'s label set: --labels; else a training run's, train.tsv's
        sorted labels; else `labels`, those recorded with the model it starts from (the
        plan's `StartingPoint.labels`: output_dir's, else the LoRA adapters', else
        --init_checkpoint's); else none (refused when a split needs them)."""
        if self.processor.labels is not None or run is None:
            return self.processor
        if run.do_train:
            return processors.MultiLabelProcessor(self.processor.train_labels(self.data_dir))
        return processors.MultiLabelProcessor(labels and labels.labels)

    def settle(self, examples, run, config=None, labels=None):
        """The task with the label set of `run` (`processor_of`); refused when the model the
        run starts from (`labels`) was trained with other labels, or the same in another
        order."""
        processor = self.processor_of(run, labels)
        if processor.labels is not None:
            run_labels.check_labels(processor.labels, labels, "--labels",
                                    ",".join(processor.labels))
        return self if processor is self.processor else self._settled(processor=processor)

    def write_run_files(self, run):
        """label_list.txt (checked against the starting model's by `settle`)."""
        run_labels.write_label_list(run.output_dir, self.label_names)
        logging.info("Labels (the columns of test_results.tsv): %s", ", ".join(self.label_names))

    def padding_record(self):
        zeros = [0] * self.max_seq_length
        return features.features_to_tf_example(features.InputFeatures(
            zeros, zeros, zeros, [0] * self.processor.num_labels, is_real_example=False))

    def build_model(self, config, bilstm_on_top=False, modes=None):
        return families.build_model("multi_label", config, self.processor.num_labels,
                                    bilstm_on_top=bilstm_on_top, modes=modes)

    def feature_spec(self, is_training):
        return features.name_to_features(self.max_seq_length,
                                         num_multi_labels=self.processor.num_labels)

    def _head(self, logits, label_ids):
        """(mean loss, per-example loss [B], probabilities [B, L]): `multi_label_loss`."""
        return multi_label_loss(logits, label_ids)

    def evaluate(self, outputs, global_step, split, output_dir):
        """eval_results.txt: `eval_loss`, `loss` (as the single-label task's), `global_step` and
        `metrics.multi_label_metrics` of the thresholded probabilities; all float32."""
        examples = self._per_example(outputs, split)
        predictions = examples["outputs"] >= self.threshold
        values = {**self._losses(outputs, examples),
                  **metrics.multi_label_metrics(examples["label_ids"], predictions,
                                                self.label_names)}
        return {"global_step": np.int64(global_step),
                **{k: np.float32(v) for k, v in values.items()}}

    def baselines(self, outputs, split):
        labels = self._per_example(outputs, split)["label_ids"]
        return {name: "all-negative %.4f, label frequency %.4f" % values
                for name, values in metrics.multi_label_baselines(
                    labels, self.label_names).items()}
