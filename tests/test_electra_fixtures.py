"""ELECTRA against google-research/electra's own code (tests/fixtures/electra, made by running
it on TensorFlow 2.21: see its README): the discriminator's and generator's outputs, the losses
for given masks and samples, three optimizer steps, and the command line on the released layout.
"""
import json
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import FIXTURES, ROOT
from modeling import families
from bert_runner.runs.model_files import model_files
from modeling.checkpoint import load_checkpoint, load_config, variables_by_name
from modeling.electra.config import ElectraConfig
from modeling.optimization import create_optimizer
from bert_runner.trainer import Trainer
from bert_tasks.pretraining.electra_task import ElectraPretrainingTask

ELECTRA = FIXTURES / "electra"
TINY, TINY_TRAIN = ELECTRA / "tiny", ELECTRA / "tiny_train"
FORWARD_ATOL = 1e-5


def _masked_features(arrays, sampled=True):
    features = {"input_ids": arrays["masked_input_ids"], "input_mask": arrays["input_mask"],
                "segment_ids": arrays["segment_ids"]}
    for name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
        features[name] = arrays[name]
    if sampled:
        features["sampled_ids"] = arrays["sampled_ids"]
    return features


@pytest.fixture(scope="module")
def tiny():
    config = load_config(str(TINY / "hparams.json"))
    model = families.build_model("pretrainer", config)
    load_checkpoint(model, str(TINY), strict=True)
    return model, dict(np.load(TINY / "expected.npz"))


def test_hparams_json_reads_as_the_originals_config():
    config = load_config(str(TINY / "hparams.json"))
    assert isinstance(config, ElectraConfig)
    assert (config.embedding_size, config.hidden_size, config.num_hidden_layers,
            config.type_vocab_size, config.hidden_act) == (16, 32, 2, 2, "gelu_exact")
    generator = config.generator_config()
    assert (generator.hidden_size, generator.num_hidden_layers, generator.num_attention_heads,
            generator.intermediate_size) == (24, 1, 1, 96)


def test_discriminator_and_generator_match_the_original(tiny):
    model, want = tiny
    unmasked = {"input_ids": want["input_ids"], "input_mask": want["input_mask"],
                "token_type_ids": want["segment_ids"]}
    outputs = model.encoder(unmasked)
    np.testing.assert_allclose(outputs["embedding_output"], want["disc_embedding_output"],
                               atol=FORWARD_ATOL)
    np.testing.assert_allclose(np.stack(outputs["all_encoder_layers"]),
                               want["disc_all_encoder_layers"], atol=FORWARD_ATOL)
    np.testing.assert_allclose(outputs["pooled_output"], want["disc_pooled_output"],
                               atol=FORWARD_ATOL)
    np.testing.assert_allclose(model.discriminator_predictions(outputs["sequence_output"]),
                               want["disc_logits"], atol=FORWARD_ATOL)

    features = _masked_features(want)
    got = model(features)
    np.testing.assert_allclose(got["masked_lm_logits"], want["gen_logits"], atol=FORWARD_ATOL)
    np.testing.assert_array_equal(got["is_replaced"], want["is_fake_tokens"])
    np.testing.assert_allclose(got["discriminator_logits"], want["fake_disc_logits"],
                               atol=FORWARD_ATOL)
    task = ElectraPretrainingTask(16, 3)
    total, metrics = task.loss(model, features, training=False)
    assert float(metrics["masked_lm_loss"]) == pytest.approx(float(want["gen_loss"]), abs=1e-5)
    assert float(metrics["disc_loss"]) == pytest.approx(float(want["disc_loss"]), abs=1e-5)
    assert float(total) == pytest.approx(float(want["total_loss"]), abs=1e-4)


@pytest.mark.large
def test_xla_compiles_the_model_with_its_sampling_and_draws_the_same_tokens(tiny):
    """The pre-training model, sampling included, compiles under XLA (static shapes, as a TPU
    needs) and gives what it gives op by op: the same samples from the same seed (hashed
    noise, not TensorFlow's random ops), the same replaced tokens and logits."""
    import keras

    from modeling.inference import copy_with

    model, want = tiny
    features = _masked_features(want, sampled=False)
    model = copy_with(model, static_shapes=True)
    assert model.encoder.modes.static_shapes and model.generator.modes.static_shapes
    seed = keras.ops.convert_to_numpy(model.seed_generator.state)
    eager = model(features)
    model.seed_generator.state.assign(seed)
    compiled = tf.function(lambda f: model(f), jit_compile=True)(features)
    np.testing.assert_array_equal(compiled["sampled_ids"], eager["sampled_ids"])
    np.testing.assert_array_equal(compiled["is_replaced"], eager["is_replaced"])
    for name in ("masked_lm_logits", "discriminator_logits"):
        np.testing.assert_allclose(compiled[name], eager[name], atol=FORWARD_ATOL)


def test_replaced_ids_follow_the_originals_scatter_quirks(tiny):
    """A sample equal to the original token is labelled original; two samples at one position
    give their floored mean, as the original's scatter_update."""
    from modeling.electra.pretrainer import replace_tokens

    _, want = tiny
    _, replaced, labels = replace_tokens(_masked_features(want), want["sampled_ids"])
    np.testing.assert_array_equal(replaced, want["fake_input_ids"])
    np.testing.assert_array_equal(labels, want["is_fake_tokens"])
    positions, weights = want["masked_lm_positions"], want["masked_lm_weights"]
    kept = (want["sampled_ids"] == want["masked_lm_ids"]) & (weights > 0)
    assert kept.any() and not labels.numpy()[np.nonzero(kept)[0], positions[kept]].any()


def test_three_steps_follow_the_originals_trajectory(tmp_path):
    """Losses before each step within 1e-5, parameters after three steps within 5e-5, against
    the original's `create_optimizer` with its warm-up rule (the schedule's documented values,
    `after_3_steps_preinc`: see the fixture README)."""
    expected = json.loads((TINY_TRAIN / "expected_train.json").read_text())["runs"]["preinc"]
    config = load_config(str(TINY_TRAIN / "hparams.json"))
    model = families.build_model("pretrainer", config)
    load_checkpoint(model, str(TINY_TRAIN / "electra_tiny"), strict=True)
    settings = json.loads((TINY_TRAIN / "expected_train.json").read_text())["create_optimizer"]
    optimizer = create_optimizer("adamw", settings["learning_rate"], settings["num_train_steps"],
                                 settings["warmup_steps"], settings["weight_decay_rate"],
                                 warmup_rule="electra")
    steps = dict(np.load(TINY_TRAIN / "steps.npz"))
    batches = [_masked_features({k: v[i] for k, v in steps.items()}) for i in range(3)]
    task = ElectraPretrainingTask(16, 3)
    trainer = Trainer(tf.distribute.get_strategy(), model, optimizer, task.loss, str(tmp_path),
                      global_batch_size=3, steps_per_loop=1, save_checkpoints_steps=1000)
    stacked = {k: np.stack([b[k] for b in batches]) for k in batches[0]}
    trainer.train(lambda context: tf.data.Dataset.from_tensor_slices(stacked), num_train_steps=3)
    for (_, metrics, _), want in zip(trainer.history, expected["steps"]):
        assert metrics["loss"] == pytest.approx(want["total_loss"], abs=1e-4)
        assert metrics["masked_lm_loss"] == pytest.approx(want["gen_loss"], abs=1e-5)
        assert metrics["disc_loss"] == pytest.approx(want["disc_loss"], abs=1e-5)
    reader = tf.train.load_checkpoint(str(TINY_TRAIN / expected["checkpoint"]))
    for name, variable in variables_by_name(model).items():
        np.testing.assert_allclose(np.asarray(variable), reader.get_tensor(name), rtol=0,
                                   atol=5e-5, err_msg=name)


def test_a_released_folder_without_its_hparams_is_read_by_the_size_table():
    """The released folders have no config: the shapes give it when they are a released size;
    the tiny one is not, and the refusal asks for its --hparams JSON."""
    shapes = {"electra/embeddings/word_embeddings": (30522, 128),
              "electra/embeddings/token_type_embeddings": (2, 128),
              "electra/embeddings/position_embeddings": (512, 128),
              "electra/encoder/layer_0/intermediate/dense/kernel": (256, 1024),
              "generator/encoder/layer_0/attention/self/query/kernel": (256, 256)}
    shapes.update({f"{scope}/encoder/layer_{i}/attention/self/query/kernel": (256, 256)
                   for scope in ("electra", "generator") for i in range(12)})
    config = ElectraConfig.from_original_shapes(shapes, "electra_small")
    assert (config.hidden_size, config.num_attention_heads, config.embedding_size,
            config.generator_hidden_size, config.generator_layers) == (256, 4, 128, 1.0, 1.0)
    with pytest.raises(ValueError, match="none of the released ELECTRA sizes.*--hparams JSON"):
        model_files(None, None, str(TINY))


def test_extract_features_reads_the_discriminator_of_the_original_checkpoint(tmp_path):
    """The hidden states of the fixture's first pair, through the command line on the folder
    as it unzips with the original's --hparams JSON."""
    want = dict(np.load(TINY / "expected.npz"))
    (tmp_path / "in.txt").write_text("the dog runs fast. ||| a big cat\n")
    result = subprocess.run(
        [sys.executable, str(ROOT / "extract_features.py"), f"--input_file={tmp_path / 'in.txt'}",
         f"--output_file={tmp_path / 'out.jsonl'}", f"--init_checkpoint={TINY}",
         f"--bert_config_file={TINY / 'hparams.json'}", "--layers=-1,-2", "--max_seq_length=16"],
        capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    features = json.loads((tmp_path / "out.jsonl").read_text().splitlines()[0])["features"]
    length = int(want["input_mask"][0].sum())
    vocab = (TINY / "vocab.txt").read_text().split("\n")
    assert [f["token"] for f in features] == [vocab[i] for i in want["input_ids"][0, :length]]
    for index, layer in ((-1, 1), (-2, 0)):
        got = np.array([[v for v in f["layers"][index == -2]["values"]] for f in features])
        np.testing.assert_allclose(got, want["disc_all_encoder_layers"][layer, 0, :length],
                                   atol=FORWARD_ATOL)


def _write_masked_records(path, arrays):
    """The fixture's masked pairs as create_pretraining_data.py writes records."""
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(len(arrays["input_ids"])):
            ints = {"input_ids": arrays["masked_input_ids"][i],
                    "input_mask": arrays["input_mask"][i],
                    "segment_ids": arrays["segment_ids"][i],
                    "masked_lm_positions": arrays["masked_lm_positions"][i],
                    "masked_lm_ids": arrays["masked_lm_ids"][i], "next_sentence_labels": [0]}
            feature = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=list(map(int, v))))
                       for k, v in ints.items()}
            feature["masked_lm_weights"] = tf.train.Feature(float_list=tf.train.FloatList(
                value=list(map(float, arrays["masked_lm_weights"][i]))))
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())


def test_run_pretraining_evaluates_the_generator_as_the_original(tmp_path):
    """run_pretraining.py --pretraining_objective=electra --do_eval on masked records from the
    original checkpoint: the generator's masked-LM loss is the original's weighted mean of its
    per-position losses; the discriminator's metrics stand beside their baselines."""
    want = dict(np.load(TINY / "expected.npz"))
    _write_masked_records(tmp_path / "masked.tfrecord", want)
    result = subprocess.run(
        [sys.executable, str(ROOT / "run_pretraining.py"), "--pretraining_objective=electra",
         f"--input_file={tmp_path / 'masked.tfrecord'}", f"--output_dir={tmp_path / 'out'}",
         f"--bert_config_file={TINY / 'hparams.json'}", f"--init_checkpoint={TINY}",
         "--max_seq_length=16", "--max_predictions_per_seq=3", "--do_eval",
         "--eval_batch_size=3", "--max_eval_steps=1"],
        capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "eval_report.json").read_text())
    weights = want["masked_lm_weights"]
    expected = np.sum(want["gen_per_example_loss"] * weights) / np.sum(weights)
    assert report["metrics"]["masked_lm_loss"] == pytest.approx(expected, abs=1e-5)
    assert report["metrics"]["masked_lm_accuracy"] == pytest.approx(
        np.sum((want["gen_preds"] == want["masked_lm_ids"]) * weights) / np.sum(weights))
    assert {"disc_accuracy", "disc_auc"} <= set(report["baselines"])


def test_refusals_name_the_file(tmp_path):
    """A checkpoint of another size without its --hparams JSON; a key the original does not
    have; a BERT checkpoint to continue ELECTRA pre-training from (no generator): one line,
    exit 2, nothing written."""
    from refusals import assert_refused, message

    with pytest.raises(ValueError, match=message("electra-not-a-released-size")):
        model_files(None, None, str(TINY))
    hparams = json.loads((TINY / "hparams.json").read_text())
    (tmp_path / "typo.json").write_text(json.dumps({**hparams, "generator_hiden_size": 0.5}))
    with pytest.raises(ValueError, match=re.escape(message("electra-hparams-unknown"))) as refused:
        load_config(str(tmp_path / "typo.json"))
    assert "generator_hiden_size" in str(refused.value) and "typo.json" in str(refused.value)

    from modeling_helpers import TINY as BERT_TINY
    records = tmp_path / "masked.tfrecord"
    _write_masked_records(records, dict(np.load(TINY / "expected.npz")))
    result = subprocess.run(
        [sys.executable, str(ROOT / "run_pretraining.py"), "--pretraining_objective=electra",
         f"--input_file={records}", f"--output_dir={tmp_path / 'out'}",
         f"--bert_config_file={BERT_TINY / 'bert_config.json'}",
         f"--init_checkpoint={BERT_TINY / 'bert_model.ckpt'}", "--max_seq_length=16",
         "--max_predictions_per_seq=3", "--do_train", "--num_train_steps=1"],
        capture_output=True, text=True, cwd=ROOT)
    assert_refused(result, "electra-pretraining-no-generator")
    assert not list((tmp_path / "out").glob("ckpt-*"))
