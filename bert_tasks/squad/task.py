"""run_squad as a `bert_runner.task.Task`: the SQuAD files and their windows, the original
`model_fn` (span loss, prediction outputs), prediction results with throughput logs, and the
official scores of the predictions (eval_results.json).

The training steps count questions, not features: a question whose context needs several windows
yields several features, so an "epoch" covers fewer than all the features, as in the original.

    task = SquadTask(max_seq_length, PostprocessOptions(...), train_file=..., predict_file=...)
    bert_runner.driver.run_command(task, run)
"""
import dataclasses
import os
import time
from typing import Optional

from absl import logging

from modeling import span_loss, families
from bert_runner.task import SplitRecords, Task, encoder_training_flops
from bert_tasks.input_files import check_is_file
from bert_tasks.squad import evaluate, examples as sq_examples, features as sq_features, io_utils
from bert_tasks.squad import postprocess


@dataclasses.dataclass(frozen=True)
class PostprocessOptions:
    """The original's answer-selection flags (see `bert_tasks.squad.postprocess.write_predictions`)."""

    n_best_size: int = 20
    max_answer_length: int = 30
    do_lower_case: bool = True
    version_2_with_negative: bool = False
    # None: the span model's (`null_score_diff_threshold`, ELECTRA's head: -2.75), else 0.0.
    null_score_diff_threshold: Optional[float] = None
    verbose_logging: bool = False


@dataclasses.dataclass(frozen=True)
class PredictSet:
    """The predict file read: its `SquadExample`s, the parsed file (`gold_data`, its answers)
    and whether the predictions are scored against it (`evaluate.should_score`)."""

    examples: list
    gold_data: dict
    scoring: bool


class SquadTask(Task):
    """SQuAD v1.1 / v2.0 span prediction.

    Args:
      max_seq_length, doc_stride, max_query_length: the windows (checked at once: the original
        loops forever on some settings).
      options: `PostprocessOptions` for the prediction files.
      train_file, predict_file: the SQuAD JSON files (`--do_train` / `--do_predict` need them).
      do_eval: the `--do_eval` flag: score the predictions (eval_results.json); None: when the
        predict file has answers.
    Splits: train (train.tf_record) and predict (eval.tf_record, as the original names it).
    `settle` gives the task the span model's settings for the config (`training_features`, the
    default null threshold) and the predict file's answers (`predict_set`).
    """

    name = "squad"
    splits = {"train": "train", "predict": "eval"}

    def __init__(self, max_seq_length, options=PostprocessOptions(), train_file=None,
                 predict_file=None, doc_stride=128, max_query_length=64, do_eval=None):
        sq_features.check_window_settings(max_seq_length, doc_stride, max_query_length)
        self.max_seq_length = max_seq_length
        self.options = options
        self.files = {"train": train_file, "predict": predict_file}
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length
        self.do_eval = do_eval
        # The training records' further features the model's loss reads (`settle`: the span
        # model's `training_features`).
        self.training_features = ()
        self.predict_set = None

    def read_examples(self, split, run=None, labels=None):
        """The training split's SquadExamples (shuffled as the original main() did); the predict
        split's `PredictSet`, its answers kept for scoring."""
        path = self.files[split]
        if not path:
            raise ValueError(f"If `do_{split}` is True, then `{split}_file` must be specified.")
        check_is_file(path, f"--{split}_file")
        data = io_utils.read_json(path)
        examples = sq_examples.examples_from_data(
            data, is_training=split == "train",
            version_2_with_negative=self.options.version_2_with_negative, source=path)
        if split == "train":
            sq_examples.shuffle_examples(examples)
            return examples
        return PredictSet(examples, data, evaluate.should_score(self.do_eval, data, path))

    def settle(self, examples, run, config=None, labels=None):
        """The task with the settings of `config`'s span model (its family's; read off its
        class, nothing built): the training records' further features its loss reads, and
        its null threshold where --null_score_diff_threshold left it open (else 0.0); and
        the predict split's `PredictSet`, for `finish`."""
        span_model = families.of_config(config).models["span"]
        options = self.options
        if options.null_score_diff_threshold is None:
            options = dataclasses.replace(options, null_score_diff_threshold=getattr(
                span_model, "null_score_diff_threshold", 0.0))
        return self._settled(
            training_features=tuple(getattr(span_model, "training_features", ())),
            options=options, predict_set=examples.get("predict"))

    def records(self, examples, split, tokenizer, run):
        """The windows' records of the training examples (streamed), or of a `PredictSet`'s,
        whose windows (`iter_windows`' ExampleWindows, made at once) are the index."""
        if split == "train":
            return SplitRecords(self._logged(sq_features.tf_examples(
                examples, tokenizer, self.max_seq_length, self.doc_stride, self.max_query_length,
                is_training=True), "training", len(examples)))
        examples = examples.examples
        windows = tuple(sq_features.iter_windows(
            examples, tokenizer, self.max_seq_length, self.doc_stride, self.max_query_length,
            is_training=False))
        return SplitRecords(self._logged(sq_features.window_records(
            windows, examples, tokenizer, self.max_seq_length, is_training=False),
            "predictions", len(examples)), windows)

    @staticmethod
    def _logged(records, purpose, num_examples):
        """The records as they come (streamed), then their count in the original's log lines."""
        count = 0
        for record in records:
            count += 1
            yield record
        logging.info("***** Features for %s *****", purpose)
        logging.info("  Num orig examples = %d", num_examples)
        logging.info("  Num split examples = %d", count)

    def recorded_settings(self):
        # The version decides what the run learns (no-answer questions) and what its
        # eval_results.json holds; the windows shape its records.
        return {"version_2_with_negative": self.options.version_2_with_negative,
                "max_seq_length": self.max_seq_length, "doc_stride": self.doc_stride,
                "max_query_length": self.max_query_length}

    def padding_record(self):
        """A window of zeros whose unique id no window has (theirs start at 1000000000), after
        the real ones on TPU: `raw_results` stops before it."""
        zeros = [0] * self.max_seq_length
        return sq_features.feature_to_example(sq_features.InputFeatures(
            unique_id=0, example_index=-1, doc_span_index=0, tokens=[], token_to_orig_map={},
            token_is_max_context={}, input_ids=zeros, input_mask=zeros, segment_ids=zeros),
            is_training=False)

    def training_steps(self, run, examples, num_records):
        return run.training_steps(len(examples), "questions")

    def build_model(self, config, bilstm_on_top=False, modes=None):
        return build_model(config, bilstm_on_top, modes)

    def feature_spec(self, is_training):
        return sq_features.name_to_features(self.max_seq_length, is_training,
                                            self.training_features)

    def loss(self, model, features, training):
        return span_loss_fn(model, features, training)

    def predict_step(self, model, features):
        return predict_step(model, features)

    def write_predictions(self, batches, split, output_dir):
        """predictions.json, nbest_predictions.json and (v2.0) null_odds.json; returns the
        `bert_tasks.squad.postprocess.Predictions`."""
        o = self.options
        return postprocess.write_predictions(
            split.examples.examples, split.index,
            raw_results(batches, split.num_examples),
            o.n_best_size, o.max_answer_length, o.do_lower_case,
            os.path.join(output_dir, "predictions.json"),
            os.path.join(output_dir, "nbest_predictions.json"),
            os.path.join(output_dir, "null_odds.json"),
            o.version_2_with_negative, o.null_score_diff_threshold, o.verbose_logging)

    def finish(self, result, output_dir):
        """The official scores of the predictions, in the log beside the best constant
        answer's, and in eval_results.json."""
        if self.predict_set is None or not self.predict_set.scoring:
            return
        gold_data = self.predict_set.gold_data
        version_2, source = self.options.version_2_with_negative, self.files["predict"]
        metrics = evaluate.score_predictions(gold_data, result.predictions, version_2, source)
        baselines = evaluate.constant_baselines(gold_data, version_2, source)
        logging.info("***** SQuAD scores (official evaluation) *****")
        for key, value in metrics.items():
            if key in baselines:
                logging.info("  %s = %s (%s)", key, value, baselines[key])
            else:
                logging.info("  %s = %s", key, value)
        evaluate.write_metrics(os.path.join(output_dir, "eval_results.json"), metrics)

    def flops_per_example(self, config):
        return encoder_training_flops(config, self.max_seq_length)


def build_model(config, bilstm_on_top=False, modes=None):
    """The original `create_model`: the encoder and the `cls/squad` span layer.

    Returns:
      `modeling.BertSpanLabeler` (built; returns start_logits, end_logits float32 [B, S]; its
      pooler, which the span loss does not reach, not trained, as the original's optimizer
      skipped it), with `bilstm_on_top` the paper's "+ BiLSTM" under the span layer, its
      encoder's `modes`; or the family's span model of `config`.
    """
    return families.build_model("span", config, bilstm_on_top=bilstm_on_top, modes=modes)


def span_loss_fn(model, features, training):
    """The original loss: mean over the batch of (start CE + end CE) / 2; a model with its own
    loss (`span_loss(features, outputs)`, ELECTRA's joint start/end head) gives it.

    Args:
      model: a `modeling.BertSpanLabeler`, or a family's span model.
      features: dict of int32 tensors: input_ids, input_mask, segment_ids [B, S];
        start_positions, end_positions [B] (positions in the window; 0 = [CLS]); the model's
        `training_features` (e.g. is_impossible [B]).
    Returns:
      (scalar float32 loss, {} — no further metrics).
    """
    outputs = model(features, training=training)
    if hasattr(model, "span_loss"):
        return model.span_loss(features, outputs), {}
    loss = span_loss(outputs["start_logits"], outputs["end_logits"],
                     features["start_positions"], features["end_positions"])
    return loss, {}


def predict_step(model, features):
    """The original PREDICT outputs: unique_ids int32 [B], start_logits, end_logits float32 [B, S];
    for a model that declares its `prediction_outputs` (ELECTRA's beams), those."""
    outputs = model(features, training=False)
    names = getattr(model, "prediction_outputs", ("start_logits", "end_logits"))
    return {"unique_ids": features["unique_ids"], **{name: outputs[name] for name in names}}


def raw_results(batches, num_features, log_every=1000):
    """Yields one RawResult per feature from `Trainer.predict` batches of `predict_step`.

    Logs progress every `log_every` features (the original's "Processing example: %d") and the
    throughput at the end. Logits stay float32 numpy rows (about 3 KB per feature at length 384).

    Args:
      batches: iterable of {"unique_ids": [B], "start_logits": [B, S], "end_logits": [B, S]}, or
        of the beams' outputs (`postprocess.BeamResult`'s fields), which yield BeamResults.
      num_features: int, the number of real records: the results of the padding records after
        them (`SquadTask.padding_record`, filling the last batch on TPU) are left out.
    """
    start = time.perf_counter()
    count = 0
    for batch in batches:
        result_type = postprocess.result_type(batch)
        for unique_id, *values in zip(
                batch["unique_ids"], *(batch[name] for name in result_type._fields[1:])):
            if count == num_features:
                break
            if count % log_every == 0:
                logging.info("Processing example: %d of %d", count, num_features)
            count += 1
            yield result_type(int(unique_id), *values)
    seconds = time.perf_counter() - start
    logging.info("Predicted %d features in %.1f s: %.1f examples/s", count, seconds,
                 count / max(seconds, 1e-9))
