"""Original TF1 checkpoints in and out; BERT-Base names and shapes; initialisation; heads."""
import json
import logging
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from bert_runner.runs import checkpoints as run_checkpoints
from conftest import FIXTURES
from modeling import BertClassifier, BertConfig, BertModel, BertPretrainer, BertSpanLabeler
from modeling import checkpoint as checkpoints
from modeling.checkpoint import original as original_layout
from modeling_helpers import (TINY, encoder_inputs, save_like_the_trainer, tiny_config,
                              tiny_expected, tiny_pretrainer)
from refusals import message


def test_bert_base_has_exactly_the_original_names_and_shapes(monkeypatch):
    import keras

    from modeling.layers.initializers import HostInitializer

    # Names and shapes only: zeros instead of 110M values drawn on the host (most of the build's
    # time); test_initialisation_is_the_original_truncated_normal checks the drawn values.
    monkeypatch.setattr(HostInitializer, "__call__", lambda self, shape, dtype=None:
                        keras.ops.zeros(shape, dtype or keras.config.floatx()))
    info = json.loads((FIXTURES / "modeling" / "base_shapes_info.json").read_text())
    expected = json.loads((FIXTURES / "modeling" / "base_shapes.json").read_text())
    config = BertConfig.from_dict(info["config"]) if "config" in info else BertConfig.from_dict(
        {"vocab_size": 30522, "type_vocab_size": 2})
    names = original_layout.variable_map(BertPretrainer(config))
    assert list(names) == list(expected)  # same names, same creation order
    assert {n: list(v.shape) for n, v in names.items()} == expected
    assert sum(int(np.prod(v.shape)) for v in names.values()) == 110_106_428


def test_strict_load_names_every_problem(tmp_path):
    small = BertConfig.from_dict({**tiny_config().to_dict(), "intermediate_size": 40})
    with pytest.raises(ValueError) as error:
        checkpoints.load_checkpoint(BertModel(small), TINY / "bert_model.ckpt")
    message = str(error.value)
    assert "shape mismatch bert/encoder/layer_0/intermediate/dense/kernel: model [32, 40], checkpoint [32, 37]" in message
    # The encoder alone does not own the pretraining heads: strict mode reports them.
    config = tiny_config()
    with pytest.raises(ValueError, match="not in the model: cls/predictions/output_bias"):
        checkpoints.load_checkpoint(BertModel(config), TINY / "bert_model.ckpt")
    with pytest.raises(ValueError, match="missing from checkpoint: output_weights \\[3, 32\\]"):
        checkpoints.load_checkpoint(BertClassifier(config, 3), TINY / "bert_model.ckpt")


def test_vocab_size_mismatch_is_explained():
    wrong = BertConfig.from_dict({**tiny_config().to_dict(), "vocab_size": 100})
    with pytest.raises(ValueError, match="vocab_size in bert_config.json must equal"):
        checkpoints.load_checkpoint(BertModel(wrong), TINY / "bert_model.ckpt", strict=False)


def test_partial_load_initialises_the_encoder_and_logs_like_the_original(caplog):
    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.INFO)
    caplog.set_level(logging.INFO)
    model = BertClassifier(tiny_config(), num_labels=3)
    head_before = np.asarray(model.classifier.output_weights).copy()
    report = checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    assert report.missing == ["output_weights", "output_bias"]
    assert "cls/predictions/output_bias" in report.unexpected
    reader = tf.train.load_checkpoint(str(TINY / "bert_model.ckpt"))
    for name, var in original_layout.encoder_names(model):
        np.testing.assert_array_equal(np.asarray(var), reader.get_tensor(name))
    np.testing.assert_array_equal(np.asarray(model.classifier.output_weights), head_before)
    assert "bert/pooler/dense/kernel, shape = [32, 32], *INIT_FROM_CKPT*" in caplog.text
    assert "name = output_weights, shape = [3, 32]\n" in caplog.text + "\n"


def test_save_then_load_is_lossless_and_readable_by_tf1_tools(tmp_path):
    model = tiny_pretrainer()
    prefix = original_layout.save_tf1_checkpoint(
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
    checkpoints.load_checkpoint(reloaded, prefix)  # strict; global_step is ignored
    for a, b in zip(reloaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert not list((tmp_path / "out").glob("*tmp*"))


def _copy_tiny(directory, name="bert_model.ckpt"):
    directory.mkdir(parents=True, exist_ok=True)
    for part in TINY.glob("bert_model.ckpt.*"):
        shutil.copy(part, directory / part.name.replace("bert_model.ckpt", name))
    return directory / name


def _refused(case, function, *args, **kwargs):
    """Calls `function`; it must raise ValueError (or FileNotFoundError) with `case`'s words."""
    with pytest.raises((ValueError, FileNotFoundError), match=re.escape(message(case))) as error:
        function(*args, **kwargs)
    return str(error.value)


def test_corrupt_or_missing_checkpoints_fail_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere/bert_model.ckpt .* not found: the "
                                                "directory .*nowhere does not exist"):
        run_checkpoints.load_checkpoint(BertModel(tiny_config()), tmp_path / "nowhere" /
                                        "bert_model.ckpt", flag="--init_checkpoint")
    (tmp_path / "bad.ckpt.index").write_bytes(b"garbage")
    (tmp_path / "bad.ckpt.data-00000-of-00001").write_bytes(b"")
    text = _refused("checkpoint-index-corrupt", checkpoints.load_checkpoint,
                    BertModel(tiny_config()), tmp_path / "bad.ckpt")
    assert f"{tmp_path / 'bad.ckpt'}.index" in text


def test_checkpoint_files_missing_or_cut_short_are_named(tmp_path):
    """Each way a copied checkpoint goes wrong, through the loader every script uses (the
    machinery's, which names the flag)."""
    model = BertClassifier(tiny_config(), 2)
    prefix = _copy_tiny(tmp_path / "cut")
    data = tmp_path / "cut" / "bert_model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    for load in (run_checkpoints.check_init_checkpoint,
                 run_checkpoints.initialize_from_checkpoint):
        text = _refused("checkpoint-truncated", load, model, str(prefix))
        assert text.startswith(f"Checkpoint {prefix} (--init_checkpoint) is unreadable at bert/")

    data.unlink()
    text = _refused("checkpoint-data-missing", run_checkpoints.initialize_from_checkpoint, model,
                    str(prefix))
    assert str(data) in text

    index_only = _copy_tiny(tmp_path / "no_index")
    (tmp_path / "no_index" / "bert_model.ckpt.index").unlink()
    text = _refused("checkpoint-index-missing", run_checkpoints.check_init_checkpoint, model,
                    str(index_only))
    assert "bert_model.ckpt.data-00000-of-00001 is there without it" in text
    text = _refused("checkpoint-index-missing", run_checkpoints.check_init_checkpoint, model,
                    str(TINY / "bert_model.ckp"))  # a typo: the directory's checkpoint is named
    assert text.endswith(f"holds the checkpoint(s) {TINY / 'bert_model.ckpt'}")

    # A directory: the release's files without the checkpoint, or two checkpoints.
    release = tmp_path / "uncased_L-2_H-32"
    release.mkdir()
    for name in ("bert_config.json", "vocab.txt"):
        shutil.copy(TINY / name, release / name)
    text = _refused("checkpoint-directory-without-one", run_checkpoints.check_init_checkpoint,
                    model, str(release))
    assert "it holds bert_config.json, vocab.txt" in text
    assert f"e.g. {release / 'bert_model.ckpt'}" in text
    _copy_tiny(tmp_path / "two", "model.ckpt-1")
    _copy_tiny(tmp_path / "two", "model.ckpt-2")
    text = _refused("checkpoint-directory-several", run_checkpoints.check_init_checkpoint, model,
                    str(tmp_path / "two"))
    assert f"e.g. {tmp_path / 'two' / 'model.ckpt-2'}" in text


def _with_layers(num_hidden_layers):
    return BertConfig.from_dict({**tiny_config().to_dict(), "num_hidden_layers": num_hidden_layers})


def test_a_config_that_does_not_describe_the_checkpoint_loads_nothing(tmp_path):
    """12 layers for the 2-layer checkpoint (the original loads 39 of 199 variables and draws the
    rest at random), 1 layer (its second would be dropped): refused in both layouts, naming the
    checkpoint, the config file and both layer counts; the model keeps its initial values."""
    save_like_the_trainer(BertClassifier(tiny_config(), 2), tmp_path / "run")
    # One model of each for both layouts: a refused load leaves it as it was (checked).
    deep = BertModel(_with_layers(12))
    before = [np.asarray(v).copy() for v in deep.weights]
    shallow = BertSpanLabeler(_with_layers(1))
    for source in (TINY / "bert_model.ckpt", tmp_path / "run"):
        for load in (checkpoints.check_init_checkpoint, checkpoints.initialize_from_checkpoint):
            text = _refused("checkpoint-encoder-missing", load, deep, str(source),
                            config_file="deep/bert_config.json")
            assert "of the model of deep/bert_config.json: 160 of its 197 encoder" in text
            assert "layer_2/" in text and "and 157 more" in text
            assert "the config has num_hidden_layers=12, the checkpoint 2 encoder layers" in text
        for a, b in zip(deep.weights, before):
            np.testing.assert_array_equal(np.asarray(a), b)

        # The scripts' loader names the flag that gives the config where no file is named.
        text = _refused("checkpoint-encoder-extra", run_checkpoints.initialize_from_checkpoint,
                        shallow, str(source))
        assert "the model of --bert_config_file: it holds 16 encoder variables" in text
        assert "num_hidden_layers=1, the checkpoint 2 encoder layers" in text

    # The original-layout loader refuses it too, also when not strict.
    _refused("checkpoint-encoder-missing", checkpoints.load_checkpoint,
             BertModel(_with_layers(3)), TINY / "bert_model.ckpt", strict=False)


def test_a_checkpoint_of_another_model_is_refused(tmp_path):
    prefix = str(tmp_path / "electra.ckpt")
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=["electra/embeddings/word_embeddings"],
                      shape_and_slices=[""], tensors=[tf.zeros([99, 32])])
    text = _refused("checkpoint-encoder-missing", checkpoints.check_init_checkpoint,
                    BertClassifier(tiny_config(), 2), prefix)
    # The pooler is not required (original.check_encoder): 37 of the tiny encoder's 39.
    assert "37 of its 37 encoder variables are missing" in text
    assert "it holds no BERT encoder (is it a BERT checkpoint? it holds electra/" in text


def test_a_new_head_and_extra_checkpoint_variables_stay_allowed(caplog, tmp_path):
    """The encoder complete: a head the checkpoint lacks is newly initialised (logged), the
    checkpoint's other heads and optimizer slots are left."""
    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.INFO)
    caplog.set_level(logging.INFO)
    model = BertClassifier(tiny_config(), 2)
    checkpoints.check_init_checkpoint(model, str(TINY / "bert_model.ckpt"))
    report = checkpoints.initialize_from_checkpoint(model, str(TINY / "bert_model.ckpt"))
    assert report.missing == ["output_weights", "output_bias"]
    assert "newly initialised: output_weights, output_bias" in caplog.text
    assert "cls/seq_relationship/output_weights" in report.unexpected
    # Ours, with its optimizer slots: a pre-training run's checkpoint into a span labeler.
    save_like_the_trainer(tiny_pretrainer(), tmp_path / "pretraining")
    report = checkpoints.initialize_from_checkpoint(BertSpanLabeler(tiny_config()),
                                                    str(tmp_path / "pretraining"))
    assert sorted(report.missing) == ["squad/output_bias", "squad/output_weights"]


def test_configs_and_vocabularies_of_another_model_are_refused(tmp_path):
    from bert_runner import startup

    config = json.loads((TINY / "bert_config.json").read_text())
    del config["num_hidden_layers"]
    (tmp_path / "bert_config.json").write_text(json.dumps(config))
    text = _refused("config-missing-key", BertConfig.from_json_file, tmp_path / "bert_config.json")
    assert "num_hidden_layers" in text
    _refused("vocab-beyond-config", startup.check_vocab_matches_config, {"[PAD]": 0, "x": 120},
             "vocab.txt", tiny_config(), "bert_config.json")
    wide = BertConfig.from_dict({**tiny_config().to_dict(), "hidden_size": 64})
    _refused("checkpoint-shape-mismatch", checkpoints.check_init_checkpoint, BertModel(wide),
             str(TINY / "bert_model.ckpt"))


def test_task_heads_have_the_original_names_and_shapes():
    config = tiny_config()
    classifier = original_layout.variable_map(BertClassifier(config, 5))
    assert [list(classifier[n].shape) for n in ("output_weights", "output_bias")] == [[5, 32], [5]]
    squad = original_layout.variable_map(BertSpanLabeler(config))
    assert [list(squad[n].shape) for n in ("cls/squad/output_weights", "cls/squad/output_bias")] == [[2, 32], [2]]


def test_a_new_head_round_trips_through_tf1_checkpoints_without_touching_the_name_map(tmp_path):
    """A task model defined here, unknown to modeling/: it names its head, and that is enough."""
    import keras

    from modeling import BertTaskModel
    from modeling.bert.checkpoint_names import dense_names

    class ScoreModel(BertTaskModel):
        def __init__(self, config, name="score_model", **kwargs):
            super().__init__(config, name, **kwargs)
            self.score = keras.layers.Dense(1, name="score")
            self.score.build((None, config.hidden_size))

        def call(self, features, training=False):
            return {"score": self.score(self.encoder(features)["pooled_output"])}

        def get_config(self):
            return self._config_dict()

        def tf1_head_variables(self):
            return dense_names("cls/score", self.score)

    model = ScoreModel(tiny_config())
    checkpoints.load_checkpoint(model, TINY / "bert_model.ckpt", strict=False)
    prefix = original_layout.save_tf1_checkpoint(model, tmp_path / "bert_model.ckpt")
    saved = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    assert saved["cls/score/kernel"] == [32, 1] and saved["cls/score/bias"] == [1]
    clone = ScoreModel(tiny_config())
    report = checkpoints.load_checkpoint(clone, prefix)  # strict: every name accounted for
    assert len(report.loaded) == len(saved)
    np.testing.assert_array_equal(np.asarray(clone.score.kernel), np.asarray(model.score.kernel))


def test_initialisation_is_the_original_truncated_normal():
    config = BertConfig.from_dict({**tiny_config().to_dict(), "vocab_size": 2000, "initializer_range": 0.05})
    names = original_layout.variable_map(BertPretrainer(config))
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
    a = model.encoder(encoder_inputs(expected))["pooled_output"]
    b = clone.encoder(encoder_inputs(expected))["pooled_output"]
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert BertModel.from_config(model.encoder.get_config()).config == model.config
