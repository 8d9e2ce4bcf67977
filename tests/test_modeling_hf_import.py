"""Hugging Face layout in and out: a checkpoint the test writes from the tiny fixture's weights,
and `save_hf_model`'s directory read back (weights, outputs, the file format)."""
import json
import re
import struct
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

from modeling import BertModel, BertPretrainer, gelu_exact
from modeling.checkpoint import original as original_layout
from modeling import checkpoint as checkpoints
from modeling.checkpoint.hugging_face import read_config as config_from_hf
from modeling.checkpoint.hugging_face import save_hf_model, write_safetensors
from modeling.bert.family import hf_name, original_name as tf1_name
from modeling_helpers import TINY, encoder_inputs, tiny_config, tiny_expected
from refusals import message


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
    (directory / "vocab.txt").write_bytes((TINY / "vocab.txt").read_bytes())
    return reader


def test_hf_config_uses_exact_gelu(tmp_path):
    hf_checkpoint_from_fixture(tmp_path)
    config = config_from_hf(tmp_path / "config.json")
    assert config.hidden_act == "gelu_exact"
    assert config.vocab_size == 99 and config.intermediate_size == 37


def test_every_tensor_lands_where_its_name_says(tmp_path):
    reader = hf_checkpoint_from_fixture(tmp_path)
    model = BertPretrainer(config_from_hf(tmp_path / "config.json"))
    report = checkpoints.load_checkpoint(model, tmp_path)  # strict
    names = original_layout.variable_map(model)
    assert sorted(report.loaded) == sorted(names)
    for name, var in names.items():
        np.testing.assert_array_equal(np.asarray(var), reader.get_tensor(name), err_msg=name)
    # The exact erf GELU (Hugging Face's "gelu"), not the original's tanh approximation: at
    # these points the two differ by up to 5e-4.
    x = tf.constant([-3.0, -1.5, -0.5, 0.5, 1.5, 3.0])
    activation = model.encoder.encoder_layers[0].activation
    np.testing.assert_allclose(np.asarray(activation(x)), np.asarray(gelu_exact(x)), atol=1e-6)


def test_encoder_only_checkpoint_without_prefix_loads(tmp_path):
    reader = hf_checkpoint_from_fixture(tmp_path, bert_prefix=False)
    model = BertModel(config_from_hf(tmp_path / "config.json"))
    checkpoints.load_checkpoint(model, tmp_path / "model.safetensors", strict=False)
    np.testing.assert_array_equal(
        np.asarray(model.encoder_layers[1].query_kernel),
        reader.get_tensor("bert/encoder/layer_1/attention/self/query/kernel"))


def test_wrong_config_is_reported_with_shapes(tmp_path):
    hf_checkpoint_from_fixture(tmp_path)
    config = config_from_hf(tmp_path / "config.json")
    config.intermediate_size = 38
    with pytest.raises(ValueError, match=r"bert/encoder/layer_0/intermediate/dense/kernel: model \[32, 38\], checkpoint \[32, 37\]"):
        checkpoints.load_checkpoint(BertPretrainer(config), tmp_path)


def test_corrupt_safetensors_names_the_file(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 5) + b"{oops")
    with pytest.raises(ValueError, match="model.safetensors: corrupt safetensors header"):
        checkpoints.load_checkpoint(BertModel(tiny_config()), tmp_path / "model.safetensors")
    # Cut short (an interrupted download): said so, with what is missing.
    write_safetensors(tmp_path / "whole.safetensors", {"a": np.zeros((4, 4), np.float32)})
    data = (tmp_path / "whole.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[:-10])
    with pytest.raises(ValueError, match=re.escape(message("hf-weights-truncated"))):
        checkpoints.load_checkpoint(BertModel(tiny_config()), tmp_path / "model.safetensors")


def test_unreadable_pytorch_weights_name_the_file(tmp_path, monkeypatch):
    """torch's own errors for a `pytorch_model.bin` cut short name no file ("[Errno 22] Invalid
    argument", from its zip reader): the refusal names it. torch itself is stood in for, with
    what it raises and returns."""
    weights = tmp_path / "pytorch_model.bin"
    weights.write_bytes(b"PK\x03\x04")

    def cut_short(path, **options):
        raise OSError(22, "Invalid argument")

    fake_torch = types.SimpleNamespace(load=cut_short, is_tensor=lambda v: False)
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    with pytest.raises(ValueError, match=re.escape(message("hf-torch-unreadable"))) as error:
        checkpoints.load_checkpoint(BertModel(tiny_config()), weights)
    assert str(error.value).startswith(f"{weights}: ")
    assert "Invalid argument" in str(error.value) and "\n" not in str(error.value)
    # A file that loads but holds no state dict (a bare tensor, a training checkpoint).
    fake_torch.load = lambda path, **options: {"state_dict": {}}
    with pytest.raises(ValueError, match=re.escape(message("hf-torch-unreadable"))):
        checkpoints.load_checkpoint(BertModel(tiny_config()), weights)


def test_tf1_name_inverts_hf_name():
    for name in original_layout.variable_map(BertPretrainer(tiny_config())):
        assert tf1_name(hf_name(name)[0]) == (name, hf_name(name)[1])


def _header(path):
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    return size, json.loads(data[8:8 + size]), len(data) - 8 - size


@pytest.mark.parametrize("hidden_act, hf_act", [("gelu", "gelu_new"), ("gelu_exact", "gelu")])
def test_written_directory_reads_back_identical(tmp_path, hidden_act, hf_act):
    """Our writer, then our reader: the same weights and outputs; the files in the layout
    transformers.BertModel.from_pretrained reads (checked by hand with transformers: see
    docs/modeling.md)."""
    config = tiny_config()
    config.hidden_act = hidden_act  # the GELU flavour goes out and comes back
    model = BertModel(config)
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    out = save_hf_model(model, tmp_path / "hf", TINY / "vocab.txt", do_lower_case=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # no temporary left
    hf = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert hf["hidden_act"] == hf_act and hf["model_type"] == "bert"
    assert hf["architectures"] == ["BertModel"] and hf["layer_norm_eps"] == 1e-12
    assert {k: hf[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers",
                               "num_attention_heads", "intermediate_size",
                               "max_position_embeddings", "type_vocab_size")} == {
        "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 37, "max_position_embeddings": 64, "type_vocab_size": 2}
    assert (tmp_path / "hf" / "vocab.txt").read_bytes() == (TINY / "vocab.txt").read_bytes()
    size, header, body = _header(tmp_path / "hf" / "model.safetensors")
    assert size % 8 == 0 and header.pop("__metadata__") == {"format": "pt"}
    assert len(header) == 39 and "encoder.layer.1.attention.self.query.weight" in header
    assert header["encoder.layer.0.intermediate.dense.weight"]["shape"] == [37, 32]  # [out, in]
    ends = sorted(v["data_offsets"] for v in header.values())
    assert ends[0][0] == 0 and ends[-1][1] == body
    assert all(a[1] == b[0] for a, b in zip(ends, ends[1:]))
    assert {v["dtype"] for v in header.values()} == {"F32"}

    config = config_from_hf(tmp_path / "hf" / "config.json")
    assert config.hidden_act == hidden_act
    back = BertModel(config)
    checkpoints.load_checkpoint(back, out)  # strict: every variable
    for (name, a), (_, b) in zip(original_layout.variable_map(model).items(),
                                 original_layout.variable_map(back).items()):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)
    inputs = encoder_inputs(tiny_expected())
    np.testing.assert_array_equal(np.asarray(back(inputs)["sequence_output"]),
                                  np.asarray(model(inputs)["sequence_output"]))
    with pytest.raises(FileExistsError, match="already exists"):
        save_hf_model(model, out, TINY / "vocab.txt", do_lower_case=True)


def test_pretraining_model_writes_its_heads_and_reads_back(tmp_path):
    """The pre-training model goes out as transformers' `BertForPreTraining` saves it (its
    encoder under `bert.`, both heads under `cls.`, the decoder left to the tying to the word
    embeddings) and comes back with every weight (checked by hand with transformers: see
    docs/modeling.md)."""
    model = BertPretrainer(tiny_config())
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt")  # strict: the heads too
    save_hf_model(model, tmp_path / "hf", TINY / "vocab.txt", do_lower_case=True)
    hf = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert hf["architectures"] == ["BertForPreTraining"]
    _, header, _ = _header(tmp_path / "hf" / "model.safetensors")
    header.pop("__metadata__")
    assert {name: v["shape"] for name, v in header.items() if name.startswith("cls.")} == {
        "cls.predictions.bias": [99],
        "cls.predictions.transform.dense.weight": [32, 32],
        "cls.predictions.transform.dense.bias": [32],
        "cls.predictions.transform.LayerNorm.weight": [32],
        "cls.predictions.transform.LayerNorm.bias": [32],
        "cls.seq_relationship.weight": [2, 32],
        "cls.seq_relationship.bias": [2]}
    assert len(header) == 46 and "bert.embeddings.word_embeddings.weight" in header

    back = BertPretrainer(config_from_hf(tmp_path / "hf" / "config.json"))
    checkpoints.load_checkpoint(back, tmp_path / "hf")  # strict: every variable
    ours, theirs = original_layout.variable_map(model), original_layout.variable_map(back)
    assert list(ours) == list(theirs)
    for name in ours:
        np.testing.assert_array_equal(np.asarray(ours[name]), np.asarray(theirs[name]),
                                      err_msg=name)
