"""run_ner's raw-text graph (`serving` declares its format). The raw-text NER SavedModel: text
in, entities with their labels and character offsets out.

A text is one sentence of one document (run_ner's input with the paper's document context: the
context of a long sentence is the rest of itself). Its words are the CoNLL kind of tokens:
`BasicTokenizer(do_lower_case=False)`'s split (whitespace, each punctuation mark and CJK character
alone); each word is word-pieced with the model's tokenizer (cut to max_seq_length - 2 pieces,
[UNK] for none) and classified at its first piece, in run_ner's windows
(`features`): [CLS] context scored-words context [SEP]. The tags are IOB2 labels;
an entity is a conlleval chunk of them (B-X, or an I-X after another type, starts one).

Signature `serving_default(text [N])`, outputs (N rows each, padded):

  entity_text   string [N, E]   the entity's characters of the text ("" padded)
  entity_label  string [N, E]   its type, e.g. PER ("" padded)
  entity_start  int32 [N, E]    text[start:end] is the entity (characters; -1 padded)
  entity_end    int32 [N, E]
  entity_count  int32 [N]
  words         string [N, M]   the words ("" padded)
  word_tags     string [N, M]   the predicted tag of each word ("" padded)
  word_start, word_end  int32 [N, M]  each word's characters (-1 padded)
"""

import tensorflow as tf
import tensorflow_text as tf_text

from bert_runner.runs import labels as run_labels
from bert_runner.serving import provenance, registry
from bert_runner.serving.saved_model import write_saved_model
from bert_runner.serving.text_module import TEXT, ModelExport, ragged_slices, signature
from bert_tasks.ner import serving, tags as ner_tags
from modeling import families
from vocab import char_tables
from vocab.fast_tokenizer import FastBertTokenizer, grouped_rows


class NerExport(ModelExport):
    """The raw-text signature of a `BertTokenClassifier` (see the module docstring).

    Args:
      model: `BertTokenClassifier` with its weights.
      tokenizer: `FastBertTokenizer` of the model's vocabulary and casing.
      max_seq_length: int, run_ner's --max_seq_length.
      label_list: list of str, the model's labels in order (run_ner's label_list.txt).
    """

    format = "ner"

    def __init__(self, model, tokenizer, max_seq_length, label_list):
        if len(label_list) != model.num_labels:
            raise ValueError("%d labels %s for a token classifier with %d outputs"
                             % (len(label_list), list(label_list), model.num_labels))
        if max_seq_length < 3:
            raise ValueError("max_seq_length must be at least 3 ([CLS] word [SEP]), got %d"
                             % max_seq_length)
        super().__init__("bert_ner", model, tokenizer, max_seq_length, max_seq_length)
        self.label_list = list(label_list)
        self.labels = tf.constant(self.label_list)
        rules = char_tables.tables()
        marks = "%s|%s" % (rules.punct_class, rules.cjk_class)
        self._split = ("[ \t\n\r]|%s|%s" % (rules.space_class, marks), marks)

    def signatures(self):
        return {"serving_default": self.serve_ner}

    def metadata(self):
        return {**super().metadata(), "labels": self.label_list}

    @signature(TEXT)
    def serve_ner(self, text):
        """text [N] strings -> dict of outputs (see the module docstring)."""
        tokenizer = self._parts.tokenizer
        budget = self.max_seq_length - 2
        # The regex split ends a word at U+0000; U+0001 is deleted by the tokenizer just as well.
        words, begin, end = tf_text.regex_split_with_offsets(
            tf.strings.regex_replace(text, "\x00", "\x01"), *self._split)
        word_pieces = tokenizer.tokenize(words.flat_values)  # [K, (P)]
        # Only characters BasicTokenizer deletes (controls): it drops such a word.
        piece_counts = word_pieces.row_lengths()
        kept = piece_counts > 0
        # Ragged tensors here are built unchecked: their row ids are sorted by construction, and
        # each check is a conditional that the first call's graph optimisation pays for.
        text_of_word = tf.boolean_mask(words.value_rowids(), kept)
        n = tf.shape(text, out_type=tf.int64)[0]
        begin, end = (tf.RaggedTensor.from_value_rowids(tf.boolean_mask(t.flat_values, kept),
                                                        text_of_word, n, validate=False)
                      for t in (begin, end))
        words = begin.with_flat_values(tf.strings.substr(
            tf.gather(text, text_of_word), begin.flat_values, end.flat_values - begin.flat_values))
        # A dropped word has no pieces: the pieces stay, the empty rows go.
        word_pieces = tf.RaggedTensor.from_row_lengths(
            word_pieces.flat_values, tf.boolean_mask(piece_counts, kept),
            validate=False)[:, :budget]

        word_count = tf.cast(words.row_lengths(), tf.int32)
        pieces = grouped_rows(words.row_splits, word_pieces)
        total = tf.cast(pieces.row_lengths(), tf.int32)
        # Each word's first piece in its text's pieces.
        offsets = words.with_flat_values(tf.cast(
            word_pieces.row_starts() - tf.gather(pieces.row_splits, text_of_word),
            tf.int32))
        bounds = _word_bounds(offsets, word_count, total)
        rows, first, last = _chunks(bounds, word_count, budget)
        a = tf.gather_nd(bounds, tf.stack([rows, first], axis=1))
        b = tf.gather_nd(bounds, tf.stack([rows, last], axis=1))
        room = budget - (b - a)
        left_available, right_available = a, tf.gather(total, rows) - b
        left = tf.minimum(left_available, tf.maximum(room // 2, room - right_available))
        right = tf.minimum(right_available, room - left)
        features = tokenizer.pack(ragged_slices(pieces, rows, a - left, b + right - a + left),
                                  None, self.max_seq_length)
        predicted = tf.cast(self._by_length(features), tf.int32)  # [W, S] label ids

        # Every word lies in one window: its windows' words, in order, are its text's words.
        window_words = tf.ragged.range(first, last)
        window_of_word = tf.cast(window_words.value_rowids(), tf.int32)
        word_offset = tf.gather_nd(bounds, tf.stack(
            [tf.gather(rows, window_of_word), window_words.flat_values], axis=1))
        position = 1 + tf.gather(left, window_of_word) + word_offset - tf.gather(a, window_of_word)
        label_ids = tf.gather_nd(predicted, tf.stack([window_of_word, position], axis=1))
        tags = words.with_flat_values(tf.gather(self.labels, label_ids))
        return _entity_outputs(text, words, begin, end, tags)

    def _row_values(self, group):
        # A Keras model's or ONNX Runtime's (`onnx.OnnxModel`): both give its "logits".
        ids = tf.argmax(self._parts.model(group, training=False)["logits"], axis=-1)
        width = tf.shape(ids)[1]
        return tf.pad(tf.cast(ids, tf.float32), [[0, 0], [0, self.max_seq_length - width]])


def _word_bounds(offsets, word_count, total):
    """int32 [N, M + 1]: each text's word offsets (`offsets`, ragged [N, (M)]), then its piece
    count `total`, then int32 max (so that each row is sorted for `tf.searchsorted`)."""
    n = tf.shape(word_count)[0]
    bounds = tf.concat([offsets.to_tensor(tf.int32.max), tf.fill([n, 1], tf.int32.max)], axis=1)
    return tf.tensor_scatter_nd_update(bounds, tf.stack([tf.range(n), word_count], axis=1),
                                       total)


def _chunks(bounds, word_count, budget):
    """`features._sentence_chunks` of every text: (row, first word, end word) int32
    [W] of each window, a text's windows consecutive and in order; a text without words has none.

    Each window takes the most words from `first` on whose pieces fit in `budget` (every word
    does alone): the same greedy cut as run_ner's, all texts at once.
    """
    n = tf.shape(word_count)[0]

    def more(step, first, firsts, lasts):
        # At least one step, so that the stacks are [steps >= 1, N] even when no text has words.
        return tf.equal(step, 0) | tf.reduce_any(first < word_count)

    def window(step, first, firsts, lasts):
        limit = tf.gather(bounds, first, batch_dims=1) + budget
        last = tf.cast(tf.searchsorted(bounds, limit[:, None], side="right")[:, 0], tf.int32) - 1
        last = tf.minimum(last, word_count)
        return (step + 1, tf.where(first < word_count, last, first), firsts.write(step, first),
                lasts.write(step, last))

    stacks = [tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=[None])
              for _ in range(2)]
    _, _, firsts, lasts = tf.while_loop(more, window,
                                        (tf.constant(0), tf.zeros([n], tf.int32), *stacks))
    firsts, lasts = tf.transpose(firsts.stack()), tf.transpose(lasts.stack())  # [N, steps]
    active = firsts < word_count[:, None]
    rows = tf.broadcast_to(tf.range(n)[:, None], tf.shape(firsts))
    return (tf.boolean_mask(rows, active), tf.boolean_mask(firsts, active),
            tf.boolean_mask(lasts, active))


def _entity_outputs(text, words, begin, end, tags):
    """The signature's outputs from the words (ragged [N, (M)]), their byte offsets and tags."""
    prefix = tf.strings.substr(tags.flat_values, 0, 1)
    kind = tf.strings.regex_replace(tags.flat_values, "^[BI]-|^O$", "")
    is_first_word = tf.range(tf.size(prefix, tf.int64)) == tf.gather(
        words.row_splits, words.value_rowids())
    previous_kind = tf.where(is_first_word, "", tf.roll(kind, 1, axis=0))
    starts = (prefix == "B") | ((prefix == "I") & (kind != previous_kind))
    inside = (prefix == "B") | (prefix == "I")
    entity = tf.cumsum(tf.cast(starts, tf.int32)) - 1
    members = tf.where(inside)[:, 0]
    entity_of = tf.gather(entity, members)
    count = tf.reduce_sum(tf.cast(starts, tf.int32))
    entity_begin = tf.math.unsorted_segment_min(tf.gather(begin.flat_values, members),
                                                entity_of, count)
    entity_end = tf.math.unsorted_segment_max(tf.gather(end.flat_values, members),
                                              entity_of, count)
    head = tf.where(starts)[:, 0]
    entity_row = tf.gather(words.value_rowids(), head)
    n = tf.shape(text, out_type=tf.int64)[0]

    def by_row(values, pad, row_ids=entity_row):
        return tf.RaggedTensor.from_value_rowids(values, row_ids, nrows=n,
                                                 validate=False).to_tensor(pad)

    entity_text = tf.strings.substr(tf.gather(text, entity_row), entity_begin,
                                    entity_end - entity_begin)
    char_begin, char_end, word_begin, word_end = _character_offsets(
        text, [(entity_begin, entity_row), (entity_end, entity_row),
               (begin.flat_values, words.value_rowids()), (end.flat_values, words.value_rowids())])
    word_rows = words.value_rowids()
    return {
        "entity_text": by_row(entity_text, ""),
        "entity_label": by_row(tf.gather(kind, head), ""),
        "entity_start": by_row(char_begin, -1),
        "entity_end": by_row(char_end, -1),
        "entity_count": tf.math.bincount(tf.cast(entity_row, tf.int32),
                                         minlength=tf.cast(n, tf.int32),
                                         maxlength=tf.cast(n, tf.int32)),
        "words": words.to_tensor(""),
        "word_tags": tags.to_tensor(""),
        "word_start": by_row(word_begin, -1, word_rows),
        "word_end": by_row(word_end, -1, word_rows),
    }


def _character_offsets(text, queries):
    """Character offsets (int32) of byte offsets: `queries` is a list of (byte offsets [K], their
    text's row [K]); a byte offset at a character boundary becomes that character's index."""
    _, char_starts = tf.strings.unicode_decode_with_offsets(text, "UTF-8", errors="replace")
    sorted_starts = char_starts.to_tensor(tf.int64.max)
    out = []
    for offsets, rows in queries:
        found = tf.searchsorted(tf.gather(sorted_starts, rows), tf.cast(offsets, tf.int64)[:, None],
                                side="left")
        out.append(tf.cast(found[:, 0], tf.int32))
    return out


def export_ner(model, vocab_file, do_lower_case, max_seq_length, label_list, export_dir):
    """Writes the raw-text NER SavedModel of `model` (a `BertTokenClassifier`) to `export_dir`
    (which must not exist; `write_saved_model`). Returns export_dir."""
    module = NerExport(model, FastBertTokenizer(vocab_file, do_lower_case), max_seq_length,
                       label_list)
    return write_saved_model(module, export_dir, "NER model")


def fine_tuned_from_config(export_config, files):
    """(the run_ner model with every weight from --checkpoint, its tag set in its scheme):
    the labels of --entity_types or of its label_list.txt."""
    if export_config.entity_types:
        label_list = ner_tags.label_list(export_config.entity_types)
        source = "--entity_types=%s" % ",".join(export_config.entity_types)
        run_labels.check_recorded_labels(label_list, export_config.checkpoint, "--entity_types",
                                        ",".join(export_config.entity_types))
    else:
        label_list = provenance.recorded_labels(export_config.checkpoint, "--entity_types")
        source = "its label_list.txt"
    model = provenance.load_fine_tuned(
        families.build_model("token", files.config, len(label_list),
                             **provenance.recorded_model_options(export_config.checkpoint)),
        export_config.checkpoint, serving.FORMAT_NAME, files.config_file, label_source=source)
    return model, label_list


def convertible(model, label_list):
    """The `registry.Convertible` of a `BertTokenClassifier` with its tag set, for ONNX and
    LiteRT: its tag logits per word-piece."""
    return registry.Convertible(
        model=model, metadata={},
        text_module=lambda tagger, tokenizer, max_seq_length: NerExport(
            tagger, tokenizer, max_seq_length, label_list),
        ids_outputs=lambda tagger, features: {
            "logits": tagger(features, training=False)["logits"]}, litert_ids=True)


def convertible_from_config(export_config, files):
    """The run_ner model of --checkpoint for ONNX and LiteRT (`convertible`)."""
    return convertible(*fine_tuned_from_config(export_config, files))


def served_module(make_model, tokenizer, metadata):
    """The `NerExport` of a converted export or a Hugging Face directory
    (`ServingFormat.served_module`)."""
    labels = metadata["labels"]
    return NerExport(make_model(num_labels=len(labels)), tokenizer, metadata["max_seq_length"],
                     labels)


def export_from_config(export_config, files):
    """export_model.py --format=ner: a run_ner model, with its label list (--entity_types or its
    label_list.txt)."""
    model, label_list = fine_tuned_from_config(export_config, files)
    export_ner(provenance.serving_precision(model, export_config.mixed_precision),
               files.vocab_file, export_config.do_lower_case, export_config.max_seq_length,
               label_list, export_config.export_dir)
