"""run_classifier as a `bert_runner.task.Task`: the original's splits and TFRecords, `model_fn`
(classifier, loss) and outputs.

The original computed its metrics inside the graph with `tf.metrics`; here one step returns
per-example values for evaluation and prediction alike, and the metrics are computed in NumPy
afterwards, so the task's official metrics (F1, Matthews, Pearson, Spearman) come from the same
pass as the original's accuracy and loss.
"""
import os

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tasks.classifier import features, metrics, outputs as glue_outputs, processors
from bert_tasks.classifier.outputs import predicted_values
from modeling import BertClassifier, classification_loss, regression_loss
from bert_runner.task import Task, collect, encoder_training_flops, per_batch_mean


class ClassifierTask(Task):
    """A GLUE / XNLI task of `bert_tasks.classifier.processors`, fine-tuned with one output layer.

    Args:
      task_name: the `--task_name` (its processor, metrics and the run's name); an unknown name
        raises ValueError listing the known ones.
      max_seq_length: the TFRecords' sequence length.
      data_dir: the task's TSV files (train.tsv, dev.tsv, test.tsv or the task's names).
    Splits: train, eval (the dev set), predict (the test set), written to train.tf_record,
    eval.tf_record and predict.tf_record as the original.
    """

    def __init__(self, task_name, max_seq_length, data_dir=None):
        self.processor = processors.get_processor(task_name)
        self.task_name = task_name
        self.max_seq_length = max_seq_length
        self.data_dir = data_dir
        self.predict_examples = None
        self.name = "classifier/" + task_name.lower()

    @property
    def is_regression(self):
        return self.processor.is_regression

    def read_examples(self, split):
        read = {"train": self.processor.get_train_examples,
                "eval": self.processor.get_dev_examples,
                "predict": self.processor.get_test_examples}[split]
        return read(self.data_dir)

    def records(self, examples, split, tokenizer):
        if split == "predict":
            self.predict_examples = examples  # the GLUE submission file's index column
        return features.tf_examples(examples, self.processor.get_labels(), self.max_seq_length,
                                    tokenizer)

    def padding_record(self):
        return features.features_to_tf_example(features.convert_single_example(
            0, features.PaddingInputExample(), self.processor.get_labels(), self.max_seq_length,
            tokenizer=None))

    def build_model(self, config):
        return BertClassifier(config, self.processor.num_labels)

    def feature_spec(self, is_training):
        return features.name_to_features(self.max_seq_length, self.is_regression)

    def _forward(self, model, features, training):
        """(mean loss, per-example loss [B], outputs): outputs are the softmax probabilities
        [B, num_labels] (the original's `probabilities`, which test_results.tsv prints), or the
        predicted score [B, 1] for regression."""
        logits = model(features, training=training)["logits"]
        if self.is_regression:
            loss, per_example, _ = regression_loss(logits, features["label_ids"])
            return loss, per_example, logits
        loss, per_example, _ = classification_loss(logits, features["label_ids"])
        return loss, per_example, tf.nn.softmax(logits, axis=-1)

    def loss(self, model, features, training):
        """The original total_loss: mean softmax cross-entropy (mean squared error for STS-B)."""
        loss, _, _ = self._forward(model, features, training)
        return loss, {}

    def predict_step(self, model, features):
        """`outputs` (probabilities [B, C] or scores [B, 1]), `per_example_loss` [B],
        `label_ids` [B] and `is_real_example` [B] (0 on TPU padding rows)."""
        _, per_example, outputs = self._forward(model, features, training=False)
        return {
            "outputs": outputs,
            "per_example_loss": per_example,
            "label_ids": features["label_ids"],
            "is_real_example": features["is_real_example"],
        }

    def evaluate(self, outputs, global_step):
        """eval_results.txt: `eval_loss` (mean per-example loss over real examples), `loss` (mean
        of the batch losses, padding rows included: the Estimator's), `global_step`,
        `eval_accuracy` (classification) and the task's official metrics; all float32."""
        real = outputs["is_real_example"].astype(bool)
        labels = outputs["label_ids"][real]
        predictions = predicted_values(outputs["outputs"][real], self.is_regression)
        values = {
            "eval_loss": np.mean(outputs["per_example_loss"][real], dtype=np.float64),
            "loss": np.mean(per_batch_mean(outputs["per_example_loss"], outputs["batch_index"])),
            **metrics.task_metrics(self.task_name, labels, predictions),
        }
        return {"global_step": np.int64(global_step),
                **{k: np.float32(v) for k, v in values.items()}}

    def baselines(self, outputs):
        if self.is_regression:
            return {}
        labels = outputs["label_ids"][outputs["is_real_example"].astype(bool)]
        counts = np.bincount(labels, minlength=self.processor.num_labels)
        majority = int(np.argmax(counts))
        return {"eval_accuracy": "majority class %r %.4f, chance %.4f" % (
            self.processor.get_labels()[majority], counts[majority] / max(len(labels), 1),
            1.0 / self.processor.num_labels)}

    def write_predictions(self, batches, split, output_dir):
        """test_results.tsv (the original's), and the GLUE submission file where there is one."""
        outputs = collect(batches)
        glue_outputs.write_test_results(
            os.path.join(output_dir, "test_results.tsv"), outputs["outputs"], split.num_examples)
        if self.processor.submission_name and self.predict_examples is not None:
            path = glue_outputs.write_glue_submission(
                output_dir, self.processor, self.predict_examples,
                predicted_values(outputs["outputs"], self.is_regression))
            logging.info("Wrote GLUE submission file %s", path)

    def flops_per_example(self, config):
        return encoder_training_flops(config, self.max_seq_length)
