"""Raw-text SavedModels of a sentence(-pair) classifier (strings in, probabilities out) and of
a sentence encoder (strings in, one vector per string out).

The exported graph runs the whole original prediction path: `FastBertTokenizer` (tf.text,
word-piece-identical to `FullTokenizer`), the original `[CLS] A [SEP] B [SEP]` packing and
truncation to `max_seq_length`, the `BertClassifier`, and softmax. It needs only TensorFlow and
tensorflow-text to load (`import tensorflow_text` registers the tokenizer ops).

Signatures (inputs are 1-D string tensors of UTF-8 text; N may be 0):

  serving_default(text_a [N])              single sentences
  pairs(text_a [N], text_b [N])            sentence pairs; an empty text_b (or one that tokenizes to
                                           nothing) gives the single-sentence encoding, as the
                                           original's `if tokens_b:`
Outputs of both (every output has N rows, so TF Serving's row format works):
  classification: probabilities float32 [N, L], label string [N] (the most probable label),
                  label_names string [N, L] (the label of each probabilities column)
  regression (STS-B, one output): predictions float32 [N] (the raw score, as the original writes)
  embedding (`EmbeddingExport`): embedding float32 [N, H] (`modeling.pooling.pool` of the last
                  layer: [CLS], mean or max over the real tokens, optionally L2-normalised)

Rows are not padded to `max_seq_length`: the batch is sorted by length and run in groups of
similar length, each padded to its own longest row. Padded keys add exactly zero to attention in
float32 (exp(-10000) underflows) and rows never mix, so the probabilities are those of the fully
padded features up to float rounding, at the cost of the real tokens only.
"""
import json
import os
import re
import uuid

import tensorflow as tf
from absl import logging

from modeling import BertClassifier, BertModel, tf1_checkpoint
from modeling.pooling import pool
from bert_runner import checkpoints, results
from vocab.fast_tokenizer import FastBertTokenizer

_TEXT = tf.TensorSpec([None], tf.string)
# Rows per model call (see TextExport._by_length): small enough that a group's rows have
# similar lengths, large enough that its matrix products stay efficient.
ROWS_PER_CALL = 8


class _Untracked:
    """Holds objects where `tf.Module` attribute tracking does not see them."""

    def __init__(self, model, tokenizer):
        self.model = model
        self.tokenizer = tokenizer


class TextExport(tf.Module):
    """Raw text in, one row of values per text out: tokenizer, packing, and the model run in
    groups of similar length. A subclass says what a group of rows gives (`_row_values`, float32
    [n, width]) and what the signatures return of them (`_outputs`).

    Args:
      name: the module's name.
      model: the Keras model, with its weights.
      tokenizer: `FastBertTokenizer` of the model's vocabulary and casing.
      max_seq_length: int, inputs are truncated and packed as by run_classifier with this length.
      width: int, the values per row.
      rows_per_call: int, rows per model call (`_by_length`).
    """

    def __init__(self, name, model, tokenizer, max_seq_length, width, rows_per_call=ROWS_PER_CALL):
        super().__init__(name=name)
        # The Keras model stays out of the SavedModel's object graph (saving it would trace
        # Keras's default float-input signature, which cannot embed ids); its weights are
        # tracked instead. They must be the tf.Variables the graph reads (`.value`), not their
        # Keras wrappers: otherwise graph-mode loaders (TF Serving, saved_model_cli) find the
        # variables uninitialised. The tokenizer holds constants only: tracking it would just
        # save its own tf.functions beside the signatures.
        self._parts = _Untracked(model=model, tokenizer=tokenizer)
        self.model_weights = [weight.value for weight in model.weights]
        self.max_seq_length = max_seq_length
        self.width = width
        self.rows_per_call = rows_per_call

    @tf.function(input_signature=[_TEXT])
    def serve(self, text_a):
        """string [N] -> dict of outputs (see the module docstring)."""
        return self._outputs(self._by_length(self._parts.tokenizer.pack(
            self._parts.tokenizer.tokenize(text_a), None, self.max_seq_length)))

    @tf.function(input_signature=[_TEXT, _TEXT])
    def serve_pairs(self, text_a, text_b):
        """string [N], string [N] -> dict of outputs (see the module docstring)."""
        tf.debugging.assert_equal(tf.shape(text_a), tf.shape(text_b),
                                  message="text_a and text_b must have the same length")
        return self._outputs(self._by_length(self._parts.tokenizer.pack(
            self._parts.tokenizer.tokenize(text_a), self._parts.tokenizer.tokenize(text_b),
            self.max_seq_length)))

    def signatures(self):
        """`signatures=` for `tf.saved_model.save`: {signature name: tf.function}."""
        return {"serving_default": self.serve, "pairs": self.serve_pairs}

    def _by_length(self, features):
        """float32 [N, width] of the int [N, S] features, computed in groups of similar length.

        Rows are sorted by length and run `rows_per_call` at a time, each group padded only to
        its own longest row: a batch of mixed lengths costs little more than its tokens.
        """
        order = tf.argsort(tf.reduce_sum(features["input_mask"], axis=1), stable=True)
        n = tf.shape(order)[0]
        values = tf.zeros([n, self.width], tf.float32)
        for start in tf.range(0, n, self.rows_per_call):
            rows = order[start:start + self.rows_per_call]
            group = trim_to_longest({k: tf.gather(v, rows) for k, v in features.items()})
            values = tf.tensor_scatter_nd_update(values, rows[:, None], self._row_values(group))
        return values


class ClassifierExport(TextExport):
    """The raw-text signatures of a `BertClassifier`: tokenizer, packing, model, softmax.

    Args:
      model: `BertClassifier` with its weights; `model.num_labels == 1` means regression.
      tokenizer: `FastBertTokenizer` of the model's vocabulary and casing.
      max_seq_length: int, the `--max_seq_length` the model was fine-tuned with.
      label_names: list of str, one per logit; None for regression.
    """

    def __init__(self, model, tokenizer, max_seq_length, label_names=None):
        if label_names is None and model.num_labels != 1:
            raise ValueError("label_names are required for a classifier with %d labels"
                             % model.num_labels)
        if label_names is not None and len(label_names) != model.num_labels:
            raise ValueError("%d label names %s for a classifier with %d outputs"
                             % (len(label_names), list(label_names), model.num_labels))
        super().__init__("bert_text_classifier", model, tokenizer, max_seq_length,
                         model.num_labels)
        self.label_names = None if label_names is None else tf.constant(list(label_names))

    def _row_values(self, group):
        return self._parts.model(group, training=False)["logits"]

    def _outputs(self, logits):
        if self.label_names is None:
            return {"predictions": logits[:, 0]}
        probabilities = tf.nn.softmax(logits, axis=-1)
        n = tf.shape(logits)[0]
        return {
            "probabilities": probabilities,
            "label": tf.gather(self.label_names, tf.argmax(probabilities, axis=-1)),
            "label_names": tf.tile(self.label_names[None, :], [n, 1]),
        }


class EmbeddingExport(TextExport):
    """The raw-text signatures of a sentence encoder: one vector per text (`modeling.pooling`).

    Args:
      model: `BertModel` with its weights.
      tokenizer: `FastBertTokenizer` of the model's vocabulary and casing.
      max_seq_length: int, texts are cut to this many word-pieces with [CLS] and [SEP].
      pooling: "cls", "mean" or "max" (`modeling.pooling.pool`).
      normalize: L2-normalise each vector.
      rows_per_call: int, rows per model call.
    """

    def __init__(self, model, tokenizer, max_seq_length, pooling, normalize,
                 rows_per_call=ROWS_PER_CALL):
        super().__init__("bert_text_embedding", model, tokenizer, max_seq_length,
                         model.config.hidden_size, rows_per_call)
        self.pooling = pooling
        self.normalize = normalize

    def _row_values(self, group):
        # Only the real tokens are pooled, so the encoder skips the padding's rows.
        outputs = self._parts.model({"input_ids": group["input_ids"],
                                     "input_mask": group["input_mask"],
                                     "token_type_ids": group["segment_ids"]},
                                    training=False, skip_padding=True)
        return pool(outputs["sequence_output"], group["input_mask"], self.pooling, self.normalize)

    def _outputs(self, vectors):
        return {"embedding": vectors}


def trim_to_longest(features):
    """Cuts the int [N, S] feature tensors to [N, T], T = the longest row's length (at least 1)."""
    longest = tf.maximum(tf.reduce_max(tf.reduce_sum(features["input_mask"], axis=1)), 1)
    return {name: value[:, :longest] for name, value in features.items()}


def export_classifier(model, vocab_file, do_lower_case, max_seq_length, label_names, export_dir):
    """Writes the raw-text SavedModel of `model` to `export_dir` (which must not exist; see
    `write_saved_model`).

    Args:
      model: `BertClassifier` holding the weights to export.
      vocab_file, do_lower_case: the model's vocabulary and casing (as for `FullTokenizer`).
      max_seq_length: int, inputs are truncated and packed as by run_classifier with this length.
      label_names: list of str (the processor's `get_labels()`), or None for regression.
      export_dir: str, the SavedModel directory to create.
    Returns:
      export_dir.
    """
    module = ClassifierExport(model, FastBertTokenizer(vocab_file, do_lower_case),
                              max_seq_length, label_names)
    return write_saved_model(module, export_dir, "classifier")


def export_embedding(model, vocab_file, do_lower_case, max_seq_length, pooling, normalize,
                     export_dir):
    """Writes the raw-text sentence-embedding SavedModel of `model` (a `BertModel`) to
    `export_dir` (which must not exist; see `write_saved_model`); `pooling` and `normalize` as
    for `EmbeddingExport`. Returns export_dir."""
    module = EmbeddingExport(model, FastBertTokenizer(vocab_file, do_lower_case), max_seq_length,
                             pooling, normalize)
    return write_saved_model(module, export_dir, "sentence encoder")


def write_saved_model(module, export_dir, what):
    """Saves the `TextExport` `module` with its signatures as the SavedModel `export_dir`.

    The SavedModel is written to a temporary directory beside `export_dir` and renamed, so a
    serving system watching the parent never sees a half-written model. `what` names the model
    in the log. Raises FileExistsError when `export_dir` exists, ValueError when it cannot be
    written (nothing is left).
    """
    export_dir = os.fspath(export_dir).rstrip("/")
    if tf.io.gfile.exists(export_dir):
        raise FileExistsError("%s already exists: choose a new --export_dir (e.g. the next "
                              "version number under the model's serving directory)" % export_dir)
    parent = os.path.dirname(export_dir)
    tmp_dir = "%s.tmp-%s" % (export_dir, uuid.uuid4().hex)
    try:
        if parent:
            tf.io.gfile.makedirs(parent)
        tf.saved_model.save(module, tmp_dir, signatures=module.signatures())
        tf.io.gfile.rename(tmp_dir, export_dir)
    except (OSError, *_FILE_ERRORS) as e:
        # Said of --export_dir: the failing path is often the temporary one.
        raise ValueError("Cannot write --export_dir=%s (%s): nothing was exported; choose a "
                         "writable location" % (export_dir, results.file_error_reason(e))) from e
    finally:
        _remove_quietly(tmp_dir)
    logging.info("Exported the raw-text %s to %s (signatures: serving_default, pairs)", what,
                 export_dir)
    return export_dir


# TensorFlow's errors about a path (gfile and SavedModel writing raise these, not OSError).
_FILE_ERRORS = (tf.errors.NotFoundError, tf.errors.PermissionDeniedError,
                tf.errors.FailedPreconditionError, tf.errors.AlreadyExistsError,
                tf.errors.UnknownError)


def _remove_quietly(directory):
    """Removes the half-written `directory`, if any; a failure to is logged, not raised (the
    error that stopped the export is the one to report)."""
    try:
        if tf.io.gfile.exists(directory):
            tf.io.gfile.rmtree(directory)
    except (OSError, *_FILE_ERRORS) as e:
        logging.warning("Could not remove the incomplete export %s: %s", directory, e)


def load_classifier(config, num_labels, checkpoint, task_name=None, config_file=None):
    """A `BertClassifier` with every weight (encoder and head) from `checkpoint`.

    Args:
      config: `BertConfig`.
      num_labels: int, the task's number of outputs (1 for regression).
      checkpoint: an original-layout classifier checkpoint (`model.ckpt-N` written by the
        original run_classifier, holding `output_weights`/`output_bias`), or this project's own
        (`ckpt-N`, or an output_dir holding one, as `bert_runner.trainer.Trainer` writes it).
      task_name: the `--task_name` to export as, for the checks below and their messages.
      config_file: the `--bert_config_file`, for the messages.
    Raises:
      ValueError naming the checkpoint: the run that wrote it (its output_dir's run.json) was
      fine-tuned on another task than `task_name`; it has no classifier head (a pre-training
      checkpoint) or one of another number of labels than the task's; a variable is missing or
      mis-shaped (another config); its files are missing, truncated or corrupt.
    """
    prefix = tf1_checkpoint.resolve_checkpoint_prefix(checkpoint, _FLAG)
    if task_name:
        _check_fine_tuned_task(prefix, task_name)
    _check_head(prefix, num_labels, task_name)
    model = BertClassifier(config, num_labels)
    checkpoints.load_checkpoint(model, prefix, strict=True, flag=_FLAG, config_file=config_file)
    return model


_FLAG = "--checkpoint"
# The classifier head's weights [num_labels, hidden]: original name, our variable path.
_HEAD_WEIGHTS = ("output_weights", "classifier/output_weights")


def _check_head(prefix, num_labels, task_name):
    """Refuses a checkpoint without a classifier head (a pre-training one), or with a head of
    another number of labels than the task's (MNLI's 3 as MRPC's 2)."""
    _, _, shapes = tf1_checkpoint.read_checkpoint(prefix, _FLAG)
    paths = {checkpoints.variable_path(k) or k: shape for k, shape in shapes.items()}
    heads = [(name, paths[name]) for name in _HEAD_WEIGHTS if name in paths]
    if not heads:
        raise ValueError(
            f"Checkpoint {prefix} ({_FLAG}) has no classifier head ({' or '.join(_HEAD_WEIGHTS)}): "
            "export a checkpoint of run_classifier.py (its output_dir), not a pre-training one")
    for name, shape in heads:
        if len(shape) == 2 and shape[0] != num_labels:
            task = f"--task_name={task_name}" if task_name else "the task"
            raise ValueError(
                f"Checkpoint {prefix} ({_FLAG}) has a classifier head of {shape[0]} labels "
                f"({name} {list(shape)}), {task} has {num_labels}: export it with the "
                "--task_name it was fine-tuned on")


# Tasks that share one fine-tuned model: MNLI's is evaluated on its mismatched set and on AX.
_SHARED_MODELS = (frozenset({"mnli", "mnli-mm", "ax"}),)


def _model_family(task):
    return next((family for family in _SHARED_MODELS if task in family), task)


def _check_fine_tuned_task(prefix, task_name):
    """Refuses `task_name` when the run.json of the run that wrote `prefix` names another task
    (an MRPC checkpoint exported as CoLA: both have 2 labels, only the record tells)."""
    from bert_runner.driver import RUN_RECORD

    directory = os.path.dirname(prefix) or "."
    candidates = [directory]
    if re.fullmatch(r"seed_\d+", os.path.basename(os.path.abspath(directory))):
        candidates.append(os.path.dirname(os.path.abspath(directory)))  # --seeds: output_dir/seed_N
    for candidate in candidates:
        record_path = os.path.join(candidate, RUN_RECORD)
        if not tf.io.gfile.exists(record_path):
            continue
        try:
            with tf.io.gfile.GFile(record_path) as f:
                recorded = json.load(f).get("task")
        except (ValueError, AttributeError, tf.errors.OpError):
            logging.warning("%s is unreadable: the task %s was fine-tuned on is not checked",
                            record_path, prefix)
            return
        if isinstance(recorded, str) and recorded.startswith("classifier/"):
            recorded_task = recorded[len("classifier/"):]
            if _model_family(recorded_task) != _model_family(task_name.lower()):
                raise ValueError(
                    f"Checkpoint {prefix} ({_FLAG}) was fine-tuned on {recorded_task.upper()} "
                    f"({record_path}), not on --task_name={task_name}: export it with "
                    f"--task_name={recorded_task.upper()}")
        elif isinstance(recorded, str):
            raise ValueError(
                f"Checkpoint {prefix} ({_FLAG}) was written by a {recorded} run "
                f"({record_path}), not by run_classifier: export_model.py exports classifiers")
        return


def load_encoder(config, checkpoint, config_file=None):
    """A `BertModel` with the whole encoder of `checkpoint` (original layout, ours, or a Hugging
    Face directory), whatever heads it also holds; refused naming the checkpoint and
    `config_file` when the encoder is not all there (`bert_runner.checkpoints`)."""
    model = BertModel(config)
    checkpoints.initialize_from_checkpoint(model, checkpoint, flag=_FLAG, config_file=config_file)
    return model
