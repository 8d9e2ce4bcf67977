"""Raw-text SavedModels of a sentence(-pair) classifier (strings in, probabilities out) and of
a sentence encoder (strings in, one vector per string out); the shared machinery of every
raw-text export (SQuAD, NER and SWAG are in `bert_runner.exports`).

The exported graph runs the whole original prediction path: `FastBertTokenizer` (tf.text,
word-piece-identical to `FullTokenizer`), the original `[CLS] A [SEP] B [SEP]` packing and
truncation to `max_seq_length` (or, for long documents, run_classifier's windows), the model, and
softmax (sigmoid for a multi-label classifier). It needs only TensorFlow and tensorflow-text to
load (`import tensorflow_text` registers the tokenizer ops).

Signatures (inputs are 1-D string tensors of UTF-8 text; N may be 0):

  serving_default(text_a [N])              single sentences
  pairs(text_a [N], text_b [N])            sentence pairs; an empty text_b (or one that tokenizes to
                                           nothing) gives the single-sentence encoding, as the
                                           original's `if tokens_b:`
Outputs of both (every output has N rows, so TF Serving's row format works):
  classification: probabilities float32 [N, L], label string [N] (the most probable label),
                  label_names string [N, L] (the label of each probabilities column)
  multi-label:    probabilities float32 [N, L] (a sigmoid per label), predicted bool [N, L]
                  (probability >= the threshold), labels string [N] (the predicted labels,
                  comma-separated), label_names string [N, L]
  regression (STS-B, one output): predictions float32 [N] (the raw score, as the original writes)
  embedding (`EmbeddingExport`): embedding float32 [N, H] (`modeling.pooling.pool` of the last
                  layer: [CLS], mean or max over the real tokens, optionally L2-normalised)

With `doc_stride` (run_classifier's --long_documents) a text longer than `max_seq_length` is cut
into run_classifier's windows (`bert_tasks.classifier.windows.window_pairs`) and the windows'
logits are aggregated per text (`--window_aggregation`) before the softmax or sigmoid.

Rows are not padded to `max_seq_length`: the batch is sorted by length and run in groups of
similar length, each padded to its own longest row. Padded keys add exactly zero to attention in
float32 (exp(-10000) underflows) and rows never mix, so the probabilities are those of the fully
padded features up to float rounding, at the cost of the real tokens only.

Every export holds `assets.extra/export.json` (`METADATA_FILE`): what it is (`format`), its
signatures and settings, for `predict.py` and other clients; TF Serving ignores it.
"""
import json
import os
import uuid

import tensorflow as tf
from absl import logging

from modeling import BertClassifier, BertModel, BertMultiLabelClassifier, tf1_checkpoint
from modeling.pooling import check_pooling, pool
from bert_runner import checkpoints, results, run_files
from vocab.fast_tokenizer import FastBertTokenizer

_TEXT = tf.TensorSpec([None], tf.string)
# Rows per model call (see ModelExport._by_length): small enough that a group's rows have
# similar lengths, large enough that its matrix products stay efficient.
ROWS_PER_CALL = 8


class _Untracked:
    """Holds objects where `tf.Module` attribute tracking does not see them."""

    def __init__(self, model, tokenizer):
        self.model = model
        self.tokenizer = tokenizer


class ModelExport(tf.Module):
    """The model of a raw-text export, run in groups of similar length over packed word-pieces
    (or windows). A subclass says what a group of rows gives (`_row_values`, float32
    [n, width]) and has the signatures (`signatures()`, tf.functions of strings).

    Args:
      name: the module's name.
      model: the Keras model, with its weights.
      tokenizer: `FastBertTokenizer` of the model's vocabulary and casing.
      max_seq_length: int, inputs are truncated and packed as by run_classifier with this length.
      width: int, the values per row.
      rows_per_call: int, rows per model call (`_by_length`).
      doc_stride: None (truncation), or int: texts longer than max_seq_length are cut into
        run_classifier's windows, `doc_stride` word-pieces apart, and each text's windows'
        values are aggregated with `window_aggregation` ("mean", "max" or "first").
    """

    format = None  # the `format` of export.json: export_model.py's --format

    def __init__(self, name, model, tokenizer, max_seq_length, width, rows_per_call=ROWS_PER_CALL,
                 doc_stride=None, window_aggregation="mean"):
        super().__init__(name=name)
        # The Keras model stays out of the SavedModel's object graph (saving it would trace
        # Keras's default float-input signature, which cannot embed ids); its weights are
        # tracked instead. They must be the tf.Variables the graph reads (`.value`), not their
        # Keras wrappers: otherwise graph-mode loaders (TF Serving, saved_model_cli) find the
        # variables uninitialised. The tokenizer holds constants only: tracking it would just
        # save its own tf.functions beside the signatures.
        self._parts = _Untracked(model=model, tokenizer=tokenizer)
        # A served call holds few rows: pad its real-row block to a small power of two.
        getattr(model, "bert", model).small_row_blocks = True
        self.model_weights = [weight.value for weight in model.weights]
        self.max_seq_length = max_seq_length
        self.width = width
        self.rows_per_call = rows_per_call
        if doc_stride is not None and doc_stride < 1:
            raise ValueError("--doc_stride must be at least 1, got %d" % doc_stride)
        if window_aggregation not in _AGGREGATIONS:
            raise ValueError("--window_aggregation must be one of %s, got %r"
                             % (", ".join(_AGGREGATIONS), window_aggregation))
        self.doc_stride = doc_stride
        self.window_aggregation = window_aggregation

    def metadata(self):
        """The JSON-able description written to export.json (subclasses add their settings)."""
        tokenizer = self._parts.tokenizer
        return {"format": self.format, "signatures": sorted(self.signatures()),
                "max_seq_length": self.max_seq_length, "do_lower_case": tokenizer.do_lower_case,
                "doc_stride": self.doc_stride,
                "window_aggregation": None if self.doc_stride is None else self.window_aggregation}

    def _text_values(self, ids_a, ids_b):
        """float32 [N, width] of the texts' word-piece ids (ids_b None for single texts)."""
        tokenizer = self._parts.tokenizer
        if self.doc_stride is None:
            return self._by_length(tokenizer.pack(ids_a, ids_b, self.max_seq_length))
        rows, piece_a, piece_b = classifier_windows(ids_a, ids_b, self.max_seq_length,
                                                    self.doc_stride)
        values = self._by_length(tokenizer.pack(piece_a, piece_b, self.max_seq_length))
        return aggregate_windows(values, rows, tf.shape(ids_a.row_splits)[0] - 1,
                                 self.window_aggregation)

    def _by_length(self, features, trim=True):
        """float32 [N, width] of the int [N, S] features, computed in groups of similar length.

        Rows are sorted by length and run `rows_per_call` at a time, each group padded only to
        its own longest row (`trim`; else to S): a batch of mixed lengths costs little more than
        its tokens.
        """
        order = tf.argsort(tf.reduce_sum(features["input_mask"], axis=1), stable=True)
        n = tf.shape(order)[0]
        values = tf.zeros([n, self.width], tf.float32)
        for start in tf.range(0, n, self.rows_per_call):
            rows = order[start:start + self.rows_per_call]
            group = {k: tf.gather(v, rows) for k, v in features.items()}
            if trim:
                group = trim_to_longest(group)
            values = tf.tensor_scatter_nd_update(values, rows[:, None], self._row_values(group))
        return values



class TextExport(ModelExport):
    """Raw text in, one row of values per text out (`serving_default` of single texts, `pairs`
    of text pairs): a subclass says what a group of rows gives (`_row_values`, float32
    [n, width]) and what the signatures return of them (`_outputs`). Arguments: `ModelExport`'s.
    """

    @tf.function(input_signature=[_TEXT])
    def serve(self, text_a):
        """string [N] -> dict of outputs (see the module docstring)."""
        return self._outputs(self._text_values(self._parts.tokenizer.tokenize(text_a), None))

    @tf.function(input_signature=[_TEXT, _TEXT])
    def serve_pairs(self, text_a, text_b):
        """string [N], string [N] -> dict of outputs (see the module docstring)."""
        tf.debugging.assert_equal(tf.shape(text_a), tf.shape(text_b),
                                  message="text_a and text_b must have the same length")
        return self._outputs(self._text_values(self._parts.tokenizer.tokenize(text_a),
                                               self._parts.tokenizer.tokenize(text_b)))

    def signatures(self):
        """`signatures=` for `tf.saved_model.save`: {signature name: tf.function}."""
        return {"serving_default": self.serve, "pairs": self.serve_pairs}

_AGGREGATIONS = ("mean", "max", "first")  # bert_tasks.classifier.windows.AGGREGATIONS


def window_spans(num_pieces, room, doc_stride, empty_has_window=True):
    """run_squad's sliding windows (`bert_tasks.squad.features.window_spans`) of a batch.

    Args:
      num_pieces: int32 [N], the word-pieces of each text.
      room: int32 [N], the most pieces a window holds (>= 1).
      doc_stride: int, pieces between the starts of consecutive windows.
      empty_has_window: a text of no pieces gets one empty window (run_classifier's) or none
        (run_squad's).
    Returns:
      (row int32 [W], start int32 [W], length int32 [W]): the text, first piece and length of
      each window; the windows of a text are consecutive, in order.
    """
    step = tf.minimum(room, doc_stride)
    count = 1 + (tf.maximum(num_pieces - room, 0) + step - 1) // step
    if not empty_has_window:
        count = tf.where(num_pieces > 0, count, 0)
    row = tf.repeat(tf.range(tf.shape(num_pieces)[0]), count)
    start = tf.ragged.range(count).flat_values * tf.gather(step, row)
    length = tf.minimum(tf.gather(num_pieces, row) - start, tf.gather(room, row))
    return row, start, length


def ragged_slices(values, rows, starts, lengths):
    """RaggedTensor [W, (lengths)]: `values[rows[w], starts[w]:starts[w] + lengths[w]]` of the
    RaggedTensor `values` [N, (P)]."""
    first = tf.gather(tf.cast(values.row_starts(), tf.int32), rows) + starts
    return tf.gather(values.flat_values, tf.ragged.range(first, first + lengths))


def classifier_windows(ids_a, ids_b, max_seq_length, doc_stride):
    """`bert_tasks.classifier.windows.window_pairs` of a batch, in the graph.

    Args:
      ids_a: int RaggedTensor [N, (pieces)]; ids_b: the same, or None (single texts).
    Returns:
      (rows int32 [W], piece_a, piece_b): the text of each window and its A and B pieces (int
      RaggedTensors [W, (pieces)], piece_b None for single texts), each fitting untruncated.
    """
    len_a = tf.cast(ids_a.row_lengths(), tf.int32)
    if ids_b is None:
        rows, start, length = window_spans(len_a, tf.fill(tf.shape(len_a), max_seq_length - 2),
                                           doc_stride)
        return rows, ragged_slices(ids_a, rows, start, length), None
    len_b = tf.cast(ids_b.row_lengths(), tf.int32)
    single = len_b == 0  # the original's `if tokens_b:`
    room = tf.where(single, max_seq_length - 2, max_seq_length - 3)
    fits = len_a + len_b <= room
    window_b = (len_b >= len_a) & ~single  # the longer text is windowed, B on ties
    long_len = tf.where(window_b, len_b, len_a)
    short_len = tf.where(window_b, len_a, len_b)
    short_len = tf.where(fits, short_len, tf.minimum(short_len, room // 2))
    rows, start, length = window_spans(
        long_len, tf.where(fits, tf.maximum(long_len, 1), room - short_len), doc_stride)
    on_b, short = tf.gather(window_b, rows), tf.gather(short_len, rows)
    zero = tf.zeros_like(start)
    piece_a = ragged_slices(ids_a, rows, tf.where(on_b, zero, start),
                            tf.where(on_b, short, length))
    piece_b = ragged_slices(ids_b, rows, tf.where(on_b, start, zero),
                            tf.where(on_b, length, short))
    return rows, piece_a, piece_b


def aggregate_windows(values, rows, n, how):
    """`bert_tasks.classifier.windows.aggregate` in the graph: float32 [N, width] of the windows'
    values [W, width], `rows` [W] giving each window's text (consecutive, every text one or more
    windows)."""
    if how == "first":
        firsts = tf.math.unsorted_segment_min(tf.range(tf.shape(rows)[0]), rows, n)
        return tf.gather(values, firsts)
    if how == "max":
        return tf.math.unsorted_segment_max(values, rows, n)
    return tf.math.unsorted_segment_mean(values, rows, n)


class ClassifierExport(TextExport):
    """The raw-text signatures of a `BertClassifier`: tokenizer, packing, model, softmax (a
    sigmoid per label for a multi-label classifier).

    Args:
      model: `BertClassifier` with its weights; `model.num_labels == 1` means regression.
      tokenizer: `FastBertTokenizer` of the model's vocabulary and casing.
      max_seq_length: int, the `--max_seq_length` the model was fine-tuned with.
      label_names: list of str, one per logit; None for regression.
      multi_label_threshold: None (one label per text), or the decision threshold in (0, 1) of a
        multi-label classifier (`BertMultiLabelClassifier`, run_classifier's
        --multi_label_threshold).
      doc_stride, window_aggregation: long documents (see `TextExport`).
    """

    format = "classifier"

    def __init__(self, model, tokenizer, max_seq_length, label_names=None,
                 multi_label_threshold=None, doc_stride=None, window_aggregation="mean"):
        if label_names is None and model.num_labels != 1:
            raise ValueError("label_names are required for a classifier with %d labels"
                             % model.num_labels)
        if label_names is not None and len(label_names) != model.num_labels:
            raise ValueError("%d label names %s for a classifier with %d outputs"
                             % (len(label_names), list(label_names), model.num_labels))
        if multi_label_threshold is not None and not 0.0 < multi_label_threshold < 1.0:
            raise ValueError("--multi_label_threshold must be in (0, 1), got %r"
                             % multi_label_threshold)
        super().__init__("bert_text_classifier", model, tokenizer, max_seq_length,
                         model.num_labels, doc_stride=doc_stride,
                         window_aggregation=window_aggregation)
        self.label_names = None if label_names is None else tf.constant(list(label_names))
        self.multi_label_threshold = multi_label_threshold
        self._label_list = None if label_names is None else list(label_names)

    def metadata(self):
        return {**super().metadata(), "labels": self._label_list,
                "multi_label_threshold": self.multi_label_threshold}

    def _row_values(self, group):
        return self._parts.model(group, training=False)["logits"]

    def _outputs(self, logits):
        if self.label_names is None:
            return {"predictions": logits[:, 0]}
        n = tf.shape(logits)[0]
        names = tf.tile(self.label_names[None, :], [n, 1])
        if self.multi_label_threshold is not None:
            probabilities = tf.sigmoid(logits)
            predicted = probabilities >= self.multi_label_threshold
            return {
                "probabilities": probabilities,
                "predicted": predicted,
                "labels": tf.strings.reduce_join(tf.ragged.boolean_mask(names, predicted),
                                                 axis=1, separator=","),
                "label_names": names,
            }
        probabilities = tf.nn.softmax(logits, axis=-1)
        return {
            "probabilities": probabilities,
            "label": tf.gather(self.label_names, tf.argmax(probabilities, axis=-1)),
            "label_names": names,
        }


class EmbeddingExport(TextExport):
    """The raw-text signatures of a sentence encoder: one vector per text (`modeling.pooling`).

    Args:
      model: `BertModel` with its weights.
      tokenizer: `FastBertTokenizer` of the model's vocabulary and casing.
      max_seq_length: int, texts are cut to this many word-pieces with [CLS] and [SEP].
      pooling: "cls", "mean" or "max" (`modeling.pooling.pool`; "cls" is refused for a
        left-to-right model, `modeling.pooling.check_pooling`).
      normalize: L2-normalise each vector.
      rows_per_call: int, rows per model call.
    """

    format = "embedding"

    def __init__(self, model, tokenizer, max_seq_length, pooling, normalize,
                 rows_per_call=ROWS_PER_CALL):
        check_pooling(pooling, model.config)
        super().__init__("bert_text_embedding", model, tokenizer, max_seq_length,
                         model.config.hidden_size, rows_per_call)
        self.pooling = pooling
        self.normalize = normalize

    def metadata(self):
        return {**super().metadata(), "pooling": self.pooling, "normalize": self.normalize}

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


def export_classifier(model, vocab_file, do_lower_case, max_seq_length, label_names, export_dir,
                      **options):
    """Writes the raw-text SavedModel of `model` to `export_dir` (which must not exist; see
    `write_saved_model`).

    Args:
      model: `BertClassifier` holding the weights to export.
      vocab_file, do_lower_case: the model's vocabulary and casing (as for `FullTokenizer`).
      max_seq_length: int, inputs are truncated and packed as by run_classifier with this length.
      label_names: list of str (the processor's `get_labels()`), or None for regression.
      export_dir: str, the SavedModel directory to create.
      options: `ClassifierExport`'s multi_label_threshold, doc_stride and window_aggregation.
    Returns:
      export_dir.
    """
    module = ClassifierExport(model, FastBertTokenizer(vocab_file, do_lower_case),
                              max_seq_length, label_names, **options)
    return write_saved_model(module, export_dir, "classifier")


def export_embedding(model, vocab_file, do_lower_case, max_seq_length, pooling, normalize,
                     export_dir):
    """Writes the raw-text sentence-embedding SavedModel of `model` (a `BertModel`) to
    `export_dir` (which must not exist; see `write_saved_model`); `pooling` and `normalize` as
    for `EmbeddingExport`. Returns export_dir."""
    module = EmbeddingExport(model, FastBertTokenizer(vocab_file, do_lower_case), max_seq_length,
                             pooling, normalize)
    return write_saved_model(module, export_dir, "sentence encoder")


METADATA_FILE = os.path.join("assets.extra", "export.json")


def write_saved_model(module, export_dir, what):
    """Saves the `TextExport` `module` with its signatures as the SavedModel `export_dir`, with
    `module.metadata()` as its `METADATA_FILE`.

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
    signatures = module.signatures()
    try:
        if parent:
            tf.io.gfile.makedirs(parent)
        tf.saved_model.save(module, tmp_dir, signatures=signatures)
        tf.io.gfile.makedirs(os.path.join(tmp_dir, os.path.dirname(METADATA_FILE)))
        with tf.io.gfile.GFile(os.path.join(tmp_dir, METADATA_FILE), "w") as f:
            f.write(json.dumps(module.metadata(), indent=2) + "\n")
        tf.io.gfile.rename(tmp_dir, export_dir)
    except (OSError, *_FILE_ERRORS) as e:
        # Said of --export_dir: the failing path is often the temporary one.
        raise ValueError("Cannot write --export_dir=%s (%s): nothing was exported; choose a "
                         "writable location" % (export_dir, results.file_error_reason(e))) from e
    finally:
        _remove_quietly(tmp_dir)
    logging.info("Exported the raw-text %s to %s (signatures: %s)", what, export_dir,
                 ", ".join(signatures))
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
    """A `BertClassifier` (a `BertMultiLabelClassifier` for `task_name` "multilabel") with every
    weight (encoder and head) from `checkpoint`.

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
    multi_label = bool(task_name) and task_name.lower() == "multilabel"
    model = (BertMultiLabelClassifier if multi_label else BertClassifier)(
        config, num_labels, bilstm_on_top=recorded_bilstm_on_top(checkpoint))
    labels = f"--task_name={task_name}" if task_name else "the task"
    return load_fine_tuned(model, checkpoint, "classifier", config_file, task_name=task_name,
                           label_source=labels)


# export_model.py's --format of each fine-tuning script's models; the head each is refused without.
SCRIPTS = {"classifier": "run_classifier.py", "squad": "run_squad.py", "ner": "run_ner.py",
           "swag": "run_swag.py"}
_HEADS = {"classifier": "classifier", "squad": "SQuAD span", "ner": "token classifier",
          "swag": "multiple-choice"}


def load_fine_tuned(model, checkpoint, export_format, config_file=None, task_name=None,
                    label_source=None):
    """`model` (a `BertTaskModel` of a fine-tuning script) with every weight from `checkpoint`.

    Args:
      model: the task model to fill, e.g. `BertSpanLabeler(config)`.
      checkpoint: the script's output_dir (its latest ckpt-N), a ckpt-N prefix, or an
        original-layout TF1 checkpoint holding the head (`model.tf1_head_variables()`).
      export_format: the --format exported ("classifier", "squad", "ner", "swag"): a checkpoint
        whose run.json names another script's run is refused, saying which --format it needs.
      config_file: the `--bert_config_file`, for the messages.
      task_name: for "classifier", the --task_name (checked against run.json).
      label_source: what gives the number of labels, for the messages ("--task_name=MRPC").
    Raises:
      ValueError naming the checkpoint (see `load_classifier`).
    """
    prefix = tf1_checkpoint.resolve_checkpoint_prefix(checkpoint, _FLAG)
    _check_fine_tuned_task(prefix, export_format, task_name)
    _check_head(prefix, model, export_format, label_source)
    checkpoints.load_checkpoint(model, prefix, strict=True, flag=_FLAG, config_file=config_file)
    return model


_FLAG = "--checkpoint"


def _check_head(prefix, model, export_format, label_source):
    """Refuses a checkpoint without the model's head (a pre-training one, or another task's), or
    with a head of another number of labels than the task's (MNLI's 3 as MRPC's 2)."""
    _, _, shapes = tf1_checkpoint.read_checkpoint(prefix, _FLAG)
    paths = {checkpoints.variable_path(k) or k: shape for k, shape in shapes.items()}
    tf1_name, weights = model.tf1_head_variables()[0]
    names = (tf1_name, weights.path)  # the head's weights [outputs, hidden], both layouts
    heads = [(name, paths[name]) for name in names if name in paths]
    if not heads:
        raise ValueError(
            f"Checkpoint {prefix} ({_FLAG}) has no {_HEADS[export_format]} head "
            f"({' or '.join(names)}): export a checkpoint of {SCRIPTS[export_format]} (its "
            "output_dir), not a pre-training one or another script's")
    for name, shape in heads:
        if len(shape) == 2 and shape[0] != weights.shape[0] and label_source:
            raise ValueError(
                f"Checkpoint {prefix} ({_FLAG}) has a classifier head of {shape[0]} labels "
                f"({name} {list(shape)}), {label_source} has {weights.shape[0]}: export it with "
                "the labels it was fine-tuned on")


# Tasks that share one fine-tuned model: MNLI's is evaluated on its mismatched set and on AX.
_SHARED_MODELS = (frozenset({"mnli", "mnli-mm", "ax"}),)


def _model_family(task):
    return next((family for family in _SHARED_MODELS if task in family), task)


def _format_of(recorded_task):
    """(export_model.py's --format, the flags to pass) of a run.json `task`, or (None, None)."""
    kind, _, task_name = recorded_task.partition("/")
    if kind not in SCRIPTS:
        return None, None
    return kind, f"--format={kind}" + (f" --task_name={task_name.upper()}" if task_name else "")


def _check_fine_tuned_task(prefix, export_format, task_name):
    """Refuses to export `prefix` as `export_format` (and `task_name`) when the run.json of the run
    that wrote it names another script (an NER model as SQuAD) or another classifier task (an
    MRPC checkpoint exported as CoLA: both have 2 labels, only the record tells)."""
    record_path, record = run_files.run_record(prefix)
    recorded = (record or {}).get("task")
    if not isinstance(recorded, str):
        return
    recorded_format, flags_to_pass = _format_of(recorded)
    if recorded_format == export_format == "classifier" and task_name:
        recorded_task = recorded[len("classifier/"):]
        if _model_family(recorded_task) != _model_family(task_name.lower()):
            raise ValueError(
                f"Checkpoint {prefix} ({_FLAG}) was fine-tuned on {recorded_task.upper()} "
                f"({record_path}), not on --task_name={task_name}: export it with "
                f"--task_name={recorded_task.upper()}")
    elif recorded_format != export_format:
        advice = (f"export it with {flags_to_pass}" if flags_to_pass else
                  f"export a checkpoint of {SCRIPTS[export_format]} (its output_dir)")
        raise ValueError(
            f"Checkpoint {prefix} ({_FLAG}) was written by a {recorded} run "
            f"({record_path}), not by {SCRIPTS[export_format]}: {advice}")


def recorded_bilstm_on_top(checkpoint):
    """Whether the run that wrote `checkpoint` was fine-tuned with `--bilstm_on_top` (its
    run.json says; false without one): the export builds the model it trained."""
    _, record = run_files.run_record(checkpoint)
    return bool((record or {}).get("bilstm_on_top", False))


def load_encoder(config, checkpoint, config_file=None):
    """A `BertModel` with the whole encoder of `checkpoint` (original layout, ours, or a Hugging
    Face directory), whatever heads it also holds; refused naming the checkpoint and
    `config_file` when the encoder is not all there (`bert_runner.checkpoints`)."""
    model = BertModel(config)
    checkpoints.initialize_from_checkpoint(model, checkpoint, flag=_FLAG, config_file=config_file)
    return model
