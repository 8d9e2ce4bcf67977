"""ONNX export of a classifier or sentence encoder: the model with token ids in (tf2onnx), and
our fast tokenizer as the documented pre-processing (tf.text's tokenizer ops have no ONNX
counterpart).

`export_dir` holds `model.onnx`, `vocab.txt` and `export.json` (max_seq_length, casing, labels or
pooling). The model's inputs are int32 `input_ids`, `input_mask`, `segment_ids` [N, T] (any N, any
T up to the config's positions); its output `probabilities` float32 [N, L] (softmax),
`predictions` [N] (regression) or `embedding` [N, H]. The encoder runs on the reference kernels
(`conversion.reference_copy`).

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

MODEL_FILE = "model.onnx"
VOCAB_FILE = "vocab.txt"
REQUIREMENTS = "requirements-onnx.txt"
# 17: LayerNormalization-free graphs run on every onnxruntime since 1.11; what tf2onnx 1.17 tests.
OPSET = 17
_FEATURES = ("input_ids", "input_mask", "segment_ids")


def require(*modules):
    """Imports the optional `modules` (names); a missing one is a ValueError naming
    requirements-onnx.txt."""
    import importlib

    try:
        return [importlib.import_module(name) for name in modules]
    except ImportError as e:
        raise ValueError("ONNX export and inference need %s: pip install -r %s"
                         % (e.name, REQUIREMENTS)) from e


def ids_function(convertible):
    """The tf.function the ONNX graph is made of: int32 input_ids, input_mask, segment_ids [N, T]
    -> the outputs `convertible.ids_outputs` gives (a classifier's "probabilities" or
    "predictions", an encoder's "embedding"), on a reference-kernel copy of its model."""
    model = conversion.reference_copy(convertible.model)
    # The padded grid: tf2onnx cannot convert the real-token rows' data-dependent gather.
    getattr(model, "encoder", model).static_shapes = True
    spec = [tf.TensorSpec([None, None], tf.int32, name=name) for name in _FEATURES]

    @tf.function(input_signature=spec)
    def run(input_ids, input_mask, segment_ids):
        return convertible.ids_outputs(model, {"input_ids": input_ids, "input_mask": input_mask,
                                               "token_type_ids": segment_ids})

    return run


def convert(function):
    """The ONNX ModelProto bytes of `ids_function`'s result (tf2onnx).

    `tf2onnx.convert.from_function` with one of tf2onnx's graph optimizers left out:
    `reshape_optimizer` (tf2onnx 1.17) rewrites the attention's `[B, S, H] -> [B, S, N, D]`
    reshape with the sizes of the dense layer's flattened `[B * S, H]` input, which onnxruntime
    then refuses. `from_function` takes no optimizer list, so its steps are spelled out here.
    """
    (tf2onnx,) = require("tf2onnx")
    from tf2onnx import optimizer, tf_loader

    concrete = function.get_concrete_function()
    inputs = [t.name for t in concrete.inputs if t.dtype != tf.dtypes.resource]
    outputs = [t.name for t in concrete.outputs if t.dtype != tf.dtypes.resource]
    optimizers = {name: make for name, make in optimizer._get_optimizers().items()
                  if name != "reshape_optimizer"}
    try:
        with tf.device("/cpu:0"):
            frozen = tf_loader.from_function(concrete, inputs, outputs)
            proto, _ = tf2onnx.convert._convert_common(
                frozen, name=concrete.name, continue_on_error=True, opset=OPSET,
                input_names=inputs, output_names=outputs, optimizers=optimizers,
                tensors_to_rename=tf2onnx.convert.tensor_names_from_structed(
                    concrete, inputs, outputs))
    except Exception as e:  # tf2onnx raises whatever its handlers raise
        raise ValueError("ONNX conversion failed: %s" % conversion.first_line(e)) from e
    return proto.SerializeToString()


def write_onnx(convertible, vocab_file, do_lower_case, max_seq_length, export_dir):
    """Writes `export_dir` (new): model.onnx, vocab.txt and export.json.

    Args:
      convertible: `registry.Convertible`, a classifier's or an encoder's (its metadata: labels,
        pooling, normalize).
      vocab_file, do_lower_case, max_seq_length: the pre-processing's (as the SavedModel's).
    Returns: the path of model.onnx.
    """
    blob = convert(ids_function(convertible))
    with tf.io.gfile.GFile(vocab_file, "rb") as f:
        vocab = f.read()
    kind = "embedding" if convertible.metadata.get("pooling") else "classifier"
    metadata = {"format": "onnx/" + kind, "inputs": list(_FEATURES),
                "max_seq_length": max_seq_length, "do_lower_case": do_lower_case,
                **convertible.metadata, "opset": OPSET}
    conversion.write_export_dir(export_dir, {MODEL_FILE: blob, VOCAB_FILE: vocab}, metadata)
    return os.path.join(export_dir, MODEL_FILE)


class OnnxTextModel:
    """An ONNX export served by onnxruntime on raw text, our tokenizer in front.

    Args:
      export_dir: written by `write_onnx`.
      num_threads: onnxruntime's intra-op threads (None: its default).
    """

    def __init__(self, export_dir, num_threads=None):
        from vocab.fast_tokenizer import FastBertTokenizer

        (ort,) = require("onnxruntime")
        with open(os.path.join(export_dir, conversion.METADATA_FILE), encoding="utf-8") as f:
            self.metadata = json.load(f)
        self.tokenizer = FastBertTokenizer(os.path.join(export_dir, VOCAB_FILE),
                                           self.metadata["do_lower_case"])
        options = ort.SessionOptions()
        if num_threads:
            options.intra_op_num_threads = num_threads
            options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(os.path.join(export_dir, MODEL_FILE), options,
                                            providers=["CPUExecutionProvider"])
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


def export_from_flags(flag_values, files):
    """export_model.py --format=onnx."""
    require("tf2onnx", "onnx")
    path = write_onnx(conversion.convertible_from_flags(flag_values, files), files.vocab_file,
                      flag_values.do_lower_case, flag_values.max_seq_length,
                      flag_values.export_dir)
    logging.info("ONNX model: %s, %.1f MB", path, os.path.getsize(path) / 1e6)
