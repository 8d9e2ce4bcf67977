"""predict.py's logic: load an export_model.py SavedModel, ONNX or LiteRT export, or a Hugging
Face directory with a task head, once; answer raw-text inputs.

    predictor = Predictor("/tmp/mrpc_serving/1")            # any --format's SavedModel, or ONNX
    results = predictor.predict(["He said so.\tSo he said."])  # list of dicts, one per input
    print(predictor.describe(results[0]))                   # one readable line

What the export is comes from its `assets.extra/export.json` (`saved_model.METADATA_FILE`);
an older classifier or embedding export without one is recognised by its signatures' outputs. An
ONNX export (model.onnx beside export.json) is answered by its task's own raw-text module with
ONNX Runtime as its model (`served.ServedModule`): the SavedModel's outputs, the same answers; a
LiteRT export (its directory or its .tflite) by its raw-text signatures or, for a graph on token
ids, the same way (`litert.serving_call`); a Hugging Face directory by the task its head's class
names, the same way with the Keras model its weights load into (`hugging_face_serving`).
Inputs are text lines; fields within a line are separated by tabs, as the export's format
declares them (`registry.ServingFormat.fields`: a classifier's text or text_a<TAB>text_b, SQuAD's
question<TAB>context, ...), and its format answers them (`ServingFormat.answer`, `.describe`).
The formats must be registered first (predict.py registers every task's).
"""
import dataclasses
import json
import os
import time

import tensorflow as tf
import tensorflow_text  # noqa: F401 (registers the tokenizer ops the SavedModels use)
from absl import logging

from bert_runner.serving import registry
from bert_runner.serving.saved_model import METADATA_FILE
from modeling.hf_directory import is_hf_directory


@dataclasses.dataclass
class Input:
    """One input line: `text` (str) and where it came from, e.g. "line 3 of stdin"."""
    text: str
    source: str


def read_inputs(texts=(), input_file=None, stdin=None):
    """The inputs of predict.py: the command line's texts, else `input_file`'s lines (`-` or
    None with `stdin`: standard input's). Each line's trailing newline is dropped; a blank line
    is kept (`run` answers it with a blank line, so that output line i answers input line i).

    Raises:
      ValueError naming the argument or line that is not UTF-8, or when there is no input.
    """
    if texts:
        inputs = []
        for i, text in enumerate(texts, 1):
            source = "argument %d" % i
            try:
                text.encode("utf-8")  # sys.argv keeps undecodable bytes as lone surrogates
            except UnicodeEncodeError as e:
                raise ValueError("%s is not UTF-8 text (byte %d): pass UTF-8"
                                 % (source, e.start)) from None
            inputs.append(Input(text, source))
        return inputs
    if input_file and input_file != "-":
        with open(input_file, "rb") as f:
            data = f.read()
        name = "--input_file=%s" % input_file
    else:
        data = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read()
        name = "stdin"
    inputs = []
    for number, raw in enumerate(data.splitlines(), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError("line %d of %s is not UTF-8 (byte 0x%02x at column %d): convert it to "
                             "UTF-8" % (number, name, raw[e.start], e.start + 1)) from None
        inputs.append(Input(line.lstrip("\ufeff") if number == 1 else line,
                            "line %d of %s" % (number, name)))
    if not any(item.text.strip() for item in inputs):
        raise ValueError("%s has no text: give one input per line" % name)
    return inputs


def _has(export_dir, name):
    return tf.io.gfile.exists(os.path.join(export_dir, name))


def _read_json(path):
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


class Predictor:
    """An export_model.py SavedModel, loaded once (see the module docstring).

    Args:
      export_dir: the SavedModel directory (`--export_dir` of export_model.py).
      warm_up: call every signature `predict` may use once at load, so that every answer after
        it takes milliseconds (a server's first request included). Off where all the inputs
        are known before the load (`run`): their own call builds only the signatures they use.
      num_threads: ONNX Runtime's or LiteRT's threads (None: their default); TensorFlow's are
        the process's.
      top_k: a fill-mask export's word-pieces per mask (None: 5).
    Raises:
      ValueError naming the directory: neither a SavedModel nor an ONNX export, not one of
      export_model.py's, or lacking a signature its format needs.
    """

    def __init__(self, export_dir, warm_up=True, num_threads=None, top_k=None):
        from bert_runner.serving import conversion

        self.export_dir = export_dir
        self.top_k = top_k
        # A LiteRT export: its directory or its .tflite (export.json beside it).
        tflite = (export_dir if export_dir.endswith(".tflite") else
                  os.path.join(export_dir, "model.tflite"))
        converted = os.path.dirname(tflite) if tflite == export_dir else export_dir
        kind = ("litert" if tf.io.gfile.exists(tflite) else
                "onnx" if _has(export_dir, "model.onnx") else
                "huggingface" if is_hf_directory(export_dir) else None)
        if not _has(export_dir, "saved_model.pb") and not (
                kind == "huggingface" or kind and _has(converted, conversion.METADATA_FILE)):
            raise ValueError("--model=%s is neither a SavedModel directory (saved_model.pb) nor "
                             "an ONNX or LiteRT export (model.onnx or model.tflite, export.json) "
                             "nor a Hugging Face directory (config.json, model.safetensors): "
                             "give an --export_dir of export_model.py --format=%s, onnx, litert "
                             "or huggingface"
                             % (export_dir, "|".join(
                                 name for name in registry.names() if registry.get(name).fields)))
        started = time.perf_counter()
        if kind == "huggingface":
            from bert_runner.serving import hugging_face_serving

            self.metadata, self._call = hugging_face_serving.serving(export_dir)
            self.format = self.metadata["format"]
        elif kind:
            self.metadata = _read_json(os.path.join(converted, conversion.METADATA_FILE))
            self.format = self.metadata["format"].partition(kind + "/")[2]
        else:
            self.model = tf.saved_model.load(export_dir)
            self.metadata = self._read_metadata()
            self.format = self.metadata["format"]
        try:
            self.serving = registry.get(self.format)
        except KeyError as e:
            raise ValueError("--model=%s is a %r export, which predict.py does not serve (%s)"
                             % (export_dir, self.format, e.args[0])) from None
        if self.serving.fields is None:
            raise ValueError("--model=%s is a %s export: predict.py serves SavedModels, ONNX and "
                             "LiteRT" % (export_dir, self.format))
        if kind == "onnx":
            from bert_runner.serving import onnx

            self._call = onnx.served(export_dir, self.metadata, self.serving,
                                     num_threads).call
        elif kind == "litert":
            from bert_runner.serving import litert

            self._call = litert.serving_call(tflite, self.metadata, self.serving, num_threads)
        elif kind is None:
            self._check_signatures()
        # The first call of a loaded signature builds and optimises its graph (seconds): made
        # here for every signature `predict` may call, so that every answer after the load
        # takes milliseconds, a classifier's first pair included.
        if warm_up:
            for count in self.serving.warm_up_fields or (self.serving.fields[0],):
                self.predict([Input("\t".join([self.serving.warm_up_text] * count),
                                    "warm-up")])
        logging.info("Loaded the %s export %s in %.1f s", self.format, export_dir,
                     time.perf_counter() - started)

    def _check_signatures(self):
        needed = self.serving.signatures or self.metadata.get("signatures", ["serving_default"])
        export_dir = self.export_dir
        for name in needed:
            if name not in self.model.signatures:
                raise ValueError(
                    "--model=%s has no signature %r (it has: %s): a %s export has it; export the "
                    "model again with export_model.py --format=%s"
                    % (export_dir, name, ", ".join(sorted(self.model.signatures)) or "none",
                       self.format, self.format))

    def _read_metadata(self):
        path = os.path.join(self.export_dir, METADATA_FILE)
        if tf.io.gfile.exists(path):
            return _read_json(path)
        # An export from before export.json: a classifier or an embedding, by its outputs.
        signature = self.model.signatures.get("serving_default")
        outputs = set(signature.structured_outputs) if signature is not None else set()
        if outputs & {"probabilities", "predictions"}:
            return {"format": "classifier", "signatures": ["serving_default", "pairs"]}
        if "embedding" in outputs:
            return {"format": "embedding", "signatures": ["serving_default", "pairs"]}
        raise ValueError(
            "--model=%s is not an export of export_model.py (no %s, and its serving_default "
            "outputs %s are none of a classifier's or an embedding's)"
            % (self.export_dir, METADATA_FILE, sorted(outputs) or "nothing"))

    def fields(self, inputs):
        """The tab-separated fields of each input, checked against the format (ValueError naming
        the input)."""
        fewest, most, form = self.serving.fields
        rows = []
        for item in inputs:
            parts = item.text.split("\t")
            if len(parts) < fewest or (most is not None and len(parts) > most):
                raise ValueError("%s has %d tab-separated field(s); %s %s export takes %s"
                                 % (item.source, len(parts),
                                    "an" if self.format[:1] in "aeiou" else "a", self.format,
                                    form))
            if any(not part.strip() for part in parts):
                raise ValueError("%s has an empty text: give text in each field (%s)"
                                 % (item.source, form))
            rows.append(parts)
        self.serving.check_rows(rows)
        return rows

    def predict(self, inputs):
        """list of `Input` (or str) -> list of result dicts, one per input (JSON-able)."""
        inputs = [Input(item, "input %d" % i) if isinstance(item, str) else item
                  for i, item in enumerate(inputs, 1)]
        metadata = self.metadata if self.top_k is None else {**self.metadata,
                                                             "top_k": self.top_k}
        return self.serving.answer(self._call, self.fields(inputs), metadata)

    def _call(self, name, **tensors):
        outputs = self.model.signatures[name](**{k: tf.constant(v) for k, v in tensors.items()})
        return {k: v.numpy() for k, v in outputs.items()}

    def describe(self, result):
        """One readable line of a result of `predict`."""
        return self.serving.describe(result)


def predict(export_dir, texts=(), input_file=None, stdin=None, output_format="text", out=None,
            top_k=None):
    """predict.py: loads `export_dir`, answers the inputs (`read_inputs`), writes one line per
    input to `out`: readable, or one JSON object per line (`output_format="json"`, with the
    input's text); `top_k`: a fill-mask export's word-pieces per mask."""
    inputs = read_inputs(texts, input_file, stdin)
    answered = [item for item in inputs if item.text.strip()]
    # Every input is read before the load: their call builds what they use, and a one-off
    # answer does not wait for signatures it never calls.
    predictor = Predictor(export_dir, warm_up=False, top_k=top_k)
    started = time.perf_counter()
    results = iter(predictor.predict(answered))
    logging.info("Answered %d input(s) in %.1f ms", len(answered),
                 1000 * (time.perf_counter() - started))
    for item in inputs:
        if not item.text.strip():  # a blank line: a blank answer, the lines stay aligned
            out.write(json.dumps({"input": item.text}) + "\n" if output_format == "json" else "\n")
            continue
        result = next(results)
        if output_format == "json":
            out.write(json.dumps({"input": item.text, **result}, ensure_ascii=False) + "\n")
        else:
            out.write(predictor.describe(result) + "\n")
