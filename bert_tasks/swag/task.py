"""SWAG as a `bert_runner.task.Task`: its CSV splits and TFRecords, the multiple-choice model,
its loss, eval_results and test_results.tsv.

    bert_runner.driver.run_command(SwagTask(max_seq_length=128, data_dir=swag_dir), run)

The loss is the mean softmax cross-entropy over each example's four choice scores. Evaluation
writes the classifier's keys (`eval_accuracy`, `eval_loss`, `loss`, `global_step`), with the
25% chance and the majority answer position as baselines; prediction writes `test_results.tsv`,
the four choice probabilities of each test example per line, as run_classifier's file.
"""
import os
import random

import numpy as np
from keras import ops

from bert_tasks.classifier.outputs import write_test_results
from modeling import classification_loss, families
from bert_runner.task import (
    SplitRecords, Task, collect, encoder_training_flops, per_batch_mean)
from bert_tasks.swag import features
from bert_tasks.swag.examples import NUM_CHOICES, SPLIT_FILES, read_swag_examples

# Training examples are shuffled once with this seed before they are written: the input pipeline
# shuffles only within 100 records, so a file ordered by source would train in runs of one source.
TRAIN_SHUFFLE_SEED = 12345


class SwagTask(Task):
    """Four-way multiple choice on SWAG records (`bert_tasks.swag.features`).

    Args:
      max_seq_length: int, the records' sequence length S (each example holds 4 sequences).
      data_dir: str, the SWAG release's train.csv, val.csv and test.csv.
    Splits: train (train.csv), eval (val.csv), predict (test.csv, unlabelled), written to
    train.tf_record, dev.tf_record and test.tf_record.
    """

    name = "swag"
    splits = {"train": "train", "eval": "dev", "predict": "test"}

    def __init__(self, max_seq_length, data_dir=None):
        self.max_seq_length = max_seq_length
        self.data_dir = data_dir

    def read_examples(self, split, run=None, labels=None):
        """The split's SwagExamples (guids "train-0", "dev-0", "test-0"); training examples in
        the order they are written (shuffled with TRAIN_SHUFFLE_SEED)."""
        name = self.splits[split]
        examples = read_swag_examples(os.path.join(self.data_dir, SPLIT_FILES[name]), name,
                                      require_label=split != "predict")
        if split == "train":
            random.Random(TRAIN_SHUFFLE_SEED).shuffle(examples)
        return examples

    def records(self, examples, split, tokenizer, run):
        return SplitRecords(features.tf_examples(examples, self.max_seq_length, tokenizer))

    def padding_record(self):
        return features.features_to_tf_example(features.padding_features(self.max_seq_length))

    def build_model(self, config, bilstm_on_top=False, modes=None):
        return families.build_model("multiple_choice", config, NUM_CHOICES,
                                    bilstm_on_top=bilstm_on_top, modes=modes)

    def feature_spec(self, is_training):
        return features.name_to_features(self.max_seq_length)

    def _forward(self, model, batch, training):
        """(mean loss, per-example loss [B], probabilities [B, 4])."""
        logits = model(batch, training=training)["logits"]
        loss, per_example, _ = classification_loss(logits, batch["label_ids"])
        return loss, per_example, ops.softmax(logits, axis=-1)

    def loss(self, model, features, training):
        loss, _, _ = self._forward(model, features, training)
        return loss, {}

    def predict_step(self, model, features):
        """`probabilities` [B, 4], `per_example_loss` [B], `label_ids` [B], `is_real_example` [B]
        (0 on TPU padding rows)."""
        _, per_example, probabilities = self._forward(model, features, training=False)
        return {
            "probabilities": probabilities,
            "per_example_loss": per_example,
            "label_ids": features["label_ids"],
            "is_real_example": features["is_real_example"],
        }

    def evaluate(self, outputs, global_step, split, output_dir):
        """eval_results.txt: `eval_accuracy` and `eval_loss` over the real examples, `loss` (mean
        of the batch losses, padding included: the Estimator's), `global_step`."""
        real = outputs["is_real_example"].astype(bool)
        predictions = np.argmax(outputs["probabilities"][real], axis=-1)
        values = {
            "eval_accuracy": np.mean(predictions == outputs["label_ids"][real]),
            "eval_loss": np.mean(outputs["per_example_loss"][real], dtype=np.float64),
            "loss": np.mean(per_batch_mean(outputs["per_example_loss"], outputs["batch_index"])),
        }
        return {"global_step": np.int64(global_step),
                **{k: np.float32(v) for k, v in values.items()}}

    def baselines(self, outputs, split):
        labels = outputs["label_ids"][outputs["is_real_example"].astype(bool)]
        counts = np.bincount(labels, minlength=NUM_CHOICES)
        majority = int(np.argmax(counts))
        return {"eval_accuracy": "chance %.4f, always ending%d %.4f" % (
            1.0 / NUM_CHOICES, majority, counts[majority] / max(len(labels), 1))}

    def write_predictions(self, batches, split, output_dir):
        """test_results.tsv: per test example, its four choice probabilities, tab-separated."""
        outputs = collect(batches)
        path = os.path.join(output_dir, "test_results.tsv")
        write_test_results(path, outputs["probabilities"], split.num_examples)
        return path

    def flops_per_example(self, config):
        # The encoder runs once per choice; the scoring vector is negligible.
        return NUM_CHOICES * encoder_training_flops(config, self.max_seq_length)

    def tokens_per_example(self):
        return NUM_CHOICES * self.max_seq_length
