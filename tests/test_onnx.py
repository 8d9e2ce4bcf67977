"""bert_runner.serving.onnx (export_model.py --format=onnx): the tiny classifier and a pooled
encoder exported with tf2onnx, run by onnxruntime behind our tokenizer, give the SavedModel's
outputs. Skipped when the optional packages (requirements-onnx.txt) are not installed.
"""
import json
import re
import sys

import numpy as np
import pytest

from modeling_helpers import (
    EXPORT_LABELS as LABELS, EXPORT_PAIRS as PAIRS, TINY, export_classifier, tiny_config)
from refusals import message

VOCAB = str(TINY / "vocab.txt")
MAX_SEQ_LENGTH = 16
SINGLES = ["The dog runs fast.", "Thé BIG cät SINGS?", "猫 and a dog", "", "dog\x00cat",
           "a big red car and a small blue car and a new house on the hill with a green tree",
           "she can swim", "snow", "I see the city from the hill.", "happy birds sing"]


def _require_onnx():
    for name in ("tf2onnx", "onnx", "onnxruntime"):
        pytest.importorskip(name, reason=f"{name} is not installed (pip install -r "
                                         "requirements-onnx.txt)")


@pytest.fixture(scope="module")
def classifier():
    return export_classifier()


@pytest.mark.large
def test_classifier_gives_the_saved_models_probabilities(classifier, tmp_path):
    _require_onnx()
    import tensorflow as tf

    from bert_runner.serving import onnx
    from bert_tasks.classifier import raw_text
    from vocab.fast_tokenizer import FastBertTokenizer

    onnx.write_onnx(raw_text.convertible(classifier, LABELS), VOCAB, True,
                    MAX_SEQ_LENGTH, tmp_path / "onnx")
    metadata = json.loads((tmp_path / "onnx" / "export.json").read_text())
    assert metadata["labels"] == LABELS and metadata["format"] == "onnx/classifier"
    model = onnx.OnnxTextModel(str(tmp_path / "onnx"), num_threads=1)

    saved = raw_text.ClassifierExport(classifier, FastBertTokenizer(VOCAB),
                                                MAX_SEQ_LENGTH, LABELS)
    expected = saved.serve(tf.constant(SINGLES))["probabilities"].numpy()
    np.testing.assert_allclose(model(SINGLES)["probabilities"], expected, atol=1e-5, rtol=0)
    assert np.ptp(expected, axis=0).max() > 0.05  # the inputs do give different outputs
    a, b = [list(texts) for texts in zip(*PAIRS)]
    expected = saved.serve_pairs(tf.constant(a), tf.constant(b))["probabilities"].numpy()
    np.testing.assert_allclose(model(a, b)["probabilities"], expected, atol=1e-5, rtol=0)
    features = model.features(["the dog", "a big red car"])
    assert features["input_ids"].shape == (2, 6)  # padded to the batch's longest row only


@pytest.mark.large
def test_embedding_gives_the_saved_models_vectors(tmp_path):
    _require_onnx()
    import tensorflow as tf

    from bert_runner.serving import embedding, onnx
    from modeling import BertModel
    from modeling import checkpoint as checkpoints
    from vocab.fast_tokenizer import FastBertTokenizer

    encoder = BertModel(tiny_config())
    checkpoints.load_checkpoint(encoder, TINY / "bert_model.ckpt", strict=False)
    onnx.write_onnx(embedding.convertible(encoder, "mean", True), VOCAB, True, MAX_SEQ_LENGTH,
                    tmp_path / "onnx")
    got = onnx.OnnxTextModel(str(tmp_path / "onnx"))(SINGLES)["embedding"]
    saved = embedding.EmbeddingExport(encoder, FastBertTokenizer(VOCAB), MAX_SEQ_LENGTH, "mean",
                                      True)
    np.testing.assert_allclose(got, saved.serve(tf.constant(SINGLES))["embedding"].numpy(),
                               atol=1e-5, rtol=0)


def test_missing_package_names_the_requirements_file(monkeypatch):
    from bert_runner.serving import onnx

    monkeypatch.setitem(sys.modules, "tf2onnx", None)  # import fails as if not installed
    with pytest.raises(ValueError, match=re.escape(message("onnx-missing-package"))) as error:
        onnx.require("tf2onnx")
    assert str(error.value).startswith("ONNX export and inference need tf2onnx")
