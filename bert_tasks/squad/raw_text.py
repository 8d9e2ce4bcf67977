"""run_squad's raw-text graph (`serving` declares its format). The raw-text SQuAD SavedModel:
question and context strings in; the windows' start and end logits and the word-pieces they cover
out; answers from those by run_squad's own post-processing.

In the graph (`SquadExport`): the context's split into words (`examples.split_context`'s
whitespace), the word-pieces of each word and of the question (cut to
`max_query_length`), run_squad's windows (`doc_stride`), each window's
`[CLS] question [SEP] piece... [SEP]` padded to `max_seq_length` as run_squad's features, and the
span layer. Signature `serving_default(question [N], context [N])`, outputs (N rows each):

  start_logits, end_logits  float32 [N, K, S]  per window (K: the most windows of any row)
  window_count              int32 [N]
  question_pieces           string [N, Q]      the question's word-pieces ("" padded)
  context_pieces            string [N, P]      the context's word-pieces ("" padded)
  piece_word                int32 [N, P]       the context word of each piece (-1 padded)

`bert_tasks.squad.answers` (which predict.py uses) turns these into answers with
`postprocess.compute_predictions`: the same n-best, filters, `get_final_text`
and v2.0 null threshold as run_squad's predictions.json, so the answer is run_squad's for the same
logits. The windows are padded to `max_seq_length` as run_squad's are: the n-best draws its
top-n start and end positions from every position, padding included.
"""
import dataclasses

import tensorflow as tf

from bert_runner.serving import provenance
from bert_runner.serving.saved_model import write_saved_model
from bert_runner.serving.text_module import TEXT, ModelExport, ragged_slices
from bert_tasks.squad import features as sq_features, serving
from bert_tasks.squad.task import PostprocessOptions
from bert_tasks.windows import window_spans_graph
from modeling import families
from vocab.fast_tokenizer import FastBertTokenizer

# examples._CONTEXT_WHITESPACE but " ": turned into " ", which splits.
_OTHER_CONTEXT_WHITESPACE = "[\t\r\n\u202f]"


class SquadExport(ModelExport):
    """The raw-text signature of a `BertSpanLabeler` (see the module docstring).

    Args:
      model: `BertSpanLabeler` with its weights.
      tokenizer: `FastBertTokenizer` of the model's vocabulary and casing.
      max_seq_length, doc_stride, max_query_length: run_squad's windows.
      options: `task.PostprocessOptions` (written to export.json for `answers`;
        its do_lower_case must be the tokenizer's).
    """

    format = "squad"

    def __init__(self, model, tokenizer, max_seq_length, doc_stride, max_query_length, options):
        check_exportable(model)
        sq_features.check_window_settings(max_seq_length, doc_stride, max_query_length)
        super().__init__("bert_squad", model, tokenizer, max_seq_length, 2 * max_seq_length)
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length
        self.options = dataclasses.replace(options, do_lower_case=tokenizer.do_lower_case)

    def signatures(self):
        return {"serving_default": self.serve_squad}

    def metadata(self):
        settings = dataclasses.asdict(self.options)
        settings.pop("verbose_logging")
        return {**super().metadata(), "doc_stride": self.doc_stride,
                "max_query_length": self.max_query_length, **settings}

    @tf.function(input_signature=[TEXT, TEXT])
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
        words = tf.ragged.boolean_mask(words, tf.strings.length(words) > 0)
        word_pieces = tokenizer.tokenize(words.flat_values)  # each word alone, as run_squad
        pieces = tf.RaggedTensor.from_row_splits(
            word_pieces.flat_values, tf.gather(word_pieces.row_splits, words.row_splits))
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
        logits = tf.RaggedTensor.from_value_rowids(
            self._by_length(features, trim=False), tf.cast(rows, tf.int64),
            nrows=tf.cast(n, tf.int64))
        dense = logits.to_tensor(shape=[None, None, 2 * seq])
        token_strings = tokenizer._token_strings  # noqa: SLF001 (the vocabulary, a constant)
        return {
            "start_logits": dense[:, :, :seq],
            "end_logits": dense[:, :, seq:],
            "window_count": tf.cast(logits.row_lengths(), tf.int32),
            "question_pieces": tf.gather(token_strings, query).to_tensor(""),
            "context_pieces": tf.gather(token_strings, pieces).to_tensor(""),
            "piece_word": piece_word.to_tensor(-1),
        }

    def _row_values(self, group):
        outputs = self._parts.model(group, training=False)
        return tf.concat([outputs["start_logits"], outputs["end_logits"]], axis=1)


def check_exportable(model):
    """Refuses a span model whose predictions are not start and end logits (one declaring its
    `prediction_outputs`: ELECTRA's beams and answerable logit), which this graph's outputs and
    `answers` do not carry."""
    if hasattr(model, "prediction_outputs"):
        raise ValueError(
            f"{type(model).__name__} predicts beams, not start and end logits: the raw-text SQuAD"
            " export serves start/end span heads only; predict with run_squad.py --do_predict")


def export_squad(model, vocab_file, do_lower_case, max_seq_length, doc_stride, max_query_length,
                 options, export_dir):
    """Writes the raw-text SQuAD SavedModel of `model` (a `BertSpanLabeler`) to `export_dir`
    (which must not exist; `write_saved_model`). Returns export_dir."""
    module = SquadExport(model, FastBertTokenizer(vocab_file, do_lower_case), max_seq_length,
                         doc_stride, max_query_length, options)
    return write_saved_model(module, export_dir, "SQuAD model")


def export_from_flags(flag_values, files):
    """export_model.py --format=squad: a run_squad model, with its windows and post-processing
    settings."""
    model = families.build_model("span", files.config,
                                 **provenance.recorded_model_options(flag_values.checkpoint))
    check_exportable(model)  # before the checkpoint is read
    model = provenance.load_fine_tuned(
        model,
        flag_values.checkpoint, serving.FORMAT_NAME, files.config_file)
    options = PostprocessOptions(
        n_best_size=flag_values.n_best_size, max_answer_length=flag_values.max_answer_length,
        do_lower_case=flag_values.do_lower_case,
        version_2_with_negative=flag_values.version_2_with_negative,
        null_score_diff_threshold=flag_values.null_score_diff_threshold)
    export_squad(provenance.serving_precision(flag_values, model), files.vocab_file,
                 flag_values.do_lower_case, flag_values.max_seq_length,
                 128 if flag_values.doc_stride is None else flag_values.doc_stride,
                 flag_values.max_query_length, options, flag_values.export_dir)
