"""ONNX export of every task's model: the model with token ids in (tf2onnx); the tokenizer, a
SQuAD run's windows and answers, NER's words and tags stay outside the graph, in Python (tf.text's
tokenizer ops have no ONNX counterpart).

`export_dir` holds `model.onnx`, `vocab.txt` and `export.json` (the task's SavedModel export.json
settings, `format` "onnx/<task>"). The model's inputs are int32 `input_ids`, `input_mask`,
`segment_ids` [N, T] (any N, any T up to the config's positions; SWAG's [N, C, T], C endings;
SQuAD's windows [N, max_seq_length]);
its outputs (`registry.Convertible.ids_outputs`, each task's): a classifier's `probabilities`
float32 [N, L] and `logits` [N, L] (`predictions` [N] and `logits` [N, 1] for regression), an
encoder's `embedding` [N, H], SQuAD's `start_logits`, `end_logits` [N, T] per window, NER's
`logits` [N, T, L] per word-piece, SWAG's `logits` [N, C]. The encoder runs on the reference
kernels (`conversion.reference_copy`).

`served` serves an export as predict.py does a SavedModel: the task's own raw-text module
(`ServingFormat.served_module`: the same tokenizer, windows and reassembly) with ONNX Runtime as
its model (`OnnxModel`), so that its answers are the SavedModel's.

    from bert_runner.serving import onnx
    model = onnx.OnnxTextModel("/tmp/mrpc_onnx")        # onnxruntime + our tokenizer
    model(["He said the food was great."], ["The food was great, he said."])

`OnnxTextModel.features(text_a, text_b)` is the pre-processing alone (numpy ids for any ONNX
runtime): `vocab.fast_tokenizer.FastBertTokenizer` (the original's word-pieces), the original's
`[CLS] A [SEP] B [SEP]` packing and truncation, padding to the batch's longest row.
"""
import json
import os

import tensorflow as tf
from absl import logging

from bert_runner.serving import conversion
from bert_runner.serving.onnx_layer_norm import fuse_layer_norms

MODEL_FILE = "model.onnx"
VOCAB_FILE = "vocab.txt"
REQUIREMENTS = "requirements-onnx.txt"
# 17: LayerNormalization-free graphs run on every onnxruntime since 1.11; what tf2onnx 1.17 tests.
OPSET = 17
_FEATURES = ("input_ids", "input_mask", "segment_ids")
# What an ONNX export's weights can be (export_model.py --quantization).
QUANTIZATIONS = ("float32", "dynamic_int8")
# Weights from which `convert` collects tf2onnx's graph copies as it goes (BERT-Base's then peak
# at a fraction of the memory); a small model's copies cost less than the collections' time.
COLLECTED_ABOVE_BYTES = 64 * 2**20


def require(*modules):
    """Imports the optional `modules` (names); a missing one is a ValueError naming
    requirements-onnx.txt.

    The process's environment stays as it was: importing tf2onnx.convert sets
    TF_CPP_MIN_LOG_LEVEL=3 in it, which TensorFlow, imported already, no longer reads, but which
    every process started after would inherit (its C++ errors silenced).
    """
    import importlib

    environment = dict(os.environ)
    try:
        return [importlib.import_module(name) for name in modules]
    except ImportError as e:
        raise ValueError("ONNX export and inference need %s: pip install -r %s"
                         % (e.name, REQUIREMENTS)) from e
    finally:
        for name in set(os.environ) - set(environment):
            del os.environ[name]
        os.environ.update(environment)


def ids_function(convertible, shape=None, whole_last_layer=False):
    """The tf.function the ONNX graph is made of: int32 input_ids, input_mask, segment_ids [N, T]
    (`shape`, default `convertible.ids_shape`) -> the outputs `convertible.ids_outputs` gives (a
    classifier's "probabilities" or "predictions", an encoder's "embedding"), on a
    reference-kernel copy of its model (its weights: the function's `model_weights`), its
    encoder's last layer whole with `whole_last_layer` (an `EncoderModes` field)."""
    # The padded grid: tf2onnx cannot convert the real-token rows' data-dependent gather.
    model = conversion.reference_copy(convertible.model, static_shapes=True,
                                      whole_last_layer=whole_last_layer)
    spec = [tf.TensorSpec(shape or convertible.ids_shape, tf.int32, name=name)
            for name in _FEATURES]

    @tf.function(input_signature=spec)
    def run(input_ids, input_mask, segment_ids):
        return convertible.ids_outputs(model, {"input_ids": input_ids, "input_mask": input_mask,
                                               "token_type_ids": segment_ids})

    run.model_weights = [weight.value for weight in model.weights]
    return run


def convert(function):
    """The ONNX ModelProto bytes of `ids_function`'s result (tf2onnx).

    `tf2onnx.convert.from_function` with two of tf2onnx's graph optimizers left out:
    `reshape_optimizer` (tf2onnx 1.17) rewrites the attention's `[B, S, H] -> [B, S, N, D]`
    reshape with the sizes of the dense layer's flattened `[B * S, H]` input, which onnxruntime
    then refuses; `global_pool_optimizer` writes a LayerNorm's means as GlobalAveragePool, which
    hides them from `fuse_layer_norms`. `from_function` takes no optimizer list, so its steps are
    spelled out here. Each LayerNorm is then one `LayerNormalization` node
    (`onnx_layer_norm.fuse_layer_norms`).

    Memory: tf2onnx deep-copies the whole graph, weights included, before each optimizer pass
    (to roll a failed pass back), and the copies are cycles that only Python's cyclic collector
    frees. For a model of COLLECTED_ABOVE_BYTES of weights or more, each pass here starts with a
    collection, so that a few copies are alive, not dozens, and the freezing's own copies are
    handed back before the conversion starts. A smaller model's copies cost less than the
    collections would (each walks every object of the process).
    """
    (converter,) = require("tf2onnx.convert")
    from tf2onnx import optimizer, tf_loader

    concrete = function.get_concrete_function()
    inputs = [t.name for t in concrete.inputs if t.dtype != tf.dtypes.resource]
    outputs = [t.name for t in concrete.outputs if t.dtype != tf.dtypes.resource]
    large = sum(w.shape.num_elements() * w.dtype.size
                for w in function.model_weights) >= COLLECTED_ABOVE_BYTES
    optimizers = {name: _collected_first(make) if large else make
                  for name, make in optimizer._get_optimizers().items()
                  if name not in ("reshape_optimizer", "global_pool_optimizer")}
    try:
        with tf.device("/cpu:0"):
            frozen = tf_loader.from_function(concrete, inputs, outputs)
            if large:
                conversion.release_memory()
            proto, _ = converter._convert_common(
                frozen, name=concrete.name, continue_on_error=True, opset=OPSET,
                input_names=inputs, output_names=outputs, optimizers=optimizers,
                tensors_to_rename=converter.tensor_names_from_structed(
                    concrete, inputs, outputs))
    except Exception as e:  # tf2onnx raises whatever its handlers raise
        raise ValueError("ONNX conversion failed: %s" % conversion.first_line(e)) from e
    fuse_layer_norms(proto)
    return proto.SerializeToString()


def _collected_first(make):
    """tf2onnx's optimizer factory `make`, run after a collection of Python's cyclic garbage (the
    graph copies of the passes before, `convert`)."""
    import gc

    def factory():
        gc.collect()
        return make()

    return factory


def write_onnx(convertible, vocab_file, do_lower_case, max_seq_length, export_dir,
               quantization="float32"):
    """Writes `export_dir` (new): model.onnx, vocab.txt and export.json.

    Args:
      convertible: `registry.Convertible` (its metadata: labels, pooling, normalize, a task's
        settings); its raw-text module's export.json settings are written too.
      vocab_file, do_lower_case, max_seq_length: the pre-processing's (as the SavedModel's).
      quantization: one of QUANTIZATIONS: "float32", or "dynamic_int8" (`quantize_dynamic`).
    Returns: the path of model.onnx.
    """
    check_quantization(quantization)
    blob = convert(ids_function(convertible))
    if quantization == "dynamic_int8":
        blob = quantize_dynamic(blob)
    files, metadata = ids_export(convertible, vocab_file, do_lower_case, max_seq_length, "onnx")
    conversion.write_export_dir(export_dir, {MODEL_FILE: blob, **files},
                                {**metadata, "opset": OPSET, "quantization": quantization})
    return os.path.join(export_dir, MODEL_FILE)


def check_quantization(quantization):
    """Refuses (ValueError, one line) a --quantization ONNX exports do not have."""
    if quantization not in QUANTIZATIONS:
        raise ValueError("--format=onnx --quantization=%s: ONNX exports are %s (float16 and full "
                         "int8 are LiteRT's, --format=litert)"
                         % (quantization, " or ".join(QUANTIZATIONS)))


def quantize_dynamic(blob):
    """ONNX Runtime's dynamic quantization of the model `blob` (bytes): the weights of its
    matrix products in int8 (signed, per tensor), their activations quantised per call; bytes
    out. Embedding tables, LayerNorm and the final products (`final_products`: the task's head)
    stay float32."""
    import tempfile

    onnx_package, _ = require("onnx", "onnxruntime")
    from onnxruntime.quantization import QuantType, quantize_dynamic as quantize

    with tempfile.TemporaryDirectory() as tmp:
        source, target = os.path.join(tmp, "float32.onnx"), os.path.join(tmp, "int8.onnx")
        with open(source, "wb") as f:
            f.write(blob)
        quantize(source, target, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"],
                 nodes_to_exclude=final_products(onnx_package.load_from_string(blob).graph))
        with open(target, "rb") as f:
            return f.read()


def final_products(graph):
    """The names of `graph`'s (an onnx GraphProto's) MatMul nodes whose results reach the
    outputs through no other MatMul: a task's head (a sentence encoder's last feed-forward).

    Dynamic int8 keeps them float32: their error lands on the answers with nothing after to
    average it out, and a pooled head's inputs (tanh, near +-1) sit at the ends of the uint8
    range, where ONNX Runtime's u8s8 kernels on CPUs without VNNI saturate (pairs of products
    summed in int16). They hold a sliver of the weights.
    """
    consumers = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    feeds_a_product = set()
    for node in reversed(graph.node):  # ONNX graphs list their nodes in topological order
        if any(later.op_type == "MatMul" or later.name in feeds_a_product
               for name in node.output for later in consumers.get(name, ())):
            feeds_a_product.add(node.name)
    return [node.name for node in graph.node
            if node.op_type == "MatMul" and node.name not in feeds_a_product]


def ids_export(convertible, vocab_file, do_lower_case, max_seq_length, kind):
    """({vocab.txt: bytes}, export.json) of an export of `convertible`'s graph on token ids
    ("onnx", or "litert" for a task whose raw-text graph LiteRT cannot run): its format
    "`kind`/<task>", the inputs and its raw-text module's settings (labels, windows)."""
    from vocab.fast_tokenizer import FastBertTokenizer

    module = convertible.text_module(convertible.model,
                                     FastBertTokenizer(vocab_file, do_lower_case), max_seq_length)
    with tf.io.gfile.GFile(vocab_file, "rb") as f:
        vocab = f.read()
    settings = {k: v for k, v in module.metadata().items() if k not in ("format", "signatures")}
    return {VOCAB_FILE: vocab}, {"format": "%s/%s" % (kind, module.format),
                                 "inputs": list(_FEATURES), **settings, **convertible.metadata}


def session(export_dir, num_threads=None):
    """The `onnxruntime.InferenceSession` (CPU) of `export_dir`'s model.onnx, with `num_threads`
    intra-op threads (None: onnxruntime's default)."""
    (ort,) = require("onnxruntime")
    options = ort.SessionOptions()
    if num_threads:
        options.intra_op_num_threads = num_threads
        options.inter_op_num_threads = 1
    return ort.InferenceSession(os.path.join(export_dir, MODEL_FILE), options,
                                providers=["CPUExecutionProvider"])


class OnnxTextModel:
    """An ONNX export served by onnxruntime on raw text, our tokenizer in front.

    Args:
      export_dir: written by `write_onnx`.
      num_threads: onnxruntime's intra-op threads (None: its default).
    """

    def __init__(self, export_dir, num_threads=None):
        from vocab.fast_tokenizer import FastBertTokenizer

        with open(os.path.join(export_dir, conversion.METADATA_FILE), encoding="utf-8") as f:
            self.metadata = json.load(f)
        self.tokenizer = FastBertTokenizer(os.path.join(export_dir, VOCAB_FILE),
                                           self.metadata["do_lower_case"])
        self.session = session(export_dir, num_threads)
        self._pack = tf.function(self._pack_graph, reduce_retracing=True)

    def _pack_graph(self, text_a, text_b):
        from bert_runner.serving.text_module import trim_to_longest

        ids_b = None if text_b is None else self.tokenizer.tokenize(text_b)
        return trim_to_longest(self.tokenizer.pack(self.tokenizer.tokenize(text_a), ids_b,
                                                   self.metadata["max_seq_length"]))

    def features(self, text_a, text_b=None):
        """The model's inputs (numpy int32 [N, T] each) of lists of str: the pre-processing."""
        b = None if text_b is None else tf.constant(text_b, tf.string)
        features = self._pack(tf.constant(text_a, tf.string), b)
        return {name: value.numpy() for name, value in features.items()}

    def __call__(self, text_a, text_b=None):
        """{output name: numpy array} for lists of str (text_b: pairs)."""
        names = [output.name for output in self.session.get_outputs()]
        return dict(zip(names, self.session.run(names, self.features(text_a, text_b))))


class OnnxModel:
    """ONNX Runtime's session standing in for the Keras model of a raw-text module
    (`ModelExport`): called on a group of int32 features [n, T] in a TensorFlow graph, it gives
    the graph's outputs (`tf.numpy_function`; SWAG's [n, 1, T] choices for a graph of [N, C, T]).

    Args:
      inference_session: `onnxruntime.InferenceSession` of model.onnx.
      attributes: what the module reads of its model (`num_labels`, `config`, ...).
    """

    runs_onnx = True  # `ModelExport._onnx_outputs`

    def __init__(self, inference_session, **attributes):
        self.session = inference_session
        self.weights = []
        self._rank = len(inference_session.get_inputs()[0].shape)
        self._outputs = inference_session.get_outputs()
        self.output_names = tuple(output.name for output in self._outputs)
        self.__dict__.update(attributes)

    def __call__(self, features, training=False, **unused_options):
        feeds = [tf.cast(features[name], tf.int32) for name in _FEATURES]
        if self._rank == 3:  # one choice a row
            feeds = [feed[:, None] for feed in feeds]
        names = [output.name for output in self._outputs]
        dtypes = [tf.as_dtype(_NUMPY_TYPES[output.type]) for output in self._outputs]
        values = tf.numpy_function(
            lambda *arrays: self.session.run(names, dict(zip(_FEATURES, arrays))),
            feeds, dtypes, stateful=False)
        # Each dynamic dimension of an output is its features' at that place ([n, T] -> [n, T]).
        for value, output in zip(values, self._outputs):
            value.set_shape([dim if isinstance(dim, int) else feeds[0].shape[i]
                             for i, dim in enumerate(output.shape)])
        return dict(zip(names, values))

    def output_shape(self, name):
        """The shape ONNX declares for output `name` (a str or None for a dynamic dimension)."""
        return next(output.shape for output in self._outputs if output.name == name)


_NUMPY_TYPES = {"tensor(float)": "float32", "tensor(int32)": "int32", "tensor(int64)": "int64"}


def served(export_dir, metadata, serving, num_threads=None):
    """predict.py's `ServedModule` of the ONNX export in `export_dir` (`write_onnx`) on
    onnxruntime (`num_threads` intra-op threads; None: its default)."""
    from bert_runner.serving.served import ServedModule

    loaded = session(export_dir, num_threads)
    return ServedModule(lambda **attributes: OnnxModel(loaded, **attributes),
                        os.path.join(export_dir, VOCAB_FILE), metadata, serving)


def export_from_config(export_config, files):
    """export_model.py --format=onnx."""
    # The settings before the packages and the model: refused as they are, installed or not.
    check_quantization(export_config.quantization)
    require("tf2onnx", "onnx")
    path = write_onnx(conversion.convertible_from_config(export_config, files), files.vocab_file,
                      export_config.do_lower_case, export_config.max_seq_length,
                      export_config.export_dir, export_config.quantization)
    logging.info("ONNX model (%s): %s, %.1f MB", export_config.quantization, path,
                 os.path.getsize(path) / 1e6)
