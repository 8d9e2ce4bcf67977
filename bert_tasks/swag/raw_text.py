"""run_swag's raw-text graph (`serving` declares its format). The raw-text SWAG SavedModel: a
context and its candidate endings in, the probability of each ending out (run_swag's
multiple-choice model).

Each (context, ending) pair is packed as run_swag packs a choice, `[CLS] context [SEP] ending
[SEP]` truncated as the original's pairs (`features`; run_swag's ending is
SWAG's `sent2 + " " + ending_i`: pass that whole text), scored by the model's choice layer, and
the scores of each context's endings go through a softmax. Any number of endings C >= 1 works (the
layer scores each alone).

Signature `serving_default(context [N], endings [N, C])`, outputs:
  probabilities  float32 [N, C]   softmax over the endings
  logits         float32 [N, C]   the choice scores
  choice         int32 [N]        the most probable ending
"""
import functools

import tensorflow as tf

from bert_runner.serving import provenance, registry
from bert_runner.serving.saved_model import write_saved_model
from bert_runner.serving.text_module import ROWS_PER_CALL, TEXT, ModelExport, signature
from bert_tasks.swag import serving
from modeling import families
from vocab.fast_tokenizer import FastBertTokenizer


class SwagExport(ModelExport):
    """The raw-text signature of a `BertMultipleChoice` (see the module docstring).

    Args:
      model: `BertMultipleChoice` with its weights.
      tokenizer: `FastBertTokenizer` of the model's vocabulary and casing.
      max_seq_length: int, run_swag's --max_seq_length.
      rows_per_call: `ModelExport`'s (1: LiteRT's).
    """

    format = "swag"

    def __init__(self, model, tokenizer, max_seq_length, rows_per_call=ROWS_PER_CALL):
        super().__init__("bert_swag", model, tokenizer, max_seq_length, 1, rows_per_call)

    def signatures(self):
        return {"serving_default": self.serve_swag}

    @signature(TEXT, tf.TensorSpec([None, None], tf.string))
    def serve_swag(self, context, endings):
        """context [N], endings [N, C] strings -> dict of outputs (see the module docstring)."""
        tf.debugging.assert_equal(tf.shape(context)[0], tf.shape(endings)[0],
                                  message="context and endings must have the same rows")
        choices = tf.shape(endings)[1]
        contexts = tf.repeat(context, choices)
        logits = tf.reshape(self._text_values(self._parts.tokenizer.tokenize(contexts),
                                              self._parts.tokenizer.tokenize(
                                                  tf.reshape(endings, [-1]))), [-1, choices])
        return {"probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits,
                "choice": tf.cast(tf.argmax(logits, axis=-1), tf.int32)}

    def _row_values(self, group):
        # Each row one context with one ending: the model's [n, 1] scores (ONNX Runtime's or
        # Keras's, `row_scores`: BertMultipleChoice's encoder and choice layer).
        converted = self._onnx_outputs(group)
        return row_scores(self._parts.model, group) if converted is None else converted["logits"]


def export_swag(model, vocab_file, do_lower_case, max_seq_length, export_dir):
    """Writes the raw-text SWAG SavedModel of `model` (a `BertMultipleChoice`) to `export_dir`
    (which must not exist; `write_saved_model`). Returns export_dir."""
    module = SwagExport(model, FastBertTokenizer(vocab_file, do_lower_case), max_seq_length)
    return write_saved_model(module, export_dir, "SWAG model")


def fine_tuned_from_config(export_config, files):
    """(the run_swag model with every weight from --checkpoint, None: no labels)."""
    return provenance.load_fine_tuned(
        families.build_model("multiple_choice", files.config,
                             **provenance.recorded_model_options(export_config.checkpoint)),
        export_config.checkpoint, serving.FORMAT_NAME, files.config_file), None


def choice_logits(model, features):
    """{"logits": float32 [N, C]} of a `BertMultipleChoice` on int32 [N, C, T] features, any
    number of endings C: the ONNX graph (`registry.Convertible.ids_outputs`)."""
    shape = tf.shape(features["input_ids"])
    flat = {name: tf.reshape(value, [-1, shape[2]]) for name, value in features.items()}
    return {"logits": tf.reshape(row_scores(model, flat), shape[:2])}


def row_scores(model, features):
    """float32 [n, 1]: a `BertMultipleChoice`'s score of each row of int32 [n, T] features (one
    context with one ending), as `choice_logits` scores each choice."""
    pooled = model.encode(features, training=False, skip_padding=True,
                          first_row_apart=True)["pooled_output"]
    return tf.reshape(tf.cast(model.scorer(pooled, training=False), tf.float32), [-1, 1])


def convertible_from_config(export_config, files):
    """The run_swag model for ONNX and LiteRT (`registry.Convertible`): one score per ending."""
    model, _ = fine_tuned_from_config(export_config, files)
    return registry.Convertible(model=model, metadata={}, text_module=functools.partial(
                                    SwagExport, rows_per_call=1),
                                ids_outputs=choice_logits, ids_shape=(None, None, None))


def served_module(make_model, tokenizer, metadata):
    """The `SwagExport` of a converted export or a Hugging Face directory
    (`ServingFormat.served_module`)."""
    return SwagExport(make_model(), tokenizer, metadata["max_seq_length"])


def export_from_config(export_config, files):
    """export_model.py --format=swag: a run_swag model."""
    model, _ = fine_tuned_from_config(export_config, files)
    export_swag(provenance.serving_precision(model, export_config.mixed_precision),
                files.vocab_file, export_config.do_lower_case, export_config.max_seq_length,
                export_config.export_dir)
