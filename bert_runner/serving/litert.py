"""LiteRT (TFLite) models that take raw text: the tokenizer, the original packing, the model and
the softmax (or the pooling) in one `.tflite` file, in float32, float16, dynamic-range int8 or
full int8.

The graph is the SavedModel's raw-text graph (the format's `ModelExport`, from its
`registry.Convertible`) with two changes LiteRT needs:

* The tokenizer is tf.text's `FastBertTokenizer` (`FastBertNormalizer` + end-to-end
  `FastWordpieceTokenizer`), whose ops have LiteRT kernels (`tensorflow_text.tflite_registrar`),
  instead of the SavedModel's `vocab.fast_tokenizer` (regular-expression ops LiteRT lacks). On
  printable ASCII both give the original's word-pieces; elsewhere tf.text's normalisation differs
  from the original's BasicTokenizer on a few characters: `litert_tokenizer_differences` counts
  them on the fixture texts, and docs/export.md lists them.
* The model runs one text at a time (a while loop over the batch), each on `[1, T]` features,
  T = its own length: LiteRT's converter cannot lower the attention mask's `mask[:, None, None,
  :]` when both the batch and the length are dynamic, and one row at a time pads nothing.
  The encoder runs with the reference kernels (`keras.ops`), not the XLA-fused ones.

Signatures: those of the SavedModel (`serving_default(text_a)`, `pairs(text_a, text_b)`), with
the same outputs (`probabilities`, `label`, `label_names`; `predictions` for regression;
`embedding`). Running it needs tf.text's LiteRT ops registered:

    from ai_edge_litert import interpreter  # or tf.lite
    import tensorflow_text as tf_text
    model = interpreter.InterpreterWithCustomOps(
        custom_op_registerers=tf_text.tflite_registrar.SELECT_TFTEXT_OPS,
        model_path="model.tflite")
    out = model.get_signature_runner("pairs")(text_a=np.array(["..."]), text_b=np.array(["..."]))

`interpreter(path)` does this.
"""
import json
import os
import tempfile
import threading

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text
from absl import logging

from bert_runner import results
from bert_runner.serving import saved_model
from bert_runner.serving.conversion import (
    METADATA_FILE, convertible_from_config, first_line, reference_copy, write_export_dir)
from bert_runner.serving.formats import QUANTIZATIONS
from bert_runner.serving.text_module import served_modes
from vocab import tokenization
from vocab.fast_tokenizer import FastBertTokenizer, _tokens_by_id

# Full int8 is checked against the float graph on this many calibration texts, and refused when
# its outputs differ by more than INT8_MAX_ERROR (the mean of |int8 - float| / |float| per
# output): a working int8 BERT stays within a few percent, a broken one is off by most of it.
INT8_CHECK_TEXTS = 32
INT8_MAX_ERROR = 0.2
MODEL_FILE = "model.tflite"
REQUIREMENTS = "requirements-litert.txt"
# Calibration texts for full int8: enough for stable activation ranges, few enough to convert in
# minutes at BERT-Base.
CALIBRATION_TEXTS = 200


class LiteRTTokenizer:
    """tf.text's `FastBertTokenizer` (LiteRT kernels) on our vocabulary, with our packing.

    Args:
      vocab_file: `vocab.txt`, read and checked as `FullTokenizer` reads it.
      do_lower_case: lower-case and strip accents (the original's flag).
    """

    def __init__(self, vocab_file, do_lower_case=True):
        self._packing = FastBertTokenizer(vocab_file, do_lower_case)
        self.do_lower_case = do_lower_case
        self._tokenizer = tf_text.FastBertTokenizer(
            _tokens_by_id(tokenization.load_vocab(vocab_file)),
            max_bytes_per_word=tokenization.MAX_INPUT_CHARS_PER_WORD, token_out_type=tf.int32,
            unknown_token="[UNK]", lower_case_nfd_strip_accents=do_lower_case)

    def tokenize(self, texts):
        """string [N] -> int32 RaggedTensor [N, (pieces)]."""
        return self._tokenizer.tokenize(texts)

    def pack(self, ids_a, ids_b=None, max_seq_length=128):
        """`vocab.fast_tokenizer.FastBertTokenizer.pack`."""
        return self._packing.pack(ids_a, ids_b, max_seq_length)


def convert(module, quantization, calibration_texts=None):
    """The `.tflite` bytes of `module`'s signatures (`text_module`'s result).

    Args:
      module: the `tf.Module` whose `signatures()` to convert.
      quantization: one of QUANTIZATIONS. "float16": weights stored in float16 (computed in
        float32); "dynamic_int8": weights in int8, activations quantised on the fly per call;
        "int8": weights and activations in int8, ranges from `calibration_texts`.
      calibration_texts: list of str (or (text_a, text_b) pairs, for the `pairs` signature),
        required for "int8".
    Raises:
      ValueError: a quantization not in QUANTIZATIONS, int8 without texts, or a graph the
        converter refuses (its reason, in one line).
    """
    if quantization not in QUANTIZATIONS:
        raise ValueError("--quantization must be one of %s, got %r"
                         % (", ".join(QUANTIZATIONS), quantization))
    with tempfile.TemporaryDirectory() as tmp:
        # Under a root without a `serve` attribute: the converter takes a root's `serve` for
        # Keras's `model.export` endpoint and then converts serving_default alone.
        root = tf.Module()
        root.export = module
        signatures = (one_text_signatures(module) if quantization == "int8"
                      else module.signatures())
        tf.saved_model.save(root, tmp, signatures=signatures, options=saved_model.SERVED_ONLY)
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp, list(signatures))
        # tf.text's tokenizer ops are LiteRT custom ops; everything else must be a builtin.
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        converter.allow_custom_ops = True
        if quantization != "float32":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantization == "float16":
            converter.target_spec.supported_types = [tf.float16]
        if quantization == "int8":
            if not calibration_texts:
                raise ValueError("--quantization=int8 needs calibration texts "
                                 "(--calibration_file)")
            converter.representative_dataset = lambda: _calibration(calibration_texts)
            # The calibrator runs the graph, tokenizer included.
            converter.target_spec._experimental_custom_op_registerers = list(
                tf_text.tflite_registrar.SELECT_TFTEXT_OPS)
        try:
            blob = converter.convert()
            _check_runs(blob)
            if quantization == "int8":
                _check_int8_outputs(blob, module, calibration_texts)
        except Exception as e:  # ConverterError, RuntimeError (the interpreter), ValueError
            raise ValueError("LiteRT conversion (--quantization=%s) failed: %s"
                             % (quantization, first_line(e))) from e
    return blob


def one_text_signatures(module):
    """`module`'s signatures on one text (or pair) per call, inputs of shape [1]: full int8's.
    Its ranges are calibrated a text at a time, and the converted loop over a call's rows does
    not keep them past the first row (bench/export_accuracy.py: a which-novel classifier at
    chance on calls of 32 texts, within a point of float32 on calls of one). The interpreter
    still resizes a longer input, so export.json says `texts_per_call: 1` for clients."""
    signatures = {}
    for key, function in module.signatures().items():
        specs = [tf.TensorSpec([1], tf.string, name=spec.name) for spec in function.input_signature]
        # The signature's input names are the arguments' (text_a, and text_b for pairs).
        call = ((lambda text_a, f=function: f(text_a)) if len(specs) == 1 else
                (lambda text_a, text_b, f=function: f(text_a, text_b)))
        signatures[key] = tf.function(call, input_signature=specs)
    return signatures


def _calibration(texts):
    """The representative dataset: (signature, inputs) per text, a text at a time."""
    for text in texts:
        if isinstance(text, str):
            yield "serving_default", {"text_a": np.array([text.encode("utf-8")])}
        else:
            yield "pairs", {"text_a": np.array([text[0].encode("utf-8")]),
                            "text_b": np.array([text[1].encode("utf-8")])}


def write_litert(module, quantization, export_dir, calibration_texts=None):
    """Converts `module` and writes `export_dir`/model.tflite and export.json (its metadata, the
    quantization and the ops to register; `write_export_dir`).

    Returns: the path of the `.tflite` file.
    """
    blob = convert(module, quantization, calibration_texts)
    metadata = {**module.metadata(), "format": "litert/" + module.format,
                "quantization": quantization,
                "texts_per_call": 1 if quantization == "int8" else None,
                "custom_ops": "tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS"}
    write_export_dir(export_dir, {MODEL_FILE: blob}, metadata)
    return os.path.join(export_dir, MODEL_FILE)


def texts_per_call(model_path):
    """How many texts (or pairs) a call of the `.tflite` at `model_path` may hold, from the
    export.json beside it: 1 for full int8 (`one_text_signatures`), None for any number."""
    with open(os.path.join(os.path.dirname(model_path), METADATA_FILE), encoding="utf-8") as f:
        return json.load(f).get("texts_per_call")


def interpreter(model_path=None, model_content=None, num_threads=None, xnnpack=True):
    """A LiteRT interpreter of a `.tflite` written here, tf.text's ops registered:
    ai-edge-litert's (requirements-litert.txt), else the one TensorFlow still ships. `xnnpack`
    False: without the default XNNPack delegate (`write_ids_litert`'s graphs).

    Raises ValueError naming requirements-litert.txt when neither is there."""
    try:
        from ai_edge_litert.interpreter import InterpreterWithCustomOps, OpResolverType
    except ImportError:
        try:
            from tensorflow.lite.python.interpreter import (
                InterpreterWithCustomOps, OpResolverType)
        except ImportError as e:
            raise ValueError("Running a LiteRT model needs ai-edge-litert: pip install -r %s"
                             % REQUIREMENTS) from e
    resolver = (OpResolverType.AUTO if xnnpack else
                OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    return InterpreterWithCustomOps(
        custom_op_registerers=list(tf_text.tflite_registrar.SELECT_TFTEXT_OPS),
        model_path=model_path, model_content=model_content, num_threads=num_threads,
        experimental_op_resolver_type=resolver)


class _IdsModule(tf.Module):
    """`convert`'s module of a task's graph on token ids (`onnx.ids_function`): one signature,
    its model's weights tracked."""

    def __init__(self, function):
        super().__init__()
        self.function = function
        self.model_weights = function.model_weights

    def signatures(self):
        return {"serving_default": self.function}


def write_ids_litert(convertible, vocab_file, do_lower_case, max_seq_length, quantization,
                     export_dir):
    """Writes `export_dir` (new): model.tflite of `convertible`'s graph on token ids, one row a
    call ([1, T]: any T up to max_seq_length, or max_seq_length where the task's graph needs it:
    SQuAD's padded windows, ELECTRA's beams), vocab.txt and export.json, for a task whose
    raw-text graph LiteRT cannot run (NER's regular-expression word split). predict.py runs its
    task's module around it (`LiteRTModel`), the tokenizer and the rest in Python. The encoder's
    last layer computes every row together (`EncoderModes.whole_last_layer`): XNNPack cannot run a
    dense layer on the [CLS] rows and the others joined.

    Returns: the path of model.tflite.
    """
    from bert_runner.serving import onnx

    length = convertible.ids_shape[-1]
    blob = convert(_IdsModule(onnx.ids_function(convertible, (1, length),
                                                whole_last_layer=True)), quantization)
    files, metadata = onnx.ids_export(convertible, vocab_file, do_lower_case, max_seq_length,
                                      "litert")
    write_export_dir(export_dir, {MODEL_FILE: blob, **files},
                     {**metadata, "quantization": quantization})
    return os.path.join(export_dir, MODEL_FILE)


class LiteRTModel:
    """The `.tflite` of a task's ids graph (`write_ids_litert`) standing in for the Keras model of
    its raw-text module, as `onnx.OnnxModel` does: int32 features [n, T] in a TensorFlow graph,
    its outputs [n, ...] out (`tf.numpy_function`), one row a call, padded to the graph's length
    (padded keys add exactly zero to attention) and its outputs cut back to T.

    Args:
      runner: the interpreter's signature runner of the ids graph.
      attributes: what the module reads of its model (`num_labels`, `config`, ...).
    """

    runs_onnx = True  # `ModelExport._onnx_outputs`: a converted graph's outputs

    def __init__(self, runner, **attributes):
        self.runner = runner
        self._lock = threading.Lock()
        self.weights = []
        self._inputs = sorted(runner.get_input_details())
        # The graph's length: None for any (a trimmed window's, a sentence's).
        length = runner.get_input_details()[self._inputs[0]]["shape_signature"][1]
        self._length = None if length < 0 else int(length)
        self._outputs = sorted(runner.get_output_details().items())
        self.output_names = tuple(name for name, _ in self._outputs)
        self.__dict__.update(attributes)

    def _shape(self, detail, rows, width):
        """An output's shape on `rows` rows of `width` word-pieces: [rows, width, ...] where its
        second dimension is the graph's length (or any), [rows, ...] otherwise (ELECTRA's
        beams)."""
        shape = [rows] + [int(size) for size in detail["shape_signature"][1:]]
        if len(shape) > 1 and shape[1] in (self._length, -1):
            shape[1] = width
        return shape

    def _run(self, *arrays):
        rows, width = arrays[0].shape
        padded = [np.pad(array, [(0, 0), (0, (self._length or width) - width)])
                  for array in arrays]
        # TensorFlow may run the module's groups (a while loop's iterations) side by side; an
        # interpreter serves one call at a time (concurrent calls corrupt its memory).
        with self._lock:
            calls = [self.runner(**{name: array[i:i + 1]
                                    for name, array in zip(self._inputs, padded)})
                     for i in range(rows)]
        return [np.concatenate([c[name] for c in calls])[tuple(
                    slice(0, size) for size in self._shape(detail, rows, width))] if calls else
                np.zeros(self._shape(detail, 0, width), detail["dtype"])
                for name, detail in self._outputs]

    def __call__(self, features, training=False, **unused_options):
        feeds = [tf.cast(features[name], tf.int32) for name in self._inputs]
        values = tf.numpy_function(self._run, feeds,
                                   [tf.as_dtype(detail["dtype"]) for _, detail in self._outputs],
                                   stateful=False)
        for value, (_, detail) in zip(values, self._outputs):
            value.set_shape(self._shape(detail, *feeds[0].shape))
        return dict(zip(self.output_names, values))


def serving_call(model_path, metadata, serving, num_threads=None):
    """predict.py's `call(signature name, **arrays)` of a LiteRT export: its raw-text
    signatures (`LiteRTExport`), or for a graph on token ids (export.json's `inputs`) its task's
    module around it (`LiteRTModel`)."""
    if "inputs" not in metadata:
        return LiteRTExport(model_path, num_threads).call
    from bert_runner.serving import onnx
    from bert_runner.serving.served import ServedModule

    runner = interpreter(model_path=model_path, num_threads=num_threads,
                         # Written before the whole last layer: without XNNPack.
                         xnnpack=metadata.get("xnnpack", True)).get_signature_runner()
    return ServedModule(lambda **attributes: LiteRTModel(runner, **attributes),
                        os.path.join(os.path.dirname(model_path), onnx.VOCAB_FILE), metadata,
                        serving).call


class LiteRTExport:
    """A LiteRT export (`write_litert`) served as predict.py serves a SavedModel: `call(signature
    name, **arrays)` runs the `.tflite`'s raw-text signature of that name (strings encoded as
    UTF-8) and gives its outputs (numpy).

    Args:
      model_path: its model.tflite (export.json beside it).
      num_threads: the interpreter's threads (None: its default).
    """

    def __init__(self, model_path, num_threads=None):
        self.model = interpreter(model_path=model_path, num_threads=num_threads)

    def call(self, name, **arrays):
        runner = self.model.get_signature_runner(name)
        return runner(**{k: np.char.encode(np.asarray(v, dtype=str), "utf-8")
                         for k, v in arrays.items()})


def _check_runs(blob):
    """Runs every signature of the converted model on one text (SWAG's: one ending): an op
    without a LiteRT kernel (the converter lets unknown ops through as custom ops) fails here, not
    on the phone."""
    model = interpreter(model_content=blob)
    for key in model.get_signature_list():
        runner = model.get_signature_runner(key)
        runner(**{name: np.full([max(size, 1) for size in detail["shape_signature"]],
                                b"a b" if detail["dtype"] in (np.bytes_, np.object_) else 1,
                                dtype=detail["dtype"])
                  for name, detail in runner.get_input_details().items()})


def _check_int8_outputs(blob, module, calibration_texts):
    """Refuses a full-int8 model whose outputs are far from the float graph's on the first
    INT8_CHECK_TEXTS calibration texts: integer activations can lose a BERT altogether (its
    LayerNorm and attention ranges; tensorflow#44306), and a model that answers at chance must
    not be written as if it worked."""
    model = interpreter(model_content=blob)
    runners = {key: model.get_signature_runner(key) for key in model.get_signature_list()}
    floats = module.signatures()
    errors = []
    for key, inputs in _calibration(calibration_texts[:INT8_CHECK_TEXTS]):
        want = floats[key](**{name: tf.constant(v) for name, v in inputs.items()})
        got = runners[key](**inputs)
        for name, value in want.items():
            value = value.numpy()
            if value.dtype.kind == "f":
                errors.append(np.linalg.norm(got[name] - value)
                              / max(float(np.linalg.norm(value)), 1e-12))
    error = float(np.mean(errors))
    if error > INT8_MAX_ERROR:
        raise ValueError(
            "full int8 changes the model's outputs by %.0f%% on average (%d calibration inputs "
            "against float32; at most %.0f%% is accepted): its integer activations do not hold "
            "this model. --quantization=dynamic_int8 keeps int8 weights with float activations"
            % (100 * error, min(len(calibration_texts), INT8_CHECK_TEXTS), 100 * INT8_MAX_ERROR))


def tokenizer_differences(vocab_file, do_lower_case, texts):
    """[(text, ours, tf.text's)] of the texts whose word-piece ids differ between the
    SavedModel's tokenizer (the original's) and the LiteRT one."""
    ours = FastBertTokenizer(vocab_file, do_lower_case).tokenize_batch(texts)
    vocab = tokenization.load_vocab(vocab_file)
    theirs = LiteRTTokenizer(vocab_file, do_lower_case).tokenize(tf.constant(texts)).to_list()
    return [(text, [vocab[p] for p in a], b) for text, a, b in zip(texts, ours, theirs)
            if [vocab[p] for p in a] != b]


def text_module(convertible, vocab_file, do_lower_case, max_seq_length):
    """The LiteRT raw-text module of `convertible` (a `registry.Convertible`): its format's
    module on a reference-kernel copy of the model, one text a call, tf.text's tokenizer."""
    return convertible.text_module(reference_copy(convertible.model, **served_modes(1)),
                                   LiteRTTokenizer(vocab_file, do_lower_case), max_seq_length)


def read_calibration_file(path):
    """Calibration texts of a UTF-8 file: one per line, a tab between the texts of a pair;
    blank lines skipped. Raises ValueError naming --calibration_file for a file without any."""
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            data = f.read()
    except tf.errors.OpError as e:
        raise ValueError("--calibration_file=%s: %s" % (path, results.file_error_reason(e))) from e
    texts = []
    for number, line in enumerate(data.splitlines(), 1):
        try:
            line = line.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as e:
            raise ValueError("--calibration_file=%s line %d is not UTF-8" % (path, number)) from e
        if line.strip():
            parts = line.split("\t")
            texts.append(parts[0] if len(parts) == 1 else tuple(parts[:2]))
    if not texts:
        raise ValueError("--calibration_file=%s has no text: give a few hundred of the "
                         "training texts, one per line" % path)
    return texts[:CALIBRATION_TEXTS]


def export_from_config(export_config, files):
    """export_model.py --format=litert."""
    if export_config.quantization == "int8" and not export_config.calibration_file:
        raise ValueError("--quantization=int8 needs --calibration_file (training texts, one per "
                         "line; a tab between the texts of a pair)")
    calibration = None
    if export_config.quantization == "int8":
        calibration = read_calibration_file(export_config.calibration_file)
    convertible = convertible_from_config(export_config, files)
    if convertible.litert_ids:
        path = write_ids_litert(convertible, files.vocab_file, export_config.do_lower_case,
                                export_config.max_seq_length, export_config.quantization,
                                export_config.export_dir)
    else:
        module = text_module(convertible, files.vocab_file, export_config.do_lower_case,
                             export_config.max_seq_length)
        path = write_litert(module, export_config.quantization, export_config.export_dir,
                            calibration)
    logging.info("LiteRT model (%s): %s, %.1f MB", export_config.quantization, path,
                 os.path.getsize(path) / 1e6)
