"""run_ner.py as a `bert_runner.task.Task`: CoNLL-2003 files and their windows, BERT fine-tuned
for NER (paper section 5.3).

Each window's scored words are classified at their first sub-token (`bert_tasks.ner.features`): the loss is
the softmax cross-entropy averaged over those positions (label_weights 1), every other position
weighs 0. Evaluation and prediction take the argmax label there, put the tags back on the words
(`bert_tasks.ner.predictions`), write the file in CoNLL format with a predicted column and score it with
conlleval (`bert_tasks.ner.conlleval`):

    task = NerTask(data_dir, max_seq_length)   # the label list from train.txt
    bert_runner.driver.run_command(task, run)

Files: `eval_predictions.txt` / `eval_conlleval.txt` for the dev set (evaluation) and
`test_predictions.txt` / `test_conlleval.txt` for the test set (prediction); eval_results.txt
holds conlleval's overall and per-type precision, recall and F1 (percentages, as conlleval
prints them), its token accuracy, the mean loss per scored word and the global step.
"""
import os

import numpy as np
from absl import logging
from keras import ops

from modeling import masked_lm_loss, families
from bert_tasks.ner import conll, conlleval, features as ner_features, predictions, tags
from bert_tasks.ner.sets import NerSet
from modeling.checkpoint.files import write_text_atomic
from bert_runner.runs import labels as run_labels
from bert_runner.task import SplitRecords, Task, collect, encoder_training_flops

# The driver's splits -> CoNLL split of the file read.
_CONLL_SPLITS = {"train": "train", "eval": "dev", "predict": "test"}


def _token_loss(logits, features):
    """(mean loss over scored positions, per-position loss [B, S]): the same weighted mean
    cross-entropy as the masked-LM loss, over all positions of the windows."""
    loss, per_position, _ = masked_lm_loss(logits, features["label_ids"],
                                           features["label_weights"])
    return loss, ops.reshape(per_position, ops.shape(features["label_ids"]))


class NerTask(Task):
    """Token classification of the CoNLL files in `data_dir`.

    Args:
      data_dir: train.txt, dev.txt, test.txt (or the original eng.train, eng.testa, eng.testb).
      max_seq_length: the windows' length.
      entity_types: list of str or None: the labels are O, B-<type>, I-<type> of these types, in
        this order; None: the training file's types, sorted (or the list recorded in output_dir).
      document_context: surround each sentence with its document's text (the paper).
      label_scheme: "IOB1" or "IOB2", the tags the model learns, whatever the files' scheme
        (`bert_tasks.ner.tags`: IOB1 keeps a name from being split).
    Splits: train, eval (the dev file), predict (the test file, predicted and scored), written
    to train.tf_record, eval.tf_record and predict.tf_record. `label_list` (IOB2, "O" first) is
    that of `entity_types`, else settled once the files are read (`settle`).
    """

    name = "ner"

    def __init__(self, data_dir, max_seq_length, entity_types=None, document_context=True,
                 label_scheme="IOB1"):
        self.data_dir = data_dir
        self.max_seq_length = max_seq_length
        self.entity_types = entity_types
        self.document_context = document_context
        self.label_scheme = label_scheme
        self.label_list = tags.label_list(entity_types) if entity_types else None

    def recorded_settings(self):
        """What shapes the training records: the tags the model learns, the windows' context."""
        return {"label_scheme": self.label_scheme, "document_context": self.document_context}

    def training_data(self, examples):
        """The training file's documents (its words and tags), not its path."""
        return examples.documents

    def read_examples(self, split, run=None, labels=None):
        """The split's `bert_tasks.ner.sets.NerSet`."""
        return NerSet.read(conll.split_file(self.data_dir, _CONLL_SPLITS[split]))

    def settle(self, examples, run, config=None, labels=None):
        """The task with its label list settled (--entity_types, else the training file's
        types, else `labels`, those recorded with the model the run starts from; checked
        against that record), every file's tags checked against it."""
        train = examples.get("train")
        if train is None and not self.entity_types:
            try:
                train = NerSet.read(conll.split_file(self.data_dir, "train"))
            except FileNotFoundError:
                pass
        label_list = tags.resolve_label_list(
            self.entity_types, [s.tags for s in train.sentences] if train else None,
            labels and list(labels.labels), labels and labels.file)
        for data in examples.values():
            data.check_labels(label_list)
        logging.info("Labels: %s", " ".join(label_list))
        return self._settled(label_list=label_list)

    def write_run_files(self, run):
        run_labels.write_label_list(run.output_dir, self.label_list)

    def records(self, data, split, tokenizer, run):
        """The windows' records; the index is the set with its windows (a new `NerSet`), to put
        the predicted tags back on its words."""
        windowed = data.windowed(tokenizer, self.max_seq_length, self.document_context)
        return SplitRecords(ner_features.tf_examples(
            windowed.windows, windowed.sentences, self.label_list, tokenizer,
            self.max_seq_length, self.label_scheme), windowed)

    def padding_record(self):
        return ner_features.padding_example(self.max_seq_length)

    def training_steps(self, run, examples, num_records):
        """The training windows are counted (a long sentence makes several)."""
        return run.training_steps(num_records, "training windows")

    def build_model(self, config, bilstm_on_top=False, modes=None):
        return families.build_model("token", config, len(self.label_list),
                                    bilstm_on_top=bilstm_on_top, modes=modes)

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
        """Tags of `data`'s words (a windowed `NerSet`) from collected outputs; writes
        <prefix>_predictions.txt and <prefix>_conlleval.txt. Returns the conlleval ChunkCounts."""
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

    def evaluate(self, outputs, global_step, split, output_dir):
        """eval_results.txt: eval_f1 / eval_precision / eval_recall / eval_accuracy (conlleval,
        percent), the same per type (eval_f1_PER, ...), eval_loss (mean over scored words),
        global_step; eval_predictions.txt and eval_conlleval.txt in `output_dir`."""
        counts = self._score(outputs, split.index, "eval", output_dir)
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

    def baselines(self, outputs, split):
        """conlleval of tagging every word O (the majority tag) on the eval set."""
        data = split.examples
        all_o = [["O"] * len(s.words) for s in data.sentences]
        counts = conlleval.count_lines(predictions.prediction_lines(data.documents, all_o))
        scores = conlleval.metrics(counts)["overall"]
        return {"eval_f1": "every word O %.2f" % scores["f1"],
                "eval_accuracy": "every word O %.2f" % scores["accuracy"]}

    def write_predictions(self, batches, split, output_dir):
        """test_predictions.txt (CoNLL format + predicted tag) and test_conlleval.txt; returns the
        conlleval ChunkCounts (against the file's tags)."""
        return self._score(collect(batches), split.index, "test", output_dir)

    def finish(self, result, output_dir):
        """Logs the F1 scores beside the paper's BERT-Base figures on CoNLL-2003 (Table 3)."""
        if result.eval_results:
            logging.info("dev F1 %.2f (the paper's BERT-Base on CoNLL-2003: 96.4)",
                         result.eval_results["eval_f1"])
        if result.predictions:
            logging.info("test F1 %.2f (the paper's BERT-Base on CoNLL-2003: 92.4)",
                         conlleval.metrics(result.predictions)["overall"]["f1"])

    def flops_per_example(self, config):
        return encoder_training_flops(config, self.max_seq_length)
