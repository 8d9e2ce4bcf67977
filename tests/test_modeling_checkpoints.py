"""Original TF1 checkpoints in and out; BERT-Base names and shapes; initialisation; heads."""
import json
import logging

import numpy as np
import pytest
import tensorflow as tf

from conftest import FIXTURES
from modeling import BertClassifier, BertConfig, BertModel, BertPretrainer, BertSpanLabeler
from modeling import tf1_checkpoint
from modeling_helpers import TINY, encoder_inputs, tiny_config, tiny_expected, tiny_pretrainer


def test_bert_base_has_exactly_the_original_names_and_shapes():
    info = json.loads((FIXTURES / "modeling" / "base_shapes_info.json").read_text())
    expected = json.loads((FIXTURES / "modeling" / "base_shapes.json").read_text())
    config = BertConfig.from_dict(info["config"]) if "config" in info else BertConfig.from_dict(
        {"vocab_size": 30522, "type_vocab_size": 2})
    names = tf1_checkpoint.variable_map(BertPretrainer(config))
    assert list(names) == list(expected)  # same names, same creation order
    assert {n: list(v.shape) for n, v in names.items()} == expected
    assert sum(int(np.prod(v.shape)) for v in names.values()) == 110_106_428


def test_strict_load_names_every_problem(tmp_path):
    small = BertConfig.from_dict({**tiny_config().to_dict(), "intermediate_size": 40})
    with pytest.raises(ValueError) as error:
        tf1_checkpoint.load_tf1_checkpoint(BertModel(small), TINY / "bert_model.ckpt")
    message = str(error.value)
    assert "shape mismatch bert/encoder/layer_0/intermediate/dense/kernel: model [32, 40], checkpoint [32, 37]" in message
    # The encoder alone does not own the pretraining heads: strict mode reports them.
    config = tiny_config()
    with pytest.raises(ValueError, match="not in the model: cls/predictions/output_bias"):
        tf1_checkpoint.load_tf1_checkpoint(BertModel(config), TINY / "bert_model.ckpt")
    with pytest.raises(ValueError, match="missing from checkpoint: output_weights \\[3, 32\\]"):
        tf1_checkpoint.load_tf1_checkpoint(BertClassifier(config, 3), TINY / "bert_model.ckpt")


def test_vocab_size_mismatch_is_explained():
    wrong = BertConfig.from_dict({**tiny_config().to_dict(), "vocab_size": 100})
    with pytest.raises(ValueError, match="vocab_size in bert_config.json must equal"):
        tf1_checkpoint.load_tf1_checkpoint(BertModel(wrong), TINY / "bert_model.ckpt", strict=False)


def test_partial_load_initialises_the_encoder_and_logs_like_the_original(caplog):
    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.INFO)
    caplog.set_level(logging.INFO)
    model = BertClassifier(tiny_config(), num_labels=3)
    head_before = np.asarray(model.classifier.output_weights).copy()
    report = tf1_checkpoint.load_tf1_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    assert report.missing == ["output_weights", "output_bias"]
    assert "cls/predictions/output_bias" in report.unexpected
    reader = tf.train.load_checkpoint(str(TINY / "bert_model.ckpt"))
    for name, var in tf1_checkpoint.encoder_variable_map(model.bert):
        np.testing.assert_array_equal(np.asarray(var), reader.get_tensor(name))
    np.testing.assert_array_equal(np.asarray(model.classifier.output_weights), head_before)
    assert "bert/pooler/dense/kernel, shape = [32, 32], *INIT_FROM_CKPT*" in caplog.text
    assert "name = output_weights, shape = [3, 32]\n" in caplog.text + "\n"


def test_save_then_load_is_lossless_and_readable_by_tf1_tools(tmp_path):
    model = tiny_pretrainer()
    prefix = tf1_checkpoint.save_tf1_checkpoint(
        model, tmp_path / "out" / "bert_model.ckpt", extra_tensors={"global_step": np.int64(7)})
    reader = tf.train.load_checkpoint(prefix)
    original = tf.train.load_checkpoint(str(TINY / "bert_model.ckpt"))
    original_shapes = original.get_variable_to_shape_map()
    saved_shapes = reader.get_variable_to_shape_map()
    assert set(saved_shapes) == set(original_shapes) | {"global_step"}
    for name in original_shapes:
        np.testing.assert_array_equal(reader.get_tensor(name), original.get_tensor(name))
    assert reader.get_tensor("global_step") == 7
    reloaded = BertPretrainer(tiny_config())
    tf1_checkpoint.load_tf1_checkpoint(reloaded, prefix)  # strict; global_step is ignored
    for a, b in zip(reloaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert not list((tmp_path / "out").glob("*tmp*"))


def test_corrupt_or_missing_checkpoints_fail_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere/bert_model.ckpt not found"):
        tf1_checkpoint.load_tf1_checkpoint(BertModel(tiny_config()), tmp_path / "nowhere" / "bert_model.ckpt")
    (tmp_path / "bad.ckpt.index").write_bytes(b"garbage")
    (tmp_path / "bad.ckpt.data-00000-of-00001").write_bytes(b"")
    with pytest.raises(ValueError, match="unreadable"):
        tf1_checkpoint.load_tf1_checkpoint(BertModel(tiny_config()), tmp_path / "bad.ckpt")


def test_task_heads_have_the_original_names_and_shapes():
    config = tiny_config()
    classifier = tf1_checkpoint.variable_map(BertClassifier(config, 5))
    assert [list(classifier[n].shape) for n in ("output_weights", "output_bias")] == [[5, 32], [5]]
    squad = tf1_checkpoint.variable_map(BertSpanLabeler(config))
    assert [list(squad[n].shape) for n in ("cls/squad/output_weights", "cls/squad/output_bias")] == [[2, 32], [2]]


def test_a_new_head_round_trips_through_tf1_checkpoints_without_touching_the_name_map(tmp_path):
    """A task model defined here, unknown to modeling/: it names its head, and that is enough."""
    import keras

    from modeling import BertTaskModel
    from modeling.checkpoint_names import dense_names

    class ScoreModel(BertTaskModel):
        def __init__(self, config, name="score_model", **kwargs):
            super().__init__(config, name, **kwargs)
            self.score = keras.layers.Dense(1, name="score")
            self.score.build((None, config.hidden_size))

        def call(self, features, training=False):
            return {"score": self.score(self.bert(features)["pooled_output"])}

        def get_config(self):
            return self._config_dict()

        def tf1_head_variables(self):
            return dense_names("cls/score", self.score)

    model = ScoreModel(tiny_config())
    tf1_checkpoint.load_tf1_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    prefix = tf1_checkpoint.save_tf1_checkpoint(model, tmp_path / "bert_model.ckpt")
    saved = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    assert saved["cls/score/kernel"] == [32, 1] and saved["cls/score/bias"] == [1]
    clone = ScoreModel(tiny_config())
    report = tf1_checkpoint.load_tf1_checkpoint(clone, prefix)  # strict: every name accounted for
    assert len(report.loaded) == len(saved)
    np.testing.assert_array_equal(np.asarray(clone.score.kernel), np.asarray(model.score.kernel))


def test_initialisation_is_the_original_truncated_normal():
    config = BertConfig.from_dict({**tiny_config().to_dict(), "vocab_size": 2000, "initializer_range": 0.05})
    names = tf1_checkpoint.variable_map(BertPretrainer(config))
    table = np.asarray(names["bert/embeddings/word_embeddings"])
    assert np.max(np.abs(table)) <= 2 * 0.05 + 1e-7
    assert 0.85 * 0.05 < table.std() < 0.91 * 0.05  # cut at 2σ and not rescaled: ≈0.88σ
    for name, var in names.items():
        if name.endswith(("bias", "beta")):
            assert not np.any(np.asarray(var)), name
        if name.endswith("gamma"):
            np.testing.assert_array_equal(np.asarray(var), 1.0)


def test_get_config_round_trip_rebuilds_the_same_model():
    model = tiny_pretrainer()
    clone = BertPretrainer.from_config(model.get_config())
    clone.set_weights(model.get_weights())
    expected = tiny_expected()
    a = model.bert(encoder_inputs(expected))["pooled_output"]
    b = clone.bert(encoder_inputs(expected))["pooled_output"]
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert BertModel.from_config(model.bert.get_config()).config == model.config
