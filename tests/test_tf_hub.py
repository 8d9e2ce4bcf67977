"""TF Hub text-encoder SavedModels in and out. In: Model Garden's own exports (tests/fixtures/tfhub,
made by its unchanged export_tfhub.py) read through the one checkpoint reader, their settings from
the SavedModel itself; the features equal the SavedModel's own outputs and those of the original
checkpoint it was made from; other SavedModels refused in one line. Out: export_model.py
--format=tfhub of the same checkpoint gives Model Garden's encoder outputs and preprocessing,
reads back, runs as a Keras 3 TFSMLayer and fine-tunes through hub.KerasLayer (large tier)."""
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import FIXTURES, ROOT
from modeling_helpers import TINY
from optional_packages import needs
from refusals import assert_refused

HUB = FIXTURES / "tfhub"
ENCODERS = ["bert_encoder", "bert_encoder_variant", "electra_encoder"]


def _outputs(found, expected):
    """The encoder outputs of `found` (a TF_HUB Checkpoint) on the fixture's inputs."""
    from modeling import families

    model = families.build_model("encoder", found.config)
    found.load_into(model, strict=False)
    return model({"input_ids": expected["input_word_ids"], "input_mask": expected["input_mask"],
                  "token_type_ids": expected["input_type_ids"]})


@pytest.mark.parametrize("name", ENCODERS)
def test_a_model_garden_encoder_reads_with_its_own_settings_and_gives_its_outputs(name):
    from modeling import checkpoint

    found = checkpoint.open_checkpoint(HUB / name)
    info = json.loads((HUB / name / "info.json").read_text())
    expected = dict(np.load(HUB / name / "expected.npz"))
    assert found.layout == checkpoint.TF_HUB
    assert found.vocab_file == str(HUB / name / "assets" / "vocab.txt")
    assert found.do_lower_case is True
    given = info["config"].get("bert_config") or info["config"]
    config = found.config
    if name == "electra_encoder":  # its embeddings are narrower than its layers: ELECTRA's
        assert (found.family.name, config.embedding_size) == ("electra", 16)
    else:
        assert found.family.name == "bert"
        for key in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size", "hidden_act", "max_position_embeddings",
                    "type_vocab_size", "vocab_size"):
            assert getattr(config, key) == given[key], key
    outputs = _outputs(found, expected)
    real = expected["input_mask"][..., None].astype(bool)
    layers = np.stack([np.asarray(layer) for layer in outputs["all_encoder_layers"]])
    np.testing.assert_allclose(np.where(real, layers, 0),
                               np.where(real, expected["encoder_outputs"], 0), atol=1e-5)
    if found.family.name == "bert":  # ELECTRA has no pooler
        np.testing.assert_allclose(np.asarray(outputs["pooled_output"]),
                                   expected["pooled_output"], atol=1e-5)


def test_the_masked_lm_head_reads_from_the_mlm_sub_object():
    from modeling import checkpoint, families

    found = checkpoint.open_checkpoint(HUB / "bert_encoder")
    expected = dict(np.load(HUB / "bert_encoder" / "expected.npz"))
    model = families.build_model("pretrainer", found.config)
    report = found.load_into(model, strict=False)
    assert not [n for n in report.missing if n.startswith("cls/predictions")]
    logits = model({"input_ids": expected["input_word_ids"], "input_mask": expected["input_mask"],
                    "segment_ids": expected["input_type_ids"],
                    "masked_lm_positions": expected["masked_lm_positions"]})["masked_lm_logits"]
    np.testing.assert_allclose(np.asarray(logits), expected["mlm_logits"], atol=1e-5)


@pytest.mark.large
def test_features_through_the_saved_model_equal_the_original_checkpoints(tmp_path):
    """bert_encoder was exported from the tiny original checkpoint: extract_features.py reads
    it with no config, vocabulary or casing flag and writes the same features."""
    (tmp_path / "in.txt").write_text("the dog runs fast. ||| a big cat\nHello there\n")
    common = [sys.executable, str(ROOT / "extract_features.py"),
              f"--input_file={tmp_path / 'in.txt'}", "--layers=-1,-2", "--max_seq_length=16"]
    original = [f"--init_checkpoint={TINY / 'bert_model.ckpt'}",
                f"--bert_config_file={TINY / 'bert_config.json'}",
                f"--vocab_file={TINY / 'vocab.txt'}"]
    for name, flags in (("hub", [f"--init_checkpoint={HUB / 'bert_encoder'}"]),
                        ("original", original)):
        result = subprocess.run(common + flags + [f"--output_file={tmp_path / name}.jsonl"],
                                cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-2000:]
    hub, original = ([json.loads(line) for line in open(tmp_path / f"{name}.jsonl")]
                     for name in ("hub", "original"))
    assert len(hub) == len(original) == 2
    for a, b in zip(hub, original):
        assert [f["token"] for f in a["features"]] == [f["token"] for f in b["features"]]
        for fa, fb in zip(a["features"], b["features"]):
            for la, lb in zip(fa["layers"], fb["layers"]):
                np.testing.assert_allclose(la["values"], lb["values"], atol=2e-5)


def test_a_saved_model_of_another_api_is_refused_in_one_line(tmp_path):
    import tensorflow as tf

    other = tf.Module()
    other.v = tf.Variable(1.0)
    tf.saved_model.save(other, str(tmp_path / "other"))
    result = subprocess.run(
        [sys.executable, str(ROOT / "extract_features.py"),
         f"--input_file={TINY / 'vocab.txt'}", f"--output_file={tmp_path / 'out.jsonl'}",
         f"--init_checkpoint={tmp_path / 'other'}", f"--vocab_file={TINY / 'vocab.txt'}"],
        cwd=ROOT, capture_output=True, text=True)
    assert_refused(result, "tf-hub-not-an-encoder")
    assert not (tmp_path / "out.jsonl").exists()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """export_model.py --format=tfhub of the tiny original checkpoint (bert_encoder's source)."""
    folder = tmp_path_factory.mktemp("export") / "hub"
    result = subprocess.run(
        [sys.executable, str(ROOT / "export_model.py"), "--format=tfhub",
         f"--checkpoint={TINY / 'bert_model.ckpt'}",
         f"--bert_config_file={TINY / 'bert_config.json'}", f"--vocab_file={TINY / 'vocab.txt'}",
         "--max_seq_length=64", f"--export_dir={folder}"],
        cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


@pytest.mark.large
def test_our_encoder_gives_model_gardens_outputs_and_reads_back(exported):
    import keras
    import tensorflow as tf

    from modeling import checkpoint, families

    expected = dict(np.load(HUB / "bert_encoder" / "expected.npz"))
    inputs = {k: tf.constant(expected[k])
              for k in ("input_word_ids", "input_mask", "input_type_ids")}
    encoder = tf.saved_model.load(str(exported / "encoder"))
    outputs = encoder(inputs)
    assert sorted(outputs) == ["default", "encoder_outputs", "pooled_output", "sequence_output"]
    assert len(outputs["encoder_outputs"]) == 2 and bool(encoder.do_lower_case.numpy())
    assert encoder.vocab_file.asset_path.numpy().decode().endswith("assets/vocab.txt")
    np.testing.assert_allclose(np.stack([x.numpy() for x in outputs["encoder_outputs"]]),
                               expected["encoder_outputs"], atol=1e-5)
    np.testing.assert_allclose(outputs["pooled_output"].numpy(), expected["pooled_output"],
                               atol=1e-5)
    mlm = encoder.mlm({**inputs, "masked_lm_positions": tf.constant(
        expected["masked_lm_positions"])})
    np.testing.assert_allclose(mlm["mlm_logits"].numpy(), expected["mlm_logits"], atol=1e-5)
    assert len(encoder.trainable_variables) == 39  # Model Garden's count for this encoder + head
    # Keras 3 runs it as a layer.
    layer = keras.layers.TFSMLayer(str(exported / "encoder"), call_endpoint="__call__")
    np.testing.assert_allclose(np.asarray(layer(inputs)["sequence_output"]),
                               outputs["sequence_output"].numpy(), atol=1e-6)
    # Read back through the one reader, with its masked-LM head.
    found = checkpoint.open_checkpoint(exported / "encoder")
    model = families.build_model("pretrainer", found.config)
    report = found.load_into(model, strict=False)
    assert report.missing == ["cls/seq_relationship/output_weights",
                              "cls/seq_relationship/output_bias"]


@pytest.mark.large
def test_our_preprocessing_gives_model_gardens_exactly(exported):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (its ops, for the loaded graph)

    expected = dict(np.load(HUB / "preprocessing_expected.npz"))
    strings = json.loads((HUB / "preprocessing_strings.json").read_text())
    preprocessing = tf.saved_model.load(str(exported / "preprocessing"))

    def ragged(prefix):
        return [expected[f"{prefix}/flat_values"], expected[f"{prefix}/row_splits_0"],
                expected[f"{prefix}/row_splits_1"]]

    def parts(tokens):
        return [tokens.flat_values.numpy(), *(s.numpy() for s in tokens.nested_row_splits)]

    tokens = preprocessing.tokenize(tf.constant(strings["strings"]))
    for mine, theirs in zip(parts(tokens), ragged("tokenize")):
        np.testing.assert_array_equal(mine, theirs)
    keys = ("input_word_ids", "input_mask", "input_type_ids")
    packed = preprocessing.bert_pack_inputs([tokens], seq_length=128)
    for key in keys:  # Model Garden's default call packs at its default 128
        np.testing.assert_array_equal(packed[key].numpy(), expected[f"default/{key}"])
    default = preprocessing(tf.constant(strings["strings"]))  # ours at --max_seq_length
    for key in keys:
        np.testing.assert_array_equal(default[key].numpy(),
                                      preprocessing.bert_pack_inputs([tokens])[key].numpy())
        assert default[key].shape == (len(strings["strings"]), 64)
    pair = [preprocessing.tokenize(tf.constant(strings[name])) for name in ("pair_a", "pair_b")]
    for length in (16, 24):
        packed = preprocessing.bert_pack_inputs(pair, seq_length=length)
        for key in keys:
            np.testing.assert_array_equal(packed[key].numpy(), expected[f"pack_{length}/{key}"])
    special = {k: int(v) for k, v in preprocessing.tokenize.get_special_tokens_dict().items()}
    assert special == {"vocab_size": 99, "start_of_sequence_id": 2, "end_of_segment_id": 3,
                       "padding_id": 0, "mask_id": 4}


@pytest.mark.large
@needs("tensorflow_hub", "tf_keras")
def test_our_export_fine_tunes_through_hub_keras_layer(exported):
    """TensorFlow's tutorial pipeline: strings -> hub.KerasLayer(preprocessing) ->
    hub.KerasLayer(encoder, trainable=True) -> a dense layer, trained in tf-keras."""
    script = f"""
import json, numpy as np, tensorflow as tf, tensorflow_text, tf_keras
import tensorflow_hub as hub
preprocessing = hub.KerasLayer({str(exported / 'preprocessing')!r})
encoder = hub.KerasLayer({str(exported / 'encoder')!r}, trainable=True)
text = tf_keras.layers.Input(shape=(), dtype=tf.string)
logits = tf_keras.layers.Dense(2)(encoder(preprocessing(text))["pooled_output"])
model = tf_keras.Model(text, logits)
model.compile(tf_keras.optimizers.Adam(1e-3),
              tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
words = ["the dog runs", "a cat sat", "the big dog", "a red car", "dog and cat", "the sun"]
texts = np.array(words * 8)
labels = np.array([int("dog" in t) for t in texts])
before = [v.numpy().copy() for v in encoder.trainable_variables]
history = model.fit(texts, labels, epochs=8, batch_size=8, verbose=0).history["loss"]
moved = sum(not np.array_equal(a, v.numpy()) for a, v in zip(before, encoder.trainable_variables))
print(json.dumps({{"loss": history, "moved": moved, "trainable": len(before)}}))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["loss"][-1] < 0.5 * report["loss"][0]
    assert report["moved"] == report["trainable"] > 0


@pytest.mark.large
def test_pre_training_goes_on_from_a_hub_encoder_and_records_its_hash(tmp_path):
    records = tmp_path / "tiny.tfrecord"
    for args in (["create_pretraining_data.py",
                  f"--input_file={FIXTURES / 'pretraining_data' / 'corpus.txt'}",
                  f"--output_file={records}", f"--vocab_file={TINY / 'vocab.txt'}",
                  "--max_seq_length=32", "--max_predictions_per_seq=5", "--dupe_factor=1"],
                 ["run_pretraining.py", f"--input_file={records}",
                  f"--output_dir={tmp_path / 'run'}", f"--init_checkpoint={HUB / 'bert_encoder'}",
                  "--do_train=True", "--train_batch_size=4", "--max_seq_length=32",
                  "--max_predictions_per_seq=5", "--num_train_steps=1"]):
        result = subprocess.run([sys.executable, str(ROOT / args[0]), *args[1:]], cwd=ROOT,
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-3000:]
    # The masked-LM head came from the mlm sub-object; the next-sentence head is new.
    assert "cls/predictions/output_bias, shape = [99], *INIT_FROM_CKPT*" in result.stderr
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["init_checkpoint"] == str(HUB / "bert_encoder") and run["init_checkpoint_sha256"]


@pytest.mark.large
def test_an_electra_checkpoint_exports_its_discriminator_and_reads_back(tmp_path):
    """The original ELECTRA's discriminator (google-research/electra's fixture) through our
    export: its hidden states through the SavedModel and read back, and no mlm (its masked LM
    is the generator, another network)."""
    import tensorflow as tf

    from modeling import checkpoint, families

    electra = FIXTURES / "electra" / "tiny"
    result = subprocess.run(
        [sys.executable, str(ROOT / "export_model.py"), "--format=tfhub",
         f"--checkpoint={electra}", f"--bert_config_file={electra / 'hparams.json'}",
         "--max_seq_length=32", f"--export_dir={tmp_path / 'hub'}"],
        cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = dict(np.load(electra / "expected.npz"))
    hub = tf.saved_model.load(str(tmp_path / "hub" / "encoder"))
    assert not hasattr(hub, "mlm")
    outputs = hub({"input_word_ids": tf.constant(expected["input_ids"], tf.int32),
                   "input_mask": tf.constant(expected["input_mask"], tf.int32),
                   "input_type_ids": tf.constant(expected["segment_ids"], tf.int32)})
    np.testing.assert_allclose(outputs["sequence_output"].numpy(),
                               expected["disc_sequence_output"], atol=1e-5)
    found = checkpoint.open_checkpoint(tmp_path / "hub" / "encoder")
    assert (found.family.name, found.config.embedding_size) == ("electra", 16)
    model = families.build_model("encoder", found.config)
    found.load_into(model, strict=True)
    read = model({"input_ids": expected["input_ids"], "input_mask": expected["input_mask"],
                  "token_type_ids": expected["segment_ids"]})
    np.testing.assert_allclose(np.asarray(read["sequence_output"]),
                               expected["disc_sequence_output"], atol=1e-5)
