"""The raw-text module every SavedModel, LiteRT and ONNX export is made of: strings in, the
model's values per text out, computed in groups of similar length.

`ModelExport` holds the model (its weights tracked, the Keras object not), the tokenizer and the
grouping; `TextExport` adds the two signatures of single texts and text pairs. A format's module
(a task's, in its own `serving` module; `bert_runner.serving.embedding`) says what a group of rows
gives (`_row_values`) and what its signatures return (`_outputs` or its own tf.functions).

Rows are not padded to `max_seq_length`: the batch is sorted by length and run in groups of
similar length, each padded to its own longest row. Padded keys add exactly zero to attention in
float32 (exp(-10000) underflows) and rows never mix, so the values are those of the fully padded
features up to float rounding, at the cost of the real tokens only.
"""
import keras
import tensorflow as tf

from modeling.inference import copy_with

TEXT = tf.TensorSpec([None], tf.string)
# Rows per model call (see ModelExport._by_length): small enough that a group's rows have
# similar lengths, large enough that its matrix products stay efficient.
ROWS_PER_CALL = 8


def signature(*input_signature):
    """A module's signature: `tf.function` of `input_signature`, traced without AutoGraph.

    Converting a module's code and tf.text's with AutoGraph was most of its trace, which every
    process serving a converted export pays again; the modules' loops are `tf.while_loop`s and
    their Python conditions are on Python values.
    """
    return tf.function(input_signature=list(input_signature), autograph=False)


def served_modes(rows_per_call=ROWS_PER_CALL):
    """The encoder modes (`EncoderModes` fields) a module of `rows_per_call` serves with: a
    served call holds few rows, so its real-row block is padded to a multiple of 8, not 256;
    one row a call (LiteRT) runs on the padded grid, with no data-dependent row count. A model
    built with them is served as it is; another is copied (`ModelExport`)."""
    return {"small_row_blocks": True, "static_shapes": rows_per_call == 1}


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
      model: the Keras model, with its weights (a copy with `served_modes` where it has others),
        or an ONNX or LiteRT graph standing in for it (`served.ServedModule`).
      tokenizer: `FastBertTokenizer` of the model's vocabulary and casing.
      max_seq_length: int, inputs are truncated and packed as by run_classifier with this length.
      width: int, the values per row.
      rows_per_call: int, rows per model call (`_by_length`); 1 runs each text alone as a
        static batch of one on the padded grid (LiteRT's converter needs both).
    """

    format = None  # the `format` of export.json: export_model.py's --format

    def __init__(self, name, model, tokenizer, max_seq_length, width, rows_per_call=ROWS_PER_CALL):
        super().__init__(name=name)
        # The Keras model stays out of the SavedModel's object graph (saving it would trace
        # Keras's default float-input signature, which cannot embed ids); its weights are
        # tracked instead. They must be the tf.Variables the graph reads (`.value`), not their
        # Keras wrappers: otherwise graph-mode loaders (TF Serving, saved_model_cli) find the
        # variables uninitialised. The tokenizer holds constants only: tracking it would just
        # save its own tf.functions beside the signatures.
        if isinstance(model, keras.Model):  # not an ONNX or LiteRT graph standing in for one
            model = copy_with(model, **served_modes(rows_per_call))
        self._parts = _Untracked(model=model, tokenizer=tokenizer)
        self.model_weights = [weight.value for weight in model.weights]
        self.max_seq_length = max_seq_length
        self.width = width
        self.rows_per_call = rows_per_call
        # The fewest positions a trimmed group keeps (a model whose outputs need as many).
        self.shortest_trim = 1

    def metadata(self):
        """The JSON-able description written to export.json (subclasses add their settings)."""
        tokenizer = self._parts.tokenizer
        return {"format": self.format, "signatures": sorted(self.signatures()),
                "max_seq_length": self.max_seq_length, "do_lower_case": tokenizer.do_lower_case}

    def _onnx_outputs(self, group):
        """The ONNX graph's outputs on `group` where the model is ONNX Runtime's
        (`onnx.OnnxModel`, the graph `Convertible.ids_outputs` converted); None for Keras's."""
        model = self._parts.model
        return model(group) if getattr(model, "runs_onnx", False) else None

    def _text_values(self, ids_a, ids_b):
        """float32 [N, width] of the texts' word-piece ids (ids_b None for single texts)."""
        return self._by_length(self._parts.tokenizer.pack(ids_a, ids_b, self.max_seq_length))

    def _by_length(self, features, trim=True):
        """float32 [N, width] of the int [N, S] features, computed in groups of similar length.

        Rows are sorted by length and run `rows_per_call` at a time, each group padded only to
        its own longest row (`trim`; else to S): a batch of mixed lengths costs little more than
        its tokens.
        """
        order = tf.argsort(tf.reduce_sum(features["input_mask"], axis=1), stable=True)
        n = tf.shape(order)[0]

        def run_group(start, values):
            rows = order[start:start + self.rows_per_call]
            group = {k: tf.gather(v, rows) for k, v in features.items()}
            if trim:
                group = trim_to_longest(group, self.shortest_trim)
            if self.rows_per_call == 1:
                group = {k: tf.reshape(v, [1, -1]) for k, v in group.items()}
            values = tf.tensor_scatter_nd_update(values, rows[:, None], self._row_values(group))
            return start + self.rows_per_call, values

        # An explicit loop: the signatures trace without AutoGraph (`signature`).
        _, values = tf.while_loop(lambda start, _: start < n, run_group,
                                  (tf.constant(0), tf.zeros([n, self.width], tf.float32)))
        return values


class TextExport(ModelExport):
    """Raw text in, one row of values per text out (`serving_default` of single texts, `pairs`
    of text pairs): a subclass says what a group of rows gives (`_row_values`, float32
    [n, width]) and what the signatures return of them (`_outputs`). Arguments: `ModelExport`'s.
    """

    @signature(TEXT)
    def serve(self, text_a):
        """string [N] -> dict of outputs (a subclass's `_outputs`)."""
        return self._outputs(self._text_values(self._parts.tokenizer.tokenize(text_a), None))

    @signature(TEXT, TEXT)
    def serve_pairs(self, text_a, text_b):
        """string [N], string [N] -> dict of outputs (a subclass's `_outputs`)."""
        tf.debugging.assert_equal(tf.shape(text_a), tf.shape(text_b),
                                  message="text_a and text_b must have the same length")
        return self._outputs(self._text_values(self._parts.tokenizer.tokenize(text_a),
                                               self._parts.tokenizer.tokenize(text_b)))

    def signatures(self):
        """`signatures=` for `tf.saved_model.save`: {signature name: tf.function}."""
        return {"serving_default": self.serve, "pairs": self.serve_pairs}


def trim_to_longest(features, shortest=1):
    """Cuts the int [N, S] feature tensors to [N, T], T = the longest row's length (at least
    `shortest`, at most S)."""
    longest = tf.maximum(tf.reduce_max(tf.reduce_sum(features["input_mask"], axis=1)), shortest)
    return {name: value[:, :longest] for name, value in features.items()}


def ragged_slices(values, rows, starts, lengths):
    """RaggedTensor [W, (lengths)]: `values[rows[w], starts[w]:starts[w] + lengths[w]]` of the
    RaggedTensor `values` [N, (P)]."""
    first = tf.gather(tf.cast(values.row_starts(), tf.int32), rows) + starts
    return tf.gather(values.flat_values, tf.ragged.range(first, first + lengths))
