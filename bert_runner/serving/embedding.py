"""The sentence-embedding format: raw text in, one vector per text out (`modeling.layers.pooling` of
the last layer: [CLS], mean or max over the real tokens, optionally L2-normalised), from the
encoder of any checkpoint. The machinery's own format: no task owns it.

Signatures `serving_default(text_a [N])` and `pairs(text_a [N], text_b [N])` (an empty text_b
gives the single-text encoding); output `embedding` float32 [N, H].
"""
from bert_runner.serving import provenance, registry
from bert_runner.serving.saved_model import write_saved_model
from bert_runner.serving.text_module import ROWS_PER_CALL, TextExport
from bert_runner.startup import check_pooling
from modeling.layers.pooling import pool
from vocab.fast_tokenizer import FastBertTokenizer


class EmbeddingExport(TextExport):
    """The raw-text signatures of a sentence encoder: one vector per text
    (`modeling.layers.pooling`).

    Args:
      model: `BertModel` with its weights.
      tokenizer: `FastBertTokenizer` of the model's vocabulary and casing.
      max_seq_length: int, texts are cut to this many word-pieces with [CLS] and [SEP].
      pooling: "cls", "mean" or "max" (`modeling.layers.pooling.pool`; "cls" is refused for a
        left-to-right model, `bert_runner.startup.check_pooling`).
      normalize: L2-normalise each vector.
      rows_per_call: int, rows per model call.
    """

    format = "embedding"

    def __init__(self, model, tokenizer, max_seq_length, pooling, normalize,
                 rows_per_call=ROWS_PER_CALL):
        check_pooling(pooling, model.config)
        super().__init__("bert_text_embedding", model, tokenizer, max_seq_length,
                         model.config.hidden_size, rows_per_call)
        self.pooling = pooling
        self.normalize = normalize

    def metadata(self):
        return {**super().metadata(), "pooling": self.pooling, "normalize": self.normalize}

    def _row_values(self, group):
        converted = self._onnx_outputs(group)
        if converted is not None:
            return converted["embedding"]
        # Only the real tokens are pooled, so the encoder skips the padding's rows.
        outputs = self._parts.model({"input_ids": group["input_ids"],
                                     "input_mask": group["input_mask"],
                                     "token_type_ids": group["segment_ids"]},
                                    training=False, skip_padding=True)
        return pool(outputs["sequence_output"], group["input_mask"], self.pooling, self.normalize)

    def _outputs(self, vectors):
        return {"embedding": vectors}


def export_embedding(model, vocab_file, do_lower_case, max_seq_length, pooling, normalize,
                     export_dir):
    """Writes the raw-text sentence-embedding SavedModel of `model` (a `BertModel`) to
    `export_dir` (which must not exist; see `write_saved_model`); `pooling` and `normalize` as
    for `EmbeddingExport`. Returns export_dir."""
    module = EmbeddingExport(model, FastBertTokenizer(vocab_file, do_lower_case), max_seq_length,
                             pooling, normalize)
    return write_saved_model(module, export_dir, "sentence encoder")


def export_from_config(export_config, files):
    """export_model.py --format=embedding: the encoder of any checkpoint, pooled."""
    if not export_config.pooling:
        raise ValueError("--format=embedding needs --pooling=cls, mean or max")
    model = provenance.load_encoder(files.config, export_config.checkpoint,
                                    config_file=files.config_file)
    export_embedding(provenance.serving_precision(model, export_config.mixed_precision),
                     files.vocab_file, export_config.do_lower_case, export_config.max_seq_length,
                     export_config.pooling, export_config.normalize, export_config.export_dir)


def convertible(model, pooling, normalize):
    """The `registry.Convertible` of `model` (a `BertModel`) pooled with `pooling` ("cls", "mean",
    "max") and optionally L2-normalised: what LiteRT and ONNX convert."""

    def ids_outputs(encoder, features):
        sequence = encoder(features, training=False)["sequence_output"]
        return {"embedding": pool(sequence, features["input_mask"], pooling, normalize)}

    return registry.Convertible(
        model=model, metadata={"labels": None, "pooling": pooling, "normalize": normalize},
        text_module=lambda encoder, tokenizer, max_seq_length: EmbeddingExport(
            encoder, tokenizer, max_seq_length, pooling, normalize, rows_per_call=1),
        ids_outputs=ids_outputs)


def served_module(make_model, tokenizer, metadata):
    """The `EmbeddingExport` of an ONNX export (`ServingFormat.served_module`)."""
    import types

    width = make_model().output_shape("embedding")[-1]
    model = make_model(config=types.SimpleNamespace(causal=False,  # pooling checked at export
                                                    hidden_size=width))
    return EmbeddingExport(model, tokenizer, metadata["max_seq_length"], metadata["pooling"],
                           metadata["normalize"])


def convertible_from_config(export_config, files):
    """The encoder LiteRT and ONNX convert with --pooling."""
    model = provenance.load_encoder(files.config, export_config.checkpoint,
                                    config_file=files.config_file)
    return convertible(model, export_config.pooling, export_config.normalize)
