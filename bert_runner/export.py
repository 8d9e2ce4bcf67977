"""Raw-text SavedModel of a sentence(-pair) classifier: strings in, probabilities out.

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

Rows are not padded to `max_seq_length`: the batch is sorted by length and run in groups of
similar length, each padded to its own longest row. Padded keys add exactly zero to attention in
float32 (exp(-10000) underflows) and rows never mix, so the probabilities are those of the fully
padded features up to float rounding, at the cost of the real tokens only.
"""
import os
import uuid

import tensorflow as tf
from absl import logging

from modeling import BertClassifier, tf1_checkpoint
from bert_runner import checkpoints
from vocab.fast_tokenizer import FastBertTokenizer

_TEXT = tf.TensorSpec([None], tf.string)
# Rows per model call (see ClassifierExport._logits): small enough that a group's rows have
# similar lengths, large enough that its matrix products stay efficient.
ROWS_PER_CALL = 8


class _Untracked:
    """Holds objects where `tf.Module` attribute tracking does not see them."""

    def __init__(self, model, tokenizer):
        self.model = model
        self.tokenizer = tokenizer


class ClassifierExport(tf.Module):
    """The raw-text signatures of a `BertClassifier`: tokenizer, packing, model, softmax.

    Args:
      model: `BertClassifier` with its weights; `model.num_labels == 1` means regression.
      tokenizer: `FastBertTokenizer` of the model's vocabulary and casing.
      max_seq_length: int, the `--max_seq_length` the model was fine-tuned with.
      label_names: list of str, one per logit; None for regression.
    """

    def __init__(self, model, tokenizer, max_seq_length, label_names=None):
        super().__init__(name="bert_text_classifier")
        if label_names is None and model.num_labels != 1:
            raise ValueError("label_names are required for a classifier with %d labels"
                             % model.num_labels)
        if label_names is not None and len(label_names) != model.num_labels:
            raise ValueError("%d label names %s for a classifier with %d outputs"
                             % (len(label_names), list(label_names), model.num_labels))
        # The Keras model stays out of the SavedModel's object graph (saving it would trace
        # Keras's default float-input signature, which cannot embed ids); its weights are
        # tracked instead. They must be the tf.Variables the graph reads (`.value`), not their
        # Keras wrappers: otherwise graph-mode loaders (TF Serving, saved_model_cli) find the
        # variables uninitialised. The tokenizer holds constants only: tracking it would just
        # save its own tf.functions beside the signatures.
        self._parts = _Untracked(model=model, tokenizer=tokenizer)
        self.model_weights = [weight.value for weight in model.weights]
        self.max_seq_length = max_seq_length
        self.label_names = None if label_names is None else tf.constant(list(label_names))

    @tf.function(input_signature=[_TEXT])
    def serve(self, text_a):
        """string [N] -> dict of outputs (see the module docstring)."""
        return self._outputs(self._parts.tokenizer.pack(
            self._parts.tokenizer.tokenize(text_a), None, self.max_seq_length))

    @tf.function(input_signature=[_TEXT, _TEXT])
    def serve_pairs(self, text_a, text_b):
        """string [N], string [N] -> dict of outputs (see the module docstring)."""
        tf.debugging.assert_equal(tf.shape(text_a), tf.shape(text_b),
                                  message="text_a and text_b must have the same length")
        return self._outputs(self._parts.tokenizer.pack(
            self._parts.tokenizer.tokenize(text_a), self._parts.tokenizer.tokenize(text_b),
            self.max_seq_length))

    def signatures(self):
        """`signatures=` for `tf.saved_model.save`: {signature name: tf.function}."""
        return {"serving_default": self.serve, "pairs": self.serve_pairs}

    def _outputs(self, features):
        logits = self._logits(features)
        if self.label_names is None:
            return {"predictions": logits[:, 0]}
        probabilities = tf.nn.softmax(logits, axis=-1)
        n = tf.shape(logits)[0]
        return {
            "probabilities": probabilities,
            "label": tf.gather(self.label_names, tf.argmax(probabilities, axis=-1)),
            "label_names": tf.tile(self.label_names[None, :], [n, 1]),
        }

    def _logits(self, features):
        """float32 [N, num_labels] of the int [N, S] features, computed in groups of similar length.

        Rows are sorted by length and run `ROWS_PER_CALL` at a time, each group padded only to
        its own longest row: a batch of mixed lengths costs little more than its tokens.
        """
        model = self._parts.model
        order = tf.argsort(tf.reduce_sum(features["input_mask"], axis=1), stable=True)
        n = tf.shape(order)[0]
        logits = tf.zeros([n, model.num_labels], tf.float32)
        for start in tf.range(0, n, ROWS_PER_CALL):
            rows = order[start:start + ROWS_PER_CALL]
            group = trim_to_longest({k: tf.gather(v, rows) for k, v in features.items()})
            logits = tf.tensor_scatter_nd_update(
                logits, rows[:, None], model(group, training=False)["logits"])
        return logits


def trim_to_longest(features):
    """Cuts the int [N, S] feature tensors to [N, T], T = the longest row's length (at least 1)."""
    longest = tf.maximum(tf.reduce_max(tf.reduce_sum(features["input_mask"], axis=1)), 1)
    return {name: value[:, :longest] for name, value in features.items()}


def export_classifier(model, vocab_file, do_lower_case, max_seq_length, label_names, export_dir):
    """Writes the raw-text SavedModel of `model` to `export_dir` (which must not exist).

    The SavedModel is written to a temporary directory beside `export_dir` and renamed, so a
    serving system watching the parent never sees a half-written model.

    Args:
      model: `BertClassifier` holding the weights to export.
      vocab_file, do_lower_case: the model's vocabulary and casing (as for `FullTokenizer`).
      max_seq_length: int, inputs are truncated and packed as by run_classifier with this length.
      label_names: list of str (the processor's `get_labels()`), or None for regression.
      export_dir: str, the SavedModel directory to create.
    Returns:
      export_dir.
    """
    export_dir = os.fspath(export_dir).rstrip("/")
    if tf.io.gfile.exists(export_dir):
        raise FileExistsError("%s already exists: choose a new --export_dir (e.g. the next "
                              "version number under the model's serving directory)" % export_dir)
    module = ClassifierExport(model, FastBertTokenizer(vocab_file, do_lower_case),
                              max_seq_length, label_names)
    parent = os.path.dirname(export_dir)
    if parent:
        tf.io.gfile.makedirs(parent)
    tmp_dir = "%s.tmp-%s" % (export_dir, uuid.uuid4().hex)
    try:
        tf.saved_model.save(module, tmp_dir, signatures=module.signatures())
        tf.io.gfile.rename(tmp_dir, export_dir)
    finally:
        if tf.io.gfile.exists(tmp_dir):
            tf.io.gfile.rmtree(tmp_dir)
    logging.info("Exported the raw-text classifier to %s (signatures: serving_default, pairs)",
                 export_dir)
    return export_dir


def load_classifier(config, num_labels, checkpoint):
    """A `BertClassifier` with every weight (encoder and head) from `checkpoint`.

    Args:
      config: `BertConfig`.
      num_labels: int, the task's number of outputs (1 for regression).
      checkpoint: an original-layout classifier checkpoint (`model.ckpt-N` written by the
        original run_classifier, holding `output_weights`/`output_bias`), or this project's own
        (`ckpt-N`, or an output_dir holding one, as `bert_runner.trainer.Trainer` writes it).
    Raises:
      ValueError naming the checkpoint and every missing or mis-shaped variable, e.g. for a
      pre-training checkpoint, which has no classifier head.
    """
    model = BertClassifier(config, num_labels)
    if tf1_checkpoint.is_tf1_checkpoint(checkpoint):
        tf1_checkpoint.load_tf1_checkpoint(model, checkpoint, strict=True)
    else:
        checkpoints.load_project_checkpoint(model, checkpoint, strict=True)
    return model


