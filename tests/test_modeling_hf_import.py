"""Hugging Face naming in: a checkpoint the test writes from the tiny fixture's weights."""
import json
import struct

import numpy as np
import pytest
import tensorflow as tf

from modeling import BertModel, BertPretrainer, gelu_exact, tf1_checkpoint
from modeling.hf_checkpoint import config_from_hf, hf_name, load_hf_checkpoint
from modeling_helpers import TINY, tiny_config


def write_safetensors(path, tensors):
    """Minimal safetensors writer (the format: u64 header length, JSON header, raw data)."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))


def hf_checkpoint_from_fixture(directory, bert_prefix=True):
    """The fixture's TF1 weights under Hugging Face names, with its config.json.

    bert_prefix=False names the encoder weights as a bare Hugging Face `BertModel` saves them.
    """
    reader = tf.train.load_checkpoint(str(TINY / "bert_model.ckpt"))
    tensors = {}
    for name in reader.get_variable_to_shape_map():
        hf, transpose = hf_name(name)
        value = reader.get_tensor(name)
        if not bert_prefix:
            hf = hf.removeprefix("bert.")
        tensors[hf] = value.T if transpose else value
    # Hugging Face also saves the tied decoder and position ids; both must be ignored.
    tensors["cls.predictions.decoder.weight"] = reader.get_tensor("bert/embeddings/word_embeddings")
    config = {**tiny_config().to_dict(), "hidden_act": "gelu", "model_type": "bert", "layer_norm_eps": 1e-12}
    (directory / "config.json").write_text(json.dumps(config))
    write_safetensors(directory / "model.safetensors", tensors)
    return reader


def test_hf_config_uses_exact_gelu(tmp_path):
    hf_checkpoint_from_fixture(tmp_path)
    config = config_from_hf(tmp_path / "config.json")
    assert config.hidden_act == "gelu_exact"
    assert config.vocab_size == 99 and config.intermediate_size == 37


def test_every_tensor_lands_where_its_name_says(tmp_path):
    reader = hf_checkpoint_from_fixture(tmp_path)
    model = BertPretrainer(config_from_hf(tmp_path / "config.json"))
    report = load_hf_checkpoint(model, tmp_path)  # strict
    names = tf1_checkpoint.variable_map(model)
    assert sorted(report.loaded) == sorted(hf_name(n)[0] for n in names)
    for name, var in names.items():
        np.testing.assert_array_equal(np.asarray(var), reader.get_tensor(name), err_msg=name)
    # The exact erf GELU (Hugging Face's "gelu"), not the original's tanh approximation: at
    # these points the two differ by up to 5e-4.
    x = tf.constant([-3.0, -1.5, -0.5, 0.5, 1.5, 3.0])
    activation = model.bert.encoder_layers[0].activation
    np.testing.assert_allclose(np.asarray(activation(x)), np.asarray(gelu_exact(x)), atol=1e-6)


def test_encoder_only_checkpoint_without_prefix_loads(tmp_path):
    reader = hf_checkpoint_from_fixture(tmp_path, bert_prefix=False)
    model = BertModel(config_from_hf(tmp_path / "config.json"))
    load_hf_checkpoint(model, tmp_path / "model.safetensors", strict=False)
    np.testing.assert_array_equal(
        np.asarray(model.encoder_layers[1].query_kernel),
        reader.get_tensor("bert/encoder/layer_1/attention/self/query/kernel"))


def test_wrong_config_is_reported_with_shapes(tmp_path):
    hf_checkpoint_from_fixture(tmp_path)
    config = config_from_hf(tmp_path / "config.json")
    config.intermediate_size = 38
    with pytest.raises(ValueError, match=r"bert.encoder.layer.0.intermediate.dense.weight: model \[32, 38\], checkpoint \[32, 37\]"):
        load_hf_checkpoint(BertPretrainer(config), tmp_path)


def test_corrupt_safetensors_names_the_file(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 5) + b"{oops")
    with pytest.raises(ValueError, match="model.safetensors: corrupt safetensors header"):
        load_hf_checkpoint(BertModel(tiny_config()), tmp_path / "model.safetensors")
