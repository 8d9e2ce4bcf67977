"""run_squad's raw-text graph (`serving` declares its format). The raw-text SQuAD SavedModel:
question and context strings in; each window's prediction outputs (what run_squad's
`task.predict_step` keeps: start and end logits, or the outputs a span model declares) and the
word-pieces they cover out; answers from those by run_squad's own post-processing.

In the graph (`SquadExport`): the context's split into words (`examples.split_context`'s
whitespace), the word-pieces of each word and of the question (cut to
`max_query_length`), run_squad's windows (`doc_stride`), each window's
`[CLS] question [SEP] piece... [SEP]` padded to `max_seq_length` as run_squad's features, and the
span layer. Signature `serving_default(question [N], context [N])`, outputs (N rows each):

  start_logits, end_logits  float32 [N, K, S]  per window (K: the most windows of any row)
  (a span model declaring `prediction_outputs`, ELECTRA's head, has those instead of the logits,
  each [N, K, ...] per window: start_top_log_probs, start_top_index [N, K, B],
  end_top_log_probs, end_top_index [N, K, B, B], answerable_logit [N, K]; B its beam size)
  window_count              int32 [N]
  question_pieces           string [N, Q]      the question's word-pieces ("" padded)
  context_pieces            string [N, P]      the context's word-pieces ("" padded)
  piece_word                int32 [N, P]       the context word of each piece (-1 padded)

`bert_tasks.squad.answers` (which predict.py uses) turns these into answers with
`postprocess.compute_predictions`: the same n-best (or beam) rule, filters, `get_final_text`
and v2.0 null threshold as run_squad's predictions.json, so the answer is run_squad's for the same
outputs. The windows are padded to `max_seq_length` as run_squad's are: the n-best draws its
top-n start and end positions from every position, padding included.
"""
import dataclasses
import math

import tensorflow as tf

from bert_runner.serving import provenance, registry
from bert_runner.serving.saved_model import write_saved_model
from bert_runner.serving.text_module import TEXT, ModelExport, ragged_slices, signature
from bert_tasks.squad import features as sq_features, serving
from bert_tasks.squad.task import PostprocessOptions
from bert_tasks.windows import window_spans_graph
from modeling import families
from vocab.fast_tokenizer import FastBertTokenizer, grouped_rows

# examples._CONTEXT_WHITESPACE but " ": turned into " ", which splits.
_OTHER_CONTEXT_WHITESPACE = "[\t\r\n\u202f]"


# The logit of a trimmed window's padded positions (`SquadExport`'s trim_windows): below any
# real logit, so the n-best draws every real position first.
PADDED_LOGIT = -1e9


class SquadExport(ModelExport):
    """The raw-text signature of a span model (see the module docstring).

    Args:
      model: `BertSpanLabeler` or a family's span model (ELECTRA's head), with its weights.
      tokenizer: `FastBertTokenizer` of the model's vocabulary and casing.
      max_seq_length, doc_stride, max_query_length: run_squad's windows.
      options: `task.PostprocessOptions` (written to export.json for `answers`;
        its do_lower_case must be the tokenizer's; a null_score_diff_threshold of None is the
        model's, as run_squad's).
      trim_windows: run each group of windows at its longest window's length (the default),
        not padded to max_seq_length (export_model.py --full_width_windows keeps those): BERT's
        start and end logits at the padding's positions are then `PADDED_LOGIT`, so the n-best
        never draws them, where run_squad's draws them from the padded model's logits (and then
        drops them). An answer differs only where padding took n-best places run_squad would
        have given no real span (docs/export.md). ELECTRA's beams (a span model's declared
        `prediction_outputs`) are the same either way: its head gives every position outside
        the context a logit 1000 below, whose share of each softmax is 0 in float32, and a
        trimmed window keeps at least `beam_size` positions, so its top-k are the padded
        window's real ones.
    """

    format = "squad"

    def __init__(self, model, tokenizer, max_seq_length, doc_stride, max_query_length, options,
                 trim_windows=True):
        sq_features.check_window_settings(max_seq_length, doc_stride, max_query_length)
        # Per-position logits are put back on the grid; a head's beams are of fixed size.
        self._per_position = not hasattr(model, "prediction_outputs")
        self._outputs = window_outputs(model, max_seq_length)
        super().__init__("bert_squad", model, tokenizer, max_seq_length,
                         sum(_size(shape) for _, shape, _ in self._outputs))
        # A head's beams of K positions (their first dimension) need windows of at least K; with
        # windows no longer than K there is nothing to trim.
        beams = 1 if self._per_position else max(shape[0] for _, shape, _ in self._outputs
                                                 if shape)
        self.trim_windows = trim_windows and beams < max_seq_length
        self.shortest_trim = beams
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length
        threshold = options.null_score_diff_threshold
        if threshold is None:  # run_squad's default: the model's (ELECTRA's head: -2.75)
            threshold = getattr(model, "null_score_diff_threshold", 0.0)
        self.options = dataclasses.replace(options, do_lower_case=tokenizer.do_lower_case,
                                           null_score_diff_threshold=threshold)

    def signatures(self):
        return {"serving_default": self.serve_squad}

    def metadata(self):
        settings = dataclasses.asdict(self.options)
        settings.pop("verbose_logging")
        return {**super().metadata(), "doc_stride": self.doc_stride,
                "max_query_length": self.max_query_length, "trim_windows": self.trim_windows,
                **settings}

    @signature(TEXT, TEXT)
    def serve_squad(self, question, context):
        """question [N], context [N] strings -> dict of outputs (see the module docstring)."""
        tf.debugging.assert_equal(tf.shape(question), tf.shape(context),
                                  message="question and context must have the same length")
        tokenizer = self._parts.tokenizer
        seq = self.max_seq_length
        n = tf.shape(question)[0]
        query = tokenizer.tokenize(question)[:, :self.max_query_length]
        words = tf.strings.split(
            tf.strings.regex_replace(context, _OTHER_CONTEXT_WHITESPACE, " "), sep=" ")
        # Each text's non-empty words (unchecked, as `grouped_rows`: sorted by construction).
        nonempty = tf.strings.length(words.flat_values) > 0
        words = grouped_rows(words.row_splits, tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(words.flat_values, nonempty), tf.cast(nonempty, tf.int64),
            validate=False))
        word_pieces = tokenizer.tokenize(words.flat_values)  # each word alone, as run_squad
        pieces = grouped_rows(words.row_splits, word_pieces)
        first_word = tf.gather(words.row_splits, pieces.value_rowids())
        piece_word = pieces.with_flat_values(
            tf.cast(word_pieces.value_rowids() - first_word, tf.int32))

        query_length = tf.cast(query.row_lengths(), tf.int32)
        rows, start, length = window_spans_graph(
            tf.cast(pieces.row_lengths(), tf.int32), seq - query_length - 3, self.doc_stride,
            empty_has_window=False)
        features = tokenizer.pack(
            ragged_slices(query, rows, tf.zeros_like(rows), tf.gather(query_length, rows)),
            ragged_slices(pieces, rows, start, length), seq)
        values = tf.RaggedTensor.from_value_rowids(
            self._by_length(features, trim=self.trim_windows), tf.cast(rows, tf.int64),
            nrows=tf.cast(n, tf.int64), validate=False)
        dense = values.to_tensor(shape=[None, None, self.width])
        token_strings = tokenizer._token_strings  # noqa: SLF001 (the vocabulary, a constant)
        return {
            **self._split(dense),
            "window_count": tf.cast(values.row_lengths(), tf.int32),
            "question_pieces": tf.gather(token_strings, query).to_tensor(""),
            "context_pieces": tf.gather(token_strings, pieces).to_tensor(""),
            "piece_word": piece_word.to_tensor(-1),
        }

    def _row_values(self, group):
        """The windows' outputs flattened side by side, float32 [n, width]: `_by_length` keeps
        one float row per window. Indexes (window positions, < max_seq_length) are exact in
        float32 and are cast back by `_split`."""
        outputs = self._parts.model(group, training=False)
        rows = tf.shape(group["input_ids"])[0]
        if self.trim_windows and self._per_position:  # [rows, T] logits back on the grid
            padding = [[0, 0], [0, self.max_seq_length - tf.shape(group["input_ids"])[1]]]
            outputs = {name: tf.pad(tf.cast(outputs[name], tf.float32), padding,
                                    constant_values=PADDED_LOGIT)
                       for name, _, _ in self._outputs}
        return tf.concat([tf.reshape(tf.cast(outputs[name], tf.float32), [rows, _size(shape)])
                          for name, shape, _ in self._outputs], axis=1)

    def _split(self, dense):
        """float32 [N, K, width] -> {output name: [N, K, *shape] of its dtype}."""
        lead = tf.shape(dense)[:2]
        split, offset = {}, 0
        for name, shape, dtype in self._outputs:
            part = dense[:, :, offset:offset + _size(shape)]
            split[name] = tf.cast(tf.reshape(part, tf.concat([lead, shape], 0)), dtype)
            offset += _size(shape)
        return split


def window_outputs(model, max_seq_length):
    """[(name, per-window shape, dtype)] of what run_squad's prediction keeps of `model`'s
    outputs (`task.predict_step`): its declared `prediction_outputs` (ELECTRA's beams and
    answerable logit), else the start and end logits. The shapes come from tracing the model on
    windows of `max_seq_length` (nothing is computed), as the served graph pads them."""
    names = getattr(model, "prediction_outputs", ("start_logits", "end_logits"))
    spec = {name: tf.TensorSpec([None, max_seq_length], tf.int32)
            for name in ("input_ids", "input_mask", "segment_ids")}
    traced = tf.function(lambda features: model(features, training=False))
    outputs = traced.get_concrete_function(spec).structured_outputs
    return [(name, outputs[name].shape[1:].as_list(), outputs[name].dtype) for name in names]


def _size(shape):
    return math.prod(shape)


def export_squad(model, vocab_file, do_lower_case, max_seq_length, doc_stride, max_query_length,
                 options, export_dir, trim_windows=True):
    """Writes the raw-text SQuAD SavedModel of `model` (a span model) to `export_dir`
    (which must not exist; `write_saved_model`). Returns export_dir."""
    module = SquadExport(model, FastBertTokenizer(vocab_file, do_lower_case), max_seq_length,
                         doc_stride, max_query_length, options, trim_windows)
    return write_saved_model(module, export_dir, "SQuAD model")


def fine_tuned_from_config(export_config, files):
    """(the run_squad model with every weight from --checkpoint, None: no labels)."""
    model = families.build_model("span", files.config,
                                 **provenance.recorded_model_options(export_config.checkpoint))
    return provenance.load_fine_tuned(
        model, export_config.checkpoint, serving.FORMAT_NAME, files.config_file), None


def _windows_of(export_config):
    """(doc_stride, max_query_length, `PostprocessOptions`, trim_windows) of the export's
    settings."""
    options = PostprocessOptions(
        n_best_size=export_config.n_best_size, max_answer_length=export_config.max_answer_length,
        do_lower_case=export_config.do_lower_case,
        version_2_with_negative=export_config.version_2_with_negative,
        # Not given: the model's, as run_squad's (ELECTRA's head: -2.75; BERT's 0.0).
        null_score_diff_threshold=export_config.null_score_diff_threshold)
    return (128 if export_config.doc_stride is None else export_config.doc_stride,
            export_config.max_query_length, options, not export_config.full_width_windows)


def export_from_config(export_config, files):
    """export_model.py --format=squad: a run_squad model, with its windows and post-processing
    settings."""
    model, _ = fine_tuned_from_config(export_config, files)
    doc_stride, max_query_length, options, trim_windows = _windows_of(export_config)
    export_squad(provenance.serving_precision(model, export_config.mixed_precision),
                 files.vocab_file, export_config.do_lower_case, export_config.max_seq_length,
                 doc_stride, max_query_length, options, export_config.export_dir, trim_windows)


def convertible(model, max_seq_length, doc_stride, max_query_length, options,
                trim_windows=True):
    """The `registry.Convertible` of a span model for ONNX and LiteRT: its outputs per window
    (start and end logits, or a span model's declared `prediction_outputs`) on windows of
    `max_seq_length` (any length up to it with `trim_windows`), with `SquadExport`'s windows and
    post-processing settings."""
    names = getattr(model, "prediction_outputs", ("start_logits", "end_logits"))
    # As `SquadExport` decides: a head's beams need windows longer than its beam size.
    trim_windows = trim_windows and max_seq_length > getattr(model, "beam_size", 1)

    def ids_outputs(span_model, features):
        # The keys `SquadExport` gives it (ELECTRA's head reads segment_ids).
        outputs = span_model({"input_ids": features["input_ids"],
                              "input_mask": features["input_mask"],
                              "segment_ids": features["token_type_ids"]}, training=False)
        return {name: outputs[name] for name in names}

    return registry.Convertible(
        model=model, metadata={}, ids_outputs=ids_outputs,
        ids_shape=(None, None if trim_windows else max_seq_length),  # its windows' length
        litert_ids=True,
        text_module=lambda span_model, tokenizer, length: SquadExport(
            span_model, tokenizer, length, doc_stride, max_query_length, options, trim_windows))


def convertible_from_config(export_config, files):
    """The run_squad model of --checkpoint for ONNX and LiteRT (`convertible`)."""
    model, _ = fine_tuned_from_config(export_config, files)
    return convertible(model, export_config.max_seq_length, *_windows_of(export_config))


def served_module(make_model, tokenizer, metadata):
    """The `SquadExport` of an ONNX or LiteRT export or a Hugging Face directory
    (`ServingFormat.served_module`), with the SavedModel's windows and post-processing settings
    (its export.json's)."""
    model = make_model()
    if getattr(model, "runs_onnx", False) and set(model.output_names) != {"start_logits",
                                                                          "end_logits"}:
        model = make_model(prediction_outputs=model.output_names)
    options = PostprocessOptions(**{field.name: metadata[field.name]
                                    for field in dataclasses.fields(PostprocessOptions)
                                    if field.name in metadata})
    return SquadExport(model, tokenizer, metadata["max_seq_length"], metadata["doc_stride"],
                       metadata["max_query_length"], options,
                       metadata.get("trim_windows", False))


def hf_settings(export_config):
    """export.json's settings beside a run_squad run's Hugging Face directory
    (`ServingFormat.hf_settings`): its windows and post-processing, as its SavedModel's."""
    doc_stride, max_query_length, options, trim_windows = _windows_of(export_config)
    settings = dataclasses.asdict(options)
    settings.pop("verbose_logging")
    return {"doc_stride": doc_stride, "max_query_length": max_query_length,
            "trim_windows": trim_windows, **settings}
