"""run_classifier's raw-text graph: the classifier SavedModel (strings in, probabilities out) and
what LiteRT and ONNX convert of it (`serving` declares the format).

The exported graph runs the whole original prediction path: `FastBertTokenizer` (tf.text,
word-piece-identical to `FullTokenizer`), the original `[CLS] A [SEP] B [SEP]` packing and
truncation to `max_seq_length` (or, for long documents, run_classifier's windows, computed in the
graph as `windows.window_pairs` computes them), the model, and softmax (sigmoid for a multi-label
classifier). It needs only TensorFlow and tensorflow-text to load (`import tensorflow_text`
registers the tokenizer ops).

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
"""
import tensorflow as tf

from bert_runner.runs import labels as run_labels
from bert_runner.serving import provenance, registry
from bert_runner.serving.saved_model import write_saved_model
from bert_runner.serving.text_module import ROWS_PER_CALL, TextExport, ragged_slices
from bert_tasks.classifier import processors, serving, windows
from bert_tasks.windows import window_spans_graph
from modeling import families
from vocab.fast_tokenizer import FastBertTokenizer



def classifier_windows(ids_a, ids_b, max_seq_length, doc_stride):
    """`windows.window_pairs` of a batch, in the graph.

    Args:
      ids_a: int RaggedTensor [N, (pieces)]; ids_b: the same, or None (single texts).
    Returns:
      (rows int32 [W], piece_a, piece_b): the text of each window and its A and B pieces (int
      RaggedTensors [W, (pieces)], piece_b None for single texts), each fitting untruncated.
    """
    len_a = tf.cast(ids_a.row_lengths(), tf.int32)
    if ids_b is None:
        rows, start, length = window_spans_graph(
            len_a, tf.fill(tf.shape(len_a), max_seq_length - 2), doc_stride)
        return rows, ragged_slices(ids_a, rows, start, length), None
    len_b = tf.cast(ids_b.row_lengths(), tf.int32)
    single = len_b == 0  # the original's `if tokens_b:`
    room = tf.where(single, max_seq_length - 2, max_seq_length - 3)
    fits = len_a + len_b <= room
    window_b = (len_b >= len_a) & ~single  # the longer text is windowed, B on ties
    long_len = tf.where(window_b, len_b, len_a)
    short_len = tf.where(window_b, len_a, len_b)
    short_len = tf.where(fits, short_len, tf.minimum(short_len, room // 2))
    rows, start, length = window_spans_graph(
        long_len, tf.where(fits, tf.maximum(long_len, 1), room - short_len), doc_stride)
    on_b, short = tf.gather(window_b, rows), tf.gather(short_len, rows)
    zero = tf.zeros_like(start)
    piece_a = ragged_slices(ids_a, rows, tf.where(on_b, zero, start),
                            tf.where(on_b, short, length))
    piece_b = ragged_slices(ids_b, rows, tf.where(on_b, start, zero),
                            tf.where(on_b, length, short))
    return rows, piece_a, piece_b


def aggregate_windows(values, rows, n, how):
    """`windows.aggregate` in the graph: float32 [N, width] of the windows'
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
      doc_stride: None (truncation), or int: texts longer than max_seq_length are cut into
        run_classifier's windows (`windows.window_pairs`), `doc_stride` word-pieces apart, and
        each text's windows' logits are aggregated with `window_aggregation` ("mean", "max" or
        "first") before the softmax or sigmoid (run_classifier --long_documents).
      rows_per_call: `ModelExport`'s.
    """

    format = "classifier"

    def __init__(self, model, tokenizer, max_seq_length, label_names=None,
                 multi_label_threshold=None, doc_stride=None, window_aggregation="mean",
                 rows_per_call=ROWS_PER_CALL):
        if label_names is None and model.num_labels != 1:
            raise ValueError("label_names are required for a classifier with %d labels"
                             % model.num_labels)
        if label_names is not None and len(label_names) != model.num_labels:
            raise ValueError("%d label names %s for a classifier with %d outputs"
                             % (len(label_names), list(label_names), model.num_labels))
        if multi_label_threshold is not None and not 0.0 < multi_label_threshold < 1.0:
            raise ValueError("--multi_label_threshold must be in (0, 1), got %r"
                             % multi_label_threshold)
        if doc_stride is not None and doc_stride < 1:
            raise ValueError("--doc_stride must be at least 1, got %d" % doc_stride)
        if window_aggregation not in windows.AGGREGATIONS:
            raise ValueError("--window_aggregation must be one of %s, got %r"
                             % (", ".join(windows.AGGREGATIONS), window_aggregation))
        super().__init__("bert_text_classifier", model, tokenizer, max_seq_length,
                         model.num_labels, rows_per_call)
        self.doc_stride = doc_stride
        self.window_aggregation = window_aggregation
        self.label_names = None if label_names is None else tf.constant(list(label_names))
        self.multi_label_threshold = multi_label_threshold
        self._label_list = None if label_names is None else list(label_names)

    def metadata(self):
        return {**super().metadata(), "labels": self._label_list,
                "multi_label_threshold": self.multi_label_threshold,
                "doc_stride": self.doc_stride,
                "window_aggregation": None if self.doc_stride is None else self.window_aggregation}

    def _text_values(self, ids_a, ids_b):
        if self.doc_stride is None:
            return super()._text_values(ids_a, ids_b)
        rows, piece_a, piece_b = classifier_windows(ids_a, ids_b, self.max_seq_length,
                                                    self.doc_stride)
        values = self._by_length(self._parts.tokenizer.pack(piece_a, piece_b,
                                                            self.max_seq_length))
        return aggregate_windows(values, rows, tf.shape(ids_a.row_splits)[0] - 1,
                                 self.window_aggregation)

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
    model = families.build_model("multi_label" if multi_label else "classifier", config,
                                 num_labels, **provenance.recorded_model_options(checkpoint))
    labels = f"--task_name={task_name}" if task_name else "the task"
    return provenance.load_fine_tuned(model, checkpoint, serving.FORMAT_NAME, config_file,
                                      task_name=task_name, label_source=labels)


def _classifier_of(export_config, files, task_name):
    """(the run_classifier model of `task_name` with every weight from --checkpoint, its task's
    processor): a multi-label model's labels from --labels or its label_list.txt."""
    labels = None
    if task_name.lower() == "multilabel":
        labels = export_config.labels
        if labels:
            run_labels.check_recorded_labels(labels, export_config.checkpoint, "--labels",
                                            ",".join(labels))
        else:
            labels = provenance.recorded_labels(export_config.checkpoint, "--labels")
    processor = processors.get_processor(task_name, labels)
    model = load_classifier(files.config, processor.num_labels, export_config.checkpoint,
                            task_name=task_name, config_file=files.config_file)
    return model, processor


# A reranker's Hugging Face directory is a sentence-transformers cross-encoder: one logit, whose
# sigmoid (CrossEncoder's score of a one-label model, said in its config.json) is the reranker's
# probability of "relevant" (`cross_encoder`).
RERANK_TASK = "rerank"
CROSS_ENCODER_CONFIG = {
    "sentence_transformers": {"activation_fn": "torch.nn.modules.activation.Sigmoid"},
    "problem_type": None}  # a score, not a regression (predict.py serves its probabilities)


def cross_encoder(model):
    """The one-logit `BertClassifier` of the 2-label classifier `model` (a reranker): its encoder,
    and the head's row difference (w1 - w0, b1 - b0), so that sigmoid(z1 - z0) = softmax(z)[1],
    the probability of label "1"; its config.json says so (`CROSS_ENCODER_CONFIG`)."""
    one = families.build_model("classifier", model.encoder.config, 1)
    ids = tf.ones([1, 2], tf.int32)
    one({"input_ids": ids, "input_mask": ids, "segment_ids": 0 * ids})
    for mine, theirs in zip(one.encoder.weights, model.encoder.weights):
        mine.assign(theirs)
    for (_, mine), (_, theirs) in zip(one.tf1_head_variables(), model.tf1_head_variables()):
        mine.assign((theirs[1] - theirs[0])[None])
    return one


def fine_tuned_from_config(export_config, files):
    """export_model.py --format=huggingface of a run_classifier run: (its model, its labels;
    None for regression), the task its run.json records; a reranker as its cross-encoder
    (`cross_encoder`, no labels)."""
    task = provenance.recorded_task(export_config.checkpoint)
    model, processor = _classifier_of(export_config, files, task)
    if task == RERANK_TASK:
        return cross_encoder(model), None
    return model, processor.get_labels()


def hf_config_entries(export_config):
    """The config.json entries of a run_classifier run's Hugging Face directory beside its
    family's: a reranker's `CROSS_ENCODER_CONFIG` (its cross-encoder's activation)."""
    rerank = provenance.recorded_task(export_config.checkpoint) == RERANK_TASK
    return CROSS_ENCODER_CONFIG if rerank else {}


def export_from_config(export_config, files):
    """export_model.py --format=classifier: a run_classifier model (single-label, regression or
    multi-label; truncated or windowed)."""
    task_name = export_config.task_name
    if not task_name:
        raise ValueError("--task_name is required with --format=classifier")
    multi_label = task_name.lower() == "multilabel"
    model, processor = _classifier_of(export_config, files, task_name)
    doc_stride = None
    if export_config.long_documents:
        doc_stride = 64 if export_config.doc_stride is None else export_config.doc_stride
    export_classifier(
        provenance.serving_precision(model, export_config.mixed_precision), files.vocab_file,
        export_config.do_lower_case, export_config.max_seq_length, processor.get_labels(),
        export_config.export_dir,
        multi_label_threshold=export_config.multi_label_threshold if multi_label else None,
        doc_stride=doc_stride, window_aggregation=export_config.window_aggregation)


def convertible(model, label_names):
    """The `registry.Convertible` of `model` (a single-label or regression `BertClassifier`) with
    its labels (None for regression): what LiteRT and ONNX convert."""

    def ids_outputs(classifier, features):
        logits = classifier(features, training=False)["logits"]
        if classifier.num_labels == 1:
            return {"predictions": logits[:, 0], "logits": logits}
        return {"probabilities": tf.nn.softmax(logits, axis=-1), "logits": logits}

    return registry.Convertible(
        model=model, metadata={"labels": label_names, "pooling": None, "normalize": False},
        text_module=lambda classifier, tokenizer, max_seq_length: ClassifierExport(
            classifier, tokenizer, max_seq_length, label_names, rows_per_call=1),
        ids_outputs=ids_outputs)


def served_module(make_model, tokenizer, metadata):
    """The `ClassifierExport` of a converted export or a Hugging Face directory
    (`ServingFormat.served_module`)."""
    labels = metadata["labels"]
    return ClassifierExport(make_model(num_labels=len(labels) if labels else 1), tokenizer,
                            metadata["max_seq_length"], labels,
                            multi_label_threshold=metadata.get("multi_label_threshold"),
                            doc_stride=metadata.get("doc_stride"),
                            window_aggregation=metadata.get("window_aggregation") or "mean")


def hf_settings(export_config):
    """export.json's settings beside a run_classifier run's Hugging Face directory
    (`ServingFormat.hf_settings`): a multi-label run's decision threshold; a reranker's labels,
    served from its cross-encoder's one logit (`cross_encoder`)."""
    task = (export_config.task_name or provenance.recorded_task(export_config.checkpoint)
            or "").lower()
    if task == "multilabel":
        return {"multi_label_threshold": export_config.multi_label_threshold}
    if task == RERANK_TASK:  # its labels, not the one logit's (`cross_encoder`)
        return {"labels": processors.get_processor(task).get_labels(), "cross_encoder": True}
    return {}


def convertible_from_config(export_config, files):
    """The classifier of --task_name, for LiteRT and ONNX: single-label or regression."""
    if export_config.task_name.lower() == "multilabel":
        raise ValueError("--format=%s converts a classifier (--task_name) or an embedding model "
                         "(--pooling) (single-label or regression), not --task_name=multilabel: "
                         "export a SavedModel" % export_config.format)
    model, processor = _classifier_of(export_config, files, export_config.task_name)
    return convertible(model, processor.get_labels())
