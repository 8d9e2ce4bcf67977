"""Pre-training as a `bert_runner.task.Task`: run_pretraining's `model_fn` (masked LM + next sentence
losses) and `metric_fn` (eval_results.txt), or masked LM alone (the paper's "No NSP" ablation).

Without next sentence prediction the model is the same `BertPretrainer` (so checkpoints load
everywhere the usual ones do), but the loss leaves out its next-sentence head: that head and the
encoder's pooler, which only it reads, get no gradient. The trainer skips variables without a
gradient, as the original optimizer does (no update, no weight decay), so both keep their
initial values (or those of `--init_checkpoint`): fine-tuning trains the pooler from there.
"""
import dataclasses

import numpy as np
from absl import logging
from keras import ops

from modeling import classification_loss, masked_lm_loss, families
from modeling.bert.config import OBJECTIVE_KEY
from bert_tasks.pretraining.data.features import name_to_features
from bert_tasks.pretraining.data.packing import packed_name_to_features
from bert_tasks.pretraining.data.reading import expand_input_files
from bert_tasks.pretraining.data.validation import check_records
from bert_runner.packing import filled_slots, slot_mean
from bert_runner.task import Task, encoder_training_flops


def _heads(model, features, training, next_sentence=True):
    """Both losses (`(loss, per_example, log_probs)` each; the next-sentence one None without
    next sentence prediction) and the masked-LM weights `[B·P]`.

    Packed rows (`data.packing`) have a next-sentence label per sequence slot: the loss is the
    mean over the filled slots, per example `[B·K]`, as the unpacked records' mean over rows."""
    outputs = model(features, training=training)
    mlm = masked_lm_loss(
        outputs["masked_lm_logits"], features["masked_lm_ids"], features["masked_lm_weights"])
    nsp = None
    if next_sentence and "sequence_starts" in features:
        logits = ops.reshape(outputs["next_sentence_logits"], (-1, 2))
        _, per_slot, log_probs = classification_loss(logits, features["next_sentence_labels"])
        nsp = (slot_mean(per_slot, features["sequence_starts"]), per_slot, log_probs)
    elif next_sentence:
        nsp = classification_loss(outputs["next_sentence_logits"], features["next_sentence_labels"])
    return mlm, nsp, ops.reshape(features["masked_lm_weights"], (-1,))


def _correct(log_probs, labels):
    """1.0 where the argmax of `log_probs [N, C]` equals `labels` (any shape with N entries)."""
    predicted = ops.cast(ops.argmax(log_probs, -1), "int32")
    return ops.cast(ops.equal(predicted, ops.cast(ops.reshape(labels, (-1,)), "int32")), "float32")


def pretraining_loss(model, features, training, next_sentence=True):
    """total_loss = masked_lm_loss (+ next_sentence_loss); also reports the MLM accuracy."""
    (mlm_loss, _, mlm_log_probs), nsp, weights = _heads(model, features, training, next_sentence)
    correct = _correct(mlm_log_probs, features["masked_lm_ids"])
    accuracy = ops.sum(correct * weights) / ops.maximum(ops.sum(weights), 1.0)
    metrics = {"masked_lm_loss": mlm_loss, "masked_lm_accuracy": accuracy}
    if nsp is None:
        return mlm_loss, metrics
    return mlm_loss + nsp[0], {**metrics, "next_sentence_loss": nsp[0]}


class PretrainingTask(Task):
    """Masked LM + next sentence prediction on create_pretraining_data's records.

    Args:
      max_seq_length, max_predictions_per_seq: the records' shapes (as the flags).
      next_sentence: False for masked LM alone: no next_sentence_labels read, no next-sentence
        loss or metrics; None: as the records of `input_file` say.
      input_file: the records (a glob or comma-separated), for `bert_runner.driver.run_command`.
      num_train_steps, num_warmup_steps: the schedule (run_pretraining's flags).
      max_eval_steps: batches evaluated, the records read again as often as needed.
      dynamic_input: `data.dynamic_masking.DynamicInput` for --input_format=text|unmasked_records
        (masks made in tf.data); None: the records carry their masks.
    Splits: train and eval, both reading `input_file` (the original's). `settle` checks its
    records (or reads its text) and settles what they leave open: `next_sentence`,
    `sequences_per_row`.
    """

    name = "pretraining"
    splits = {"train": "train", "eval": "eval"}
    # The `modeling.bert.config.PRETRAINING_OBJECTIVES` entry this task trains (`ltr_task`: "ltr").
    objective = "mlm"
    # Whether the records carry masked_lm_* features (`check_records`; `ltr_task`: False).
    masked_lm = True
    # Pairs a row of the records holds: more than 1 for packed records (`data.packing`).
    sequences_per_row = 1

    def __init__(self, max_seq_length, max_predictions_per_seq, next_sentence=True,
                 input_file=None, num_train_steps=0, num_warmup_steps=0, max_eval_steps=None,
                 dynamic_input=None):
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq
        self.next_sentence = next_sentence
        self.input_file = input_file
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps
        self.eval_batches = max_eval_steps
        self.dynamic_input = dynamic_input

    def recorded_settings(self):
        """The records' shapes, the objective's parts and the schedule (which resuming with
        other steps would change); with dynamic masking its options."""
        masking = {} if self.dynamic_input is None else {
            "masking": {k: v for k, v in dataclasses.asdict(self.dynamic_input.options).items()
                        if k != "vocab_file"}}
        return {"max_predictions_per_seq": self.max_predictions_per_seq,
                "next_sentence_prediction": self.next_sentence, "objective": self.objective,
                "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps, **masking}

    def existing_records(self, split):
        """The files of `input_file` (both splits read them)."""
        return expand_input_files(self.input_file)

    def settle(self, examples, run, config=None, labels=None):
        """The task with what its input leaves open settled: with `dynamic_input` reading text,
        next sentence prediction as the text decides; else what `input_file`'s first records,
        checked against the flags and `config`, say (`records_settings`)."""
        files = expand_input_files(self.input_file)
        if self.dynamic_input is not None and self.dynamic_input.reads_text:
            return self._settled(
                next_sentence=self.dynamic_input.read_text(files, self.next_sentence))
        logging.info("*** Input Files *** %d files: %s", len(files), ", ".join(files[:10]))
        return self._settled(**self.records_settings(check_records(
            files, self.max_seq_length, self.max_predictions_per_seq, config.vocab_size,
            config.type_vocab_size, next_sentence=self.next_sentence,
            masked_lm=self.masked_lm, unmasked=self.dynamic_input is not None)))

    def records_settings(self, records):
        """`{attribute: value}` that the checked records (`RecordsInfo`) settle, the objective
        logged: next sentence prediction when the flag did not say, the sequences a row."""
        if records.next_sentence and self.next_sentence is False:
            logging.warning(
                "--next_sentence_prediction=false on records with next_sentence_labels: the "
                "labels are ignored, but half the pairs still have a random B. The paper's "
                "'No NSP' data: create_pretraining_data.py --next_sentence_prediction=false")
        next_sentence = records.next_sentence and self.next_sentence is not False
        logging.info("Next sentence prediction: %s",
                     "on" if next_sentence else "off (masked LM only)")
        if records.sequences_per_row > 1:
            logging.info("Packed records: up to %d sequences a row", records.sequences_per_row)
        return {"next_sentence": next_sentence, "sequences_per_row": records.sequences_per_row}

    def training_steps(self, run, examples, num_records):
        return self.num_train_steps, self.num_warmup_steps

    def examples_per_row(self, run):
        """None for packed records (read as a stream: rows not counted); with `dynamic_input`,
        the pairs a row of its pipeline holds for `run`'s seed (`--input_format=text
        --max_sequences_per_row` packs them there)."""
        if self.sequences_per_row > 1:
            return None
        if self.dynamic_input is not None:
            return self.dynamic_input.pairs_per_row(run.random_seed, self.next_sentence)
        return 1.0

    def model_config(self, config):
        """`config` with this task's objective, which output_dir/bert_config.json records for
        every script that loads the checkpoints. A config that records another objective (a
        pre-training run's own bert_config.json) is refused: its checkpoints would be continued
        as another model. A config without the key (the original's) starts either."""
        if config.pretraining_objective == "electra":
            raise ValueError(
                f"--bert_config_file describes an ELECTRA model (embedding_size "
                f"{config.embedding_size}, a generator {config.generator_hidden_size:g} of its "
                f"width): pass --pretraining_objective=electra to pre-train it")
        recorded = config.to_dict().get(OBJECTIVE_KEY)
        if recorded is not None and recorded != self.objective:
            raise ValueError(
                f"--bert_config_file records \"{OBJECTIVE_KEY}\": \"{recorded}\" but "
                f"--pretraining_objective={self.objective}: pass --pretraining_objective="
                f"{recorded} to go on pre-training that model, or a config without the key")
        return config.with_objective(self.objective)

    def build_model(self, config, bilstm_on_top=False, modes=None):
        """The pre-trainer, which has no BiLSTM variant (run_pretraining offers no
        --bilstm_on_top: `bilstm_on_top` is always False)."""
        return families.build_model("pretrainer", config, modes=modes)

    def input_dataset(self, files, batch_size, is_training, **kwargs):
        """The records, or with `dynamic_input` (`--input_format=text|unmasked_records`) pairs
        masked in tf.data anew for every batch (`data.dynamic_masking`)."""
        if self.dynamic_input is None:
            return super().input_dataset(files, batch_size, is_training, **kwargs)
        return self.dynamic_input.dataset(files, batch_size, self.next_sentence,
                                          is_training=is_training, **kwargs)

    def feature_spec(self, is_training):
        spec = name_to_features(self.max_seq_length, self.max_predictions_per_seq,
                                self.next_sentence)
        if self.sequences_per_row > 1:
            spec.update(packed_name_to_features(self.max_seq_length, self.sequences_per_row,
                                                self.next_sentence))
        return spec

    def loss(self, model, features, training):
        return pretraining_loss(model, features, training, self.next_sentence)

    def predict_step(self, model, features):
        """Per example `[B]`: the masked-LM loss and correct count summed over its weighted
        positions and their weight, the next-sentence loss and correctness (with next sentence
        prediction), so `evaluate` can form the original's weighted metrics and per-batch total
        loss."""
        (_, mlm_per_position, mlm_log_probs), nsp, weights = _heads(
            model, features, False, self.next_sentence)
        batch = ops.shape(features["masked_lm_ids"])[0]

        def per_example(values):
            return ops.sum(ops.reshape(values * weights, (batch, -1)), axis=1)

        outputs = {
            "mlm_loss": per_example(mlm_per_position),
            "mlm_correct": per_example(_correct(mlm_log_probs, features["masked_lm_ids"])),
            "mlm_weight": ops.sum(features["masked_lm_weights"], axis=1),
            "masked_lm_ids": features["masked_lm_ids"],
            "masked_lm_weights": features["masked_lm_weights"],
        }
        if nsp is not None:
            _, nsp_per_example, nsp_log_probs = nsp
            labels = features["next_sentence_labels"]
            slots = ops.shape(labels)[1]
            outputs.update({
                "nsp_loss": ops.reshape(nsp_per_example, (batch, slots)),
                "nsp_correct": ops.reshape(_correct(nsp_log_probs, labels), (batch, slots)),
                "next_sentence_labels": labels,
                "nsp_weight": (filled_slots(features["sequence_starts"])
                               if "sequence_starts" in features else ops.ones((batch, 1))),
            })
        return outputs

    def evaluate(self, outputs, global_step, split, output_dir):
        """The original's eval_results.txt values (without the next_sentence_* ones when the
        task has no next sentence prediction).

        `masked_lm_accuracy`/`masked_lm_loss` are weighted by masked_lm_weights (tf.metrics.accuracy /
        mean with weights); `loss` is the Estimator's mean over batches of the batch total loss
        (masked-LM loss with the original's +1e-5 in its denominator, plus next-sentence loss).
        """
        batch = outputs["batch_index"]
        mlm_weight = np.sum(outputs["mlm_weight"], dtype=np.float64)
        batch_loss = (np.bincount(batch, weights=outputs["mlm_loss"])
                      / (np.bincount(batch, weights=outputs["mlm_weight"]) + 1e-5))
        if self.next_sentence:  # per sequence: [N, K] slots, the filled ones weighted 1
            nsp_weight = outputs["nsp_weight"].astype(np.float64)
            nsp_count = np.bincount(batch, weights=nsp_weight.sum(axis=1))
            batch_loss = batch_loss + np.bincount(
                batch, weights=(outputs["nsp_loss"] * nsp_weight).sum(axis=1)) / nsp_count
        values = {
            "loss": np.mean(batch_loss),
            "masked_lm_accuracy": np.sum(outputs["mlm_correct"]) / max(mlm_weight, 1e-12),
            "masked_lm_loss": np.sum(outputs["mlm_loss"], dtype=np.float64) / max(mlm_weight, 1e-12),
        }
        if self.next_sentence:
            sequences = nsp_weight.sum()
            values["next_sentence_accuracy"] = np.sum(outputs["nsp_correct"] * nsp_weight) / sequences
            values["next_sentence_loss"] = np.sum(outputs["nsp_loss"] * nsp_weight) / sequences
        # numpy scalars, so eval_results.txt shows the original's float32 / int64 text.
        return {"global_step": np.int64(global_step),
                **{k: np.float32(v) for k, v in values.items()}}

    def baselines(self, outputs, split):
        """Majority next-sentence label, and always predicting the most frequent masked token."""
        weights = outputs["masked_lm_weights"].reshape(-1) > 0
        targets = outputs["masked_lm_ids"].reshape(-1)[weights]
        lines = {}
        if len(targets):
            counts = np.bincount(targets)
            lines["masked_lm_accuracy"] = "most frequent masked token (id %d) %.4f" % (
                int(np.argmax(counts)), counts.max() / len(targets))
        if not self.next_sentence:
            return lines
        labels = outputs["next_sentence_labels"].reshape(-1)[outputs["nsp_weight"].reshape(-1) > 0]
        majority = np.bincount(labels, minlength=2)
        lines["next_sentence_accuracy"] = "majority label %d %.4f" % (
            int(np.argmax(majority)), majority.max() / max(len(labels), 1))
        return lines

    def flops_per_example(self, config):
        return encoder_training_flops(config, self.max_seq_length, self.max_predictions_per_seq)
