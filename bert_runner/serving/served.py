"""A task's raw-text module run in this process around a model other than the one a SavedModel
holds: an ONNX export's graph (`onnx.OnnxModel`), a LiteRT export's (`litert.LiteRTModel`), or the
Keras model a Hugging Face directory with its head loads into (`hugging_face_serving`). The
tokenizer, windows and reassembly are the SavedModel's own code, so the answers are its answers.
"""
import tensorflow as tf


class ServedModule:
    """`call(signature name, **arrays)` gives what the SavedModel's signature of that name gives
    (numpy), computed by the task's raw-text module (`ServingFormat.served_module`) with
    `make_model`'s model.

    Args:
      make_model: `(**attributes) -> model` standing in for the module's Keras model (or the
        Keras model itself); `attributes` are what the module reads of its model (`num_labels`).
      vocab_file: the export's vocab.txt.
      metadata: its export.json settings (`do_lower_case`, `max_seq_length`, labels, windows).
      serving: the `registry.ServingFormat` of its task.
    """

    def __init__(self, make_model, vocab_file, metadata, serving):
        from vocab.fast_tokenizer import FastBertTokenizer

        tokenizer = FastBertTokenizer(vocab_file, metadata["do_lower_case"])
        self.module = serving.served_module(make_model, tokenizer, metadata)
        self.signatures = self.module.signatures()

    def call(self, name, **arrays):
        """The outputs (numpy) of the module's signature `name` on `arrays`."""
        outputs = self.signatures[name](**{k: tf.constant(v) for k, v in arrays.items()})
        return {k: v.numpy() for k, v in outputs.items()}
