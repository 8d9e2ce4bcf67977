"""run_ner.py as a `bert_runner.task.Task`: BERT fine-tuned for CoNLL-2003 NER (paper section 5.3).

Each window's scored words are classified at their first sub-token (`bert_tasks.ner.features`): the loss is
the softmax cross-entropy averaged over those positions (label_weights 1), every other position
weighs 0. Evaluation and prediction take the argmax label there, put the tags back on the words
(`bert_tasks.ner.predictions`), write the file in CoNLL format with a predicted column and score it with
conlleval (`bert_tasks.ner.conlleval`):

    task = NerTask(label_list, max_seq_length, output_dir)
    task.eval_set = NerSet.read(dev_path)       # its records written (NerSet.write_records)
    driver.run_task(task, run, config, ..., eval_split=split)

Files: `eval_predictions.txt` / `eval_conlleval.txt` for the dev set (evaluation) and
`test_predictions.txt` / `test_conlleval.txt` for the test set (prediction); eval_results.txt
holds conlleval's overall and per-type precision, recall and F1 (percentages, as conlleval
prints them), its token accuracy, the mean loss per scored word and the global step.
"""
import os

import numpy as np
from absl import logging
from keras import ops

from modeling import masked_lm_loss
from modeling import BertTokenClassifier
from bert_tasks.ner import conlleval, features as ner_features, predictions
from bert_runner.results import write_text_atomic
from bert_runner.task import Task, collect, encoder_training_flops


def _token_loss(logits, features):
    """(mean loss over scored positions, per-position loss [B, S]): the same weighted mean
    cross-entropy as the masked-LM loss, over all positions of the windows."""
    loss, per_position, _ = masked_lm_loss(logits, features["label_ids"],
                                           features["label_weights"])
    return loss, ops.reshape(per_position, ops.shape(features["label_ids"]))


class NerTask(Task):
    """Token classification with the labels `label_list` (`bert_tasks.ner.tags.label_list`).

    Args:
      label_list: list of str, IOB2 labels, "O" first.
      max_seq_length: the windows' length.
      output_dir: where evaluation writes its predictions files.
    `eval_set`, `predict_set`: the `bert_tasks.ner.sets.NerSet`s whose records the eval / predict splits
    hold, set by the script once written.
    """

    name = "ner"

    def __init__(self, label_list, max_seq_length, output_dir):
        self.label_list = list(label_list)
        self.max_seq_length = max_seq_length
        self.output_dir = output_dir
        self.eval_set = None
        self.predict_set = None

    def build_model(self, config):
        return BertTokenClassifier(config, len(self.label_list))

    def feature_spec(self, is_training):
        return ner_features.name_to_features(self.max_seq_length)

    def loss(self, model, features, training):
        loss, _ = _token_loss(model(features, training=training)["logits"], features)
        return loss, {}

    def predict_step(self, model, features):
        """`predicted_ids` int32 [B, S] (argmax label at every position), `loss_sum` and
        `num_scored` [B] (per window: summed loss and number of scored words), `window_index`
        [B] (-1 on padding)."""
        logits = model(features, training=False)["logits"]
        _, per_position = _token_loss(logits, features)
        weights = ops.cast(features["label_weights"], "float32")
        return {
            "predicted_ids": ops.cast(ops.argmax(logits, axis=-1), "int32"),
            "loss_sum": ops.sum(per_position * weights, axis=1),
            "num_scored": ops.sum(weights, axis=1),
            "window_index": features["window_index"],
        }

    def _score(self, outputs, data, prefix, output_dir):
        """Tags of `data`'s words from collected outputs; writes <prefix>_predictions.txt and
        <prefix>_conlleval.txt. Returns the conlleval ChunkCounts."""
        real = outputs["window_index"] >= 0
        order = outputs["window_index"][real]
        if not np.array_equal(order, np.arange(len(data.windows))):
            raise ValueError("%s: predictions came back for windows %s..., expected 0..%d in "
                             "order" % (data.path, order[:5], len(data.windows) - 1))
        predicted = predictions.sentence_tags(data.windows, outputs["predicted_ids"][real],
                                              data.sentences, self.label_list)
        path = os.path.join(output_dir, prefix + "_predictions.txt")
        counts = predictions.write_predictions(path, data.documents, predicted, data.scheme)
        report = conlleval.report(counts)
        write_text_atomic(os.path.join(output_dir, prefix + "_conlleval.txt"), report)
        logging.info("conlleval of %s (%s):\n%s", data.path, path, report)
        return counts

    def evaluate(self, outputs, global_step):
        """eval_results.txt: eval_f1 / eval_precision / eval_recall / eval_accuracy (conlleval,
        percent), the same per type (eval_f1_PER, ...), eval_loss (mean over scored words),
        global_step."""
        counts = self._score(outputs, self.eval_set, "eval", self.output_dir)
        scores = conlleval.metrics(counts)
        real = outputs["window_index"] >= 0
        values = {"eval_loss": outputs["loss_sum"][real].sum(dtype=np.float64)
                  / max(outputs["num_scored"][real].sum(dtype=np.float64), 1.0)}
        for name in ("precision", "recall", "f1", "accuracy"):
            values["eval_" + name] = scores["overall"][name]
        for chunk_type, by_type in scores["by_type"].items():
            for name in ("precision", "recall", "f1"):
                values["eval_%s_%s" % (name, chunk_type)] = by_type[name]
        return {"global_step": np.int64(global_step),
                **{k: np.float32(v) for k, v in values.items()}}

    def baselines(self, outputs):
        """conlleval of tagging every word O (the majority tag) on the eval set."""
        data = self.eval_set
        all_o = [["O"] * len(s.words) for s in data.sentences]
        counts = conlleval.count_lines(predictions.prediction_lines(data.documents, all_o))
        scores = conlleval.metrics(counts)["overall"]
        return {"eval_f1": "every word O %.2f" % scores["f1"],
                "eval_accuracy": "every word O %.2f" % scores["accuracy"]}

    def write_predictions(self, batches, split, output_dir):
        """test_predictions.txt (CoNLL format + predicted tag) and test_conlleval.txt; returns the
        conlleval ChunkCounts (against the file's tags)."""
        return self._score(collect(batches), self.predict_set, "test", output_dir)

    def flops_per_example(self, config):
        return encoder_training_flops(config, self.max_seq_length)
