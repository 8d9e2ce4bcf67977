import json
import re

import numpy as np
import pytest

from modeling import BertConfig, gelu, gelu_exact, get_activation
from modeling_helpers import TINY


def test_defaults_match_the_original_constructor():
    config = BertConfig(vocab_size=100)
    assert config.type_vocab_size == 16
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads) == (768, 12, 12)
    assert (config.intermediate_size, config.hidden_act, config.max_position_embeddings) == (3072, "gelu", 512)
    assert (config.hidden_dropout_prob, config.attention_probs_dropout_prob) == (0.1, 0.1)
    assert config.initializer_range == 0.02


def test_json_round_trip_is_byte_identical_to_the_original_format():
    text = (TINY / "bert_config.json").read_text()
    assert BertConfig.from_json_file(TINY / "bert_config.json").to_json_string() == text


def test_unknown_keys_are_kept_and_missing_keys_default(tmp_path):
    config = BertConfig.from_dict({"vocab_size": 10, "hidden_size": 8, "num_attention_heads": 2,
                                   "directionality": "bidi"})
    assert config.directionality == "bidi"
    assert config.type_vocab_size == 16
    path = tmp_path / "bert_config.json"
    config.to_json_file(path)
    assert json.loads(path.read_text())["directionality"] == "bidi"
    assert BertConfig.from_json_file(path) == config


@pytest.mark.parametrize("change, message", [
    ({"hidden_size": 30}, "not a multiple of num_attention_heads"),
    ({"num_hidden_layers": 0}, "num_hidden_layers must be a positive integer"),
    ({"vocab_size": -5}, "vocab_size must be a positive integer"),
    ({"hidden_act": "swish"}, "hidden_act 'swish' is not supported"),
    ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob must be in [0, 1)"),
])
def test_invalid_configs_fail_with_a_clear_message(tmp_path, change, message):
    data = json.loads((TINY / "bert_config.json").read_text())
    data.update(change)
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=str(path)) as error:
        BertConfig.from_json_file(path)
    assert message in str(error.value)


@pytest.mark.parametrize("key", ["num_hidden_layers", "num_attention_heads", "hidden_act"])
def test_a_missing_key_is_named_not_defaulted(tmp_path, key):
    """The original would build 12 layers for a config without num_hidden_layers and load a
    2-layer checkpoint into two of them."""
    data = json.loads((TINY / "bert_config.json").read_text())
    del data[key]
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=rf"bert_config.json: missing key\(s\) {key};") as error:
        BertConfig.from_json_file(path)
    # Not validated with a default in its place: once "hidden_size (128) is not a multiple of
    # num_attention_heads (12)" for a config without num_attention_heads.
    assert "multiple" not in str(error.value) and "Invalid BERT config" not in str(error.value)


def test_a_directory_is_named(tmp_path):
    with pytest.raises(IsADirectoryError,
                       match=f"BERT config file {tmp_path}: is a directory, expected a file"):
        BertConfig.from_json_file(str(tmp_path))


def test_malformed_json_names_the_file(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="bert_config.json: not valid JSON"):
        BertConfig.from_json_file(path)


def test_gelu_is_the_tanh_approximation():
    x = np.linspace(-4, 4, 81).astype("float32")
    tanh_form = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(np.asarray(gelu(x)), tanh_form, atol=1e-6)
    # The exact form differs visibly; mixing them up moves outputs by ~1e-3.
    assert np.max(np.abs(np.asarray(gelu_exact(x)) - tanh_form)) > 1e-4


def test_activation_names():
    x = np.array([-2.0, 0.5], "float32")
    assert get_activation("GELU") is gelu
    assert get_activation("gelu_exact") is gelu_exact
    np.testing.assert_allclose(np.asarray(get_activation("relu")(x)), [0.0, 0.5])
    np.testing.assert_allclose(np.asarray(get_activation("tanh")(x)), np.tanh(x), rtol=1e-6)
    for identity in ("linear", "", None):
        np.testing.assert_array_equal(np.asarray(get_activation(identity)(x)), x)
    with pytest.raises(ValueError, match="Unsupported activation: swish"):
        get_activation("swish")


@pytest.mark.parametrize("overrides,expected", [
    ({"hidden_size": "32"}, "hidden_size must be a positive integer, got '32'"),
    # 0.25 of 516 is 129 wide, with two heads (one per 64): the original would fail in the model.
    ({"hidden_size": 516, "num_attention_heads": 4},
     "the generator would be 129 wide (generator_hidden_size 0.25 of hidden_size 516) with 2 "
     "heads"),
])
def test_electra_hparams_that_build_no_model_are_refused_naming_the_file(overrides, expected):
    from modeling.electra.config import ElectraConfig

    hparams = {"model_size": "small", "vocab_size": 99,
               "model_hparam_overrides": {"num_hidden_layers": 2, **overrides}}
    with pytest.raises(ValueError, match=r"\(hparams\.json\): .*" + re.escape(expected)):
        ElectraConfig.from_hparams(hparams, source="hparams.json")


def test_an_electra_config_is_not_pre_trained_as_a_masked_lm():
    from bert_tasks.pretraining.task import PretrainingTask
    from modeling.electra.config import ElectraConfig

    config = ElectraConfig.from_hparams({"model_size": "small", "vocab_size": 99})
    with pytest.raises(ValueError, match="describes an ELECTRA model .*: pass "
                                         "--pretraining_objective=electra"):
        PretrainingTask(64, 10).model_config(config)
